// `shardrt ... --help` and `shardrt help ...` from the binary: every command's help exits 0 on
// stdout and lists every flag of its table, `help NAME` prints the same, help never runs the
// command, and unknown commands and flags stay one-line errors.
#include <string>

#include "absl/strings/str_cat.h"
#include "cli/cli_runner.h"
#include "cli/commands.h"
#include "cli/help.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace shardrt::cli {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;
using testing::CliResult;
using testing::RunCliCaptured;

// Expects `shardrt <args>` to fail with `exit_code` and one line on stderr holding `expected`,
// and nothing on stdout.
void ExpectOneLineError(const std::string& args, int exit_code, const std::string& expected) {
  SCOPED_TRACE(args);
  CliResult r = RunCliCaptured(args);
  EXPECT_EQ(r.exit_code, exit_code) << r.err;
  EXPECT_EQ(r.out, "");
  ASSERT_FALSE(r.err.empty());
  EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << "not one line: " << r.err;
  EXPECT_THAT(r.err, HasSubstr(expected));
}

TEST(CliHelpTest, EveryCommandsHelpExitsZeroAndListsEveryFlag) {
  for (const CommandDef* command : Commands()) {
    for (const char* flag : {"--help", "-h"}) {
      SCOPED_TRACE(absl::StrCat(command->name, " ", flag));
      CliResult r = RunCliCaptured(absl::StrCat(command->name, " ", flag));
      EXPECT_EQ(r.exit_code, 0) << r.err;
      EXPECT_EQ(r.err, "");
      EXPECT_EQ(r.out, CommandHelp(*command));
      EXPECT_THAT(r.out, StartsWith(absl::StrCat("usage: shardrt ", command->name, " ")));
      EXPECT_THAT(r.out, HasSubstr(absl::StrCat("\n", command->summary, "\n")));
      for (const FlagDef& def : command->flags) {
        EXPECT_THAT(r.out, HasSubstr(absl::StrCat("\n  --", def.name, " "))) << def.name;
        EXPECT_THAT(r.out, HasSubstr(std::string(def.description))) << def.name;
      }
      EXPECT_THAT(r.out, HasSubstr("\n  --timeout SECONDS "));
      EXPECT_THAT(r.out, HasSubstr("\n  -h, --help "));
    }
  }
}

TEST(CliHelpTest, HelpCommandPrintsTheSameAsTheFlag) {
  for (const CommandDef* command : Commands()) {
    SCOPED_TRACE(command->name);
    CliResult by_command = RunCliCaptured(absl::StrCat("help ", command->name));
    CliResult by_flag = RunCliCaptured(absl::StrCat(command->name, " --help"));
    EXPECT_EQ(by_command.exit_code, 0) << by_command.err;
    EXPECT_EQ(by_command.err, "");
    EXPECT_EQ(by_command.out, by_flag.out);
  }
  CliResult help = RunCliCaptured("help generate");
  EXPECT_EQ(help.out, RunCliCaptured("generate --help").out);
  EXPECT_THAT(help.out, HasSubstr("\n  --max-tokens N "));
}

TEST(CliHelpTest, OverviewListsEveryCommand) {
  for (const char* args : {"help", "--help", "-h"}) {
    SCOPED_TRACE(args);
    CliResult r = RunCliCaptured(args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.err, "");
    EXPECT_EQ(r.out, OverviewHelp());
    for (const CommandDef* command : Commands()) {
      EXPECT_THAT(r.out, HasSubstr(absl::StrCat("\n  ", command->name, " ")));
    }
  }
  // No command at all is a usage error: the overview on stderr, exit 2.
  CliResult none = RunCliCaptured("");
  EXPECT_EQ(none.exit_code, 2);
  EXPECT_EQ(none.out, "");
  EXPECT_EQ(none.err, OverviewHelp());
}

// Help is printed instead of running the command, whatever the other arguments are (no plugin
// is loaded, no file read); --timeout is still taken.
TEST(CliHelpTest, HelpDoesNotRunTheCommand) {
  for (const char* args : {"run --help", "run /nonexistent.mlir --devices 0 -h",
                           "devices --plugin /nonexistent.so --help", "generate --bogus --help",
                           "cache info --timeout 0 --help",
                           "shard-info --timeout 5 --help", "cache clear --help",
                           "generate --prompt hi --model /nonexistent.gguf -h"}) {
    SCOPED_TRACE(args);
    CliResult r = RunCliCaptured(args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.err, "");
    EXPECT_THAT(r.out, StartsWith("usage: shardrt "));
  }
}

// A flag's value that reads "--help" is that value: here the prompt, and generate goes on to
// fail on the model file.
TEST(CliHelpTest, HelpAsAFlagsValueIsTheValue) {
  ExpectOneLineError("generate --prompt --help --model /nonexistent/model.gguf", 1,
                     "/nonexistent/model.gguf");
}

TEST(CliHelpTest, UnknownCommandsAndFlagsAreOneLineErrors) {
  ExpectOneLineError("bogus", 2, "shardrt: unknown command 'bogus' (try: shardrt --help)");
  // The decoder demo is a program of its own (build/bench/decoder_demo), not a command.
  ExpectOneLineError("demo", 2, "shardrt: unknown command 'demo' (try: shardrt --help)");
  ExpectOneLineError("demo --devices 8 --tokens 32", 2, "shardrt: unknown command 'demo'");
  ExpectOneLineError("help demo", 2, "shardrt: unknown command 'demo' (try: shardrt --help)");
  ExpectOneLineError("help bogus", 2, "shardrt: unknown command 'bogus' (try: shardrt --help)");
  ExpectOneLineError("'bad\ncommand'", 2, "unknown command 'bad\\ncommand'");
  ExpectOneLineError("help run generate", 2, "usage: shardrt help [COMMAND]");
  ExpectOneLineError("devices --bogus", 1,
                     "shardrt devices: unknown flag --bogus (see: shardrt devices --help)");
  ExpectOneLineError("generate --max-tokens", 1, "flag --max-tokens needs a value");
  ExpectOneLineError("shard-info --json=yes", 1, "flag --json takes no value");
  ExpectOneLineError("run --help=1", 1, "flag --help takes no value");
  ExpectOneLineError("cache info --timeout 0", 1,
                     "flag --timeout: expected a whole number of seconds in [1, 86400], got '0'");
}

}  // namespace
}  // namespace shardrt::cli
