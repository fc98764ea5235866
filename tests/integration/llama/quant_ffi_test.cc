// The quantized kernels as custom calls in real programs (quant_ffi.h) on the real plugin, 1 and
// 8 devices: y = x . W^T with W as Q4_1 blocks split by rows over the devices (manual SPMD, the
// model's style), a stacked weight read at a layer given at run time, and the embedding gather,
// each against a reference computed here in double precision from quants.h's dequantization;
// and a custom call whose shapes do not match its type is an error naming the target, not a
// crash.
#include "llama/quant_ffi.h"

#include <cmath>
#include <random>
#include <span>
#include <vector>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "llama/quants.h"
#include "shardrt/program/array_spec.h"
#include "shardrt/program/builder.h"
#include "test_env.h"

namespace shardrt::llama {
namespace {

using stablehlo::ArraySpec;
using stablehlo::Builder;
using stablehlo::F32;
using stablehlo::Value;

constexpr int64_t kLayers = 3, kRows = 40, kCols = 96, kX = 5;  // Q4_1: 3 blocks a row
constexpr int64_t kRowBytes = kCols / 32 * 20;

// Random Q4_1 blocks with finite scales and minimums.
std::vector<uint8_t> RandomBlocks(std::mt19937& rng, int64_t blocks) {
  std::vector<uint8_t> bytes(size_t(blocks * 20));
  for (int64_t b = 0; b < blocks; ++b) {
    uint8_t* block = bytes.data() + b * 20;
    const uint16_t d = uint16_t(0x2000 + rng() % 0x1000), m = uint16_t(0xa000 + rng() % 0x1000);
    block[0] = uint8_t(d), block[1] = uint8_t(d >> 8), block[2] = uint8_t(m),
    block[3] = uint8_t(m >> 8);
    for (int i = 4; i < 20; ++i) block[i] = uint8_t(rng());
  }
  return bytes;
}

// Row r of layer `layer` of the stacked blocks, dequantized by quants.h.
std::vector<float> Row(const std::vector<uint8_t>& w, int64_t layer, int64_t r) {
  std::vector<float> row(kCols);
  DequantizeRow(GgufType::kQ4_1,
                reinterpret_cast<const std::byte*>(w.data()) + (layer * kRows + r) * kRowBytes,
                0, kCols, row.data());
  return row;
}

class QuantFfiTest : public ::testing::TestWithParam<int64_t> {
 protected:
  void SetUp() override {
    runtime_ = testing::MakeTestRuntime();
    ASSERT_NE(runtime_, nullptr);
    ASSERT_TRUE(RegisterModelKernels(*runtime_).ok());
  }

  // Compiles the module `sig` -> `results` of builder `b` for `p` devices and runs it on
  // `inputs`; returns the first output's bytes, or the error.
  absl::StatusOr<std::vector<std::byte>> Run(int64_t p, const stablehlo::ModuleSpec& sig,
                                             const Builder& b, const std::vector<Value>& results,
                                             const std::vector<HostArrayView>& inputs) {
    auto module = stablehlo::WriteModule("quant_ffi", p, sig, b, results);
    if (!module.ok()) return module.status();
    CompileRequest request{.name = "quant_ffi", .program = module->text};
    request.options.num_partitions = p;
    ComputationClient& client = runtime_->client();
    auto computation = client.Compile(request);
    if (!computation.ok()) return computation.status();
    std::vector<DataPtr> args;
    for (size_t i = 0; i < inputs.size(); ++i) {
      auto data = client.TransferToDevice(inputs[i], (*computation)->parameter_layout(i));
      if (!data.ok()) return data.status();
      args.push_back(*data);
    }
    auto out = client.ExecuteReplicated(**computation, args);
    if (!out.ok()) return out.status();
    auto host = client.TransferFromDevice({&(*out)[0], 1});
    if (!host.ok()) return host.status();
    return std::move((*host)[0].data);
  }

