// The sharding layer holds its inputs to shardrt::limits before allocating for them.
#include <string>

#include "gtest/gtest.h"
#include "shardrt/base/limits.h"
#include "shardrt/sharding/geometry.h"
#include "shardrt/sharding/text.h"

namespace shardrt {
namespace {

TEST(ShardingLimitsTest, TextLengthAndTileRank) {
  const std::string long_text =
      "{devices=[2]0,1" + std::string(limits::kMaxShardingTextBytes, ' ') + "}";
  auto too_long = ParseSharding(long_text);
  ASSERT_FALSE(too_long.ok());
  EXPECT_NE(too_long.status().message().find("sharding text has "), absl::string_view::npos)
      << too_long.status();
  std::string dims = "1";
  for (int i = 0; i < limits::kMaxRank + 2; ++i) dims += ",1";  // 67 entries
  auto too_many = ParseSharding("{devices=[" + dims + "]<=[1]}");
  ASSERT_FALSE(too_many.ok());
  EXPECT_NE(too_many.status().message().find("has 67 entries; the limit is 66"),
            absl::string_view::npos)
      << too_many.status();
}

// The explicit device list of the largest sharding the device limit admits parses back: the
// text limit leaves room for it (found by fuzzing: 297,024 devices printed to 2 MB of ids).
TEST(ShardingLimitsTest, ExplicitListOfTheLargestShardingParsesBack) {
  auto largest = ParseSharding("{devices=[1024,1024]<=[1024,1024]T(1,0)}");
  ASSERT_TRUE(largest.ok()) << largest.status();
  const std::string explicit_text = PrintSharding(*largest, DeviceListStyle::kExplicit);
  EXPECT_GT(explicit_text.size(), size_t{1} << 20);
  auto again = ParseSharding(explicit_text);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE(*again == *largest);
}

TEST(ShardingLimitsTest, GeometryRankAndEntries) {
  auto high_rank = ShardGeometry::Create(Shape(limits::kMaxRank + 1, 1), Sharding::Replicated(), 2);
  ASSERT_FALSE(high_rank.ok());
  EXPECT_NE(high_rank.status().message().find("the array has rank 65; the limit is 64"),
            absl::string_view::npos)
      << high_rank.status();
  // 60 dims over 2^20 devices: 63 Mi entries per table, refused before any is allocated.
  std::string tiles;
  Shape shape;
  for (int i = 0; i < 60; ++i) {
    tiles += "1,";
    shape.push_back(1);
  }
  shape.push_back(1 << 20);
  auto sharding = ParseSharding("{devices=[" + tiles + "1048576]<=[1048576]}");
  ASSERT_TRUE(sharding.ok()) << sharding.status();
  auto big = ShardGeometry::Create(shape, *sharding, 1 << 20);
  ASSERT_FALSE(big.ok());
  EXPECT_NE(big.status().message().find("index entries"), absl::string_view::npos)
      << big.status();
}

}  // namespace
}  // namespace shardrt
