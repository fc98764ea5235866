// The decoder demo binary (build/bench/decoder_demo, SHARDRT_DEMO_PATH) end to end: the same
// tokens on 1 and 8 devices, long generations read back in batches, sizes the machine cannot
// hold refused with one line before anything is allocated, and the CLI's conventions it is
// built on: --help lists every flag with its range and default, help never runs the demo, and
// bad flags are one-line errors.
#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "cli/cli_runner.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace shardrt::decoder {
namespace {

using ::shardrt::cli::testing::CliResult;
using ::shardrt::cli::testing::ExpectCleanErrorOf;
using ::shardrt::cli::testing::RunCaptured;
using ::testing::HasSubstr;
using ::testing::StartsWith;

struct Result {
  int exit_code = -1;
  std::string out;
};

// Runs the demo with `args`; stdout (and stderr after it when `merge`).
Result RunDemo(const std::string& args, bool merge = false) {
  CliResult r = RunCaptured(SHARDRT_DEMO_PATH, args);
  return {r.exit_code, merge ? r.out + r.err : r.out};
}

// The line of `out` that starts with `prefix`, or "".
std::string Line(const std::string& out, const std::string& prefix) {
  size_t pos = out.find(prefix);
  if (pos == std::string::npos) return "";
  return out.substr(pos, out.find('\n', pos) - pos);
}

// Runs the demo for `tokens` tokens with `flags` on 1 and on 8 devices (`eight_flags` added
// there) and checks both succeed with the same `tokens` tokens and a rate line. Returns the
// 8-device run; its "tokens: " line is the 1-device one.
Result ExpectSameTokensOnOneAndEight(const std::string& flags, int tokens,
                                     const std::string& eight_flags = "") {
  const std::string run = absl::StrCat(" --tokens ", tokens, " ", flags);
  Result one = RunDemo("--devices 1" + run);
  Result eight = RunDemo("--devices 8" + run + " " + eight_flags);
  EXPECT_EQ(one.exit_code, 0) << one.out;
  EXPECT_EQ(eight.exit_code, 0) << eight.out;
  const std::string line = Line(one.out, "tokens: ");
  EXPECT_EQ(std::count(line.begin(), line.end(), ' '), tokens) << one.out;
  EXPECT_EQ(line, Line(eight.out, "tokens: "));
  EXPECT_NE(Line(eight.out, absl::StrCat("decoded ", tokens, " tokens in ")).find("tokens/s)"),
            std::string::npos)
      << eight.out;
  return eight;
}

TEST(DecoderDemoTest, GeneratesTheSameTokensOnOneAndEightDevices) {
  Result eight = ExpectSameTokensOnOneAndEight("--seed 7", 24, "--metrics");
  const std::string tokens = Line(eight.out, "tokens: ");
  ASSERT_FALSE(tokens.empty()) << eight.out;
  EXPECT_NE(eight.out.find("Metric: ExecuteReplicatedTime"), std::string::npos);
  // A different seed gives a different model and sequence.
  Result other = RunDemo("--devices 8 --tokens 24 --seed 8");
  ASSERT_EQ(other.exit_code, 0) << other.out;
  EXPECT_NE(Line(other.out, "tokens: "), tokens);
  // Bad sizes are clear errors: 8 heads do not split over 3 devices.
  Result bad = RunDemo("--devices 3", /*merge=*/true);
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_EQ(std::count(bad.out.begin(), bad.out.end(), '\n'), 1) << bad.out;
}

// Past 2 x 64 tokens the demo reads tokens back in batches while later steps run: the sequence
// is the same on 1 and 8 devices, whole and in order.
TEST(DecoderDemoTest, ReadsLongGenerationsInBatches) {
  ExpectSameTokensOnOneAndEight("--seed 3", 300);
}

// Sizes the machine cannot hold are one line naming the flags, their values and the limit,
// before anything is allocated or compiled.
TEST(DecoderDemoTest, RejectsModelsTooLargeWithOneLine) {
  struct Case {
    std::string args;
    std::string expected;
  } cases[] = {
      {"--d-model 65536",
       "flag --d-model 65536: array w1 f32[65536,262144] would take 64 GiB, over the demo's "
       "limit of 512 MiB per array"},
      {"--layers 1024", "flag --layers 1024: over the demo's limit of 64 layers"},
      {"--d-model 4096 --tokens 65536",
       "flags --d-model 4096 --tokens 65536: array pos_embed f32[65544,4096] would take 1.00 GiB"},
      {"--d-model 4096 --layers 8",
       "flags --d-model 4096 --layers 8: the weights would take 6.01 GiB, over the demo's limit "
       "of 2 GiB"},
      {"--d-model 512 --layers 64 --tokens 65536",
       "flags --d-model 512 --layers 64 --tokens 65536 --devices 8: the devices would hold"},
  };
  for (const Case& c : cases) {
    Result r = RunDemo(c.args, /*merge=*/true);
    EXPECT_NE(r.exit_code, 0) << c.args;
    EXPECT_NE(r.out.find(c.expected), std::string::npos) << c.args << "\n" << r.out;
    EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << c.args << "\n" << r.out;
    EXPECT_THAT(r.out, StartsWith("decoder_demo: ")) << c.args;
  }
  // At the limits the demo runs.
  Result at_limit = RunDemo("--devices 8 --layers 64 --tokens 2");
  EXPECT_EQ(at_limit.exit_code, 0) << at_limit.out;
}

// The demo's flags: name and value as --help shows them, and what its line must hold after the
// description (the range and the default).
struct DemoFlag {
  const char* head;
  const char* description;
  const char* range_and_default;
};
constexpr DemoFlag kDemoFlags[] = {
    {"--devices N", "CPU devices to use (one partition each)",
     "an integer in [1, 1024] (default: 8)"},
    {"--tokens T", "tokens to generate", "an integer in [1, 65536] (default: 32)"},
    {"--layers L", "transformer layers (the demo takes at most 64)",
     "an integer >= 1 (default: 2)"},
    {"--d-model D", "the model width", "an integer in [1, 65536] (default: 128)"},
    {"--seed S", "the seed of the random weights and prompt", "an integer >= 0 (default: 42)"},
    {"--metrics", "print the runtime's metrics report at the end", "(default: off)"},
    {"--trace FILE", "write Chrome trace events", "(default: none)"},
    {"--plugin PATH", "the PJRT plugin (.so) to load", "(default: $SHARDRT_PJRT_PLUGIN"},
    {"--compile-cache DIR|off", "folder of the persistent compile cache; off for none",
     "(default: $SHARDRT_COMPILE_CACHE"},
    {"--timeout SECONDS", "once the command has run this long",
     "an integer in [1, 86400] (default: none)"},
};

TEST(DecoderDemoTest, HelpExitsZeroAndListsEveryFlagWithItsRangeAndDefault) {
  for (const char* flag : {"--help", "-h"}) {
    SCOPED_TRACE(flag);
    CliResult r = RunCaptured(SHARDRT_DEMO_PATH, flag);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.err, "");
    EXPECT_THAT(r.out, StartsWith("usage: decoder_demo [flags]\n\nGenerates tokens greedily with "
                                  "a small random-weight transformer, sharded Megatron style "
                                  "over N devices.\n"));
    for (const DemoFlag& f : kDemoFlags) {
      const std::string line = Line(r.out, absl::StrCat("  ", f.head, " "));
      ASSERT_FALSE(line.empty()) << f.head << "\n" << r.out;
      EXPECT_THAT(line, HasSubstr(f.description)) << f.head;
      EXPECT_THAT(line, HasSubstr(f.range_and_default)) << f.head;
    }
    EXPECT_THAT(r.out, HasSubstr("\n  -h, --help "));
    // Nothing else: the nine flags of the demo, --timeout and -h, --help.
    size_t flag_lines = 0;
    for (size_t pos = 0; (pos = r.out.find("\n  -", pos)) != std::string::npos; ++pos) {
      ++flag_lines;
    }
    EXPECT_EQ(flag_lines, std::size(kDemoFlags) + 1) << r.out;
  }
}

