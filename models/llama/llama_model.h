// LlamaModel: a Llama model on P devices, ready to generate: its weights on device (sharded,
// loaded once), and its programs (llama_program.h), compiled on first use: empty caches, a
// prompt chunk per chunk size, and a decode step per batch size.
//
// A prompt runs as chunks of at most ModelOptions::chunk tokens, each attending to the cache
// the earlier ones wrote: a prompt costs its cache plus one chunk's activations, whatever its
// length. Generate then runs one decode step per token on the runtime's asynchronous executor:
// each step takes the previous step's caches and token as placeholders (nothing returns to
// the host between steps), and the host only reads the tokens, `lookahead` steps behind the
// newest scheduled one, so the devices always have the next steps queued. The caches are
// donated at every step. Sampling (temperature > 0) runs on the host from the step's logits,
// which then makes each step wait for the previous token.
//
// A caller that runs many sequences at once (a server's scheduler) uses the steps themselves:
// NewCaches of R rows, ScheduleChunk into one row, ScheduleDecode of a batch of rows.
//
// Thread safety: Generate and the steps may be called from any thread; one Generate at a time
// per model; a pair of caches is used by one thread at a time (every step donates it).
#pragma once

#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
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
  // Positions a cache row holds: a prompt plus every generated token must fit. At most the
  // model's context; rounded up to a multiple of both the granule and the attention block, or
  // down where rounding up would pass the context.
  int64_t cache_len = 512;
  // Chunk sizes are granule x 1, 2, 3, 4, 6, 8, ... (Bucket; a multiple of partitions), at most
  // `chunk` (rounded up to a multiple of the granule): a prompt's last chunk is the smallest
  // size that holds what is left of it.
  int64_t granule = 64;
  int64_t chunk = 256;
  // Positions the attention loops cover per iteration (a multiple of partitions): a decode
  // step at position p runs p / block + 1 iterations.
  int64_t block = 256;
  ProgramRetention retention = ProgramRetention::kKeepAll;
};

using SamplingOptions = llm::SamplingOptions;

struct GenerateOptions {
  int64_t max_tokens = 256;  // generated tokens at most (the stop token included)
  std::vector<int32_t> stop_tokens;  // generation ends after one of these
  SamplingOptions sampling;
  bool keep_logits = false;  // return every step's logits (downloads them)
  // When set, called with each generated token's index and logits (downloads them), before
  // on_token; an error ends Generate with it.
  std::function<absl::Status(int64_t index, std::span<const float> logits)> on_logits;
  int64_t lookahead = 4;     // decode steps scheduled beyond the token being read (>= 1)
};

struct GenerateResult {
  std::vector<int32_t> tokens;              // generated, in order (a stop token included)
  std::vector<std::vector<float>> logits;   // per generated token, when keep_logits
  double prefill_seconds = 0;  // prompt upload to the first token on the host
  double decode_seconds = 0;   // first token to the last (both on the host)
  int64_t prompt_tokens = 0;
};

// A pair of caches (k, v) of `rows` sequences on the devices (CacheSpecs), as placeholders of
// the steps that write them.
struct KvCaches {
  DataPtr k, v;
  int64_t rows = 0;
};

// What a scheduled step returns: the caches it wrote, and per token of the step its greedy
// next token (s32[B]) and logits (f32[B, vocab]), placeholders until it has run.
struct StepOutputs {
  KvCaches caches;
  DataPtr next_tokens;
  DataPtr logits;
};

// `data`'s values on the host as T (s32 tokens, f32 logits); waits for the step that writes
// it. Errors: the transfer's (and so the step's).
template <typename T>
absl::StatusOr<std::vector<T>> HostValues(ComputationClient& client, const DataPtr& data) {
  absl::StatusOr<std::vector<HostArray>> host = client.TransferFromDevice({&data, 1});
  if (!host.ok()) return host.status();
  std::vector<T> values((*host)[0].data.size() / sizeof(T));
  std::memcpy(values.data(), (*host)[0].data.data(), values.size() * sizeof(T));
  return values;
}

