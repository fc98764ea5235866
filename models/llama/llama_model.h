// LlamaModel: a Llama model on P devices, ready to generate: its weights on device (sharded,
// loaded once), and its programs, compiled on first use: a prefill per prompt bucket and one
// decode step (llama_program.h).
//
// Generate runs prefill, then one decode step per token on the runtime's asynchronous executor:
// each step takes the previous step's caches and token as placeholders (nothing returns to the
// host between steps), and the host only reads the tokens, `lookahead` steps behind the newest
// scheduled one, so the devices always have the next steps queued. The caches are donated at
// every step. Sampling (temperature > 0) runs on the host from the step's logits, which then
// makes each step wait for the previous token.
//
// Thread safety: one Generate at a time per model (the caches are per call); the model may be
// used from any thread.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "llama/gguf.h"
#include "llama/llama_config.h"
#include "llama/llama_program.h"
#include "shardrt/llm/sampling.h"
#include "shardrt/base/mutex.h"
#include "shardrt/client/computation_client.h"
#include "shardrt/executor/executor.h"

namespace shardrt::llama {

// Which compiled programs a model keeps after using them.
enum class ProgramRetention {
  kKeepAll,  // every program stays compiled (repeated generations compile nothing)
  // A prefill program is released once its execution is scheduled: a process that generates
  // once holds one program (the decode step) while it decodes. A later Generate compiles its
  // prefill again (or loads it from the persistent compile cache).
  kReleasePrefill,
};

struct ModelOptions {
  int64_t partitions = 8;
  // How Load takes the weights (Create takes the config's). Native weights need the quantized
  // kernels registered with the runtime first (RegisterModelKernels, quant_ffi.h).
  WeightFormat weights = WeightFormat::kNative;
  // Positions the KV cache holds: the prompt plus every generated token must fit. Rounded up
  // to a multiple of both the bucket granule and the attention block, at most the model's
  // context.
  int64_t cache_len = 512;
  // Prompt buckets are granule x 1, 2, 3, 4, 6, 8, ... (Bucket; a multiple of partitions).
  int64_t granule = 64;
  // Positions a decode step's attention loop covers per iteration (a multiple of partitions):
  // a step at position p runs p / block + 1 iterations.
  int64_t block = 256;
  ProgramRetention retention = ProgramRetention::kKeepAll;
};

using SamplingOptions = llm::SamplingOptions;

struct GenerateOptions {
  int64_t max_tokens = 256;  // generated tokens at most (the stop token included)
  std::vector<int32_t> stop_tokens;  // generation ends after one of these
  SamplingOptions sampling;
  bool keep_logits = false;  // return every step's logits (downloads them)
  int64_t lookahead = 4;     // decode steps scheduled beyond the token being read (>= 1)
};

struct GenerateResult {
  std::vector<int32_t> tokens;              // generated, in order (a stop token included)
  std::vector<std::vector<float>> logits;   // per generated token, when keep_logits
  double prefill_seconds = 0;  // prompt upload to the first token on the host
  double decode_seconds = 0;   // first token to the last (both on the host)
  int64_t prompt_tokens = 0;
};

// Checks a prompt's token ids: at least one, each in [0, vocab). Error: InvalidArgument naming
// the first bad token. Thread-safe (pure).
[[nodiscard]] absl::Status CheckPrompt(std::span<const int32_t> prompt, int64_t vocab);

class LlamaModel {
 public:
  // A model of `config` on the first options.partitions devices, without weights yet.
  // `client` and `executor` are borrowed and must outlive the model. Errors: CheckPartitions',
  // InvalidArgument for options.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<LlamaModel>> Create(
      LlamaConfig config, ComputationClient& client, Executor& executor,
      const ModelOptions& options);
  // Create, then LoadWeights from `file` (whose config it reads).
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<LlamaModel>> Load(
      const GgufFile& file, ComputationClient& client, Executor& executor,
      const ModelOptions& options);

  // Dequantizes and uploads the weights (llama_weights.h) from `file`, which must hold this
  // model's config; the file is not needed afterwards. Errors: LoadWeights', InvalidArgument
  // for a file of another config. Not concurrent with Generate.
  [[nodiscard]] absl::Status LoadWeights(const GgufFile& file);