// Every flag the help lists is one the parser takes: all of them at once get as far as the size
// check (8 heads do not split over 3 devices), which runs before anything is loaded or written
// (the --trace file's folder must exist: that is checked first).
TEST(DecoderDemoTest, TheParserTakesEveryListedFlag) {
  ExpectCleanErrorOf(SHARDRT_DEMO_PATH,
                     "--devices 3 --tokens 1 --layers 1 --d-model 128 --seed 0 --metrics "
                     "--trace " + ::testing::TempDir() + "decoder_demo_trace.json "
                     "--plugin /nonexistent.so --compile-cache off --timeout 60",
                     "decoder_demo: n_heads (8) must be divisible by the number of devices (3)");
}

// Help is printed instead of running the demo, whatever the other arguments are.
TEST(DecoderDemoTest, HelpDoesNotRunTheDemo) {
  for (const char* args : {"--bogus --help", "--devices 0 --plugin /nonexistent.so -h",
                           "--timeout 0 --help"}) {
    SCOPED_TRACE(args);
    CliResult r = RunCaptured(SHARDRT_DEMO_PATH, args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.err, "");
    EXPECT_THAT(r.out, StartsWith("usage: decoder_demo "));
  }
}

TEST(DecoderDemoTest, BadFlagsAreOneLineErrors) {
  ExpectCleanErrorOf(SHARDRT_DEMO_PATH, "--bogus",
                     "decoder_demo: unknown flag --bogus (see: decoder_demo --help)");
  ExpectCleanErrorOf(SHARDRT_DEMO_PATH, "--help=1", "flag --help takes no value");
  ExpectCleanErrorOf(SHARDRT_DEMO_PATH, "--tokens 0",
                     "flag --tokens: expected an integer in [1, 65536], got '0'");
  ExpectCleanErrorOf(SHARDRT_DEMO_PATH, "extra", "decoder_demo: unexpected argument 'extra'");
  ExpectCleanErrorOf(SHARDRT_DEMO_PATH, "--devices 8 --compile-cache=",
                     "flag --compile-cache: expected a folder or 'off', got ''");
  ExpectCleanErrorOf(SHARDRT_DEMO_PATH, "--timeout 0",
                     "flag --timeout: expected a whole number of seconds in [1, 86400], got '0'");
}

}  // namespace
}  // namespace shardrt::decoder
