#include "shardrt/sharding/geometry.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "shardrt/sharding/text.h"
#include "sharding_test_util.h"

namespace shardrt {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

using ::shardrt::testing::Geometry;

std::string GeometryError(Shape shape, const char* sharding,
                          std::optional<int64_t> devices = std::nullopt) {
  absl::StatusOr<Sharding> s = ParseSharding(sharding);
  EXPECT_TRUE(s.ok()) << s.status();
  absl::StatusOr<ShardGeometry> g = ShardGeometry::Create(std::move(shape), *s, devices);
  EXPECT_FALSE(g.ok());
  return std::string(g.status().message());
}

// One row of a table: device -> exact shape.
struct ExactCase {
  Shape shape;
  const char* sharding;
  Shape padded;
  std::vector<std::pair<int64_t, Shape>> exact;  // (device, exact shape)
};

class ExactShapeTest : public ::testing::TestWithParam<ExactCase> {};

TEST_P(ExactShapeTest, MatchesAnchors) {
  const ExactCase& c = GetParam();
  ShardGeometry g = Geometry(c.shape, c.sharding, 8);
  EXPECT_EQ(g.shard_shape(), c.padded);
  for (const auto& [device, exact] : c.exact) EXPECT_EQ(g.exact_shape(device), exact) << device;
}

INSTANTIATE_TEST_SUITE_P(
    Anchors, ExactShapeTest,
    ::testing::Values(
        // C3: 1-D over 8 devices.
        ExactCase{{8}, "{devices=[8]<=[8]}", {1}, {{0, {1}}, {7, {1}}}},
        // C4: 2-D tile of a 3-D array.
        ExactCase{{8, 7, 4}, "{devices=[2,4,1]<=[8]}", {4, 2, 4}, {{0, {4, 2, 4}}, {7, {4, 1, 4}}}},
        // C5: 3-D tile [1,4,2].
        ExactCase{{8, 7, 4}, "{devices=[1,4,2]<=[8]}", {8, 2, 2}, {{0, {8, 2, 2}}, {7, {8, 1, 2}}}},
        // C6: replicated.
        ExactCase{{8, 7, 4}, "{replicated}", {8, 7, 4}, {{0, {8, 7, 4}}, {7, {8, 7, 4}}}},
        // C7: 4-D.
        ExactCase{{1, 8, 7, 4},
                  "{devices=[1,1,4,2]<=[8]}",
                  {1, 8, 2, 2},
                  {{0, {1, 8, 2, 2}}, {7, {1, 8, 1, 2}}}},
        // C8: 5-D iota.
        ExactCase{{10, 1, 8, 7, 4},
                  "{devices=[1,1,2,2,2]<=[8]}",
                  {10, 1, 4, 4, 2},
                  {{0, {10, 1, 4, 4, 2}}, {7, {10, 1, 4, 3, 2}}}},
        // Transposed iota: device 1 holds tile 2 of 8 rows.
        ExactCase{{8}, "{devices=[8]<=[2,4]T(1,0)}", {1}, {{1, {1}}, {4, {1}}}},
        // Rank 0, replicated.
        ExactCase{{}, "{replicated}", {}, {{0, {}}, {5, {}}}}));

// C1 / C2: f32[8,7] on [[0,1],[2,3]].
TEST(GeometryTest, Tiled2x2) {
  ShardGeometry g = Geometry({8, 7}, "{devices=[2,2]0,1,2,3}");
  EXPECT_EQ(g.num_devices(), 4);
  EXPECT_EQ(g.num_tiles(), 4);
  EXPECT_EQ(g.num_replicas(), 1);
  EXPECT_EQ(g.shard_shape(), (Shape{4, 4}));
  const std::vector<std::pair<Shape, Shape>> expected = {
      {{0, 0}, {4, 4}}, {{0, 4}, {4, 7}}, {{4, 0}, {8, 4}}, {{4, 4}, {8, 7}}};
  for (int64_t d = 0; d < 4; ++d) {
    EXPECT_THAT(g.start(d), ::testing::ElementsAreArray(expected[d].first));
    EXPECT_THAT(g.limit(d), ::testing::ElementsAreArray(expected[d].second));
    EXPECT_EQ(g.replica(d), 0);
    EXPECT_TRUE(g.holds_data(d));
  }
}

// C2 replicated half: replica id = the device's position.
TEST(GeometryTest, ReplicatedReplicaIsDevicePosition) {
  ShardGeometry g = Geometry({8, 7}, "{replicated}", 4);
  EXPECT_EQ(g.shard_shape(), (Shape{8, 7}));
  EXPECT_EQ(g.num_tiles(), 1);
  EXPECT_EQ(g.num_replicas(), 4);
  for (int64_t d = 0; d < 4; ++d) {
    EXPECT_EQ(g.replica(d), d);
    EXPECT_THAT(g.start(d), ElementsAre(0, 0));
    EXPECT_THAT(g.limit(d), ElementsAre(8, 7));
  }
}

// The example: 10 rows over 4 devices -> 3,3,3,1 rows, padded to 3.
TEST(GeometryTest, TenRowsOverFourDevices) {
  ShardGeometry g = Geometry({10, 2}, "{devices=[4,1]<=[4]}");
  EXPECT_EQ(g.shard_shape(), (Shape{3, 2}));
  const int64_t starts[] = {0, 3, 6, 9}, limits[] = {3, 6, 9, 10};
  for (int64_t d = 0; d < 4; ++d) {
    EXPECT_EQ(g.start(d)[0], starts[d]);
    EXPECT_EQ(g.limit(d)[0], limits[d]);
  }
  EXPECT_EQ(g.exact_shape(3), (Shape{1, 2}));
}

// Anchor P2 style: 10 over 8 gives s = 2 and empty trailing shards.
TEST(GeometryTest, EmptyTrailingShards) {
  ShardGeometry g = Geometry({10}, "{devices=[8]<=[8]}");
  EXPECT_EQ(g.shard_shape(), (Shape{2}));
  EXPECT_THAT(g.start(4), ElementsAre(8));
  EXPECT_THAT(g.limit(4), ElementsAre(10));
  for (int64_t d = 5; d < 8; ++d) {
    EXPECT_THAT(g.start(d), ElementsAre(10));
    EXPECT_THAT(g.limit(d), ElementsAre(10));
    EXPECT_EQ(g.exact_shape(d), (Shape{0}));
    EXPECT_TRUE(g.holds_data(d));
  }
  // n+1 over n for n = 4: [0,2) [2,4) [4,5) [5,5).
  ShardGeometry h = Geometry({5}, "{devices=[4]<=[4]}");
  EXPECT_THAT(h.start(3), ElementsAre(5));
  EXPECT_THAT(h.limit(2), ElementsAre(5));
}

TEST(GeometryTest, PartialReplicationAndPermutation) {
  // Tiles of dim 0 on groups {0,2} and {1,3}: device list [[0,2],[1,3]].
  ShardGeometry g = Geometry({6, 3}, "{devices=[2,1,2]2,0,3,1 last_tile_dim_replicate}");
  EXPECT_EQ(g.num_tiles(), 2);
  EXPECT_EQ(g.num_replicas(), 2);
  EXPECT_THAT(g.tile_devices(0), ElementsAre(0, 2));
  EXPECT_THAT(g.tile_devices(1), ElementsAre(1, 3));
  EXPECT_EQ(g.tile(1), 1);
  EXPECT_EQ(g.replica(2), 1);
  EXPECT_THAT(g.start(3), ElementsAre(3, 0));
  EXPECT_THAT(g.limit(3), ElementsAre(6, 3));
}

TEST(GeometryTest, Maximal) {
  ShardGeometry g = Geometry({4, 4}, "{maximal device=2}", 4);
  EXPECT_EQ(g.num_tiles(), 1);
  EXPECT_TRUE(g.holds_data(2));
  EXPECT_FALSE(g.holds_data(0));
  EXPECT_EQ(g.tile(0), -1);
  EXPECT_EQ(g.exact_shape(0), (Shape{0, 0}));
  EXPECT_EQ(g.exact_shape(2), (Shape{4, 4}));
  EXPECT_EQ(g.shard_shape(), (Shape{4, 4}));
}

TEST(GeometryTest, RankZeroTiledIsReplicated) {
  ShardGeometry g = Geometry({}, "{devices=[4]<=[4] last_tile_dim_replicate}", 4);
  EXPECT_EQ(g.num_replicas(), 4);
  EXPECT_EQ(g.shard_num_elements(), 1);
}

TEST(GeometryTest, PlaceDevices) {
  absl::StatusOr<std::vector<DevicePlacement>> p =
      PlaceDevices(*ParseSharding("{devices=[2,2]3,1,2,0}"));
  ASSERT_TRUE(p.ok());
  ASSERT_EQ(p->size(), 4u);
  EXPECT_THAT((*p)[3].tile_index, ElementsAre(0, 0));
  EXPECT_THAT((*p)[0].tile_index, ElementsAre(1, 1));
  EXPECT_EQ((*p)[2].tile, 2);
  absl::StatusOr<std::vector<DevicePlacement>> m =
      PlaceDevices(*ParseSharding("{maximal device=1}"), 3);
  ASSERT_TRUE(m.ok());
  EXPECT_FALSE((*m)[0].holds_data);
  EXPECT_TRUE((*m)[1].holds_data);
}

TEST(GeometryTest, Errors) {
  EXPECT_THAT(GeometryError({8, 7, 4}, "{devices=[2,2]<=[4]}"),
              HasSubstr("sharding has rank 2 but the array has rank 3"));
  EXPECT_THAT(GeometryError({8, -1}, "{replicated}", 2), HasSubstr("is negative"));
  EXPECT_THAT(GeometryError({int64_t{1} << 40, int64_t{1} << 40}, "{replicated}", 2),
              HasSubstr("overflows int64"));
  EXPECT_THAT(GeometryError({8}, "{replicated}"), HasSubstr("needs the device count"));
  EXPECT_THAT(GeometryError({8}, "{maximal device=3}"), HasSubstr("needs the device count"));
  EXPECT_THAT(GeometryError({8}, "{maximal device=3}", 2),
              HasSubstr("maximal device 3 out of range [0, 2)"));
  EXPECT_THAT(GeometryError({8}, "{devices=[4]<=[4]}", 8),
              HasSubstr("the sharding uses 4 devices but the device count is 8"));
  EXPECT_THAT(GeometryError({8}, "{manual}", 8), HasSubstr("no index domains"));
  EXPECT_THAT(GeometryError({8}, "{replicated}", 0), HasSubstr("out of range"));
}

TEST(GeometryTest, HugeDimsDoNotOverflow) {
  const int64_t big = std::numeric_limits<int64_t>::max();
  ShardGeometry g = Geometry({big}, "{devices=[3]<=[3]}");
  EXPECT_EQ(g.shard_shape()[0], big / 3 + 1);
  EXPECT_EQ(g.limit(2)[0], big);
}

}  // namespace
}  // namespace shardrt
