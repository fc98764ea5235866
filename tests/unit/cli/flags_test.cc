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

const FlagSpec kSpec{.with_value = {"devices", "arg", "out"}, .boolean = {"json", "metrics"}};

// The message of the error Flags::Parse gives for `args` under kSpec, or "OK".
std::string ParseError(const std::vector<std::string>& args) {
  absl::StatusOr<Flags> flags = Flags::Parse(args, kSpec);
  if (flags.ok()) return "OK";
  EXPECT_EQ(flags.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(flags.status().message());
}

TEST(FlagsTest, ParsesValuesBooleansAndPositionals) {
  absl::StatusOr<Flags> flags =
      Flags::Parse({"prog.mlir", "--devices", "4", "--arg=a.npy", "--json", "--arg", "--b.npy",
                    "-x", "--", "", "--out=", "tail"},
                   kSpec);
  ASSERT_TRUE(flags.ok()) << flags.status();
  EXPECT_EQ(flags->Get("devices"), "4");
  // A value may itself start with "--"; an '=' gives an empty one.
  EXPECT_THAT(flags->GetAll("arg"), ElementsAre("a.npy", "--b.npy"));
  EXPECT_EQ(flags->Get("arg"), "--b.npy");
  EXPECT_EQ(flags->Get("out"), "");
  EXPECT_TRUE(flags->Has("json"));
  EXPECT_TRUE(flags->Has("out"));
  EXPECT_FALSE(flags->Has("metrics"));
  EXPECT_EQ(flags->Get("json"), std::nullopt);
  EXPECT_EQ(flags->Get("metrics"), std::nullopt);
  EXPECT_THAT(flags->GetAll("metrics"), IsEmpty());
  EXPECT_THAT(flags->positional(), ElementsAre("prog.mlir", "-x", "--", "", "tail"));
}

TEST(FlagsTest, GetIntHoldsTheBounds) {
  absl::StatusOr<Flags> flags = Flags::Parse({"--devices", "8"}, kSpec);
  ASSERT_TRUE(flags.ok()) << flags.status();
  EXPECT_EQ(*flags->GetInt("devices", 1, 1, 8), 8);
  EXPECT_EQ(*flags->GetInt("devices", 1, 8, 8), 8);
  EXPECT_EQ(flags->GetInt("devices", 1, 1, 7).status().message(),
            "flag --devices: expected an integer in [1, 7], got '8'");
  EXPECT_EQ(flags->GetInt("devices", 1, 9, 100).status().message(),
            "flag --devices: expected an integer in [9, 100], got '8'");
  // Absent: the fallback, unchecked.
  EXPECT_EQ(*flags->GetInt("out", -5, 1, 8), -5);

  const int64_t min = std::numeric_limits<int64_t>::min();
  const int64_t max = std::numeric_limits<int64_t>::max();
  flags = Flags::Parse({"--devices=-9223372036854775808"}, kSpec);
  ASSERT_TRUE(flags.ok());
  EXPECT_EQ(*flags->GetInt("devices", 0, min, max), min);
  flags = Flags::Parse({"--devices=9223372036854775808"}, kSpec);  // 2^63
  ASSERT_TRUE(flags.ok());
  EXPECT_EQ(flags->GetInt("devices", 0, min, max).status().message(),
            "flag --devices: expected an integer in [-9223372036854775808, "
            "9223372036854775807], got '9223372036854775808'");
  for (const char* text : {"", "4x", "0x10", "1e3", "four", "4 4"}) {
    flags = Flags::Parse({"--devices", text}, kSpec);
    ASSERT_TRUE(flags.ok());
    absl::StatusOr<int64_t> value = flags->GetInt("devices", 0, min, max);
    EXPECT_EQ(value.status().code(), absl::StatusCode::kInvalidArgument) << text;
  }
}

TEST(FlagsTest, GetDoubleHoldsTheBoundsAndRefusesNan) {
  for (const char* bad : {"nan", "-0.5", "2.5", "x", "", "1e999"}) {
    absl::StatusOr<Flags> flags = Flags::Parse({"--out", bad}, kSpec);
    ASSERT_TRUE(flags.ok()) << flags.status();
    EXPECT_EQ(flags->GetDouble("out", 1, 0, 2).status().message(),
              std::string("flag --out: expected a number in [0, 2], got '") + bad + "'");
  }
  absl::StatusOr<Flags> flags = Flags::Parse({"--out", "0.25"}, kSpec);
  ASSERT_TRUE(flags.ok()) << flags.status();
  EXPECT_EQ(*flags->GetDouble("out", 1, 0, 2), 0.25);
  EXPECT_EQ(*flags->GetDouble("devices", 0.5, 1, 2), 0.5);  // absent: the fallback
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

  absl::StatusOr<Flags> flags = Flags::Parse({"--devices", "1\n2"}, kSpec);
  ASSERT_TRUE(flags.ok());
  EXPECT_EQ(flags->GetInt("devices", 0, 0, 10).status().message(),
            "flag --devices: expected an integer in [0, 10], got '1\\n2'");
}

}  // namespace
}  // namespace shardrt::cli
