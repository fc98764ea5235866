// Tokens per second of the demo decoder (models/decoder) generating greedily with
// ExecuteReplicated, the loop bench/decoder_demo runs: prefill, then one donated-KV-cache decode
// step per token, tokens kept on device and downloaded once at the end. Compilation, weight and
// position uploads and one warm-up generation happen before timing; a timed generation is
// prefill + (tokens - 1) decode steps + the token download.
//
//   build/bench/decoder_bench [Google Benchmark flags]          D in {1, 8}, 32 tokens
//   build/bench/decoder_bench --serve --devices D --tokens T    bench/run's line protocol:
//       setup | gen | quit      (gen -> {"ok":true,"seconds":S,"tokens":[...]})
#include <benchmark/benchmark.h>

#include <cstring>

#include "shardrt/base/status_macros.h"
#include "bench_util.h"
#include "decoder/decoder_config.h"
#include "decoder/decoder_program.h"
#include "decoder/decoder_weights.h"

namespace shardrt::bench {
namespace {

constexpr uint64_t kSeed = 42;

class Decoder {
 public:
  static absl::StatusOr<std::unique_ptr<Decoder>> Create(int devices, int tokens) {
    std::unique_ptr<Decoder> d(new Decoder());
    SHARDRT_RETURN_IF_ERROR(d->Init(devices, tokens));
    return d;
  }

  // One timed generation: the generated token ids and the seconds it took.
  absl::StatusOr<std::pair<std::vector<int32_t>, double>> Generate() {
    const int64_t t0 = NowNs();
    std::vector<DataPtr> prefill_args = {prompt_};
    prefill_args.insert(prefill_args.end(), weights_.begin(), weights_.end());
    SHARDRT_ASSIGN_OR_RETURN(std::vector<DataPtr> state,
                             client_->ExecuteReplicated(*prefill_, prefill_args));
    std::vector<DataPtr> token_data = {state[num_caches_]};
    for (int64_t i = 1; i < tokens_; ++i) {
      std::vector<DataPtr> step_args(state.begin(), state.begin() + num_caches_);
      step_args.push_back(token_data.back());
      step_args.push_back(positions_[i - 1]);
      step_args.insert(step_args.end(), weights_.begin(), weights_.end());
      SHARDRT_ASSIGN_OR_RETURN(state, client_->ExecuteReplicated(*decode_, step_args));
      token_data.push_back(state[num_caches_]);
    }
    SHARDRT_ASSIGN_OR_RETURN(std::vector<HostArray> host, client_->TransferFromDevice(token_data));
    const double seconds = static_cast<double>(NowNs() - t0) * 1e-9;
    std::vector<int32_t> ids;
    for (const HostArray& t : host) {
      int32_t id = 0;
      std::memcpy(&id, t.data.data(), sizeof(id));
      ids.push_back(id);
    }
    return std::make_pair(std::move(ids), seconds);
  }

