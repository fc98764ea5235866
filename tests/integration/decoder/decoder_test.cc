// The demo decoder's emitted programs on the real CPU plugin: they compile for 1 and 8
// partitions with the Megatron split visible in the per-device shapes, and prefill + greedy
// decoding (caches fed back and donated every step, shards uploaded by hand) match the host
// reference, with the same tokens on 1 and on 8 devices.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "decoder/decoder_config.h"
#include "decoder/decoder_program.h"
#include "decoder/decoder_reference.h"
#include "decoder/decoder_weights.h"
#include "gtest/gtest.h"
#include "shardrt/pjrt/buffer.h"
#include "shardrt/pjrt/executable.h"
#include "shardrt/sharding/text.h"
#include "checked_execute.h"
#include "test_env.h"

namespace shardrt::decoder {
namespace {

using pjrt::Buffer;
using pjrt::LoadedExecutable;
using shardrt::testing::TestClient;

constexpr uint64_t kSeed = 42;
constexpr int64_t kTokens = 32;  // generated in the execution tests: prefill + 31 decode steps
// Logits tolerance against the reference and between device counts:
// |a - b| <= kAbsTol + kRelTol * |b|. Observed differences are about 1e-6 (see the log).
constexpr double kAbsTol = 1e-4, kRelTol = 1e-4;

DecoderConfig Config(int64_t partitions) {
  DecoderConfig config;
  config.num_partitions = partitions;
  return config;
}

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

struct Compiled {
  DecoderProgram prefill_program, decode_program;
  std::unique_ptr<LoadedExecutable> prefill, decode;
};

// Both programs of `config`, compiled once per process.
const Compiled& Programs(const DecoderConfig& config) {
  static std::map<std::string, std::unique_ptr<Compiled>> cache;
  std::unique_ptr<Compiled>& slot = cache[absl::StrCat(
      config.vocab, ",", config.d_model, ",", config.n_heads, ",", config.hidden(), ",",
      config.n_layers, ",", config.max_seq, ",", config.prompt_len, ",", config.num_partitions)];
  if (slot) return *slot;
  slot = std::make_unique<Compiled>();
  const int64_t partitions = config.num_partitions;
  auto prefill = EmitPrefill(config);
  auto decode = EmitDecodeStep(config);
  EXPECT_TRUE(prefill.ok()) << prefill.status();
  EXPECT_TRUE(decode.ok()) << decode.status();
  if (!prefill.ok() || !decode.ok()) return *slot;
  slot->prefill_program = *std::move(prefill);
  slot->decode_program = *std::move(decode);

  pjrt::CompileOptions options;
  options.num_partitions = partitions;
  for (int64_t i = 0; i < partitions; ++i) options.device_assignment.push_back(i);
  for (auto [program, exe] : {std::pair{&slot->prefill_program, &slot->prefill},
                              std::pair{&slot->decode_program, &slot->decode}}) {
    const auto start = std::chrono::steady_clock::now();
    auto compiled =
        LoadedExecutable::Compile(TestClient(), program->mlir, pjrt::ProgramFormat::kMlir, options);
    EXPECT_TRUE(compiled.ok()) << compiled.status() << "\n" << program->mlir;
    if (compiled.ok()) *exe = *std::move(compiled);
    std::printf("[decoder] compile %s for %lld devices: %.3f s\n", program->name.c_str(),
                static_cast<long long>(partitions), Seconds(start));
  }
  return *slot;
}

ArrayShape F32(std::vector<int64_t> dims) { return ArrayShape{ElementType::kF32, std::move(dims)}; }

TEST(DecoderProgramTest, ConfigValidation) {
  DecoderConfig config = Config(8);
  EXPECT_TRUE(ValidateConfig(config).ok());
  config.n_heads = 4;
  EXPECT_EQ(ValidateConfig(config).code(), absl::StatusCode::kInvalidArgument);
  config = Config(3);  // 8 heads do not split over 3 devices
  EXPECT_NE(ValidateConfig(config).message().find("n_heads (8) must be divisible"),
            absl::string_view::npos);
  config = Config(1);
  config.d_model = 100;  // not a multiple of 8 heads
  EXPECT_FALSE(ValidateConfig(config).ok());
  EXPECT_TRUE(ValidateGeneration(Config(1), 57).ok());  // 8 + 57 - 1 = 64 positions
  EXPECT_FALSE(ValidateGeneration(Config(1), 58).ok());
  EXPECT_FALSE(EmitPrefill(Config(16)).ok());
}

TEST(DecoderProgramTest, TextNamesShardingsAndDonation) {
  auto decode = EmitDecodeStep(Config(8));
  ASSERT_TRUE(decode.ok()) << decode.status();
  const std::string& text = decode->mlir;
  EXPECT_NE(text.find("mhlo.num_partitions = 8 : i32"), std::string::npos);
  EXPECT_NE(text.find("{devices=[1,8]<=[8]}"), std::string::npos);
  EXPECT_NE(text.find("{devices=[8,1,1]<=[8]}"), std::string::npos);
  EXPECT_NE(text.find("tf.aliasing_output = 3 : i32"), std::string::npos);
  EXPECT_EQ(decode->aliases.size(), 4u);  // 2 layers x (k, v)

  auto single = EmitPrefill(Config(1));
  ASSERT_TRUE(single.ok());
  EXPECT_EQ(single->mlir.find("devices="), std::string::npos);  // every sharding replicated
}

// The compiled per-device shapes show the Megatron split.
void ExpectMegatronShapes(int64_t p) {
  const DecoderConfig c = Config(p);
  const Compiled& compiled = Programs(c);
  ASSERT_NE(compiled.prefill, nullptr);
  ASSERT_NE(compiled.decode, nullptr);
  const int64_t d = c.d_model, f = c.hidden(), h = c.n_heads, hd = c.head_dim();
  const std::map<std::string, ArrayShape> expected = {
      {"embed", F32({c.vocab, d})},
      {"pos_embed", F32({c.max_seq, d})},
      {"layer0.attn_norm", F32({d})},
      {"layer0.wq", F32({d, h * hd / p})},
      {"layer1.wk", F32({d, h * hd / p})},
      {"layer1.wv", F32({d, h * hd / p})},
      {"layer0.wo", F32({h * hd / p, d})},
      {"layer1.w1", F32({d, f / p})},
      {"layer1.w2", F32({f / p, d})},
      {"w_out", F32({d, c.vocab})},
      {"layer0.k_cache", F32({h / p, c.max_seq, hd})},
      {"layer1.v_cache", F32({h / p, c.max_seq, hd})},
      {"token", ArrayShape{ElementType::kS32, {}}},
      {"tokens", ArrayShape{ElementType::kS32, {c.prompt_len}}}};
  for (auto [program, exe] : {std::pair{&compiled.prefill_program, compiled.prefill.get()},
                              std::pair{&compiled.decode_program, compiled.decode.get()}}) {
    const pjrt::ExecutableSignature& sig = exe->signature();
    EXPECT_EQ(sig.num_partitions, p);
    ASSERT_EQ(sig.parameters.size(), program->parameters.size());
    ASSERT_EQ(sig.outputs.size(), program->outputs.size());
    for (size_t i = 0; i < program->parameters.size(); ++i) {
      const ArraySpec& spec = program->parameters[i];
      EXPECT_EQ(sig.parameters[i], (ArrayShape{spec.type, *ShardDims(spec, p)}))
          << program->name << " parameter " << spec.name;
      auto it = expected.find(spec.name);
      if (it != expected.end()) {
        EXPECT_EQ(sig.parameters[i], it->second) << spec.name;
      }
    }
    for (size_t i = 0; i < program->outputs.size(); ++i) {
      const ArraySpec& spec = program->outputs[i];
      EXPECT_EQ(sig.outputs[i], (ArrayShape{spec.type, *ShardDims(spec, p)}))
          << program->name << " output " << spec.name;
    }
  }
  // The decode step donates exactly its caches, each to the output of the same index.
  const auto& aliases = compiled.decode->signature().aliases;
  ASSERT_EQ(aliases.size(), size_t(2 * c.n_layers));
  for (const pjrt::ParameterAlias& a : aliases) {
    EXPECT_EQ(a.parameter_index, a.output_index);
    EXPECT_LT(a.parameter_index, 2 * c.n_layers);
  }
  EXPECT_TRUE(compiled.prefill->signature().aliases.empty());
}

TEST(DecoderCompileTest, OneDevice) { ExpectMegatronShapes(1); }
TEST(DecoderCompileTest, EightDevicesSplitHeadsAndHidden) { ExpectMegatronShapes(8); }

// Occurrences of instructions with opcode `opcode` in a serialized HloModuleProto: the opcode
// is HloInstructionProto field 2, a length-prefixed string.
int64_t CountOpcode(const std::string& proto, const std::string& opcode) {
  const std::string needle = std::string("\x12") + char(opcode.size()) + opcode;
  int64_t n = 0;
  for (size_t pos = proto.find(needle); pos != std::string::npos;
       pos = proto.find(needle, pos + 1)) {
    ++n;
  }
  return n;
}

// Megatron: each layer needs exactly two all-reduces (after wo and after w2) and nothing is
// gathered, in both programs.
TEST(DecoderCompileTest, EightDevicesCommunicateOnlyByTwoAllReducesPerLayer) {
  const Compiled& compiled = Programs(Config(8));
  ASSERT_NE(compiled.prefill, nullptr);
  ASSERT_NE(compiled.decode, nullptr);
  for (const LoadedExecutable* exe : {compiled.prefill.get(), compiled.decode.get()}) {
    auto hlo = exe->QueryOptimizedProgram();
    ASSERT_TRUE(hlo.ok()) << hlo.status();
    EXPECT_EQ(CountOpcode(*hlo, "all-reduce"), 2 * Config(8).n_layers) << exe->name();
    for (const char* op : {"all-gather", "all-to-all", "collective-permute", "reduce-scatter"}) {
      EXPECT_EQ(CountOpcode(*hlo, op), 0) << exe->name() << " " << op;
    }
  }
}

// What one device-side generation produced.
struct Generation {
  std::vector<int32_t> tokens;
  std::vector<std::vector<float>> logits;
};

template <typename T>
Buffer Upload(const T* data, ElementType type, std::vector<int64_t> dims,
              const pjrt::Device& device) {
  auto upload = Buffer::FromHost(*TestClient(), data, type, dims, device,
                                 pjrt::HostBufferSemantics::kImmutableOnlyDuringCall);
  EXPECT_TRUE(upload.ok()) << upload.status();
  if (!upload.ok()) return Buffer();
  EXPECT_TRUE(upload->done_with_host_buffer.Await().ok());
  return std::move(upload->buffer);
}

template <typename T>
std::vector<T> Download(const Buffer& buffer, size_t n) {
  std::vector<T> out(n);
  auto event = buffer.ToHost(out.data(), n * sizeof(T));
  EXPECT_TRUE(event.ok()) << event.status();
  if (event.ok()) {
    EXPECT_TRUE(event->Await().ok());
  }
  return out;
}

// Prefill + greedy decoding of `num_tokens` tokens on `p` devices. Every weight is uploaded as
// each device's shard; the caches and the token a step returns are the next step's inputs (so
// the caches are donated); the logits and token are read from every device and must agree.
Generation Generate(const DecoderConfig& c, const DecoderWeights& weights,
                    const std::vector<int32_t>& prompt, int64_t num_tokens) {
  const int64_t p = c.num_partitions;
  const Compiled& compiled = Programs(c);
  Generation gen;
  if (!compiled.prefill || !compiled.decode) {
    ADD_FAILURE() << "programs did not compile";
    return gen;
  }
  const auto& devices = compiled.prefill->signature().devices;
  const int64_t num_caches = 2 * c.n_layers;

  // weight_buffers[d][i]: device d's shard of weight i.
  std::vector<std::vector<Buffer>> weight_buffers(p);
  std::vector<Buffer> prompt_buffers;
  for (int64_t d = 0; d < p; ++d) {
    for (const WeightArray& w : weights.arrays) {
      std::vector<float> shard = ExtractShard(w.values, w.spec, d, p);
      weight_buffers[d].push_back(
          Upload(shard.data(), ElementType::kF32, *ShardDims(w.spec, p), *devices[d]));
    }
    prompt_buffers.push_back(Upload(prompt.data(), ElementType::kS32, {c.prompt_len}, *devices[d]));
  }

  // Reads the token and logits outputs of every device; they must agree (replicated).
  auto read_outputs = [&](const std::vector<std::vector<Buffer>>& out) {
    std::vector<int32_t> token0;
    std::vector<float> logits0;
    for (int64_t d = 0; d < p; ++d) {
      auto token = Download<int32_t>(out[d][num_caches], 1);
      auto logits = Download<float>(out[d][num_caches + 1], c.vocab);
      if (d == 0) {
        token0 = token;
        logits0 = logits;
      } else {
        EXPECT_EQ(token, token0) << "device " << d;
        EXPECT_EQ(logits, logits0) << "device " << d;
      }
    }
    gen.tokens.push_back(token0[0]);
    gen.logits.push_back(logits0);
  };

  std::vector<std::vector<const Buffer*>> args(p);
  for (int64_t d = 0; d < p; ++d) {
    args[d].push_back(&prompt_buffers[d]);
    for (const Buffer& w : weight_buffers[d]) args[d].push_back(&w);
  }
  auto start = std::chrono::steady_clock::now();
  auto outputs = shardrt::testing::CheckedExecute(*compiled.prefill, args, {});
  if (!outputs.ok()) {
    ADD_FAILURE() << outputs.status();
    return gen;
  }
  read_outputs(*outputs);
  std::printf("[decoder] %lld devices: prefill %.2f ms\n", static_cast<long long>(p),
              1e3 * Seconds(start));

  start = std::chrono::steady_clock::now();
  for (int64_t i = 1; i < num_tokens; ++i) {
    const int32_t position = int32_t(c.prompt_len + i - 1);
    std::vector<Buffer> position_buffers;
    for (int64_t d = 0; d < p; ++d) {
      position_buffers.push_back(Upload(&position, ElementType::kS32, {}, *devices[d]));
    }
    std::vector<std::vector<const Buffer*>> step_args(p);
    for (int64_t d = 0; d < p; ++d) {
      for (int64_t k = 0; k < num_caches; ++k) step_args[d].push_back(&(*outputs)[d][k]);
      step_args[d].push_back(&(*outputs)[d][num_caches]);  // the token the last step chose
      step_args[d].push_back(&position_buffers[d]);
      for (const Buffer& w : weight_buffers[d]) step_args[d].push_back(&w);
    }
    auto next = shardrt::testing::CheckedExecute(*compiled.decode, step_args, {});
    if (!next.ok()) {
      ADD_FAILURE() << next.status();
      return gen;
    }
    for (int64_t d = 0; d < p; ++d) {
      for (int64_t k = 0; k < num_caches; ++k) {
        EXPECT_TRUE((*outputs)[d][k].IsDeleted()) << "cache " << k << " was not donated";
      }
    }
    outputs = std::move(next);
    read_outputs(*outputs);
  }
  std::printf("[decoder] %lld devices: %lld decode steps, %.2f ms per step (with reads)\n",
              static_cast<long long>(p), static_cast<long long>(num_tokens - 1),
              1e3 * Seconds(start) / double(std::max<int64_t>(1, num_tokens - 1)));
  return gen;
}

// Largest absolute and relative (to |b|, floored at 1) difference between two logit sets.
struct Diff {
  double abs = 0, rel = 0;
};
Diff Compare(const std::vector<std::vector<float>>& a, const std::vector<std::vector<float>>& b) {
  Diff diff;
  EXPECT_EQ(a.size(), b.size());
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    EXPECT_EQ(a[i].size(), b[i].size());
    for (size_t j = 0; j < std::min(a[i].size(), b[i].size()); ++j) {
      const double e = std::abs(double(a[i][j]) - double(b[i][j]));
      EXPECT_LE(e, kAbsTol + kRelTol * std::abs(double(b[i][j])))
          << "step " << i << " logit " << j << ": " << a[i][j] << " vs " << b[i][j];
      diff.abs = std::max(diff.abs, e);
      diff.rel = std::max(diff.rel, e / std::max(1.0, std::abs(double(b[i][j]))));
    }
  }
  return diff;
}

// The smallest gap between the best and second-best reference logit over all steps: how far
// from a tie each greedy choice is.
double SmallestMargin(const ReferenceResult& ref) {
  double margin = INFINITY;
  for (const auto& logits : ref.logits) {
    std::vector<float> sorted = logits;
    std::partial_sort(sorted.begin(), sorted.begin() + 2, sorted.end(), std::greater<float>());
    margin = std::min(margin, double(sorted[0]) - double(sorted[1]));
  }
  return margin;
}

class DecoderRunTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto weights = GenerateWeights(Config(1), kSeed);
    ASSERT_TRUE(weights.ok()) << weights.status();
    weights_ = new DecoderWeights(*std::move(weights));
    prompt_ = new std::vector<int32_t>(GeneratePrompt(Config(1), kSeed));
    auto ref = RunReference(Config(1), *weights_, *prompt_, kTokens);
    ASSERT_TRUE(ref.ok()) << ref.status();
    reference_ = new ReferenceResult(*std::move(ref));
    std::printf("[decoder] reference tokens:");
    for (int32_t t : reference_->tokens) std::printf(" %d", t);
    std::printf("  (smallest top-2 logit margin %.3g)\n", SmallestMargin(*reference_));
  }
  static void TearDownTestSuite() {
    delete weights_;
    delete prompt_;
    delete reference_;
  }

  static DecoderWeights* weights_;
  static std::vector<int32_t>* prompt_;
  static ReferenceResult* reference_;
};
DecoderWeights* DecoderRunTest::weights_ = nullptr;
std::vector<int32_t>* DecoderRunTest::prompt_ = nullptr;
ReferenceResult* DecoderRunTest::reference_ = nullptr;