// `token` as a step's program gave it: -1 marks a row whose logits were not finite (NaN or
// infinity: the model's weights or activations overflowed). Error: InvalidArgument for that.
// Thread-safe (pure).
[[nodiscard]] inline absl::StatusOr<int32_t> StepToken(int32_t token) {
  if (token >= 0) return token;
  return absl::InvalidArgumentError(
      "the model's logits are not finite (NaN or infinity): its weights or activations "
      "overflow");
}

// The token a step gives a row: drawn by `sampler` from the row's `logits` when there is a
// sampler, else the program's `greedy` one. Errors: StepToken's, for a greedy -1 or a logit of
// the row that is not finite. Thread-safe as `sampler` is (one row's, used by one thread).
[[nodiscard]] inline absl::StatusOr<int32_t> RowToken(int32_t greedy,
                                                      std::span<const float> logits,
                                                      llm::Sampler* sampler) {
  if (sampler == nullptr) return StepToken(greedy);
  for (const float v : logits) {
    if (!std::isfinite(v)) return StepToken(-1);
  }
  return sampler->Sample(logits);
}

// The logits in `data` (f32[B, W], W >= vocab: the programs' logits, whose columns are the
// devices' shares of the vocabulary, padding included; ModelSplit) on the host as B rows of
// `vocab` values, the padding columns dropped; waits for the step. Errors: the transfer's;
// Internal for a width under `vocab`.
[[nodiscard]] inline absl::StatusOr<std::vector<float>> HostLogits(ComputationClient& client,
                                                                   const DataPtr& data,
                                                                   int64_t vocab) {
  absl::StatusOr<std::vector<float>> values = HostValues<float>(client, data);
  if (!values.ok()) return values.status();
  const std::vector<int64_t>& dims = data->shape().dims;
  const int64_t width = dims.empty() ? 0 : dims.back();
  if (width < vocab) {
    return absl::InternalError(absl::StrCat("logits of width ", width, " for a vocabulary of ",
                                            vocab));
  }
  if (width == vocab) return values;
  const int64_t rows = int64_t(values->size()) / width;
  for (int64_t r = 0; r < rows; ++r) {
    std::memmove(values->data() + r * vocab, values->data() + r * width,
                 size_t(vocab) * sizeof(float));
  }
  values->resize(size_t(rows * vocab));
  return values;
}

// Checks a prompt's token ids: at least one, each in [0, vocab). Error: InvalidArgument naming
// the first bad token. Thread-safe (pure).
[[nodiscard]] absl::Status CheckPrompt(std::span<const int32_t> prompt, int64_t vocab);

class LlamaModel {
 public:
  // A model of `config` on the first options.partitions devices, without weights yet.
  // `client` and `executor` are borrowed and must outlive the model. Errors: SplitOf's,
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
  // Chunks start at multiples of this (ScheduleChunk).
  int64_t granule() const { return options_.granule; }

  // Checks that a prompt of `prompt_len` tokens and `max_tokens` generated tokens fit a cache
  // row (max_tokens >= 1). Error: InvalidArgument naming the numbers.
  [[nodiscard]] absl::Status CheckFits(int64_t prompt_len, int64_t max_tokens) const;

  // Compiles every program a generation of up to `max_tokens` tokens after a prompt of
  // `prompt_len` tokens uses (its chunks, the decode step, the empty caches), several at once
  // on the client's pool, into the client's persistent compile cache unless it has them
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
  // Compiles and loads the programs a scheduler of `rows` cache rows uses: the empty caches,
  // every chunk size, and the decode step for each batch size DecodeBatch gives. Errors:
  // compile and load errors.
  [[nodiscard]] absl::Status PrepareBatched(int64_t rows);

