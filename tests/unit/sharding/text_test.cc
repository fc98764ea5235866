#include "shardrt/sharding/text.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace shardrt {
namespace {

using ::testing::HasSubstr;

struct TextCase {
  const char* input;
  const char* canonical;
};

class CanonicalTextTest : public ::testing::TestWithParam<TextCase> {};

TEST_P(CanonicalTextTest, ParsePrintsCanonicalAndIsStable) {
  const TextCase& c = GetParam();
  absl::StatusOr<Sharding> parsed = ParseSharding(c.input);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->ToString(), c.canonical);
  absl::StatusOr<Sharding> again = ParseSharding(c.canonical);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(*again, *parsed);
  EXPECT_EQ(again->ToString(), c.canonical);
  // The explicit-list spelling parses back to the same placement.
  absl::StatusOr<Sharding> explicit_form =
      ParseSharding(PrintSharding(*parsed, DeviceListStyle::kExplicit));
  ASSERT_TRUE(explicit_form.ok()) << explicit_form.status();
  EXPECT_EQ(*explicit_form, *parsed);
}

INSTANTIATE_TEST_SUITE_P(
    Table, CanonicalTextTest,
    ::testing::Values(
        TextCase{"{replicated}", "{replicated}"},
        TextCase{"  { replicated }  ", "{replicated}"},
        TextCase{"{manual}", "{manual}"},
        TextCase{"{maximal device=3}", "{maximal device=3}"},
        TextCase{"{maximal device = 0}", "{maximal device=0}"},
        TextCase{"{devices=[2,2]0,1,2,3}", "{devices=[2,2]<=[4]}"},
        TextCase{"{devices=[2, 2] 0, 1, 2, 3}", "{devices=[2,2]<=[4]}"},
        TextCase{"{devices=[4,2]<=[8]}", "{devices=[4,2]<=[8]}"},
        TextCase{"{devices=[4,2]<=[2,4]T(1,0)}", "{devices=[4,2]<=[2,4]T(1,0)}"},
        TextCase{"{devices=[4,2]0,4,1,5,2,6,3,7}", "{devices=[4,2]<=[2,4]T(1,0)}"},
        TextCase{"{devices=[8]<=[2,2,2]T(0,1,2)}", "{devices=[8]<=[8]}"},
        TextCase{"{devices=[2,2]3,1,2,0}", "{devices=[2,2]3,1,2,0}"},
        TextCase{"{devices=[1,4]3,2,1,0}", "{devices=[1,4]3,2,1,0}"},
        TextCase{"{devices=[1,1,2,2,2]<=[8]}", "{devices=[1,1,2,2,2]<=[8]}"},
        TextCase{"{devices=[2,1,2]<=[4] last_tile_dim_replicate}",
                 "{devices=[2,1,2]<=[4] last_tile_dim_replicate}"},
        // Replica groups are sets: sorted within each group.
        TextCase{"{devices=[2,2]1,0,3,2 last_tile_dim_replicate}",
                 "{devices=[2,2]<=[4] last_tile_dim_replicate}"},
        TextCase{"{devices=[2,2]<=[4] last_tile_dims={replicated}}",
                 "{devices=[2,2]<=[4] last_tile_dim_replicate}"},
        TextCase{"{devices=[2,1,2]<=[4] last_tile_dims={manual}}",
                 "{devices=[2,1,2]<=[4] last_tile_dims={manual}}"},
        TextCase{"{devices=[2,2,2]<=[8] last_tile_dims={manual, replicated}}",
                 "{devices=[2,2,2]<=[8] last_tile_dims={manual, replicated}}"},
        // Subgroups canonicalize: manual before replicated, size-1 dims dropped, merged.
        TextCase{"{devices=[2,2,2]<=[8] last_tile_dims={replicated, manual}}",
                 "{devices=[2,2,2]<=[2,2,2]T(0,2,1) last_tile_dims={manual, replicated}}"},
        TextCase{"{devices=[2,2,1]<=[4] last_tile_dims={manual, replicated}}",
                 "{devices=[2,2]<=[4] last_tile_dims={manual}}"},
        TextCase{"{devices=[2,2,2]<=[8] last_tile_dims={replicated, replicated}}",
                 "{devices=[2,4]<=[8] last_tile_dim_replicate}"},
        TextCase{"{devices=[2,1]0,1 last_tile_dim_replicate}", "{devices=[2]<=[2]}"},
        // No data tiling left: replicated / manual.
        TextCase{"{devices=[1,1,4]<=[4] last_tile_dim_replicate}", "{replicated}"},
        TextCase{"{devices=[4]<=[4] last_tile_dim_replicate}", "{replicated}"},
        TextCase{"{devices=[1,4]<=[4] last_tile_dims={manual}}", "{manual}"},
        TextCase{"{devices=[1,1]0}", "{replicated}"},
        TextCase{"{devices=[2]1,0 metadata={op_name=\"a}\" source_file=\"x.py\"}}",
                 "{devices=[2]1,0}"},
        TextCase{"{replicated metadata={}}", "{replicated}"}));

