// build/bench/decoder_demo: the small random-weight decoder of models/decoder, sharded Megatron
// style over N devices, generating tokens greedily: prefill, then one donated-KV-cache decode
// step per token, each scheduled on the asynchronous executor. Step n+1 is scheduled on step n's
// output placeholders before step n has run, so the host runs ahead of the device (by at most the
// executor's in-flight bound). A fixture of bench/soak, bench/compile_cache and the decoder
// integration tests, not part of the shipped CLI: it takes the CLI's flag tables, help,
// --timeout, runtime set-up and reports from shardrt_cli (tools/cli), and runs as
//
//   build/bench/decoder_demo [--devices N] [--tokens T] [--layers L] [--d-model D] [--seed S]
//                            [--metrics] [--trace FILE] [--plugin PATH] [--compile-cache DIR|off]
//
// printing the prompt, the generated tokens and the rate on stdout, and a progress bar on stderr
// when it is a terminal; `--help` lists the flags with their ranges and defaults. Errors are one
// line on stderr ("decoder_demo: MESSAGE") and exit 1.
//
// Memory per generated token is the token itself: each step's position is uploaded when the step
// is scheduled, only the KV caches and the newest token placeholder are carried to the next
// step, and tokens are read back in batches of kReadBatch while later steps run, leaving one
// int32 per token on the host. What grows with the token count is the model's own KV cache and
// position table (max_seq = prompt + tokens rows), which the size check below bounds.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <deque>
#include <iterator>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "cli/command_main.h"
#include "cli/commands.h"
#include "cli/flags.h"
#include "cli/runtime_setup.h"
#include "decoder/decoder_config.h"
#include "decoder/decoder_program.h"
#include "decoder/decoder_weights.h"
#include "shardrt/base/array_shape.h"
#include "shardrt/base/limits.h"
#include "shardrt/base/status_macros.h"
#include "shardrt/executor/executor.h"

