#include "shardrt/sharding/sharding.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "shardrt/sharding/text.h"

namespace shardrt {
namespace {

using ::testing::ElementsAre;

Sharding Parse(const char* text) {
  absl::StatusOr<Sharding> s = ParseSharding(text);
  EXPECT_TRUE(s.ok()) << text << ": " << s.status();
  return s.ok() ? *s : Sharding();
}

TEST(ShardingTest, Kinds) {
  EXPECT_TRUE(Sharding().IsReplicated());
  EXPECT_TRUE(Sharding::Manual().IsManual());
  absl::StatusOr<Sharding> maximal = Sharding::Maximal(3);
  ASSERT_TRUE(maximal.ok());
  EXPECT_TRUE(maximal->IsMaximal());
  EXPECT_EQ(maximal->maximal_device(), 3);
  EXPECT_FALSE(Sharding::Maximal(-1).ok());
  EXPECT_EQ(maximal->num_devices(), std::nullopt);
}

TEST(ShardingTest, TiledAccessors) {
  Sharding s = Parse("{devices=[2,1,2]<=[4] last_tile_dim_replicate}");
  ASSERT_TRUE(s.IsTiled());
  EXPECT_TRUE(s.ReplicateOnLastTileDim());
  EXPECT_EQ(s.data_rank(), 2);
  EXPECT_THAT(s.data_tile_dims(), ElementsAre(2, 1));
  EXPECT_EQ(s.subgroup_size(), 2);
  EXPECT_EQ(s.num_devices(), 4);

  Sharding m = Parse("{devices=[2,2,2]<=[8] last_tile_dims={manual, replicated}}");
  EXPECT_FALSE(m.ReplicateOnLastTileDim());
  EXPECT_THAT(m.subgroup_types(), ElementsAre(SubgroupType::kManual, SubgroupType::kReplicated));
  EXPECT_EQ(m.data_rank(), 1);
  EXPECT_EQ(m.subgroup_size(), 4);
}

// Anchor C11: equality of tile assignments and against replicated.
TEST(ShardingTest, EqualityIsSamePlacement) {
  Sharding a = Parse("{devices=[2,4]0,1,2,3,4,5,6,7}");
  EXPECT_EQ(a, Parse("{devices=[2,4] 0,1,2,3,4,5,6,7}"));  // parsed apart, spaced differently
  EXPECT_NE(a, Parse("{devices=[2,4]1,0,2,3,4,5,6,7}"));  // two devices swapped
  EXPECT_NE(a, Parse("{devices=[4,2]0,1,2,3,4,5,6,7}"));
  EXPECT_NE(a, Sharding::Replicated());
  EXPECT_EQ(Sharding::Replicated(), Parse("{replicated}"));
  EXPECT_EQ(a, Parse("{devices=[2,4]<=[8]}"));
  EXPECT_EQ(Parse("{devices=[4,2]0,4,1,5,2,6,3,7}"), Parse("{devices=[4,2]<=[2,4]T(1,0)}"));
  EXPECT_EQ(Parse("{devices=[2,2]1,0,3,2 last_tile_dim_replicate}"),
            Parse("{devices=[2,2]0,1,2,3 last_tile_dims={replicated}}"));
  EXPECT_NE(Parse("{devices=[2,2]1,0,3,2}"), Parse("{devices=[2,2]0,1,2,3}"));
  EXPECT_NE(Parse("{devices=[2,1,2]<=[4] last_tile_dims={manual}}"),
            Parse("{devices=[2,1,2]<=[4] last_tile_dim_replicate}"));
  EXPECT_NE(*Sharding::Maximal(1), *Sharding::Maximal(2));
}

TEST(ShardingTest, CanonicalizationCollapses) {
  // One device: replicated.
  EXPECT_TRUE(Sharding::Tiled(*TileAssignment::Iota({1, 1}))->IsReplicated());
  // All devices in one replica group: replicated.
  EXPECT_TRUE(Sharding::PartiallyReplicated(*TileAssignment::Iota({1, 8}))->IsReplicated());
  // Rank-0 data, partially replicated: replicated.
  EXPECT_TRUE(Sharding::PartiallyReplicated(*TileAssignment::Iota({8}))->IsReplicated());
  // Only manual subgroups and no data tiling: manual.
  const SubgroupType manual[] = {SubgroupType::kManual};
  EXPECT_TRUE(Sharding::Tiled(*TileAssignment::Iota({1, 4}), manual)->IsManual());
  // A trailing replicated dim of size 1 is dropped.
  EXPECT_EQ(*Sharding::PartiallyReplicated(*TileAssignment::Iota({4, 1})),
            *Sharding::Tiled(*TileAssignment::Iota({4})));
}

TEST(ShardingTest, TooManySubgroupTypes) {
  const SubgroupType types[] = {SubgroupType::kManual, SubgroupType::kReplicated};
  EXPECT_FALSE(Sharding::Tiled(*TileAssignment::Iota({4}), types).ok());
}

}  // namespace
}  // namespace shardrt
