// The decoder through the library's own path: ComputationClient compiles it, TransferToDevice
// places every weight by its sharding (no test-side shard extraction), the executor runs prefill
// and decode steps on 8 devices, and the logits are checked against the independent host
// reference, after checking that every device holds the weight slices its index says it does.
// Also: the test-side ExtractShard agrees with the library's host split for every
// array of the model, so the tests that upload shards themselves upload the right ones.
#include <cmath>
#include <cstring>
#include <span>
#include <vector>

#include "decoder/decoder_config.h"
#include "decoder/decoder_program.h"
#include "decoder/decoder_reference.h"
#include "decoder/decoder_weights.h"
#include "gtest/gtest.h"
#include "shardrt/runtime/runtime.h"
#include "shardrt/sharding/split.h"
#include "shardrt/sharding/text.h"
#include "test_env.h"

namespace shardrt::decoder {
namespace {

constexpr uint64_t kSeed = 42;
constexpr double kAbsTol = 1e-4, kRelTol = 1e-4;

class ExtractShardTest : public ::testing::TestWithParam<int64_t> {};

TEST_P(ExtractShardTest, AgreesWithTheLibrarysSplitForEveryArray) {
  DecoderConfig config;
  config.num_partitions = GetParam();
  std::vector<ArraySpec> specs = WeightSpecs(config);
  for (const ArraySpec& s : CacheSpecs(config)) specs.push_back(s);
  for (const ArraySpec& spec : specs) {
    SCOPED_TRACE(spec.name);
    int64_t n = 1;
    for (int64_t d : spec.dims) n *= d;
    std::vector<float> values(n);
    for (int64_t i = 0; i < n; ++i) values[i] = static_cast<float>(i);
    auto sharding = ShardingOf(spec, config.num_partitions);
    ASSERT_TRUE(sharding.ok()) << sharding.status();
    auto geometry = ShardGeometry::Create(spec.dims, *sharding, config.num_partitions);
    ASSERT_TRUE(geometry.ok()) << geometry.status();
    auto shards = SplitHostArray(*geometry, ElementType::kF32, std::as_bytes(std::span(values)),
                                 ShardPadding::kExact);
    ASSERT_TRUE(shards.ok()) << shards.status();
    for (int64_t d = 0; d < config.num_partitions; ++d) {
      const std::vector<float> mine = ExtractShard(values, spec, d, config.num_partitions);
      ASSERT_EQ(mine.size() * sizeof(float), (*shards)[d].size()) << "device " << d;
      EXPECT_EQ(std::memcmp(mine.data(), (*shards)[d].data(), (*shards)[d].size()), 0)
          << "device " << d << " of " << config.num_partitions;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Partitions, ExtractShardTest, ::testing::Values(2, 4, 8));

std::vector<float> Floats(const HostArray& a) {
  std::vector<float> v(a.data.size() / sizeof(float));
  std::memcpy(v.data(), a.data.data(), a.data.size());
  return v;
}

TEST(DecoderClientTest, EightDevicesThroughTheClientMatchTheHostReferenceLogits) {
  DecoderConfig config;
  config.num_partitions = 8;
  constexpr int64_t kTokens = 6;
  config.max_seq = config.prompt_len + kTokens;
  auto weights = GenerateWeights(config, kSeed);
  ASSERT_TRUE(weights.ok()) << weights.status();
  const std::vector<int32_t> prompt = GeneratePrompt(config, kSeed);
  auto reference = RunReference(config, *weights, prompt, kTokens);
  ASSERT_TRUE(reference.ok()) << reference.status();

  std::unique_ptr<Runtime> runtime = testing::MakeTestRuntime();
  ASSERT_NE(runtime, nullptr);
  ComputationClient& client = runtime->client();
  auto compile = [&](absl::StatusOr<DecoderProgram> program) -> absl::StatusOr<ComputationPtr> {
    if (!program.ok()) return program.status();
    CompileRequest request;
    request.name = program->name;
    request.program = program->mlir;
    request.options.num_partitions = config.num_partitions;
    request.global_shapes = GlobalShapes{program->signature.parameters, program->signature.results};
    return client.Compile(request);
  };
  auto prefill = compile(EmitPrefill(config));
  ASSERT_TRUE(prefill.ok()) << prefill.status();
  auto decode = compile(EmitDecodeStep(config));
  ASSERT_TRUE(decode.ok()) << decode.status();

  std::vector<HostArrayView> views;
  std::vector<std::shared_ptr<const DataLayout>> layouts;
  views.push_back({ElementType::kS32, {config.prompt_len}, std::as_bytes(std::span(prompt))});
  layouts.push_back((*prefill)->parameter_layout(0));
  for (size_t i = 0; i < weights->arrays.size(); ++i) {
    const WeightArray& w = weights->arrays[i];
    views.push_back({ElementType::kF32, w.spec.dims, std::as_bytes(std::span(w.values))});
    layouts.push_back((*prefill)->parameter_layout(i + 1));
  }
  auto uploaded = client.TransferToDevice(views, layouts);
  ASSERT_TRUE(uploaded.ok()) << uploaded.status();
  const std::vector<DataPtr> weight_data(uploaded->begin() + 1, uploaded->end());
  const size_t num_caches = CacheSpecs(config).size();
  // Placement, which the logits cannot show (a permutation of heads over the devices cancels
  // under the all-reduce): device d's buffer of every weight holds exactly indices
  // [d * n / P, (d + 1) * n / P) of the weight's split dimension, read back from the device and
  // compared with the host array sliced here by index.
  const int64_t P = config.num_partitions;
  for (size_t i = 0; i < weights->arrays.size(); ++i) {
    const WeightArray& w = weights->arrays[i];
    SCOPED_TRACE(w.spec.name);
    const ShardBuffers* buffers = weight_data[i]->buffers();
    ASSERT_NE(buffers, nullptr);
    ASSERT_EQ(int64_t(buffers->buffers.size()), P);
    const int64_t rank = int64_t(w.spec.dims.size());
    const int64_t split = w.spec.split_dim;
    for (int64_t d = 0; d < P; ++d) {
      std::vector<int64_t> begin(rank, 0), end = w.spec.dims;
      if (split >= 0) {
        begin[split] = d * w.spec.dims[split] / P;
        end[split] = (d + 1) * w.spec.dims[split] / P;
      }
      std::vector<float> want;  // row-major over [begin, end)
      std::vector<int64_t> at = begin;
      while (true) {
        int64_t flat = 0;
        for (int64_t k = 0; k < rank; ++k) flat = flat * w.spec.dims[k] + at[k];
        want.push_back(w.values[flat]);
        int64_t k = rank - 1;
        while (k >= 0 && ++at[k] == end[k]) at[k] = begin[k], --k;
        if (k < 0) break;
      }
      std::vector<float> got(want.size(), NAN);
      auto done = buffers->buffers[d].ToHost(got.data(), got.size() * sizeof(float));
      ASSERT_TRUE(done.ok()) << done.status();
      ASSERT_TRUE(done->Await().ok());
      EXPECT_EQ(got, want) << "device " << d;
    }
  }

  Executor& executor = runtime->executor();
  std::vector<DataPtr> args = {(*uploaded)[0]};
  args.insert(args.end(), weight_data.begin(), weight_data.end());
  auto state = executor.Schedule(*prefill, args);
  ASSERT_TRUE(state.ok()) << state.status();
  for (int64_t t = 0; t < kTokens; ++t) {
    // state = caches..., next token, logits
    auto host = client.TransferFromDevice({(*state)[num_caches], (*state)[num_caches + 1]});
    ASSERT_TRUE(host.ok()) << host.status();
    int32_t token = 0;
    std::memcpy(&token, (*host)[0].data.data(), sizeof(token));
    EXPECT_EQ(token, reference->tokens[t]) << "token " << t;
    const std::vector<float> logits = Floats((*host)[1]);
    ASSERT_EQ(logits.size(), reference->logits[t].size());
    for (size_t v = 0; v < logits.size(); ++v) {
      const double want = reference->logits[t][v];
      ASSERT_LE(std::fabs(logits[v] - want), kAbsTol + kRelTol * std::fabs(want))
          << "token " << t << " logit " << v;
    }
    if (t + 1 == kTokens) break;
    const int32_t position = static_cast<int32_t>(config.prompt_len + t);
    const HostArrayView pos{ElementType::kS32, {}, std::as_bytes(std::span(&position, 1))};
    auto pos_data = client.TransferToDevice({&pos, 1}, {&(*decode)->parameter_layout(num_caches + 1), 1});
    ASSERT_TRUE(pos_data.ok()) << pos_data.status();
    std::vector<DataPtr> step(state->begin(), state->begin() + num_caches);
    step.push_back((*state)[num_caches]);
    step.push_back((*pos_data)[0]);
    step.insert(step.end(), weight_data.begin(), weight_data.end());
    state = executor.Schedule(*decode, step);
    ASSERT_TRUE(state.ok()) << state.status();
  }
  EXPECT_TRUE(executor.Synchronize().ok());
}

}  // namespace
}  // namespace shardrt::decoder