TEST_F(DecoderRunTest, OneDeviceMatchesReference) {
  Generation gen = Generate(Config(1), *weights_, *prompt_, kTokens);
  EXPECT_EQ(gen.tokens, reference_->tokens);
  Diff diff = Compare(gen.logits, reference_->logits);
  std::printf("[decoder] 1 device vs reference: max abs %.3g, max rel %.3g\n", diff.abs, diff.rel);
}

TEST_F(DecoderRunTest, EightDevicesMatchReferenceAndOneDevice) {
  Generation eight = Generate(Config(8), *weights_, *prompt_, kTokens);
  EXPECT_EQ(eight.tokens, reference_->tokens);
  Diff diff = Compare(eight.logits, reference_->logits);
  std::printf("[decoder] 8 devices vs reference: max abs %.3g, max rel %.3g\n", diff.abs, diff.rel);

  Generation one = Generate(Config(1), *weights_, *prompt_, kTokens);
  EXPECT_EQ(eight.tokens, one.tokens);
  Diff between = Compare(eight.logits, one.logits);
  std::printf("[decoder] 8 devices vs 1 device: max abs %.3g, max rel %.3g\n", between.abs,
              between.rel);
}

// Other sizes (odd vocab, 3 layers, 4 heads on 4 devices, a hidden size that is not 4 * d_model,
// a prompt of 5, a cache with no room to spare) so nothing depends on the defaults.
TEST(DecoderOtherShapesTest, FourDevicesMatchReference) {
  DecoderConfig c;
  c.vocab = 101;
  c.d_model = 48;
  c.n_heads = 4;
  c.mlp_hidden = 72;
  c.n_layers = 3;
  c.max_seq = 12;
  c.prompt_len = 5;
  c.num_partitions = 4;
  const int64_t tokens = c.max_seq - c.prompt_len + 1;  // fills the cache
  auto weights = GenerateWeights(c, 3);
  ASSERT_TRUE(weights.ok()) << weights.status();
  const std::vector<int32_t> prompt = GeneratePrompt(c, 3);
  auto ref = RunReference(c, *weights, prompt, tokens);
  ASSERT_TRUE(ref.ok()) << ref.status();
  Generation gen = Generate(c, *weights, prompt, tokens);
  EXPECT_EQ(gen.tokens, ref->tokens);
  Diff diff = Compare(gen.logits, ref->logits);
  std::printf(
      "[decoder] other shapes, 4 devices vs reference: max abs %.3g, max rel %.3g "
      "(smallest margin %.3g)\n",
      diff.abs, diff.rel, SmallestMargin(*ref));
}

