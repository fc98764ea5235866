// ModelSplit: each device's share of the widths the Llama programs split, and the weight specs
// built from it (padding included).
#include "llama/llama_config.h"

#include <cstdint>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "smol_sizes.h"

namespace shardrt::llama {
namespace {

LlamaConfig SmolLike() { return SmolSizes(30); }

TEST(ModelSplitTest, EvenWidthsSplitExactly) {
  absl::StatusOr<ModelSplit> s = SplitOf(SmolLike(), 8);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->q, 72);
  EXPECT_EQ(s->kv, 24);
  EXPECT_EQ(s->d, 72);
  EXPECT_EQ(s->ffn, 192);
  EXPECT_EQ(s->vocab, 6144);
  EXPECT_EQ(s->padded_vocab(), 49152);
}

TEST(ModelSplitTest, UnevenWidthsRoundUpAndFeedForwardToWholeBlocks) {
  LlamaConfig c = SmolLike();
  c.ffn = 1408;  // 44 blocks of 32: 5.5 a device over 8
  c.vocab = 49150;
  absl::StatusOr<ModelSplit> s = SplitOf(c, 8);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->ffn, 192);  // 6 blocks
  EXPECT_EQ(s->vocab, 6144);
  EXPECT_EQ(s->padded_vocab(), 49152);
  // 5 devices: 576 query features -> 116 each (580), 192 key/value features -> 39 (195).
  s = SplitOf(SmolLike(), 5);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->q, 116);
  EXPECT_EQ(s->kv, 39);
  EXPECT_EQ(s->ffn, 320);  // ceil(1536 / 5) = 308 -> 10 blocks
  // F16 rows need no blocks: 640 over 8 is 80 a device.
  c = SmolLike();
  c.ffn = 640;
  c.ffn_block = 1;
  s = SplitOf(c, 8);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->ffn, 80);
}

TEST(ModelSplitTest, ShareOfGivesTheRealRowsOfEachDevice) {
  // 44 blocks (1408 values) in shares of 192: seven full devices, 64 real values on the last.
  EXPECT_EQ(ShareOf(1408, 192, 0).begin, 0);
  EXPECT_EQ(ShareOf(1408, 192, 0).end, 192);
  EXPECT_EQ(ShareOf(1408, 192, 7).begin, 1344);
  EXPECT_EQ(ShareOf(1408, 192, 7).end, 1408);
  // A device past the end holds padding only.
  EXPECT_EQ(ShareOf(10, 4, 3).begin, 10);
  EXPECT_EQ(ShareOf(10, 4, 3).end, 10);
}

TEST(ModelSplitTest, WeightSpecsUseTheShares) {
  LlamaConfig c = SmolLike();
  c.vocab = 49150;
  c.tied_embeddings = false;
  c.qkv_bias = true;
  absl::StatusOr<ModelSplit> s = SplitOf(c, 8);
  ASSERT_TRUE(s.ok()) << s.status();
  std::vector<std::string> names;
  for (const ArraySpec& spec : WeightSpecs(c, *s)) {
    names.push_back(spec.name);
    if (spec.name == "token_embd" || spec.name == "output") {
      EXPECT_EQ(spec.dims, (std::vector<int64_t>{49152, 576})) << spec.name;
    }
    if (spec.name == "bqkv") {
      EXPECT_EQ(spec.dims, (std::vector<int64_t>{30, 960}));
    }
    if (spec.name == "wdown") {
      EXPECT_EQ(spec.dims, (std::vector<int64_t>{30, 576, 1536}));
    }
  }
  EXPECT_THAT(names, testing::ElementsAre("token_embd", "attn_norm", "wqkv", "bqkv", "wo",
                                          "ffn_norm", "wgu", "wdown", "output_norm", "output"));
}

TEST(ModelSplitTest, NoDevicesIsAnError) {
  absl::StatusOr<ModelSplit> s = SplitOf(SmolLike(), 0);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.status().message()), testing::HasSubstr("devices 0"));
}

}  // namespace
}  // namespace shardrt::llama
