// `shardrt generate` on the real model through the CLI binary: the greedy tokens on 1 and 8
// devices are the NumPy reference's (tests/testdata/golden_smollm2_greedy.h); the text streams
// to stdout and the rates end stderr; --json holds the same text; bad flags and files are one
// line on stderr and exit 1, refused before anything is compiled (docs/errors.md).
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "../../testdata/golden_smollm2_greedy.h"
#include "cli/cli_runner.h"
#include "cli/npy.h"
#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"

namespace shardrt::cli {
namespace {

using testing::CliResult;
using testing::ExpectCleanError;
using testing::RunCaptured;
using testing::RunCliCaptured;
using testing::RunCliShell;
using testing::ShellResult;

// Every child process of these tests ends within this (a first run compiles the programs).
constexpr std::chrono::seconds kDeadline = testing::kCliDeadline;

const std::string kModel = SHARDRT_MODEL_PATH;

class GenerateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(kModel)) GTEST_SKIP() << "no model (scripts/bootstrap.sh)";
  }
};

// The last line of `text` (without its newline).
std::string LastLine(const std::string& text) {
  std::string t = text;
  if (!t.empty() && t.back() == '\n') t.pop_back();
  return t.substr(t.rfind('\n') == std::string::npos ? 0 : t.rfind('\n') + 1);
}

// The token ids of a --json object's list `key` ("tokens" or "prompt_tokens").
std::vector<int32_t> TokensOf(const std::string& json, const std::string& key = "tokens") {
  std::vector<int32_t> tokens;
  const std::string opening = "\"" + key + "\": [";
  const size_t at = json.find(opening);
  if (at == std::string::npos) return tokens;
  const size_t begin = at + opening.size();
  std::stringstream list(json.substr(begin, json.find(']', begin) - begin));
  std::string id;
  while (std::getline(list, id, ',')) tokens.push_back(std::stoi(id));
  return tokens;
}

TEST_F(GenerateTest, StreamsTextAndEndsStderrWithTheRates) {
  const std::string args = "generate --model " + kModel + " --prompt 'Once upon a time' "
                           "--max-tokens 12 --devices 8";
  // As scripts/demo.sh runs it: the environment without TF_CPP_MIN_LOG_LEVEL or SHARDRT_LOG.
  // Stderr holds shardrt's own lines only, none of the plugin's.
  CliResult streamed =
      RunCaptured("env -u TF_CPP_MIN_LOG_LEVEL -u SHARDRT_LOG " SHARDRT_CLI_PATH, args);
  ASSERT_EQ(streamed.exit_code, 0) << streamed.err;
  for (absl::string_view line : absl::StrSplit(streamed.err, '\n', absl::SkipEmpty())) {
    EXPECT_TRUE(absl::StartsWith(line, "compiled in ") || absl::StartsWith(line, "prefill: ") ||
                absl::StartsWith(line, "decoded "))
        << "not a line of shardrt's: " << line;
  }
  ASSERT_FALSE(streamed.out.empty());
  EXPECT_EQ(streamed.out.back(), '\n');
  EXPECT_TRUE(std::regex_match(LastLine(streamed.err),
                               std::regex(R"(decoded 11 tokens in [0-9.]+ s \([0-9.]+ tokens/s\))")))
      << streamed.err;
  EXPECT_NE(streamed.err.find("\nprefill: 4 prompt tokens in "), std::string::npos)
      << streamed.err;

  CliResult json = RunCliCaptured(args + " --json");
  ASSERT_EQ(json.exit_code, 0) << json.err;
  const std::string text = streamed.out.substr(0, streamed.out.size() - 1);
  EXPECT_NE(json.out.find("\"prompt_tokens\": [6403,1980,253,655], \"tokens\": ["),
            std::string::npos)
      << json.out;
  // The independent reference's greedy tokens (tests/testdata/golden_smollm2_greedy.h).
  EXPECT_EQ(TokensOf(json.out), golden::kOnceUponATime.tokens) << json.out;
  // The JSON string of a text with no quotes, backslashes or control characters but newlines.
  std::string escaped;
  for (char c : text) escaped += c == '\n' ? std::string("\\n") : std::string(1, c);
  EXPECT_NE(json.out.find("\"text\": \"" + escaped + "\""), std::string::npos)
      << json.out << " vs " << text;

  // The same prompt from a file, and from standard input.
  const std::string path = ::testing::TempDir() + "prompt_" + std::to_string(getpid()) + ".txt";
  std::ofstream(path) << "Once upon a time";
  const std::string from = "generate --model " + kModel + " --max-tokens 12 --devices 8 --json";
  for (const std::string& source : {"--prompt-file " + path, "--prompt-file - < " + path}) {
    CliResult read = RunCliCaptured(from + " " + source);
    ASSERT_EQ(read.exit_code, 0) << source << ": " << read.err;
    auto answer = [](const std::string& out) { return out.substr(0, out.find(", \"prefill_s\"")); };
    EXPECT_EQ(answer(read.out), answer(json.out)) << source;
  }
  std::filesystem::remove(path);
}