  const LlamaConfig& config() const { return config_; }
  int64_t partitions() const { return options_.partitions; }
  int64_t cache_len() const { return options_.cache_len; }

  // Checks that a prompt of `prompt_len` tokens and `max_tokens` generated tokens fit the
  // cache (max_tokens >= 1). Error: InvalidArgument naming the numbers.
  [[nodiscard]] absl::Status CheckFits(int64_t prompt_len, int64_t max_tokens) const;

  // Compiles every program a generation of up to `max_tokens` tokens after a prompt of
  // `prompt_len` tokens uses (its prefill bucket and the decode step), several at once on the
  // client's pool, into the client's persistent compile cache unless it has them
  // (ComputationClient::Precompile): with that cache, nothing is loaded or kept, so the
  // compiler's memory is gone before the weights arrive. Errors: InvalidArgument when they do
  // not fit the cache; compile errors.
  [[nodiscard]] absl::Status Precompile(int64_t prompt_len, int64_t max_tokens);
  // Whether Precompile would compile nothing (ComputationClient::IsCompiled of every program).
  // Errors: as Precompile's, before compiling.
  [[nodiscard]] absl::StatusOr<bool> IsPrecompiled(int64_t prompt_len, int64_t max_tokens);
  // Precompile, then loads those programs one after the other, calling `after_each_load` (if
  // set) on this thread after each (loading has a host-memory transient of tens of MB, which a
  // caller that owns its process may hand back to the system there). Generate compiles what it
  // needs on first use; calling Prepare first keeps compilation and loading out of the
  // generation. Errors: Precompile's; load errors.
  [[nodiscard]] absl::Status Prepare(int64_t prompt_len, int64_t max_tokens,
                                     const std::function<void()>& after_each_load = nullptr);

  // Generates from `prompt` (token ids, at least one); the weights must be loaded. `on_token` is called on this thread for
  // each token in order as soon as it is on the host; returning false stops generation.
  // Errors: FailedPrecondition before LoadWeights; InvalidArgument for an empty prompt, an id outside the vocabulary, a prompt and
  // max_tokens that do not fit the cache, bad sampling options; compile and execution errors.
  [[nodiscard]] absl::StatusOr<GenerateResult> Generate(
      const std::vector<int32_t>& prompt, const GenerateOptions& options,
      const std::function<bool(int32_t)>& on_token = nullptr);

 private:
  LlamaModel(LlamaConfig config, ComputationClient& client, Executor& executor,
             ModelOptions options)
      : config_(std::move(config)), client_(client), executor_(executor), options_(options) {}

  // The programs (prefill?, bucket) Prepare makes ready. Errors: InvalidArgument when they do
  // not fit the cache.
  absl::StatusOr<std::vector<std::pair<bool, int64_t>>> Needed(int64_t prompt_len,
                                                               int64_t max_tokens) const;
  // The compile request of the prefill for a bucket of `size` tokens, or of the decode step.
  absl::StatusOr<CompileRequest> Request(bool prefill, int64_t size) const;
  // Uploads the prompt (padded to `bucket`) and its length, and schedules the prefill: its
  // outputs (placeholders). Errors: the transfer's and the executor's.
  absl::StatusOr<std::vector<DataPtr>> SchedulePrefill(const std::vector<int32_t>& prompt,
                                                       int64_t bucket,
                                                       const ComputationPtr& prefill);
  // Schedules one decode step of `token` at `position` on the previous step's outputs
  // `state` (its caches are donated): the step's outputs. Errors: as SchedulePrefill's.
  absl::StatusOr<std::vector<DataPtr>> ScheduleDecode(const ComputationPtr& decode,
                                                      std::vector<DataPtr> state, DataPtr token,
                                                      int32_t position);
  // That program, compiled (or loaded) on first use and kept in programs_.
  absl::StatusOr<ComputationPtr> Program(bool prefill, int64_t size);

  const LlamaConfig config_;
  ComputationClient& client_;
  Executor& executor_;
  const ModelOptions options_;
  std::vector<DataPtr> weights_;  // empty until LoadWeights
  Mutex mu_;
  std::map<std::pair<bool, int64_t>, ComputationPtr> programs_ ABSL_GUARDED_BY(mu_);
};

}  // namespace shardrt::llama