namespace shardrt::bench {
namespace {

using cli::CommandDef;
using cli::CommandReports;
using cli::CreateCliRuntime;
using cli::FlagDef;
using cli::Flags;
using cli::FlagType;
using decoder::DecoderConfig;
using decoder::DecoderProgram;

// Layers the demo accepts. Compiling the two programs takes longer than linearly in the layer
// count (on 2 cores: 16 layers ~1.5 s, 64 ~5 s, 128 ~13 s, 1024 over a minute) and the demo is
// meant to answer in seconds.
constexpr int64_t kMaxDemoLayers = 64;

// Generated tokens read back per download. Tokens stay on device until this many (plus the
// executor's in-flight window behind them) are pending, so the host holds at most about
// 2 * kReadBatch token placeholders however long the generation.
constexpr size_t kReadBatch = 64;

// A view of `bytes` bytes at `data` as a host array of `type` and `dims`. Borrows `data`, which
// must outlive the view's use.
HostArrayView ViewOf(ElementType type, const std::vector<int64_t>& dims, const void* data,
                     size_t bytes) {
  return {type, dims, std::span(static_cast<const std::byte*>(data), bytes)};
}

// Draws a progress bar of `done` of `total` tokens on stderr when `enabled` (a terminal), ending
// the line at the last token. Not thread-safe (one caller, the command).
void Progress(bool enabled, int64_t done, int64_t total) {
  if (!enabled) return;
  const int width = 30;
  const int filled = static_cast<int>(width * done / std::max<int64_t>(total, 1));
  std::fprintf(stderr, "\r[%s%s] %lld/%lld tokens", std::string(filled, '#').c_str(),
               std::string(width - filled, ' ').c_str(), static_cast<long long>(done),
               static_cast<long long>(total));
  if (done == total) std::fputc('\n', stderr);
}

// Compiles one emitted decoder program for `partitions` devices. Errors: Compile's.
[[nodiscard]] absl::StatusOr<ComputationPtr> CompileProgram(ComputationClient& client,
                                              const DecoderProgram& program, int64_t partitions) {
  CompileRequest request;
  request.name = program.name;
  request.program = program.mlir;
  request.options.num_partitions = partitions;
  request.global_shapes = GlobalShapes{program.signature.parameters, program.signature.results};
  return client.Compile(request);
}

// Holds the demo's sizes to the decoder's memory bounds (decoder_config.h) in the flags' terms,
// before anything is allocated: the layer count to kMaxDemoLayers, the largest array, the
// weights and what the devices hold to their limits. `config` has the flags' values (all >= 1).
// Error: InvalidArgument, one line naming the flags, their values, the size and the limit.
[[nodiscard]] absl::Status CheckDemoSize(const DecoderConfig& config, int64_t tokens) {
  if (config.n_layers > kMaxDemoLayers) {
    return absl::InvalidArgumentError(absl::StrCat(
        "flag --layers ", config.n_layers, ": over the demo's limit of ", kMaxDemoLayers,
        " layers (compile time grows faster than the layer count)"));
  }
  const decoder::ModelFootprint f = decoder::Footprint(config);
  if (f.largest_array_bytes > decoder::kMaxModelArrayBytes) {
    const std::string flags =
        f.largest_grows_with_max_seq
            ? absl::StrCat("flags --d-model ", config.d_model, " --tokens ", tokens)
            : absl::StrCat("flag --d-model ", config.d_model);
    return absl::InvalidArgumentError(absl::StrCat(
        flags, ": array ", f.largest_array, " ", ShapeToString({ElementType::kF32, f.largest_dims}),
        " would take ", decoder::BytesText(f.largest_array_bytes), ", over the demo's limit of ",
        decoder::BytesText(decoder::kMaxModelArrayBytes), " per array"));
  }
  if (f.weight_bytes > decoder::kMaxModelWeightBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "flags --d-model ", config.d_model, " --layers ", config.n_layers,
        ": the weights would take ", decoder::BytesText(f.weight_bytes),
        ", over the demo's limit of ", decoder::BytesText(decoder::kMaxModelWeightBytes)));
  }
  if (f.device_bytes > decoder::kMaxModelDeviceBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "flags --d-model ", config.d_model, " --layers ", config.n_layers, " --tokens ", tokens,
        " --devices ", config.num_partitions, ": the devices would hold ",
        decoder::BytesText(f.device_bytes), " of weights and KV caches, over the demo's limit of ",
        decoder::BytesText(decoder::kMaxModelDeviceBytes)));
  }
  return absl::OkStatus();
}

// --layers' description states the limit.
static_assert(kMaxDemoLayers == 64);
constexpr FlagDef kFlags[] = {
    cli::kDevicesFlag,
    {.name = "tokens", .type = FlagType::kInteger, .value_name = "T",
     .description = "tokens to generate", .default_text = "32", .int_min = 1,
     .int_max = 1 << 16},
    {.name = "layers", .type = FlagType::kInteger, .value_name = "L",
     .description = "transformer layers (the demo takes at most 64)", .default_text = "2",
     .int_min = 1, .int_max = INT64_MAX},
    {.name = "d-model", .type = FlagType::kInteger, .value_name = "D",
     .description = "the model width",
     .default_text = "128", .int_min = 1, .int_max = 1 << 16},
    {.name = "seed", .type = FlagType::kInteger, .value_name = "S",
     .description = "the seed of the random weights and prompt", .default_text = "42",
     .int_min = 0, .int_max = INT64_MAX},
    cli::kMetricsFlag,
    cli::kTraceFlag,
    cli::kPluginFlag,
    cli::kCompileCacheFlag,
};

// The demo command's flags, read and checked. Owns copies of the values.
struct DemoFlags {
  DecoderConfig config;  // num_partitions, n_layers, d_model and max_seq from the flags
  int64_t tokens = 0;
  int64_t seed = 0;
  bool metrics = false;
  std::optional<std::string> trace;
  std::optional<std::string> plugin;
  std::optional<std::string> compile_cache;
};