// `generate --json` of a golden case on `devices` devices: the prompt's ids and the greedy tokens
// are those of the independent references (tests/testdata/golden_smollm2_greedy.h).
void ExpectGoldenGeneration(const golden::GreedyCase& c, int devices) {
  SCOPED_TRACE(std::string(c.prompt) + ", " + std::to_string(devices) + " devices");
  CliResult r = RunCliCaptured("generate --model " + kModel + (c.chat ? " --chat" : "") +
                               " --prompt '" + c.prompt + "' --json --devices " +
                               std::to_string(devices) + " --max-tokens " +
                               std::to_string(c.tokens.size()));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(TokensOf(r.out, "prompt_tokens"), c.prompt_ids) << r.out;
  EXPECT_EQ(TokensOf(r.out), c.tokens) << r.out;
}

// Greedy tokens on 1 and on 8 devices are the NumPy reference's: the chat answer "The capital
// of France is Paris." up to its <|im_end|>, and a plain prompt's continuation (on 8 devices
// in StreamsTextAndEndsStderrWithTheRates).
TEST_F(GenerateTest, GreedyTokensAreTheReferences) {
  ExpectGoldenGeneration(golden::kCapitalOfFrance, 8);
  ExpectGoldenGeneration(golden::kCapitalOfFrance, 1);
  ExpectGoldenGeneration(golden::kOnceUponATime, 1);
}

// The value of counter `name` in a --metrics report (0 when it is not there).
int64_t CounterIn(const std::string& report, const std::string& name) {
  std::smatch m;
  if (!std::regex_search(report, m, std::regex("Counter: " + name + "\\n  Value: ([0-9]+)"))) {
    return 0;
  }
  return std::stoll(m[1]);
}

TEST_F(GenerateTest, AFirstRunCompilesInAChildProcessAndCompileOnlyFillsTheCache) {
  const std::string dir = ::testing::TempDir() + "generate_cache_" + std::to_string(getpid());
  std::filesystem::remove_all(dir);
  const std::string args = "generate --model " + kModel + " --prompt-tokens 6403,1980,253,655 "
                           "--max-tokens 6 --devices 8 --json --metrics --compile-cache " + dir;
  // First run: the programs compile in a child process; this one only loads them.
  CliResult first = RunCliCaptured(args);
  ASSERT_EQ(first.exit_code, 0) << first.err;
  EXPECT_EQ(CounterIn(first.out, "UncachedCompile"), 0) << first.out;
  // The empty caches, the prompt's chunk and the decode step.
  EXPECT_EQ(CounterIn(first.out, "PersistentCacheHit"), 3) << first.out;
  // --compile-only for another --max-tokens (another cache length): compiles, generates nothing.
  CliResult only = RunCliCaptured("generate --model " + kModel + " --prompt-tokens 6403,1980,253,655 "
                                  "--max-tokens 300 --devices 8 --compile-only --compile-cache " +
                                  dir);
  ASSERT_EQ(only.exit_code, 0) << only.err;
  EXPECT_EQ(only.out, "");
  EXPECT_TRUE(std::regex_match(LastLine(only.err), std::regex(R"(compiled in [0-9.]+ s)")))
      << only.err;
  size_t entries = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    entries += e.path().extension() == ".entry";
  }
  EXPECT_EQ(entries, 6u);  // empty caches, a chunk and a decode program per cache length
  // Later runs find everything: the same tokens, nothing compiled anywhere.
  CliResult again = RunCliCaptured(args);
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_EQ(CounterIn(again.out, "UncachedCompile"), 0);
  auto tokens = [](const std::string& out) {
    const size_t at = out.find("\"tokens\": [");
    return at == std::string::npos ? std::string() : out.substr(at, out.find(']', at) - at);
  };
  EXPECT_FALSE(tokens(first.out).empty()) << first.out;
  EXPECT_EQ(tokens(again.out), tokens(first.out));
  std::filesystem::remove_all(dir);
}

