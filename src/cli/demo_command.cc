// shardrt demo: a small decoder-only transformer, sharded Megatron style over N devices,
// generating tokens greedily: prefill, then one donated-KV-cache decode step per token, each
// scheduled on the asynchronous executor. Step n+1 is scheduled on step n's output placeholders
// before step n has run, so the host runs ahead of the device; tokens are read once at the end.
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "shardrt/base/status_macros.h"
#include "cli/commands.h"
#include "cli/flags.h"
#include "cli/runtime_setup.h"
#include "decoder/decoder_config.h"
#include "decoder/decoder_program.h"
#include "decoder/decoder_weights.h"
#include "shardrt/executor/executor.h"

namespace shardrt::cli {
namespace {

using decoder::DecoderConfig;
using decoder::DecoderProgram;

HostArrayView ViewOf(ElementType type, const std::vector<int64_t>& dims, const void* data,
                     size_t bytes) {
  return {type, dims, std::span(static_cast<const std::byte*>(data), bytes)};
}

void Progress(bool enabled, int64_t done, int64_t total) {
  if (!enabled) return;
  const int width = 30;
  const int filled = static_cast<int>(width * done / std::max<int64_t>(total, 1));
  std::fprintf(stderr, "\r[%s%s] %lld/%lld tokens", std::string(filled, '#').c_str(),
               std::string(width - filled, ' ').c_str(), static_cast<long long>(done),
               static_cast<long long>(total));
  if (done == total) std::fputc('\n', stderr);
}

absl::StatusOr<ComputationPtr> CompileProgram(ComputationClient& client,
                                              const DecoderProgram& program, int64_t partitions) {
  CompileRequest request;
  request.name = program.name;
  request.program = program.mlir;
  request.options.num_partitions = partitions;
  return client.Compile(request);
}

}  // namespace

absl::Status DemoCommand(const std::vector<std::string>& args) {
  SHARDRT_ASSIGN_OR_RETURN(
      Flags flags, Flags::Parse(args, {.with_value = {"devices", "tokens", "layers", "d-model",
                                                      "seed", "plugin", "trace"},
                                       .boolean = {"metrics"}}));
  if (!flags.positional().empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("unexpected argument '", flags.positional()[0], "'"));
  }
  DecoderConfig config;
  SHARDRT_ASSIGN_OR_RETURN(config.num_partitions, flags.GetInt("devices", 8, 1, 4096));
  SHARDRT_ASSIGN_OR_RETURN(int64_t tokens, flags.GetInt("tokens", 32, 1, 1 << 16));
  SHARDRT_ASSIGN_OR_RETURN(config.n_layers, flags.GetInt("layers", 2, 1, 1024));
  SHARDRT_ASSIGN_OR_RETURN(config.d_model, flags.GetInt("d-model", 128, 1, 1 << 16));
  SHARDRT_ASSIGN_OR_RETURN(int64_t seed, flags.GetInt("seed", 42, 0, INT64_MAX));
  config.max_seq = config.prompt_len + tokens;
  SHARDRT_RETURN_IF_ERROR(decoder::ValidateConfig(config));
  SHARDRT_RETURN_IF_ERROR(decoder::ValidateGeneration(config, tokens));
  const int64_t n = config.num_partitions;

  CommandReports reports(flags.Has("metrics"), flags.Get("trace"));
  SHARDRT_RETURN_IF_ERROR(reports.Start());
  SHARDRT_ASSIGN_OR_RETURN(std::unique_ptr<Runtime> runtime,
                           CreateCliRuntime(n, flags.Get("plugin")));
  ComputationClient* client = &runtime->client();
  SHARDRT_ASSIGN_OR_RETURN(DecoderProgram prefill_program, decoder::EmitPrefill(config));
  SHARDRT_ASSIGN_OR_RETURN(DecoderProgram decode_program, decoder::EmitDecodeStep(config));
  SHARDRT_ASSIGN_OR_RETURN(ComputationPtr prefill, CompileProgram(*client, prefill_program, n));
  SHARDRT_ASSIGN_OR_RETURN(ComputationPtr decode, CompileProgram(*client, decode_program, n));

