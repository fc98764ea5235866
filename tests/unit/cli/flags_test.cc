#include "cli/flags.h"

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace shardrt::cli {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

constexpr int64_t kInt64Min = std::numeric_limits<int64_t>::min();
constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();

constexpr FlagDef kTable[] = {
    {.name = "devices", .type = FlagType::kInteger, .value_name = "N", .description = "devices",
     .default_text = "8", .int_min = 1, .int_max = 8},
    {.name = "arg", .value_name = "FILE", .description = "an argument", .repeated = true},
    {.name = "out", .value_name = "DIR", .description = "the outputs' folder"},
    {.name = "json", .type = FlagType::kBoolean, .description = "JSON", .default_text = "off"},
    {.name = "metrics", .type = FlagType::kBoolean, .description = "metrics"},
    {.name = "ratio", .type = FlagType::kNumber, .value_name = "R", .description = "a ratio",
     .default_text = "1.5", .number_min = 0, .number_max = 2},
    {.name = "big", .type = FlagType::kInteger, .value_name = "B", .description = "any int64",
     .default_text = "-5", .int_min = kInt64Min, .int_max = kInt64Max},
    {.name = "block", .type = FlagType::kInteger, .value_name = "N", .description = "computed",
     .default_text = "a multiple of the devices", .int_min = 0, .int_max = 10},
};

// Flags::Parse of `args` under kTable; the parse must succeed.
Flags Parsed(const std::vector<std::string>& args) {
  absl::StatusOr<Flags> flags = Flags::Parse(args, kTable);
  EXPECT_TRUE(flags.ok()) << flags.status();
  return flags.ok() ? *std::move(flags) : *Flags::Parse({}, kTable);
}

// The message of the error Flags::Parse gives for `args` under kTable, or "OK".
std::string ParseError(const std::vector<std::string>& args) {
  absl::StatusOr<Flags> flags = Flags::Parse(args, kTable);
  if (flags.ok()) return "OK";
  EXPECT_EQ(flags.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(flags.status().message());
}

TEST(FlagsTest, ParsesValuesBooleansAndPositionals) {
  Flags flags = Parsed({"prog.mlir", "--devices", "4", "--arg=a.npy", "--json", "--arg",
                        "--b.npy", "-x", "--", "", "--out=", "tail"});
  EXPECT_FALSE(flags.help());
  EXPECT_EQ(flags.Get("devices"), "4");
  // A value may itself start with "--"; an '=' gives an empty one.
  EXPECT_THAT(flags.GetAll("arg"), ElementsAre("a.npy", "--b.npy"));
  EXPECT_EQ(flags.Get("arg"), "--b.npy");
  EXPECT_EQ(flags.Get("out"), "");
  EXPECT_TRUE(flags.Has("json"));
  EXPECT_TRUE(flags.Has("out"));
  EXPECT_FALSE(flags.Has("metrics"));
  EXPECT_EQ(flags.Get("json"), std::nullopt);
  EXPECT_EQ(flags.Get("metrics"), std::nullopt);
  EXPECT_THAT(flags.GetAll("metrics"), IsEmpty());
  EXPECT_THAT(flags.positional(), ElementsAre("prog.mlir", "-x", "--", "", "tail"));
}

TEST(FlagsTest, GetIntTakesTheTablesRangeAndDefault) {
  EXPECT_EQ(*Parsed({"--devices", "8"}).GetInt("devices"), 8);
  EXPECT_EQ(*Parsed({"--devices=1"}).GetInt("devices"), 1);
  EXPECT_EQ(Parsed({"--devices", "9"}).GetInt("devices").status().message(),
            "flag --devices: expected an integer in [1, 8], got '9'");
  EXPECT_EQ(Parsed({"--devices", "0"}).GetInt("devices").status().message(),
            "flag --devices: expected an integer in [1, 8], got '0'");
  // Absent: the table's default, or the caller's for a computed one.
  EXPECT_EQ(*Parsed({}).GetInt("devices"), 8);
  EXPECT_EQ(*Parsed({}).GetInt("devices", 3), 3);
  EXPECT_EQ(*Parsed({}).GetInt("big"), -5);
  EXPECT_EQ(*Parsed({}).GetInt("block", 4), 4);
  EXPECT_EQ(Parsed({}).GetInt("block").status().code(), absl::StatusCode::kInternal);
  // The range holds whoever gives the default.
  EXPECT_EQ(Parsed({"--block", "11"}).GetInt("block", 4).status().message(),
            "flag --block: expected an integer in [0, 10], got '11'");
  // A name that is not an integer flag of the table is the command's mistake.
  EXPECT_EQ(Parsed({}).GetInt("out").status().code(), absl::StatusCode::kInternal);
  EXPECT_EQ(Parsed({}).GetInt("nope", 1).status().code(), absl::StatusCode::kInternal);

  EXPECT_EQ(*Parsed({"--big=-9223372036854775808"}).GetInt("big"), kInt64Min);
  EXPECT_EQ(*Parsed({"--big=9223372036854775807"}).GetInt("big"), kInt64Max);
  EXPECT_EQ(Parsed({"--big=9223372036854775808"}).GetInt("big").status().message(),  // 2^63
            "flag --big: expected an integer in [-9223372036854775808, "
            "9223372036854775807], got '9223372036854775808'");
  for (const char* text : {"", "4x", "0x10", "1e3", "four", "4 4"}) {
    EXPECT_EQ(Parsed({"--big", text}).GetInt("big").status().code(),
              absl::StatusCode::kInvalidArgument)
        << text;
  }
}

TEST(FlagsTest, GetDoubleTakesTheTablesRangeAndRefusesNan) {
  for (const char* bad : {"nan", "-0.5", "2.5", "x", "", "1e999"}) {
    EXPECT_EQ(Parsed({"--ratio", bad}).GetDouble("ratio").status().message(),
              std::string("flag --ratio: expected a number in [0, 2], got '") + bad + "'");
  }
  EXPECT_EQ(*Parsed({"--ratio", "0.25"}).GetDouble("ratio"), 0.25);
  EXPECT_EQ(*Parsed({}).GetDouble("ratio"), 1.5);  // absent: the table's default
  EXPECT_EQ(Parsed({}).GetDouble("devices").status().code(), absl::StatusCode::kInternal);
}

TEST(FlagsTest, RejectsBadFlags) {
  EXPECT_EQ(ParseError({"--bogus"}), "unknown flag --bogus");
  EXPECT_EQ(ParseError({"--bogus=1"}), "unknown flag --bogus");
  EXPECT_EQ(ParseError({"---devices", "1"}), "unknown flag ---devices");
  EXPECT_EQ(ParseError({"--=1"}), "unknown flag --");
  EXPECT_EQ(ParseError({"--devices"}), "flag --devices needs a value");
  EXPECT_EQ(ParseError({"x", "--arg", "a", "--arg"}), "flag --arg needs a value");
  EXPECT_EQ(ParseError({"--json=true"}), "flag --json takes no value");
  EXPECT_EQ(ParseError({"--json="}), "flag --json takes no value");
  EXPECT_EQ(ParseError({"--help=1"}), "flag --help takes no value");
  // The first error is the one reported.
  EXPECT_EQ(ParseError({"--bogus", "--json=1", "--devices"}), "unknown flag --bogus");
}

TEST(FlagsTest, HelpIsAFlagWhereverAFlagCanBeAndWinsOverErrors) {
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"--help"}, {"-h"}, {"prog.mlir", "--devices", "99", "-h"}, {"--bogus", "--help"},
           {"--help", "--json=1"}, {"-h", "--devices"}}) {
    absl::StatusOr<Flags> flags = Flags::Parse(args, kTable);
    ASSERT_TRUE(flags.ok()) << args[0] << ": " << flags.status();
    EXPECT_TRUE(flags->help()) << args[0];
  }
  // As a flag's value it is that value; other words stay positional.
  Flags flags = Parsed({"--out", "--help", "--arg=-h", "-hx", "--", "-help"});
  EXPECT_FALSE(flags.help());
  EXPECT_EQ(flags.Get("out"), "--help");
  EXPECT_EQ(flags.Get("arg"), "-h");
  EXPECT_THAT(flags.positional(), ElementsAre("-hx", "--", "-help"));
}