struct ErrorCase {
  const char* input;
  const char* message;
};

class TextErrorTest : public ::testing::TestWithParam<ErrorCase> {};

TEST_P(TextErrorTest, NamesWhatAndWhere) {
  absl::StatusOr<Sharding> parsed = ParseSharding(GetParam().input);
  ASSERT_FALSE(parsed.ok()) << GetParam().input << " parsed as " << *parsed;
  EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(parsed.status().message(), HasSubstr(GetParam().message));
}

INSTANTIATE_TEST_SUITE_P(
    Table, TextErrorTest,
    ::testing::Values(
        ErrorCase{"", "position 0: expected '{', got end of text"},
        ErrorCase{"replicated", "position 0: expected '{', got 'replicated'"},
        ErrorCase{"{replicated", "position 11: expected '}', got end of text"},
        ErrorCase{"{replicated}}", "position 12: unexpected text after the sharding: '}'"},
        ErrorCase{"{foo}", "position 1: expected 'replicated', 'maximal', 'manual' or "
                           "'devices', got 'foo'"},
        ErrorCase{"{devices=[2,2x]0,1,2,3}", "position 13: expected ',' or ']', got 'x'"},
        ErrorCase{"{devices=[2,2]0,1,2}", "position 14: tile assignment has 3 devices but "
                                          "tile dims [2,2] need 4"},
        ErrorCase{"{devices=[2,2]0,1,2,3,4}", "tile assignment has 5 devices"},
        ErrorCase{"{devices=[2,2]0,1,9,3}", "position 18: device id 9 out of range [0, 4)"},
        ErrorCase{"{devices=[2,2]0,1,1,3}", "position 18: duplicate device id 1"},
        ErrorCase{"{devices=[2,-2]0,1,2,3}", "position 12: tile dim must not be negative"},
        ErrorCase{"{devices=[2,0]0}", "position 12: tile dim must be positive, got 0"},
        ErrorCase{"{devices=[99999999999999999999]0}", "position 10: tile dim does not fit"},
        ErrorCase{"{devices=[4294967296,4294967296]0}", "need more than 1048576 devices"},
        ErrorCase{"{devices=[2]0,-1}", "position 14: device id must not be negative"},
        ErrorCase{"{devices=[2]0,}", "position 14: expected device id, got '}'"},
        ErrorCase{"{devices=[4]<=[2,3]}", "position 14: iota reshape dims [2,3] hold 6 devices "
                                          "but tile dims [4] need 4"},
        ErrorCase{"{devices=[4]<=[2,2]T(0,0)}", "position 20: iota transpose (0,0) is not a "
                                                "permutation of 0..1"},
        ErrorCase{"{devices=[4]<=[2,2]T(0)}", "not a permutation"},
        ErrorCase{"{devices=[4]<[4]}", "position 12: expected '<='"},
        ErrorCase{"{devices=[2]0,1 last_tile_dims={manual, manual}}",
                  "last_tile_dims has 2 types but the tile assignment has only 1 dims"},
        ErrorCase{"{devices=[2,2]<=[4] last_tile_dims={bogus}}",
                  "position 36: expected 'manual' or 'replicated', got 'bogus'"},
        ErrorCase{"{devices=[2,2]<=[4] last_tile_dims={unreduced}}", "not supported"},
        ErrorCase{"{devices=[2,2]<=[4] last_tile_dim_replicate last_tile_dim_replicate}",
                  "given twice"},
        ErrorCase{"{replicated last_tile_dim_replicate}", "needs a devices=[...] sharding"},
        ErrorCase{"{maximal device=-1}", "position 16: maximal device id must not be negative"},
        ErrorCase{"{maximal devices=1}", "position 9: expected 'device', got 'devices'"},
        ErrorCase{"{{replicated}, {manual}}", "position 1: tuple shardings are not supported"},
        ErrorCase{"{unknown}", "not supported"},
        ErrorCase{"{replicated metadata={op_name=\"x}", "unterminated '{'"},
        ErrorCase{"{replicated shard_as 1}", "shard groups are not supported"},
        ErrorCase{"{devices=[2]0,1 \x01}", "position 16: expected '}', got '\\x01'"}));

}  // namespace
}  // namespace shardrt