  // Weights, uploaded once with the prefill program's parameter layouts (the decode step's are
  // the same), then the prompt and every decode position.
  SHARDRT_ASSIGN_OR_RETURN(decoder::DecoderWeights weights,
                           decoder::GenerateWeights(config, static_cast<uint64_t>(seed)));
  const std::vector<int32_t> prompt = decoder::GeneratePrompt(config, static_cast<uint64_t>(seed));
  std::vector<HostArrayView> views;
  std::vector<std::shared_ptr<const DataLayout>> layouts;
  views.push_back(ViewOf(ElementType::kS32, {config.prompt_len}, prompt.data(),
                         prompt.size() * sizeof(int32_t)));
  layouts.push_back(prefill->parameter_layout(0));
  for (size_t i = 0; i < weights.arrays.size(); ++i) {
    const auto& w = weights.arrays[i];
    views.push_back(ViewOf(ElementType::kF32, w.spec.dims, w.values.data(),
                           w.values.size() * sizeof(float)));
    layouts.push_back(prefill->parameter_layout(i + 1));
  }
  std::vector<int32_t> positions(tokens);
  for (int64_t i = 0; i < tokens; ++i) positions[i] = static_cast<int32_t>(config.prompt_len + i - 1);
  const size_t num_caches = decoder::CacheSpecs(config).size();
  const size_t position_param = num_caches + 1;
  for (int64_t i = 1; i < tokens; ++i) {
    views.push_back(ViewOf(ElementType::kS32, {}, &positions[i], sizeof(int32_t)));
    layouts.push_back(decode->parameter_layout(position_param));
  }
  SHARDRT_ASSIGN_OR_RETURN(std::vector<DataPtr> uploaded, client->TransferToDevice(views, layouts));
  const std::vector<DataPtr> weight_data(uploaded.begin() + 1,
                                         uploaded.begin() + 1 + weights.arrays.size());

  const bool progress = isatty(STDERR_FILENO);
  auto start = std::chrono::steady_clock::now();
  Executor& executor = runtime->executor();
  std::vector<DataPtr> prefill_args = {uploaded[0]};
  prefill_args.insert(prefill_args.end(), weight_data.begin(), weight_data.end());
  SHARDRT_ASSIGN_OR_RETURN(std::vector<DataPtr> state,
                           executor.Schedule(prefill, std::move(prefill_args)));
  // state = caches..., next_token, logits (placeholders until the step has run)
  std::vector<DataPtr> token_data = {state[num_caches]};
  for (int64_t i = 1; i < tokens; ++i) {
    std::vector<DataPtr> step_args(state.begin(), state.begin() + num_caches);
    step_args.push_back(token_data.back());
    step_args.push_back(uploaded[1 + weights.arrays.size() + (i - 1)]);
    step_args.insert(step_args.end(), weight_data.begin(), weight_data.end());
    SHARDRT_ASSIGN_OR_RETURN(state, executor.Schedule(decode, std::move(step_args)));
    token_data.push_back(state[num_caches]);
  }
  // Progress follows the tokens as the executor fills them.
  for (int64_t i = 0; i < tokens; ++i) {
    SHARDRT_RETURN_IF_ERROR(token_data[i]->Await());
    Progress(progress, i + 1, tokens);
  }
  SHARDRT_RETURN_IF_ERROR(executor.WaitForAll());
  SHARDRT_ASSIGN_OR_RETURN(std::vector<HostArray> host_tokens,
                           client->TransferFromDevice(token_data));
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::vector<int32_t> ids;
  for (const HostArray& t : host_tokens) {
    int32_t id = 0;
    std::memcpy(&id, t.data.data(), sizeof(id));
    ids.push_back(id);
  }
  std::printf("prompt: %s\n", absl::StrJoin(prompt, " ").c_str());
  std::printf("tokens: %s\n", absl::StrJoin(ids, " ").c_str());
  std::printf("decoded %lld tokens in %.3f s (%.1f tokens/s)\n", static_cast<long long>(tokens),
              seconds, static_cast<double>(tokens) / seconds);
  return reports.Finish();
}

}  // namespace shardrt::cli
