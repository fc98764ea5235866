#include "shardrt/sharding/tile_assignment.h"

#include <numeric>
#include <random>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace shardrt {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(TileAssignmentTest, ExplicitList) {
  absl::StatusOr<TileAssignment> t = TileAssignment::Create({2, 2}, {3, 1, 2, 0});
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_THAT(t->dims(), ElementsAre(2, 2));
  EXPECT_THAT(t->devices(), ElementsAre(3, 1, 2, 0));
  EXPECT_EQ(t->num_devices(), 4);
}

TEST(TileAssignmentTest, IotaExpansion) {
  absl::StatusOr<TileAssignment> plain = TileAssignment::Iota({4, 2});
  ASSERT_TRUE(plain.ok());
  EXPECT_THAT(plain->devices(), ElementsAre(0, 1, 2, 3, 4, 5, 6, 7));
  absl::StatusOr<TileAssignment> transposed =
      TileAssignment::Iota({4, 2}, {.reshape_dims = {2, 4}, .perm = {1, 0}});
  ASSERT_TRUE(transposed.ok());
  EXPECT_THAT(transposed->devices(), ElementsAre(0, 4, 1, 5, 2, 6, 3, 7));
}

TEST(TileAssignmentTest, ExplicitEqualsIotaSpellingTheSameList) {
  EXPECT_EQ(*TileAssignment::Create({4, 2}, {0, 4, 1, 5, 2, 6, 3, 7}),
            *TileAssignment::Iota({4, 2}, {.reshape_dims = {2, 4}, .perm = {1, 0}}));
  EXPECT_NE(*TileAssignment::Create({4, 2}, {0, 1, 2, 3, 4, 5, 6, 7}),
            *TileAssignment::Create({2, 4}, {0, 1, 2, 3, 4, 5, 6, 7}));
}

TEST(TileAssignmentTest, Errors) {
  EXPECT_THAT(TileAssignment::Create({2, 2}, {0, 1, 2}).status().message(),
              HasSubstr("tile assignment has 3 devices but tile dims [2,2] need 4"));
  EXPECT_THAT(TileAssignment::Create({2, 2}, {0, 1, 2, 9}).status().message(),
              HasSubstr("device id 9 out of range [0, 4)"));
  EXPECT_THAT(TileAssignment::Create({2, 2}, {0, 2, 2, 1}).status().message(),
              HasSubstr("duplicate device id 2"));
  EXPECT_THAT(TileAssignment::Create({2, -1}, {}).status().message(), HasSubstr("positive"));
  EXPECT_THAT(TileAssignment::Create({}, {}).status().message(), HasSubstr("must not be empty"));
  EXPECT_THAT(TileAssignment::Iota({1 << 20, 1 << 20}).status().message(),
              HasSubstr("need more than"));
  EXPECT_THAT(TileAssignment::Iota({int64_t{1} << 62, 8}).status().message(),
              HasSubstr("need more than"));
  EXPECT_THAT(TileAssignment::Iota({4}, {.reshape_dims = {2, 3}, .perm = {}}).status().message(),
              HasSubstr("hold 6 devices but tile dims [4] need 4"));
  EXPECT_THAT(
      TileAssignment::Iota({4}, {.reshape_dims = {2, 2}, .perm = {0, 0}}).status().message(),
      HasSubstr("not a permutation"));
}

TEST(TileAssignmentTest, AsIotaFindsTheCoarsestForm) {
  using Form = TileAssignment::IotaForm;
  EXPECT_EQ(TileAssignment::Iota({2, 2, 2})->AsIota(), (Form{{8}, {}}));
  EXPECT_EQ(TileAssignment::Create({1}, {0})->AsIota(), (Form{{1}, {}}));
  EXPECT_EQ(TileAssignment::Iota({4, 2}, {{2, 4}, {1, 0}})->AsIota(), (Form{{2, 4}, {1, 0}}));
  // [2,2,2] T(0,2,1): dims 0 and 2 are not adjacent in order, nothing merges.
  EXPECT_EQ(TileAssignment::Iota({8}, {{2, 2, 2}, {0, 2, 1}})->AsIota(),
            (Form{{2, 2, 2}, {0, 2, 1}}));
  // [2,3,4] T(2,0,1) == [6,4] T(1,0): dims 0 and 1 stay adjacent and merge.
  EXPECT_EQ(TileAssignment::Iota({24}, {{2, 3, 4}, {2, 0, 1}})->AsIota(), (Form{{6, 4}, {1, 0}}));
  // Size-1 reshape dims vanish.
  EXPECT_EQ(TileAssignment::Iota({6}, {{1, 2, 1, 3}, {3, 2, 1, 0}})->AsIota(),
            (Form{{2, 3}, {1, 0}}));
  EXPECT_EQ(TileAssignment::Create({4}, {0, 2, 3, 1})->AsIota(), std::nullopt);
  EXPECT_EQ(TileAssignment::Create({4}, {1, 0, 2, 3})->AsIota(), std::nullopt);
  EXPECT_EQ(TileAssignment::Create({6}, {0, 3, 1, 4, 5, 2})->AsIota(), std::nullopt);
}

TEST(TileAssignmentTest, AsIotaRoundTripsRandomTransposedIotas) {
  std::mt19937_64 rng(7);
  for (int iter = 0; iter < 2000; ++iter) {
    const int rank = 1 + static_cast<int>(rng() % 5);
    Shape reshape;
    int64_t n = 1;
    for (int i = 0; i < rank; ++i) {
      reshape.push_back(1 + static_cast<int64_t>(rng() % 4));
      n *= reshape.back();
    }
    std::vector<int64_t> perm(rank);
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng);
    absl::StatusOr<TileAssignment> t = TileAssignment::Iota({n}, {reshape, perm});
    ASSERT_TRUE(t.ok()) << t.status();
    std::optional<TileAssignment::IotaForm> form = t->AsIota();
    ASSERT_TRUE(form.has_value());
    if (n > 1) {
      for (int64_t d : form->reshape_dims) EXPECT_GT(d, 1);
    }
    EXPECT_EQ(TileAssignment::Iota({n}, *form)->devices(), t->devices());
  }
}

TEST(TileAssignmentTest, TransposeAndReshape) {
  absl::StatusOr<TileAssignment> t = TileAssignment::Iota({2, 3});
  ASSERT_TRUE(t.ok());
  const int64_t perm[] = {1, 0};
  absl::StatusOr<TileAssignment> tt = t->Transpose(perm);
  ASSERT_TRUE(tt.ok());
  EXPECT_THAT(tt->dims(), ElementsAre(3, 2));
  EXPECT_THAT(tt->devices(), ElementsAre(0, 3, 1, 4, 2, 5));
  EXPECT_THAT(tt->Reshape({6})->devices(), ElementsAre(0, 3, 1, 4, 2, 5));
  EXPECT_FALSE(tt->Reshape({5}).ok());
  const int64_t bad[] = {0, 0};
  EXPECT_FALSE(t->Transpose(bad).ok());
}

}  // namespace
}  // namespace shardrt
