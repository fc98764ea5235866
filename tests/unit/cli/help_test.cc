// The commands' flag tables and the help made from them: every table is well formed, the help
// lists exactly the flags the parser accepts, each on one line with its range and default.
#include "cli/help.h"

#include <algorithm>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "cli/commands.h"
#include "cli/flags.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace shardrt::cli {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

// Whether `text` is one non-empty line of printable ASCII.
bool OneLine(absl::string_view text) {
  if (text.empty()) return false;
  for (char c : text) {
    if (c < 0x20 || c > 0x7e) return false;
  }
  return true;
}

// A value `def` accepts.
std::string ValidValue(const FlagDef& def) {
  switch (def.type) {
    case FlagType::kInteger:
      return absl::StrCat(def.int_min);
    case FlagType::kNumber:
      return absl::StrCat(def.number_max);
    default:
      return "x";
  }
}

TEST(CommandTableTest, CommandsAreFoundByName) {
  ASSERT_EQ(Commands().size(), 6u);
  std::set<absl::string_view> names;
  for (const CommandDef* command : Commands()) {
    EXPECT_EQ(FindCommand(command->name), command);
    EXPECT_TRUE(names.insert(command->name).second) << command->name;
    EXPECT_NE(command->run, nullptr);
    EXPECT_TRUE(OneLine(command->usage)) << command->name;
    EXPECT_TRUE(OneLine(command->summary)) << command->name;
    EXPECT_EQ(command->summary.back(), '.') << command->name;
  }
  EXPECT_THAT(names, ::testing::UnorderedElementsAre("devices", "shard-info", "run", "generate",
                                                     "serve", "cache"));
  EXPECT_EQ(FindCommand("bogus"), nullptr);
  EXPECT_EQ(FindCommand("demo"), nullptr);  // bench/decoder_demo, a program of its own
  EXPECT_EQ(FindCommand(""), nullptr);
}

TEST(CommandTableTest, EveryTableIsWellFormed) {
  for (const CommandDef* command : Commands()) {
    std::set<absl::string_view> names;
    for (const FlagDef& def : command->flags) {
      SCOPED_TRACE(absl::StrCat(command->name, " --", def.name));
      EXPECT_TRUE(names.insert(def.name).second) << "listed twice";
      EXPECT_NE(def.name, "help");     // the parser's own
      EXPECT_NE(def.name, "timeout");  // main()'s, taken out before the command parses
      ASSERT_FALSE(def.name.empty());
      for (char c : def.name) EXPECT_TRUE((c >= 'a' && c <= 'z') || c == '-') << def.name;
      EXPECT_TRUE(OneLine(def.description));
      EXPECT_NE(def.description.back(), '.');
      EXPECT_EQ(def.value_name.empty(), def.type == FlagType::kBoolean);
      if (def.type == FlagType::kBoolean) {
        EXPECT_EQ(def.default_text, "off");
      }
      if (def.type == FlagType::kInteger) {
        EXPECT_LE(def.int_min, def.int_max);
        int64_t value = 0;
        if (absl::SimpleAtoi(def.default_text, &value)) {
          EXPECT_GE(value, def.int_min);
          EXPECT_LE(value, def.int_max);
        }
      }
      if (def.type == FlagType::kNumber) {
        EXPECT_LE(def.number_min, def.number_max);
        double value = 0;
        ASSERT_TRUE(absl::SimpleAtod(def.default_text, &value));
        EXPECT_GE(value, def.number_min);
        EXPECT_LE(value, def.number_max);
      }
    }
  }
}

// What the help lists is what the parser accepts, and nothing else.
TEST(CommandHelpTest, ListsExactlyTheFlagsTheParserAccepts) {
  for (const CommandDef* command : Commands()) {
    SCOPED_TRACE(command->name);
    const std::string help = CommandHelp(*command);
    std::set<std::string> listed;
    for (absl::string_view line : absl::StrSplit(help, '\n')) {
      if (!absl::ConsumePrefix(&line, "  --")) continue;
      listed.insert(std::string(line.substr(0, line.find(' '))));
    }
    std::set<std::string> table = {"timeout"};
    for (const FlagDef& def : command->flags) table.insert(std::string(def.name));
    EXPECT_EQ(listed, table);
    for (const std::string& name : listed) {
      if (name == "timeout") continue;
      const FlagDef& def = *std::find_if(command->flags.begin(), command->flags.end(),
                                         [&](const FlagDef& d) { return d.name == name; });
      std::vector<std::string> args = {"--" + name};
      if (def.type != FlagType::kBoolean) args.push_back(ValidValue(def));
      absl::StatusOr<Flags> flags = Flags::Parse(args, command->flags);
      ASSERT_TRUE(flags.ok()) << name << ": " << flags.status();
      EXPECT_TRUE(flags->Has(name));
      if (def.type == FlagType::kInteger) {
        EXPECT_TRUE(flags->GetInt(name, 0).ok()) << name;
      }
      if (def.type == FlagType::kNumber) {
        EXPECT_TRUE(flags->GetDouble(name).ok()) << name;
      }
    }
    EXPECT_EQ(Flags::Parse({"--not-a-flag"}, command->flags).status().message(),
              "unknown flag --not-a-flag");
  }
}

