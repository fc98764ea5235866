// The Llama emitter's programs: signatures, donation, the communication they contain, and the
// sizes they refuse. (Their numbers are checked on the real model by tests/model/.)
#include "llama/llama_program.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "shardrt/program/program_text.h"
#include "smol_sizes.h"

namespace shardrt::llama {
namespace {

using ::testing::HasSubstr;

// The message a refused program's emitter gave ("" when the program was emitted).
std::string Refusal(const absl::StatusOr<LlamaProgram>& program) {
  return program.ok() ? "" : std::string(program.status().message());
}

LlamaConfig SmallConfig(int64_t layers) { return SmolSizes(layers); }

int64_t Count(const std::string& text, const std::string& what) {
  int64_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(LlamaProgramTest, BucketsArePowerOfTwoOrThreeTimesPowerOfTwoMultiplesCappedAtTheCache) {
  EXPECT_EQ(Bucket(1, 64, 512), 64);
  EXPECT_EQ(Bucket(64, 64, 512), 64);
  EXPECT_EQ(Bucket(65, 64, 512), 128);
  EXPECT_EQ(Bucket(129, 64, 512), 192);
  EXPECT_EQ(Bucket(193, 64, 512), 256);
  EXPECT_EQ(Bucket(300, 64, 512), 384);
  EXPECT_EQ(Bucket(385, 64, 512), 512);
  EXPECT_EQ(Bucket(300, 64, 320), 320);
  EXPECT_EQ(Bucket(320, 64, 320), 320);
  EXPECT_EQ(Bucket(45, 16, 2048), 48);
  EXPECT_EQ(Bucket(17, 16, 2048), 32);
  EXPECT_EQ(Bucket(33, 16, 2048), 48);
}

TEST(LlamaProgramTest, EightDevicesCommunicateExactlyAsWritten) {
  const LlamaConfig c = SmallConfig(3);
  auto decode = EmitDecode(c, {.partitions = 8, .cache_len = 256, .rows = 4, .block = 128,
                               .batch = 2});
  ASSERT_TRUE(decode.ok()) << decode.status();
  // One loop over the layers, and in its body the attention loop; the program's size does not
  // grow with the layers.
  EXPECT_EQ(Count(decode->mlir, "\"stablehlo.while\""), 2);
  // In the layer loop: all-gathers of q/k/v, of the partial attention and of the output
  // projection; one all-reduce of the MLP. Outside: the embedding's all-reduce and the argmax's
  // two gathers.
  EXPECT_EQ(Count(decode->mlir, "\"stablehlo.all_gather\""), 3 + 2);
  EXPECT_EQ(Count(decode->mlir, "\"stablehlo.all_reduce\""), 1 + 1);
  EXPECT_EQ(Count(decode->mlir, "mhlo.num_partitions = 8 : i32"), 1);
  // caches, tokens, positions, then token_embd, the 6 stacked layer weights, output_norm.
  ASSERT_EQ(decode->parameters.size(), 4u + 1 + 6 + 1);
  EXPECT_EQ(decode->parameters[0].dims, (std::vector<int64_t>{3, 8, 4, 32, 3, 64}));
  EXPECT_EQ(decode->parameters[0].split_dim, 1);
  EXPECT_EQ(decode->parameters[DecodeParameter::kTokens].dims, (std::vector<int64_t>{2}));
  EXPECT_EQ(decode->parameters[6].name, "wqkv");
  EXPECT_EQ(decode->parameters[6].dims, (std::vector<int64_t>{3, 576 + 2 * 192, 576}));
  EXPECT_EQ(decode->parameters[6].split_dim, 1);
  EXPECT_EQ(decode->aliases, (std::vector<std::pair<int64_t, int64_t>>{{0, 0}, {1, 1}}));
  EXPECT_EQ(Count(decode->mlir, "tf.aliasing_output"), 2);
  ASSERT_EQ(decode->outputs.size(), 4u);
  EXPECT_EQ(decode->outputs[ProgramOutput::kNextTokens].dims, (std::vector<int64_t>{2}));
  EXPECT_EQ(decode->outputs[ProgramOutput::kLogits].dims, (std::vector<int64_t>{2, 49152}));

  auto chunk = EmitPrefillChunk(c, {.partitions = 8, .cache_len = 256, .rows = 4, .tokens = 64,
                                    .block = 128});
  ASSERT_TRUE(chunk.ok()) << chunk.status();
  EXPECT_EQ(chunk->parameters.size(), 6u + 1 + 6 + 1);
  EXPECT_EQ(chunk->aliases, (std::vector<std::pair<int64_t, int64_t>>{{0, 0}, {1, 1}}));
  EXPECT_EQ(Count(chunk->mlir, "\"stablehlo.all_gather\""), 3 + 2);
  // The layer loop and, inside it, the loop over the cached blocks.
  EXPECT_EQ(Count(chunk->mlir, "\"stablehlo.while\""), 2);
  EXPECT_EQ(chunk->outputs[ProgramOutput::kLogits].dims, (std::vector<int64_t>{1, 49152}));
  // The same text for any number of layers but the loop bound and the weights' shapes.
  auto deeper = EmitDecode(SmallConfig(30), {.partitions = 8, .cache_len = 256, .rows = 4,
                                             .block = 128, .batch = 2});
  ASSERT_TRUE(deeper.ok()) << deeper.status();
  EXPECT_NEAR(double(deeper->mlir.size()), double(decode->mlir.size()), 200.0);
}

// The global shapes the emitter returns (what the model's compile requests carry) are the
// specs' and the ones its text states, on 8 devices and on 1.
TEST(LlamaProgramTest, TheReturnedGlobalShapesAreTheOnesWritten) {
  const LlamaConfig c = SmallConfig(2);
  for (int64_t p : {1, 8}) {
    const ProgramShape shape{.partitions = p, .cache_len = 128, .rows = 2, .tokens = 64,
                             .block = 64, .batch = 2};
    for (auto program : {EmitDecode(c, shape), EmitPrefillChunk(c, shape),
                         EmitEmptyCaches(c, shape)}) {
      ASSERT_TRUE(program.ok()) << program.status();
      SCOPED_TRACE(program->name);
      ASSERT_EQ(program->signature.parameters.size(), program->parameters.size());
      for (size_t i = 0; i < program->parameters.size(); ++i) {
        EXPECT_EQ(program->signature.parameters[i], program->parameters[i].shape()) << i;
      }
      ASSERT_EQ(program->signature.results.size(), program->outputs.size());
      for (size_t i = 0; i < program->outputs.size(); ++i) {
        EXPECT_EQ(program->signature.results[i], program->outputs[i].shape()) << i;
      }
      auto read = ReadProgramSignature(program->mlir);
      ASSERT_TRUE(read.ok()) << read.status();
      ASSERT_TRUE(read->has_value());
      EXPECT_EQ(**read, program->signature);
    }
  }
}

TEST(LlamaProgramTest, OneDeviceHasNoSpmdAtAll) {
  auto decode = EmitDecode(SmallConfig(2), {.partitions = 1, .cache_len = 128, .block = 64});
  ASSERT_TRUE(decode.ok()) << decode.status();
  for (const char* spmd : {"all_gather", "all_reduce", "partition_id", "custom_call"}) {
    EXPECT_EQ(Count(decode->mlir, spmd), 0) << spmd;
  }
}

TEST(LlamaProgramTest, RefusesSizesThatDoNotSplitOrFit) {
  const LlamaConfig c = SmallConfig(1);
  EXPECT_THAT(Refusal(EmitDecode(c, {.partitions = 0, .cache_len = 320, .block = 320})),
              HasSubstr("devices 0: expected >= 1"));
  EXPECT_THAT(Refusal(EmitDecode(c, {.partitions = 8, .cache_len = 256, .block = 512})),
              HasSubstr("attention block 512: expected a multiple of 8 devices within the cache "
                        "length 256"));
  EXPECT_THAT(Refusal(EmitDecode(c, {.partitions = 8, .cache_len = 256, .block = 96})),
              HasSubstr("attention block 96: expected a divisor of the cache length 256"));
  EXPECT_FALSE(
      EmitPrefillChunk(c, {.partitions = 8, .cache_len = 256, .tokens = 60, .block = 64}).ok());
  EXPECT_THAT(Refusal(EmitPrefillChunk(
                  c, {.partitions = 8, .cache_len = 16384, .tokens = 64, .block = 64})),
              HasSubstr("within the model's context of 8192"));
  EXPECT_THAT(Refusal(EmitDecode(c, {.partitions = 8, .cache_len = 256, .rows = 2, .block = 64,
                                     .batch = 4})),
              HasSubstr("batch of 4 over 2 cache rows: expected 1 <= batch <= rows"));
}

// Widths that do not divide over the devices are padded to equal shares: 5 devices hold 116
// query, 39 key/value and 320 feed-forward features each (576, 192 and 1536 rounded up, the
// last to whole 32-value blocks) and 9831 vocabulary rows; the logits are 5 x 9831 wide.
TEST(LlamaProgramTest, WidthsThatDoNotDivideArePaddedToEqualShares) {
  const LlamaConfig c = SmallConfig(2);
  absl::StatusOr<LlamaProgram> decode =
      EmitDecode(c, {.partitions = 5, .cache_len = 320, .block = 320});
  ASSERT_TRUE(decode.ok()) << decode.status();
  auto dims_of = [&](const std::string& name) {
    for (const ArraySpec& spec : decode->parameters) {
      if (spec.name == name) return spec.dims;
    }
    return std::vector<int64_t>{};
  };
  EXPECT_EQ(dims_of("wqkv"), (std::vector<int64_t>{2, 5 * (116 + 2 * 39), 576}));
  EXPECT_EQ(dims_of("wo"), (std::vector<int64_t>{2, 5 * 116, 576}));
  EXPECT_EQ(dims_of("wgu"), (std::vector<int64_t>{2, 5 * 2 * 320, 576}));
  EXPECT_EQ(dims_of("wdown"), (std::vector<int64_t>{2, 576, 5 * 320}));
  EXPECT_EQ(dims_of("token_embd"), (std::vector<int64_t>{5 * 9831, 576}));
  EXPECT_EQ(decode->outputs[ProgramOutput::kLogits].dims, (std::vector<int64_t>{1, 5 * 9831}));
}

}  // namespace
}  // namespace shardrt::llama