// Parses `args` into DemoFlags and checks the sizes before anything is allocated. Errors:
// Flags::Parse's, a positional argument, CheckDemoSize's, ValidateConfig's, ValidateGeneration's.
[[nodiscard]] absl::StatusOr<DemoFlags> ParseDemoFlags(const std::vector<std::string>& args) {
  SHARDRT_ASSIGN_OR_RETURN(Flags flags, Flags::Parse(args, kFlags));
  if (!flags.positional().empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("unexpected argument '", flags.positional()[0], "'"));
  }
  DemoFlags demo;
  DecoderConfig& config = demo.config;
  SHARDRT_ASSIGN_OR_RETURN(config.num_partitions, flags.GetInt("devices"));
  SHARDRT_ASSIGN_OR_RETURN(demo.tokens, flags.GetInt("tokens"));
  SHARDRT_ASSIGN_OR_RETURN(config.n_layers, flags.GetInt("layers"));
  SHARDRT_ASSIGN_OR_RETURN(config.d_model, flags.GetInt("d-model"));
  SHARDRT_ASSIGN_OR_RETURN(demo.seed, flags.GetInt("seed"));
  config.max_seq = config.prompt_len + demo.tokens;
  SHARDRT_RETURN_IF_ERROR(CheckDemoSize(config, demo.tokens));
  SHARDRT_RETURN_IF_ERROR(decoder::ValidateConfig(config));
  SHARDRT_RETURN_IF_ERROR(decoder::ValidateGeneration(config, demo.tokens));
  demo.metrics = flags.Has("metrics");
  demo.trace = flags.Get("trace");
  demo.plugin = flags.Get("plugin");
  demo.compile_cache = flags.Get("compile-cache");
  return demo;
}

// The two compiled decoder programs.
struct DemoPrograms {
  ComputationPtr prefill;
  ComputationPtr decode;
};

// Emits and compiles the prefill and decode-step programs for config.num_partitions devices.
// Errors: EmitPrefill's, EmitDecodeStep's, Compile's.
[[nodiscard]] absl::StatusOr<DemoPrograms> CompileDemoPrograms(ComputationClient& client,
                                                               const DecoderConfig& config) {
  const int64_t n = config.num_partitions;
  SHARDRT_ASSIGN_OR_RETURN(DecoderProgram prefill_program, decoder::EmitPrefill(config));
  SHARDRT_ASSIGN_OR_RETURN(DecoderProgram decode_program, decoder::EmitDecodeStep(config));
  DemoPrograms programs;
  SHARDRT_ASSIGN_OR_RETURN(programs.prefill, CompileProgram(client, prefill_program, n));
  SHARDRT_ASSIGN_OR_RETURN(programs.decode, CompileProgram(client, decode_program, n));
  return programs;
}

// The prompt and the weights on device.
struct DemoInputs {
  DataPtr prompt;
  std::vector<DataPtr> weights;
};

// Uploads `prompt` and the weights generated from `seed`, once, with the prefill program's
// parameter layouts (the decode step's are the same). The host copies of the weights go once
// they are on device. Errors: GenerateWeights', TransferToDevice's.
[[nodiscard]] absl::StatusOr<DemoInputs> UploadDemoInputs(ComputationClient& client,
                                                          const DecoderConfig& config,
                                                          const std::vector<int32_t>& prompt,
                                                          uint64_t seed,
                                                          const Computation& prefill) {
  SHARDRT_ASSIGN_OR_RETURN(decoder::DecoderWeights weights,
                           decoder::GenerateWeights(config, seed));
  std::vector<HostArrayView> views;
  std::vector<std::shared_ptr<const DataLayout>> layouts;
  views.push_back(ViewOf(ElementType::kS32, {config.prompt_len}, prompt.data(),
                         prompt.size() * sizeof(int32_t)));
  layouts.push_back(prefill.parameter_layout(0));
  for (size_t i = 0; i < weights.arrays.size(); ++i) {
    const auto& w = weights.arrays[i];
    views.push_back(ViewOf(ElementType::kF32, w.spec.dims, w.values.data(),
                           w.values.size() * sizeof(float)));
    layouts.push_back(prefill.parameter_layout(i + 1));
  }
  SHARDRT_ASSIGN_OR_RETURN(std::vector<DataPtr> uploaded,
                           client.TransferToDevice(views, layouts));
  DemoInputs inputs;
  inputs.prompt = std::move(uploaded[0]);
  inputs.weights.assign(std::make_move_iterator(uploaded.begin() + 1),
                        std::make_move_iterator(uploaded.end()));
  return inputs;
}