TEST_F(GenerateTest, BadFlagsAndFilesAreOneLine) {
  const std::string m = "generate --model " + kModel;
  unsetenv("SHARDRT_MODEL");  // the CLI's fallback for --model
  ExpectCleanError("generate --prompt hi", "no model: pass --model FILE.gguf or set SHARDRT_MODEL");
  ExpectCleanError(m, 
                   "pass exactly one of --prompt TEXT, --prompt-file FILE|- and --prompt-tokens IDS");
  ExpectCleanError(m + " --prompt a --prompt-tokens 1", "pass exactly one of --prompt");
  ExpectCleanError(m + " --prompt a --prompt-file -", "pass exactly one of --prompt");
  ExpectCleanError(m + " --prompt-file /nonexistent/prompt.txt",
                   "/nonexistent/prompt.txt: cannot open");
  ExpectCleanError(m + " --prompt-file - < /dev/null", "the prompt has no tokens");
  ExpectCleanError(m + " --prompt-tokens 1,x", "flag --prompt-tokens: entry 1 is not a token id");
  ExpectCleanError(m + " --prompt-tokens 1,49152",
                   "flag --prompt-tokens: prompt token 1 is 49152, outside the vocabulary [0, 49152)");
  ExpectCleanError(m + " --prompt a --top-p 0.5", "--top-p and --seed apply to sampling");
  ExpectCleanError(m + " --prompt a --temperature -1",
                   "flag --temperature: expected a number in [0, 100], got '-1'");
  ExpectCleanError(m + " --prompt a --system s", "--system needs --chat");
  ExpectCleanError(m + " --prompt a --logits-out=", "flag --logits-out: empty path");
  ExpectCleanError(m + " --prompt a --compile-only --compile-cache off",
                   "--compile-only needs a compile cache");
  ExpectCleanError(m + " --prompt a --attention-block 12",
                   "attention block 12: expected a multiple of the 8 devices");
  ExpectCleanError(m + " --prompt a --attention-block 0",
                   "flag --attention-block: expected an integer in [1, 8192], got '0'");
  ExpectCleanError(m + " --prompt a --max-tokens 8192",
                   "the model's context holds 8192 positions");
  // Within the context, but beyond the whole units of 48 positions (attention block 24, prompt
  // granule 16) that fit it: the message says so.
  ExpectCleanError(m + " --prompt-tokens 1 --max-tokens 8180 --attention-block 24",
                   "a prompt of 1 tokens and --max-tokens 8180 need 8181 positions, but the cache "
                   "holds at most 8160 of the model's 8192: whole units of the attention block "
                   "(24) and the prompt granule; pass a smaller --attention-block or fewer "
                   "--max-tokens");
  ExpectCleanError("generate --prompt a --model " SHARDRT_TESTDATA_DIR "/donate_add_one.mlir",
                   "donate_add_one.mlir");
  ExpectCleanError("generate --prompt a --model /nonexistent/model.gguf", "/nonexistent/model.gguf");
}

// The whole content of the file at `path` ("" when there is none).
std::string FileText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Output that cannot be written fails the command: streamed text at its first token, --json
// at its end, a closed stdout before anything is loaded; and a --logits-out file is then left
// as it was.
TEST_F(GenerateTest, OutputThatCannotBeWrittenFailsWithOneLine) {
  const std::string dir = testing::MakeTempDir();
  const std::string logits = dir + "/logits.npy";
  std::ofstream(logits) << "before";
  const std::string args = "generate --model " + kModel + " --prompt-tokens 6403,1980,253,655 "
                           "--max-tokens 6 --devices 8";
  for (const std::string& extra : {std::string(" > /dev/full"), std::string(" --json > /dev/full"),
                                   " --logits-out " + logits + " > /dev/full"}) {
    SCOPED_TRACE(extra);
    ShellResult r = RunCliShell(args + extra, kDeadline);
    ASSERT_FALSE(r.timed_out);
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_EQ(LastLine(r.err), "shardrt generate: writing the output: No space left on device")
        << r.err;
    // The error ends the command: no rates after it.
    EXPECT_EQ(r.err.find("decoded "), std::string::npos) << r.err;
  }
  EXPECT_EQ(FileText(logits), "before");
  // A closed stdout fails before anything is compiled or loaded: one line, nothing else.
  for (const std::string& extra : {std::string(" >&-"), std::string(" --json >&-")}) {
    SCOPED_TRACE(extra);
    ShellResult r = RunCliShell(args + extra, kDeadline);
    ASSERT_FALSE(r.timed_out);
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_EQ(r.err, "shardrt generate: writing the output: standard output is closed\n");
  }
  // Only the file is left in the folder: no partial --logits-out file.
  size_t entries = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir)) ++entries;
  EXPECT_EQ(entries, 1u);
  std::filesystem::remove_all(dir);
}