  // Generates from `prompt` (token ids, at least one); the weights must be loaded. `on_token`
  // is called on this thread for each token in order as soon as it is on the host; returning
  // false stops generation. Errors: FailedPrecondition before LoadWeights; InvalidArgument for
  // an empty prompt, an id outside the vocabulary, a prompt and max_tokens that do not fit
  // the cache, bad sampling options; compile and execution errors.
  [[nodiscard]] absl::StatusOr<GenerateResult> Generate(
      const std::vector<int32_t>& prompt, const GenerateOptions& options,
      const std::function<bool(int32_t)>& on_token = nullptr);

  // The steps, for a caller that runs several sequences on one pair of caches. Each schedules
  // its program on the executor and returns its outputs as placeholders; the caches passed in
  // are donated. Errors: FailedPrecondition before LoadWeights; InvalidArgument for arguments
  // out of range (naming them); compile, transfer and executor errors.
  //
  // Empty caches of `rows` rows.
  [[nodiscard]] absl::StatusOr<KvCaches> NewCaches(int64_t rows);
  // The next chunk of a prompt in row `row`: `tokens` are the prompt's tokens from position
  // `start` on (at least one; start a multiple of the chunk sizes' granule, as the previous
  // chunks leave it). Runs the first ChunkTokens(start, tokens.size()) of them; `*consumed`
  // receives that count. The outputs' token and logits are those of the last one run.
  [[nodiscard]] absl::StatusOr<StepOutputs> ScheduleChunk(KvCaches caches, int64_t row,
                                                          std::span<const int32_t> tokens,
                                                          int64_t start, int64_t* consumed);
  // How many of `remaining` prompt tokens from `start` the next chunk runs.
  int64_t ChunkTokens(int64_t start, int64_t remaining) const;
  // One decode step of rows 0..B-1 (B = tokens.size() = positions.size(), at most the caches'
  // rows): token b at positions[b] in row b; -1 marks an idle row (its outputs are
  // meaningless). `tokens` is either the host's ids or (device_tokens set) a previous step's
  // next_tokens of the same B, then `tokens` is ignored but its size gives B.
  [[nodiscard]] absl::StatusOr<StepOutputs> ScheduleDecode(KvCaches caches,
                                                           std::span<const int32_t> tokens,
                                                           std::span<const int32_t> positions,
                                                           DataPtr device_tokens = nullptr);
  // The decode batch that covers rows 0..n-1 of `rows`: the smallest power of two >= n, at most
  // `rows` (decode programs exist for those).
  static int64_t DecodeBatch(int64_t n, int64_t rows);

 private:
  LlamaModel(LlamaConfig config, ComputationClient& client, Executor& executor,
             ModelOptions options)
      : config_(std::move(config)), client_(client), executor_(executor), options_(options) {}

  enum class Kind { kCaches, kChunk, kDecode };
  // A program: its kind, size (chunk tokens, decode batch; 0 for caches) and cache rows.
  struct Key {
    Kind kind;
    int64_t size;
    int64_t rows;
    auto operator<=>(const Key&) const = default;
  };
  // The programs Prepare makes ready. Errors: InvalidArgument when they do not fit the cache.
  absl::StatusOr<std::vector<Key>> Needed(int64_t prompt_len, int64_t max_tokens) const;
  // The compile request of program `key`.
  absl::StatusOr<CompileRequest> Request(const Key& key) const;
  // That program, compiled (or loaded) on first use and kept in programs_.
  absl::StatusOr<ComputationPtr> Program(const Key& key);
  // Compiles `keys` several at once into the persistent cache, then (load) loads each.
  absl::Status Ready(const std::vector<Key>& keys, bool load,
                     const std::function<void()>& after_each_load);
  absl::Status CheckLoaded() const;

  const LlamaConfig config_;
  ComputationClient& client_;
  Executor& executor_;
  const ModelOptions options_;
  std::vector<DataPtr> weights_;  // empty until LoadWeights
  Mutex mu_;
  std::map<Key, ComputationPtr> programs_ ABSL_GUARDED_BY(mu_);
};

}  // namespace shardrt::llama