// Reads generated tokens back from the device in order, drawing the progress bar on stderr when
// it is a terminal. Borrows `client`, which must outlive it. Not thread-safe (one caller).
class TokenReader {
 public:
  TokenReader(ComputationClient& client, int64_t total)
      : client_(client), total_(total), progress_(isatty(STDERR_FILENO)) {
    ids_.reserve(total);
  }
  // Queues the placeholder of the next token.
  void Add(DataPtr token) { pending_.push_back(std::move(token)); }
  // Token placeholders queued and not yet read.
  size_t pending() const { return pending_.size(); }
  // Reads the oldest `count` pending tokens (waiting for their steps) into ids(). Errors: the
  // steps' and TransferFromDevice's.
  [[nodiscard]] absl::Status Read(size_t count) {
    std::vector<DataPtr> batch(pending_.begin(), pending_.begin() + count);
    for (const DataPtr& t : batch) SHARDRT_RETURN_IF_ERROR(t->Await());
    SHARDRT_ASSIGN_OR_RETURN(std::vector<HostArray> host, client_.TransferFromDevice(batch));
    for (const HostArray& t : host) {
      int32_t id = 0;
      std::memcpy(&id, t.data.data(), sizeof(id));
      ids_.push_back(id);
    }
    pending_.erase(pending_.begin(), pending_.begin() + count);
    Progress(progress_, static_cast<int64_t>(ids_.size()), total_);
    return absl::OkStatus();
  }
  // The tokens read so far, in order.
  std::vector<int32_t>& ids() { return ids_; }

 private:
  ComputationClient& client_;
  int64_t total_;
  bool progress_;
  std::vector<int32_t> ids_;
  std::deque<DataPtr> pending_;
};

// Schedules decode step `i` on `state` (the previous step's caches and next token),
// uploading its position prompt_len + i - 1 now (the upload copies the value before it
// returns). Returns the step's caches and next token (placeholders). Errors: TransferToDevice's,
// Schedule's.
[[nodiscard]] absl::StatusOr<std::vector<DataPtr>> ScheduleDecodeStep(
    ComputationClient& client, Executor& executor, const DecoderConfig& config,
    const ComputationPtr& decode, int64_t i, std::vector<DataPtr> state,
    const std::vector<DataPtr>& weights) {
  const size_t num_caches = state.size() - 1;
  const std::shared_ptr<const DataLayout>& position_layout =
      decode->parameter_layout(num_caches + 1);
  const int32_t position = static_cast<int32_t>(config.prompt_len + i - 1);
  const HostArrayView position_view = ViewOf(ElementType::kS32, {}, &position, sizeof(position));
  SHARDRT_ASSIGN_OR_RETURN(std::vector<DataPtr> position_data,
                           client.TransferToDevice({&position_view, 1}, {&position_layout, 1}));
  std::vector<DataPtr> step_args(std::make_move_iterator(state.begin()),
                                 std::make_move_iterator(state.end()));
  step_args.push_back(std::move(position_data[0]));
  step_args.insert(step_args.end(), weights.begin(), weights.end());
  SHARDRT_ASSIGN_OR_RETURN(std::vector<DataPtr> next,
                           executor.Schedule(decode, std::move(step_args)));
  next.resize(num_caches + 1);
  return next;
}