 private:
  absl::Status Init(int devices, int tokens) {
    tokens_ = tokens;
    decoder::DecoderConfig config;
    config.num_partitions = devices;
    config.max_seq = config.prompt_len + tokens;
    SHARDRT_RETURN_IF_ERROR(decoder::ValidateConfig(config));
    SHARDRT_RETURN_IF_ERROR(decoder::ValidateGeneration(config, tokens));
    SHARDRT_ASSIGN_OR_RETURN(Runtime * runtime, RuntimeFor(devices));
    client_ = &runtime->client();
    for (auto [emit, out] : {std::pair{&decoder::EmitPrefill, &prefill_},
                             std::pair{&decoder::EmitDecodeStep, &decode_}}) {
      SHARDRT_ASSIGN_OR_RETURN(decoder::DecoderProgram program, emit(config));
      CompileRequest request;
      request.name = program.name;
      request.program = program.mlir;
      request.options.num_partitions = devices;
      SHARDRT_ASSIGN_OR_RETURN(*out, client_->Compile(request));
    }
    num_caches_ = decoder::CacheSpecs(config).size();

    SHARDRT_ASSIGN_OR_RETURN(decoder::DecoderWeights weights,
                             decoder::GenerateWeights(config, kSeed));
    const std::vector<int32_t> prompt = decoder::GeneratePrompt(config, kSeed);
    // Decode step i (1..tokens-1) runs at position prompt_len + i - 1.
    std::vector<int32_t> positions(tokens - 1);
    for (int i = 0; i + 1 < tokens; ++i) positions[i] = static_cast<int32_t>(config.prompt_len + i);
    std::vector<HostArrayView> views;
    std::vector<std::shared_ptr<const DataLayout>> layouts;
    views.push_back({ElementType::kS32, {config.prompt_len}, std::as_bytes(std::span(prompt))});
    layouts.push_back(prefill_->parameter_layout(0));
    for (size_t i = 0; i < weights.arrays.size(); ++i) {
      const auto& w = weights.arrays[i];
      views.push_back({ElementType::kF32, w.spec.dims, std::as_bytes(std::span(w.values))});
      layouts.push_back(prefill_->parameter_layout(i + 1));
    }
    for (const int32_t& p : positions) {
      views.push_back({ElementType::kS32, {}, std::as_bytes(std::span(&p, 1))});
      layouts.push_back(decode_->parameter_layout(num_caches_ + 1));
    }
    SHARDRT_ASSIGN_OR_RETURN(std::vector<DataPtr> uploaded,
                             client_->TransferToDevice(views, layouts));
    prompt_ = uploaded[0];
    weights_.assign(uploaded.begin() + 1, uploaded.begin() + 1 + weights.arrays.size());
    positions_.assign(uploaded.begin() + 1 + weights.arrays.size(), uploaded.end());
    // Warm-up generation (first-run allocations, caches).
    SHARDRT_RETURN_IF_ERROR(Generate().status());
    return absl::OkStatus();
  }

  int64_t tokens_ = 0;
  size_t num_caches_ = 0;
  ComputationClient* client_ = nullptr;  // borrowed from RuntimeFor(devices)
  ComputationPtr prefill_, decode_;
  DataPtr prompt_;
  std::vector<DataPtr> weights_, positions_;
};

void BM_Decode(benchmark::State& state, int devices, int tokens) {
  auto decoder = Decoder::Create(devices, tokens);
  if (!decoder.ok()) {
    state.SkipWithError(decoder.status().ToString().c_str());
    return;
  }
  for (auto _ : state) {
    auto r = (*decoder)->Generate();
    if (!r.ok()) {
      state.SkipWithError(r.status().ToString().c_str());
      return;
    }
  }
  state.counters["tokens/s"] =
      benchmark::Counter(tokens, benchmark::Counter::kIsIterationInvariantRate);
}

}  // namespace
}  // namespace shardrt::bench

int main(int argc, char** argv) {
  using namespace shardrt::bench;
  bool serve = false;
  int devices = 8, tokens = 32;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--serve") == 0) serve = true;
    if (std::strcmp(argv[i], "--devices") == 0 && i + 1 < argc) devices = std::atoi(argv[++i]);
    if (std::strcmp(argv[i], "--tokens") == 0 && i + 1 < argc) tokens = std::atoi(argv[++i]);
  }
  if (serve) {
    std::unique_ptr<Decoder> decoder;
    return ServeLoop([&](const std::vector<std::string>& w, std::string& fields) -> absl::Status {
      if (w[0] == "setup") {
        SHARDRT_ASSIGN_OR_RETURN(decoder, Decoder::Create(devices, tokens));
        return absl::OkStatus();
      }
      if (w[0] == "gen" && decoder != nullptr) {
        SHARDRT_ASSIGN_OR_RETURN(auto r, decoder->Generate());
        std::vector<int64_t> ids(r.first.begin(), r.first.end());
        absl::StrAppend(&fields, ",\"seconds\":", r.second, ",\"tokens\":", shardrt::JsonIntList(ids));
        return absl::OkStatus();
      }
      return absl::InvalidArgumentError(absl::StrCat("unexpected request: ", w[0]));
    });
  }
  for (int d : {1, 8}) {
    benchmark::RegisterBenchmark(absl::StrCat("Decode/devices:", d, "/tokens:", tokens).c_str(),
                                 [d, tokens](benchmark::State& s) { BM_Decode(s, d, tokens); })
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
  }
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