// Messages stay one line and short, whatever the arguments hold.
TEST(FlagsTest, MessagesEscapeAndCutArgumentText) {
  EXPECT_EQ(ParseError({"--a\nb"}), "unknown flag --a\\nb");
  // Control bytes as \xNN; a hex digit right after one is escaped too, so it cannot join it.
  EXPECT_EQ(ParseError({std::string("--a\0b\x1b[31m", 10)}),
            "unknown flag --a\\x00\\x62\\x1b[31m");
  EXPECT_EQ(ParseError({"--it's"}), "unknown flag --it\\'s");
  EXPECT_EQ(ParseError({"--größe"}), "unknown flag --größe");  // UTF-8 passes through
  EXPECT_EQ(ParseError({"--" + std::string(70, 'x')}),
            "unknown flag --" + std::string(64, 'x') + "...");
  // A cut never splits a character: 63 ASCII bytes, then a two-byte 'ö'.
  EXPECT_EQ(ParseError({"--" + std::string(63, 'x') + "öö"}),
            "unknown flag --" + std::string(63, 'x') + "...");
  EXPECT_EQ(Parsed({"--devices", "1\n2"}).GetInt("devices").status().message(),
            "flag --devices: expected an integer in [1, 8], got '1\\n2'");
}

}  // namespace
}  // namespace shardrt::cli
