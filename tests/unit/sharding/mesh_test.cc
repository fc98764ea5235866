#include "shardrt/sharding/mesh.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "shardrt/sharding/geometry.h"

namespace shardrt {
namespace {

using ::testing::HasSubstr;

Mesh MakeMesh(std::vector<MeshAxis> axes, std::vector<int64_t> ids = {}) {
  absl::StatusOr<Mesh> mesh = Mesh::Create(std::move(axes), std::move(ids));
  EXPECT_TRUE(mesh.ok()) << mesh.status();
  return *mesh;
}

std::string Named(const Mesh& mesh, const PartitionSpec& spec) {
  absl::StatusOr<Sharding> s = NamedSharding(mesh, spec);
  if (!s.ok()) return std::string(s.status().message());
  return s->ToString();
}

constexpr int64_t n = 8;

// Anchor P5 (annotation strings), with our canonical iota spelling.
TEST(MeshTest, AnnotationStrings) {
  EXPECT_EQ(Named(MakeMesh({{"a", 1}, {"b", n}}), {{"a"}, {"b"}}), "{devices=[1,8]<=[8]}");
  std::vector<int64_t> reversed = {7, 6, 5, 4, 3, 2, 1, 0};
  EXPECT_EQ(Named(MakeMesh({{"a", 1}, {"b", n}}, reversed), {{"a"}, {"b"}}),
            "{devices=[1,8]7,6,5,4,3,2,1,0}");
  EXPECT_EQ(Named(MakeMesh({{"a", 1}, {"b", 1}, {"c", 2}, {"d", n / 2}}),
                  {{"a"}, {"b"}, {"c"}, {"d"}}),
            "{devices=[1,1,2,4]<=[8]}");
  EXPECT_EQ(Named(MakeMesh({{"0", 2}, {"1", n / 2}}), {{"0"}, {}}),
            "{devices=[2,1,4]<=[8] last_tile_dim_replicate}");
  EXPECT_EQ(Named(MakeMesh({{"0", 2}, {"1", 1}, {"2", n / 2}}), {{"1"}, {}, {"0"}}),
            "{devices=[1,1,2,4]<=[8] last_tile_dim_replicate}");
  EXPECT_EQ(Named(MakeMesh({{"0", 2}, {"1", n / 2}}), {{"0", "1"}}), "{devices=[8]<=[8]}");
  Mesh rbm = MakeMesh({{"r", 1}, {"b", 2}, {"m", n / 2}});
  EXPECT_EQ(Named(rbm, {{"r", "b"}, {}}), "{devices=[2,1,4]<=[8] last_tile_dim_replicate}");
  EXPECT_EQ(Named(rbm, {{}, {"b", "m"}}), "{devices=[1,8]<=[8]}");
  EXPECT_EQ(Named(MakeMesh({{"0", 2}, {"1", n / 2}, {"2", 1}}), {{"2"}, {"1"}}),
            "{devices=[1,4,2]<=[2,4]T(1,0) last_tile_dim_replicate}");
  // Minor-to-major order within one dim matters.
  EXPECT_EQ(Named(MakeMesh({{"x", 2}, {"y", 4}}), {{"y", "x"}}), "{devices=[8]<=[2,4]T(1,0)}");
}

TEST(MeshTest, ReplicatedAndScalar) {
  Mesh mesh = MakeMesh({{"x", 2}, {"y", 4}});
  EXPECT_EQ(Named(mesh, {{}, {}}), "{replicated}");
  EXPECT_EQ(Named(mesh, {}), "{replicated}");  // a scalar
  EXPECT_EQ(Named(MakeMesh({{"x", 1}}), {{"x"}}), "{replicated}");  // one device
}

// Anchor P4: mesh (n/2, 2), spec (None, 1) on a [16,16] array.
TEST(MeshTest, PartialReplicationGeometry) {
  Mesh mesh = MakeMesh({{"0", n / 2}, {"1", 2}});
  absl::StatusOr<Sharding> s = NamedSharding(mesh, {{}, {"1"}});
  ASSERT_TRUE(s.ok());
  EXPECT_TRUE(s->ReplicateOnLastTileDim());
  absl::StatusOr<ShardGeometry> g = ShardGeometry::Create({16, 16}, *s);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->shard_shape(), (Shape{16, 8}));
  for (int64_t i = 0; i < n; ++i) {
    EXPECT_EQ(g->start(i)[0], 0);
    EXPECT_EQ(g->limit(i)[0], 16);
    EXPECT_EQ(g->start(i)[1], (i % 2) * 8) << i;
    EXPECT_EQ(g->limit(i)[1], (i % 2) * 8 + 8) << i;
    EXPECT_EQ(g->replica(i), i / 2) << i;
  }
}

TEST(MeshTest, Errors) {
  Mesh mesh = MakeMesh({{"x", 2}, {"y", 4}});
  EXPECT_THAT(Named(mesh, {{"z"}}), HasSubstr("mesh has no axis 'z'"));
  EXPECT_THAT(Named(mesh, {{"x"}, {"x"}}), HasSubstr("'x' is used more than once"));
  EXPECT_THAT(Named(mesh, {{"y", "y"}}), HasSubstr("used more than once"));
  EXPECT_THAT(Mesh::Create({{"x", 2}, {"x", 2}}).status().message(), HasSubstr("twice"));
  EXPECT_THAT(Mesh::Create({{"x", 0}}).status().message(), HasSubstr("must be positive"));
  EXPECT_THAT(Mesh::Create({}).status().message(), HasSubstr("at least one axis"));
  EXPECT_THAT(Mesh::Create({{"x", 2}}, {0, 5}).status().message(), HasSubstr("out of range"));
  EXPECT_THAT(Mesh::Create({{"x", 2}}, {0}).status().message(), HasSubstr("has 1 devices"));
}

}  // namespace
}  // namespace shardrt