// Greedy ties go to the lowest index: w_out gets equal columns 10 and 30 and their negation in
// columns 20 and 40 (all others zero), so every step's maximum is a tie at 10 and 30 or at 20
// and 40.
TEST(DecoderArgMaxTest, TiesGoToTheLowestIndex) {
  for (int64_t p : {1, 8}) {
    auto weights = GenerateWeights(Config(p), kSeed);
    ASSERT_TRUE(weights.ok());
    WeightArray& w_out = weights->arrays.back();
    ASSERT_EQ(w_out.spec.name, "w_out");
    const int64_t d = w_out.spec.dims[0], v = w_out.spec.dims[1];
    std::vector<float> column(d);
    for (int64_t i = 0; i < d; ++i) column[i] = w_out.values[i * v];
    std::fill(w_out.values.begin(), w_out.values.end(), 0.0f);
    for (int64_t i = 0; i < d; ++i) {
      for (int64_t j : {10, 30}) w_out.values[i * v + j] = column[i];
      for (int64_t j : {20, 40}) w_out.values[i * v + j] = -column[i];
    }
    Generation gen = Generate(Config(p), *weights, GeneratePrompt(Config(p), kSeed), 3);
    ASSERT_EQ(gen.tokens.size(), 3u);
    for (size_t step = 0; step < gen.tokens.size(); ++step) {
      const std::vector<float>& logits = gen.logits[step];
      ASSERT_EQ(logits[10], logits[30]) << "step " << step;
      ASSERT_EQ(logits[20], logits[40]) << "step " << step;
      ASSERT_NE(logits[10], 0.0f);
      EXPECT_EQ(gen.tokens[step], logits[10] > 0 ? 10 : 20)
          << "step " << step << ", " << p << " devices";
    }
  }
}