TEST(CommandHelpTest, EveryFlagIsOneLineWithItsDescriptionRangeAndDefault) {
  for (const CommandDef* command : Commands()) {
    SCOPED_TRACE(command->name);
    const std::string help = CommandHelp(*command);
    EXPECT_THAT(help, StartsWith(absl::StrCat("usage: shardrt ", command->name, " ",
                                              command->usage, "\n\n", command->summary, "\n")));
    std::vector<std::string> lines = absl::StrSplit(help, '\n');
    for (const FlagDef& def : command->flags) {
      const std::string head = def.type == FlagType::kBoolean
                                   ? absl::StrCat("  --", def.name, " ")
                                   : absl::StrCat("  --", def.name, " ", def.value_name, " ");
      auto line = std::find_if(lines.begin(), lines.end(),
                               [&](const std::string& l) { return l.starts_with(head); });
      ASSERT_NE(line, lines.end()) << head;
      EXPECT_THAT(*line, HasSubstr(std::string(def.description)));
      EXPECT_THAT(*line, HasSubstr(absl::StrCat(
                             "default: ", def.default_text.empty() ? "none" : def.default_text,
                             ")")));
      if (def.type == FlagType::kInteger && def.int_max < INT64_MAX) {
        EXPECT_THAT(*line, HasSubstr(absl::StrCat("an integer in [", def.int_min, ", ",
                                                  def.int_max, "]")));
      }
      if (def.repeated) {
        EXPECT_THAT(*line, HasSubstr("(repeatable; default: "));
      }
    }
    EXPECT_THAT(help, HasSubstr("\n  --timeout SECONDS "));
    EXPECT_THAT(help, HasSubstr("an integer in [1, 86400] (default: none)\n"));
    EXPECT_THAT(help, HasSubstr("\n  -h, --help "));
  }
}

// A command typed another way (a program of its own built on the command's table) has the same
// help but for the usage line.
TEST(CommandHelpTest, InvocationStartsTheUsageLine) {
  for (const CommandDef* command : Commands()) {
    SCOPED_TRACE(command->name);
    const std::string help = CommandHelp(*command);
    EXPECT_EQ(CommandHelp(*command, absl::StrCat("shardrt ", command->name)), help);
    const std::string other = CommandHelp(*command, "some_tool");
    const std::string usage = absl::StrCat("usage: some_tool ", command->usage, "\n");
    EXPECT_THAT(other, StartsWith(usage));
    EXPECT_EQ(other.substr(usage.size()), help.substr(help.find('\n') + 1));
  }
}

TEST(CommandHelpTest, GenerateListsItsDefaultsAndRanges) {
  const std::string help = CommandHelp(*FindCommand("generate"));
  EXPECT_THAT(help, HasSubstr("--max-tokens N"));
  EXPECT_THAT(help, HasSubstr("an integer in [1, 8192] (default: 128)\n"));
  EXPECT_THAT(help, HasSubstr("a number in [1e-06, 1] (default: 1)\n"));
  EXPECT_THAT(help, HasSubstr("an integer >= 0 (default: 0)\n"));  // --seed
  EXPECT_THAT(help, HasSubstr("(default: $SHARDRT_MODEL)\n"));
}

TEST(OverviewHelpTest, ListsEveryCommandWithItsSummary) {
  const std::string help = OverviewHelp();
  EXPECT_THAT(help, StartsWith("usage: shardrt COMMAND [flags]\n"));
  for (const CommandDef* command : Commands()) {
    EXPECT_THAT(help, HasSubstr(absl::StrCat("\n  ", command->name, " ")));
    EXPECT_THAT(help, HasSubstr(absl::StrCat(" ", command->summary, "\n")));
  }
}

}  // namespace
}  // namespace shardrt::cli