  std::unique_ptr<Runtime> runtime_;
};

TEST_P(QuantFfiTest, AStackedQ4_1MatrixSplitByRowsMatchesTheDequantizedProduct) {
  const int64_t p = GetParam();
  std::mt19937 rng(static_cast<unsigned>(p));
  const std::vector<uint8_t> w = RandomBlocks(rng, kLayers * kRows * kCols / 32);
  std::vector<float> x(kX * kCols);
  for (float& v : x) v = std::uniform_real_distribution<float>(-1, 1)(rng);
  const ArraySpec xs{"x", ElementType::kF32, {kX, kCols}, -1};
  const ArraySpec ws{"w", ElementType::kU8, {kLayers, kRows, kRowBytes}, 1};
  const ArraySpec ls{"layer", ElementType::kS32, {}, -1};
  const ArraySpec ys{"y", ElementType::kF32, {kX, kRows}, 1};
  stablehlo::ModuleSpec sig{.parameters = {xs, ws, ls}, .outputs = {ys}};
  Builder b;
  auto enter = [&](int64_t i, const ArraySpec& spec) {
    Value v = Builder::Parameter(i, spec.shape());
    return p == 1 ? v : b.FullToShard(v, *stablehlo::ShardingOf(spec, p));
  };
  const std::optional<Sharding> manual =
      p == 1 ? std::nullopt : std::optional<Sharding>(Sharding::Manual());
  Value y = b.CustomCall(kQuantMatmulTarget, {enter(0, xs), enter(1, ws), enter(2, ls)},
                         F32({kX, kRows / p}),
                         {{"type", int32_t(GgufType::kQ4_1)}, {"partitions", int32_t(p)}, {"order", 0}},
                         manual);
  if (p > 1) y = b.ShardToFull(y, *stablehlo::ShardingOf(ys, p), ys.shape());
  for (const int32_t layer : {2, 0}) {
    SCOPED_TRACE(layer);
    auto out = Run(p, sig, b, {y},
                   {{ElementType::kF32, {kX, kCols}, std::as_bytes(std::span(x))},
                    {ElementType::kU8, ws.dims, std::as_bytes(std::span(w))},
                    {ElementType::kS32, {}, std::as_bytes(std::span(&layer, 1))}});
    ASSERT_TRUE(out.ok()) << out.status();
    ASSERT_EQ(out->size(), size_t(kX * kRows) * sizeof(float));
    const float* got = reinterpret_cast<const float*>(out->data());
    for (int64_t r = 0; r < kRows; ++r) {
      const std::vector<float> row = Row(w, layer, r);
      for (int64_t i = 0; i < kX; ++i) {
        double want = 0, scale = 0;
        for (int64_t c = 0; c < kCols; ++c) {
          want += double(x[i * kCols + c]) * row[c];
          scale += std::abs(double(x[i * kCols + c]) * row[c]);
        }
        EXPECT_NEAR(got[i * kRows + r], want, 1e-5 * scale + 1e-30) << "y[" << i << ", " << r << "]";
      }
    }
  }
}

TEST_P(QuantFfiTest, TheGatherDecodesTheRowsOfItsIds) {
  const int64_t p = GetParam();
  std::mt19937 rng(7);
  const std::vector<uint8_t> w = RandomBlocks(rng, kRows * kCols / 32);
  const std::vector<int32_t> ids = {3, 39, 0, 17, 3, 40, -1};
  const int64_t s = int64_t(ids.size());
  const ArraySpec ws{"w", ElementType::kU8, {kRows, kRowBytes}, -1};
  const ArraySpec is{"ids", ElementType::kS32, {s}, -1};
  const ArraySpec ys{"y", ElementType::kF32, {s, kCols}, -1};
  stablehlo::ModuleSpec sig{.parameters = {ws, is}, .outputs = {ys}};
  Builder b;
  Value y = b.CustomCall(kQuantGatherTarget,
                         {Builder::Parameter(0, ws.shape()), Builder::Parameter(1, is.shape())},
                         ys.shape(), {{"type", int32_t(GgufType::kQ4_1)}});
  auto out = Run(p, sig, b, {y},
                 {{ElementType::kU8, ws.dims, std::as_bytes(std::span(w))},
                  {ElementType::kS32, {s}, std::as_bytes(std::span(ids))}});
  ASSERT_TRUE(out.ok()) << out.status();
  const float* got = reinterpret_cast<const float*>(out->data());
  for (int64_t i = 0; i < s; ++i) {
    const bool inside = ids[i] >= 0 && ids[i] < kRows;
    const std::vector<float> row = inside ? Row(w, 0, ids[i]) : std::vector<float>(kCols, 0.0f);
    for (int64_t c = 0; c < kCols; ++c) {
      EXPECT_EQ(got[i * kCols + c], row[c]) << "row " << i << " (id " << ids[i] << ")";
    }
  }
}

TEST_P(QuantFfiTest, ShapesThatDoNotFitTheTypeAreAnErrorNotACrash) {
  const int64_t p = GetParam();
  const ArraySpec xs{"x", ElementType::kF32, {2, 64}, -1};
  const ArraySpec ws{"w", ElementType::kU8, {4, 41}, -1};  // Q4_1 rows of 64 take 40 bytes
  const ArraySpec ys{"y", ElementType::kF32, {2, 4}, -1};
  stablehlo::ModuleSpec sig{.parameters = {xs, ws}, .outputs = {ys}};
  Builder b;
  Value y = b.CustomCall(kQuantMatmulTarget,
                         {Builder::Parameter(0, xs.shape()), Builder::Parameter(1, ws.shape()),
                          b.I32(0)},
                         ys.shape(),
                         {{"type", int32_t(GgufType::kQ4_1)}, {"partitions", 1}, {"order", 0}});
  std::vector<float> x(2 * 64, 1.0f);
  std::vector<uint8_t> w(4 * 41, 0);
  auto out = Run(p, sig, b, {y},
                 {{ElementType::kF32, {2, 64}, std::as_bytes(std::span(x))},
                  {ElementType::kU8, {4, 41}, std::as_bytes(std::span(w))}});
  ASSERT_FALSE(out.ok());
  EXPECT_TRUE(absl::StrContains(out.status().message(), "shardrt_quant_matmul")) << out.status();
  EXPECT_TRUE(absl::StrContains(out.status().message(), "take 40 bytes, got 41"))
      << out.status();
}

INSTANTIATE_TEST_SUITE_P(Devices, QuantFfiTest, ::testing::Values(1, testing::kNumDevices));

}  // namespace
}  // namespace shardrt::llama
