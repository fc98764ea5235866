// `shardrt generate` on the real model through the CLI binary: the text streams to stdout and the
// rates end stderr; --json holds the same text; bad flags and files are one line on stderr and
// exit 1, refused before anything is compiled (docs/errors.md).
#include <stdlib.h>

#include <filesystem>
#include <regex>
#include <string>

#include "cli/cli_runner.h"
#include "gtest/gtest.h"

namespace shardrt::cli {
namespace {

using testing::CliResult;
using testing::ExpectCleanError;
using testing::RunCliCaptured;

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

TEST_F(GenerateTest, StreamsTextAndEndsStderrWithTheRates) {
  const std::string args = "generate --model " + kModel + " --prompt 'Once upon a time' "
                           "--max-tokens 12 --devices 8";
  CliResult streamed = RunCliCaptured(args);
  ASSERT_EQ(streamed.exit_code, 0) << streamed.err;
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
  // The JSON string of a text with no quotes, backslashes or control characters but newlines.
  std::string escaped;
  for (char c : text) escaped += c == '\n' ? std::string("\\n") : std::string(1, c);
  EXPECT_NE(json.out.find("\"text\": \"" + escaped + "\""), std::string::npos)
      << json.out << " vs " << text;
}

TEST_F(GenerateTest, BadFlagsAndFilesAreOneLine) {
  const std::string m = "generate --model " + kModel;
  unsetenv("SHARDRT_MODEL");  // the CLI's fallback for --model
  ExpectCleanError("generate --prompt hi", "no model: pass --model FILE.gguf or set SHARDRT_MODEL");
  ExpectCleanError(m, "pass exactly one of --prompt TEXT and --prompt-tokens IDS");
  ExpectCleanError(m + " --prompt a --prompt-tokens 1", "pass exactly one of --prompt");
  ExpectCleanError(m + " --prompt-tokens 1,x", "flag --prompt-tokens: entry 1 is not a token id");
  ExpectCleanError(m + " --prompt-tokens 1,49152",
                   "flag --prompt-tokens: token 1 is 49152, outside the vocabulary [0, 49152)");
  ExpectCleanError(m + " --prompt a --top-p 0.5", "--top-p and --seed apply to sampling");
  ExpectCleanError(m + " --prompt a --temperature -1",
                   "flag --temperature: expected a number in [0, 100], got '-1'");
  ExpectCleanError(m + " --prompt a --system s", "--system needs --chat");
  ExpectCleanError(m + " --prompt a --logits-out=", "flag --logits-out: empty path");
  ExpectCleanError(m + " --prompt a --devices 5",
                   "devices 5: the query width (heads x head dim) 576 does not split into 5");
  ExpectCleanError(m + " --prompt a --attention-block 12",
                   "attention block 12: expected a multiple of the 8 devices");
  ExpectCleanError(m + " --prompt a --attention-block 0",
                   "flag --attention-block: expected an integer in [1, 8192], got '0'");
  ExpectCleanError(m + " --prompt a --max-tokens 8192",
                   "the model's context holds 8192 positions");
  ExpectCleanError("generate --prompt a --model " SHARDRT_TESTDATA_DIR "/donate_add_one.mlir",
                   "donate_add_one.mlir");
  ExpectCleanError("generate --prompt a --model /nonexistent/model.gguf", "/nonexistent/model.gguf");
}

}  // namespace
}  // namespace shardrt::cli