TEST(DecoderWeightsTest, DeterministicAndShardable) {
  auto a = GenerateWeights(Config(1), 7), b = GenerateWeights(Config(8), 7),
       other = GenerateWeights(Config(1), 8);
  ASSERT_TRUE(a.ok() && b.ok() && other.ok());
  ASSERT_EQ(a->arrays.size(), b->arrays.size());
  for (size_t i = 0; i < a->arrays.size(); ++i) {
    EXPECT_EQ(a->arrays[i].values, b->arrays[i].values) << a->arrays[i].spec.name;
    EXPECT_NE(a->arrays[i].values, other->arrays[i].values) << a->arrays[i].spec.name;
  }
  // The prompt is models/decoder/README.md's draw: splitmix64 seeded with splitmix64(seed) ^
  // FNV-1a("prompt"), each token the next value mod vocab. The ids were computed apart from
  // this code, in Python from that description (vocab 256, 8 tokens).
  EXPECT_EQ(GeneratePrompt(Config(1), 7),
            (std::vector<int32_t>{89, 186, 176, 2, 217, 73, 59, 228}));
  EXPECT_EQ(GeneratePrompt(Config(8), 8),
            (std::vector<int32_t>{196, 10, 184, 79, 19, 250, 21, 135}));
  DecoderConfig small = Config(1);
  small.vocab = 8;
  small.prompt_len = 64;
  const std::vector<int32_t> drawn = GeneratePrompt(small, 7);
  ASSERT_EQ(drawn.size(), 64u);
  EXPECT_TRUE(std::all_of(drawn.begin(), drawn.end(), [](int32_t t) { return t >= 0 && t < 8; }));
  EXPECT_NE(drawn, GeneratePrompt(small, 8));

  // A [2, 4] array split along dim 1 over 2 devices: columns [0, 2) and [2, 4).
  ArraySpec spec{"m", ElementType::kF32, {2, 4}, 1};
  std::vector<float> values = {0, 1, 2, 3, 4, 5, 6, 7};
  EXPECT_EQ(ExtractShard(values, spec, 1, 2), (std::vector<float>{2, 3, 6, 7}));
  spec.split_dim = 0;
  EXPECT_EQ(ExtractShard(values, spec, 1, 2), (std::vector<float>{4, 5, 6, 7}));
  EXPECT_EQ(PrintSharding(*ShardingOf(spec, 2)), "{devices=[2,1]<=[2]}");
}

}  // namespace
}  // namespace shardrt::decoder