// Generates `tokens` tokens: schedules prefill, then each decode step on the previous step's
// placeholders before it has run, reading tokens back in batches of kReadBatch, and waits for
// all steps. Returns the tokens in order. Errors: the uploads', the steps', the reads'.
[[nodiscard]] absl::StatusOr<std::vector<int32_t>> GenerateTokens(
    ComputationClient& client, Executor& executor, const DecoderConfig& config, int64_t tokens,
    const DemoPrograms& programs, const DemoInputs& inputs) {
  const size_t num_caches = decoder::CacheSpecs(config).size();
  TokenReader reader(client, tokens);
  std::vector<DataPtr> prefill_args = {inputs.prompt};
  prefill_args.insert(prefill_args.end(), inputs.weights.begin(), inputs.weights.end());
  SHARDRT_ASSIGN_OR_RETURN(std::vector<DataPtr> state,
                           executor.Schedule(programs.prefill, std::move(prefill_args)));
  // state = caches..., next_token, logits (placeholders until the step has run). The next step
  // needs the caches and next_token; logits are dropped at once.
  state.resize(num_caches + 1);
  reader.Add(state[num_caches]);
  for (int64_t i = 1; i < tokens; ++i) {
    SHARDRT_ASSIGN_OR_RETURN(state, ScheduleDecodeStep(client, executor, config, programs.decode,
                                                       i, std::move(state), inputs.weights));
    reader.Add(state[num_caches]);
    if (reader.pending() >= 2 * kReadBatch) SHARDRT_RETURN_IF_ERROR(reader.Read(kReadBatch));
  }
  state.clear();
  if (reader.pending() > 0) SHARDRT_RETURN_IF_ERROR(reader.Read(reader.pending()));
  SHARDRT_RETURN_IF_ERROR(executor.WaitForAll());
  return std::move(reader.ids());
}

// The demo: parses `args` with kFlags, prints the prompt, the generated tokens and the rate on
// stdout. Errors: bad flags and sizes (InvalidArgument, before anything is allocated), the
// runtime's, compilation's and the executions' errors. Owns everything it creates; runs on the
// calling thread (the executor's pool does the work).
[[nodiscard]] absl::Status DemoCommand(const std::vector<std::string>& args) {
  SHARDRT_ASSIGN_OR_RETURN(const DemoFlags demo, ParseDemoFlags(args));
  const DecoderConfig& config = demo.config;

  CommandReports reports(demo.metrics, demo.trace);
  SHARDRT_RETURN_IF_ERROR(reports.Start());
  SHARDRT_ASSIGN_OR_RETURN(
      std::unique_ptr<Runtime> runtime,
      CreateCliRuntime(config.num_partitions, demo.plugin, demo.compile_cache));
  ComputationClient& client = runtime->client();
  SHARDRT_ASSIGN_OR_RETURN(const DemoPrograms programs, CompileDemoPrograms(client, config));
  const uint64_t seed = static_cast<uint64_t>(demo.seed);
  const std::vector<int32_t> prompt = decoder::GeneratePrompt(config, seed);
  SHARDRT_ASSIGN_OR_RETURN(const DemoInputs inputs,
                           UploadDemoInputs(client, config, prompt, seed, *programs.prefill));

  auto start = std::chrono::steady_clock::now();
  SHARDRT_ASSIGN_OR_RETURN(
      const std::vector<int32_t> ids,
      GenerateTokens(client, runtime->executor(), config, demo.tokens, programs, inputs));
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("prompt: %s\n", absl::StrJoin(prompt, " ").c_str());
  std::printf("tokens: %s\n", absl::StrJoin(ids, " ").c_str());
  std::printf("decoded %lld tokens in %.3f s (%.1f tokens/s)\n",
              static_cast<long long>(demo.tokens), seconds,
              static_cast<double>(demo.tokens) / seconds);
  return reports.Finish();
}

// The demo as a CLI command of its own program: its flags, help and summary.
constexpr CommandDef kDemoCommand{
    .name = "decoder_demo",
    .usage = "[flags]",
    .summary = "Generates tokens greedily with a small random-weight transformer, sharded "
               "Megatron style over N devices.",
    .flags = kFlags,
    .run = DemoCommand};

}  // namespace
}  // namespace shardrt::bench

int main(int argc, char** argv) {
  return shardrt::cli::RunCommandLine(shardrt::bench::kDemoCommand,
                                      std::vector<std::string>(argv + 1, argv + argc),
                                      "decoder_demo");
}