// --logits-out and --trace paths that cannot be written are refused before anything is
// compiled or loaded: one line on stderr (no "compiled in" line before it), in far less time
// than a generation takes.
TEST_F(GenerateTest, OutputFilesThatCannotBeWrittenAreRefusedFirst) {
  const std::string dir = testing::MakeTempDir();
  const std::string args = "generate --model " + kModel + " --prompt-tokens 6403,1980,253,655 "
                           "--max-tokens 6 --devices 8 ";
  struct Case {
    std::string flags;
    std::string error;
  } cases[] = {
      {"--logits-out " + dir + "/missing/l.npy",
       "flag --logits-out: " + dir + "/missing/l.npy: no folder " + dir +
           "/missing to write it in (No such file or directory)"},
      {"--logits-out " + dir, "flag --logits-out: " + dir +
                                  ": expected a regular file, got a directory"},
      {"--logits-out /dev/null",
       "flag --logits-out: /dev/null: expected a regular file, got a character device"},
      {"--trace " + dir + "/missing/t.json",
       "flag --trace: " + dir + "/missing/t.json: no folder " + dir +
           "/missing to write it in (No such file or directory)"},
      {"--trace " + dir, "flag --trace: " + dir + ": expected a regular file, got a directory"},
      {"--compile-only --trace " + dir + "/missing/t.json", "flag --trace: "},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.flags);
    ShellResult r = RunCliShell(args + c.flags, kDeadline);
    ASSERT_FALSE(r.timed_out);
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_EQ(r.err.rfind("shardrt generate: " + c.error, 0), 0u) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_LT(r.seconds, 10) << "refused only after running";
  }
  std::filesystem::remove_all(dir);
}

// --logits-out writes one f32 row of the vocabulary per generated token, rows written as they
// are handed over: the same bytes the whole array serializes to (as before), each row's argmax
// the greedy token, and no temporary file left next to it.
TEST_F(GenerateTest, LogitsOutHoldsEachTokensRow) {
  const std::string dir = testing::MakeTempDir();
  const std::string path = dir + "/logits.npy";
  std::ofstream(path) << "an older file, replaced";
  ShellResult r = RunCliShell("generate --model " + kModel + " --prompt-tokens 6403,1980,253,655 "
                              "--max-tokens 7 --devices 8 --json --logits-out " + path,
                              kDeadline);
  ASSERT_FALSE(r.timed_out);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::vector<int32_t> tokens = TokensOf(r.out);
  ASSERT_EQ(tokens.size(), 7u) << r.out;
  const std::string bytes = FileText(path);
  absl::StatusOr<NpyArray> array = ParseNpy(bytes);
  ASSERT_TRUE(array.ok()) << array.status();
  EXPECT_EQ(array->type, ElementType::kF32);
  ASSERT_EQ(array->shape, (std::vector<int64_t>{7, 49152}));
  absl::StatusOr<std::string> serialized = SerializeNpy(*array);
  ASSERT_TRUE(serialized.ok());
  EXPECT_TRUE(*serialized == bytes) << "not the bytes WriteNpy writes";
  const float* values = reinterpret_cast<const float*>(array->data.data());
  for (size_t i = 0; i < tokens.size(); ++i) {
    const float* row = values + i * 49152;
    EXPECT_EQ(std::max_element(row, row + 49152) - row, tokens[i]) << "row " << i;
  }
  size_t entries = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir)) ++entries;
  EXPECT_EQ(entries, 1u);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace shardrt::cli
