#include "shardrt/sharding/split.h"

#include <cstring>
#include <numeric>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "shardrt/sharding/text.h"
#include "sharding_test_util.h"

namespace shardrt {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

using ::shardrt::testing::Geometry;

template <typename T>
std::vector<std::byte> Bytes(const std::vector<T>& values) {
  std::vector<std::byte> out(values.size() * sizeof(T));
  std::memcpy(out.data(), values.data(), out.size());
  return out;
}

template <typename T>
std::vector<T> Values(const std::vector<std::byte>& bytes) {
  std::vector<T> out(bytes.size() / sizeof(T));
  std::memcpy(out.data(), bytes.data(), bytes.size());
  return out;
}

std::vector<std::span<const std::byte>> Views(const std::vector<std::vector<std::byte>>& v) {
  return std::vector<std::span<const std::byte>>(v.begin(), v.end());
}

// 10 rows over 4 devices: 3,3,3,1 rows padded to 3.
TEST(SplitTest, TenRowsOverFourPadded) {
  ShardGeometry g = Geometry({10}, "{devices=[4]<=[4]}");
  std::vector<int32_t> x(10);
  std::iota(x.begin(), x.end(), 1);
  auto shards = SplitHostArray(g, ElementType::kS32, Bytes(x), ShardPadding::kPadded);
  ASSERT_TRUE(shards.ok()) << shards.status();
  EXPECT_THAT(Values<int32_t>((*shards)[0]), ElementsAre(1, 2, 3));
  EXPECT_THAT(Values<int32_t>((*shards)[2]), ElementsAre(7, 8, 9));
  EXPECT_THAT(Values<int32_t>((*shards)[3]), ElementsAre(10, 0, 0));
  auto back = AssembleHostArray(g, ElementType::kS32, Views(*shards), ShardPadding::kPadded);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(Values<int32_t>(*back), x);
}

TEST(SplitTest, TenRowsOverFourExact) {
  ShardGeometry g = Geometry({10}, "{devices=[4]<=[4]}");
  std::vector<int32_t> x(10);
  std::iota(x.begin(), x.end(), 1);
  auto shards = SplitHostArray(g, ElementType::kS32, Bytes(x), ShardPadding::kExact);
  ASSERT_TRUE(shards.ok());
  EXPECT_THAT(Values<int32_t>((*shards)[3]), ElementsAre(10));
  auto back = AssembleHostArray(g, ElementType::kS32, Views(*shards), ShardPadding::kExact);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(Values<int32_t>(*back), x);
}

// C7 padded: [1,8,7,4] on [1,1,4,2]: every shard [1,8,2,2], zero-filled on the right.
TEST(SplitTest, Padded4D) {
  ShardGeometry g = Geometry({1, 8, 7, 4}, "{devices=[1,1,4,2]<=[8]}");
  std::vector<float> x(1 * 8 * 7 * 4);
  std::iota(x.begin(), x.end(), 1.0f);
  auto shards = SplitHostArray(g, ElementType::kF32, Bytes(x), ShardPadding::kPadded);
  ASSERT_TRUE(shards.ok());
  for (const auto& shard : *shards) EXPECT_EQ(shard.size(), 1u * 8 * 2 * 2 * 4);
  // Device 7: columns [6,7) of dim 2, [2,4) of dim 3; row 1 of dim 2 is padding.
  std::vector<float> d7 = Values<float>((*shards)[7]);
  for (int r = 0; r < 8; ++r) {
    EXPECT_EQ(d7[r * 4 + 0], x[(r * 7 + 6) * 4 + 2]);
    EXPECT_EQ(d7[r * 4 + 1], x[(r * 7 + 6) * 4 + 3]);
    EXPECT_EQ(d7[r * 4 + 2], 0.0f);
    EXPECT_EQ(d7[r * 4 + 3], 0.0f);
  }
}

TEST(SplitTest, ReplicatedAndMaximal) {
  std::vector<uint16_t> x = {1, 2, 3, 4, 5, 6};
  ShardGeometry r = Geometry({2, 3}, "{replicated}", 3);
  auto shards = SplitHostArray(r, ElementType::kBF16, Bytes(x), ShardPadding::kPadded);
  ASSERT_TRUE(shards.ok());
  for (const auto& s : *shards) EXPECT_EQ(Values<uint16_t>(s), x);
  EXPECT_TRUE(AssembleHostArray(r, ElementType::kBF16, Views(*shards), ShardPadding::kPadded,
                                ReplicaCheck::kVerify)
                  .ok());

  ShardGeometry m = Geometry({2, 3}, "{maximal device=1}", 3);
  auto padded = SplitHostArray(m, ElementType::kU16, Bytes(x), ShardPadding::kPadded);
  ASSERT_TRUE(padded.ok());
  EXPECT_EQ(Values<uint16_t>((*padded)[1]), x);
  EXPECT_THAT(Values<uint16_t>((*padded)[0]), ElementsAre(0, 0, 0, 0, 0, 0));
  auto exact = SplitHostArray(m, ElementType::kU16, Bytes(x), ShardPadding::kExact);
  ASSERT_TRUE(exact.ok());
  EXPECT_TRUE((*exact)[0].empty());
  // Devices without data may pass anything, even empty buffers.
  std::vector<std::span<const std::byte>> views = {{}, (*padded)[1], {}};
  auto back = AssembleHostArray(m, ElementType::kU16, views, ShardPadding::kPadded);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(Values<uint16_t>(*back), x);
}

TEST(SplitTest, RankZero) {
  ShardGeometry g = Geometry({}, "{replicated}", 2);
  std::vector<double> x = {3.5};
  auto shards = SplitHostArray(g, ElementType::kF64, Bytes(x), ShardPadding::kExact);
  ASSERT_TRUE(shards.ok());
  EXPECT_EQ(Values<double>((*shards)[1]), x);
  auto back = AssembleHostArray(g, ElementType::kF64, Views(*shards), ShardPadding::kExact);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(Values<double>(*back), x);
}

TEST(SplitTest, ReplicaMismatchNamesDeviceAndElement) {
  ShardGeometry g = Geometry({4, 3}, "{devices=[2,1,2]<=[4] last_tile_dim_replicate}");
  std::vector<int8_t> x(12);
  std::iota(x.begin(), x.end(), 0);
  auto shards = SplitHostArray(g, ElementType::kS8, Bytes(x), ShardPadding::kPadded);
  ASSERT_TRUE(shards.ok());
  // Device 3 is replica 1 of tile 1 (rows 2..3); corrupt its element [1, 2] -> global [3, 2].
  (*shards)[3][1 * 3 + 2] = std::byte{99};
  auto back = AssembleHostArray(g, ElementType::kS8, Views(*shards), ShardPadding::kPadded,
                                ReplicaCheck::kVerify);
  ASSERT_FALSE(back.ok());
  EXPECT_THAT(back.status().message(),
              HasSubstr("device 3 (replica 1) differs from device 2 (replica 0) at element "
                        "[3, 2]"));
  // Without the check, replica 0 wins.
  auto unchecked = AssembleHostArray(g, ElementType::kS8, Views(*shards), ShardPadding::kPadded);
  ASSERT_TRUE(unchecked.ok());
  EXPECT_EQ(Values<int8_t>(*unchecked), x);
}

TEST(SplitTest, SplitIntoCallerBuffersZeroesPadding) {
  ShardGeometry g = Geometry({3}, "{devices=[2]<=[2]}");
  std::vector<int64_t> x = {7, 8, 9};
  std::vector<int64_t> a(2, -1), b(2, -1);
  std::vector<std::span<std::byte>> out = {std::as_writable_bytes(std::span(a)),
                                           std::as_writable_bytes(std::span(b))};
  ASSERT_TRUE(SplitHostArrayInto(g, ElementType::kS64, Bytes(x), ShardPadding::kPadded, out).ok());
  EXPECT_THAT(a, ElementsAre(7, 8));
  EXPECT_THAT(b, ElementsAre(9, 0));
}

TEST(SplitTest, Errors) {
  ShardGeometry g = Geometry({4}, "{devices=[2]<=[2]}");
  std::vector<int32_t> x(3);
  EXPECT_THAT(SplitHostArray(g, ElementType::kS32, Bytes(x), ShardPadding::kPadded)
                  .status()
                  .message(),
              HasSubstr("global array has 12 bytes, expected 16"));
  EXPECT_THAT(SplitHostArray(g, ElementType::kInvalid, {}, ShardPadding::kPadded)
                  .status()
                  .message(),
              HasSubstr("invalid element type"));
  std::vector<std::byte> good(8), bad(4);
  std::vector<std::span<const std::byte>> views = {good, bad};
  EXPECT_THAT(AssembleHostArray(g, ElementType::kS32, views, ShardPadding::kPadded)
                  .status()
                  .message(),
              HasSubstr("shard buffer of device 1 has 4 bytes, expected 8"));
  views.pop_back();
  EXPECT_THAT(AssembleHostArray(g, ElementType::kS32, views, ShardPadding::kPadded)
                  .status()
                  .message(),
              HasSubstr("got 1 shard buffers for 2 devices"));
  EXPECT_EQ(*ShardByteSize(g, ElementType::kS32, 1, ShardPadding::kPadded), 8);
  EXPECT_FALSE(ShardByteSize(g, ElementType::kS32, 2, ShardPadding::kPadded).ok());
}

}  // namespace
}  // namespace shardrt
