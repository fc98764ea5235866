#include "llama/llama_model.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <deque>
#include <numeric>
#include <optional>

#include "absl/strings/str_cat.h"
#include "llama/llama_weights.h"
#include "shardrt/base/status_macros.h"
#include "shardrt/base/thread_pool.h"

namespace shardrt::llama {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

}  // namespace

absl::Status CheckPrompt(std::span<const int32_t> prompt, int64_t vocab) {
  if (prompt.empty()) return absl::InvalidArgumentError("the prompt has no tokens");
  for (size_t i = 0; i < prompt.size(); ++i) {
    if (prompt[i] < 0 || prompt[i] >= vocab) {
      return absl::InvalidArgumentError(absl::StrCat("prompt token ", i, " is ", prompt[i],
                                                     ", outside the vocabulary [0, ", vocab,
                                                     ")"));
    }
  }
  return absl::OkStatus();
}

absl::Status LlamaModel::CheckFits(int64_t prompt_len, int64_t max_tokens) const {
  if (max_tokens < 1) {
    return absl::InvalidArgumentError(absl::StrCat("max tokens ", max_tokens, ": expected >= 1"));
  }
  // Decode step i (1-based) runs generated token i at position prompt_len + i - 1.
  if (prompt_len + max_tokens - 1 > options_.cache_len) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a prompt of ", prompt_len, " tokens and ", max_tokens, " generated tokens need ",
        prompt_len + max_tokens - 1, " cache positions; the cache holds ", options_.cache_len));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<LlamaModel>> LlamaModel::Create(LlamaConfig config,
                                                               ComputationClient& client,
                                                               Executor& executor,
                                                               const ModelOptions& options) {
  SHARDRT_RETURN_IF_ERROR(SplitOf(config, options.partitions).status());
  ModelOptions o = options;
  if (o.granule < 1 || o.granule % o.partitions != 0) {
    return absl::InvalidArgumentError(absl::StrCat("bucket granule ", o.granule,
                                                   ": expected a multiple of the ",
                                                   o.partitions, " devices"));
  }
  if (o.block < 1 || o.block % o.partitions != 0) {
    return absl::InvalidArgumentError(absl::StrCat("attention block ", o.block,
                                                   ": expected a multiple of the ",
                                                   o.partitions, " devices"));
  }
  if (o.cache_len < 1) {
    return absl::InvalidArgumentError(absl::StrCat("cache length ", o.cache_len, ": expected >= 1"));
  }
  if (o.chunk < 1) {
    return absl::InvalidArgumentError(absl::StrCat("prompt chunk ", o.chunk, ": expected >= 1"));
  }
  o.chunk = (o.chunk + o.granule - 1) / o.granule * o.granule;
  const int64_t unit = std::lcm(o.granule, o.block);
  if (o.cache_len > config.context) {
    return absl::InvalidArgumentError(
        absl::StrCat("cache length ", options.cache_len, ": the model's context holds ",
                     config.context, " positions"));
  }
  // Whole units of prompt granule and attention block: rounded up, or down where rounding up
  // would pass the model's context.
  const int64_t max_cache = config.context / unit * unit;
  if (max_cache == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the model's context of ", config.context, " positions is shorter than one unit of ",
        unit, " (attention block ", o.block, ", prompt granule ", o.granule, ", ",
        o.partitions, " devices): pass a smaller attention block"));
  }
  o.cache_len = std::min((o.cache_len + unit - 1) / unit * unit, max_cache);
  return std::unique_ptr<LlamaModel>(new LlamaModel(std::move(config), client, executor, o));
}

absl::StatusOr<std::unique_ptr<LlamaModel>> LlamaModel::Load(const GgufFile& file,
                                                             ComputationClient& client,
                                                             Executor& executor,
                                                             const ModelOptions& options) {
  SHARDRT_ASSIGN_OR_RETURN(LlamaConfig config, LlamaConfig::FromGguf(file, options.weights));
  SHARDRT_ASSIGN_OR_RETURN(std::unique_ptr<LlamaModel> model,
                           Create(std::move(config), client, executor, options));
  SHARDRT_RETURN_IF_ERROR(model->LoadWeights(file));
  return model;
}

absl::Status LlamaModel::LoadWeights(const GgufFile& file) {
  SHARDRT_ASSIGN_OR_RETURN(
      LlamaConfig file_config,
      LlamaConfig::FromGguf(file, config_.native ? WeightFormat::kNative : WeightFormat::kF32));
  if (!(file_config == config_)) {
    return absl::InvalidArgumentError(absl::StrCat("GGUF file ", file.path(),
                                                   ": its model has other sizes or weight types than this one"));
  }
  SHARDRT_ASSIGN_OR_RETURN(weights_,
                           llama::LoadWeights(file, config_, options_.partitions, client_));
  return absl::OkStatus();
}

absl::StatusOr<CompileRequest> LlamaModel::Request(const Key& key) const {
  ProgramShape shape{.partitions = options_.partitions,
                     .cache_len = options_.cache_len,
                     .rows = key.rows,
                     .tokens = key.kind == Kind::kChunk ? key.size : 0,
                     .block = options_.block,
                     .batch = key.kind == Kind::kDecode ? key.size : 1};
  absl::StatusOr<LlamaProgram> emitted;
  switch (key.kind) {
    case Kind::kCaches: emitted = EmitEmptyCaches(config_, shape); break;
    case Kind::kChunk: emitted = EmitPrefillChunk(config_, shape); break;
    case Kind::kDecode: emitted = EmitDecode(config_, shape); break;
  }
  SHARDRT_ASSIGN_OR_RETURN(LlamaProgram program, std::move(emitted));
  CompileRequest request;
  request.name = program.name;
  request.program = std::move(program.mlir);
  request.options.num_partitions = options_.partitions;
  request.global_shapes = GlobalShapes{std::move(program.signature.parameters),
                                       std::move(program.signature.results)};
  return request;
}

absl::StatusOr<ComputationPtr> LlamaModel::Program(const Key& key) {
  {
    MutexLock lock(mu_);
    auto it = programs_.find(key);
    if (it != programs_.end()) return it->second;
  }
  // Compiled without the lock, so that several programs compile at once (Prepare); two
  // threads asking for the same program both compile it and the first one kept wins.
  SHARDRT_ASSIGN_OR_RETURN(CompileRequest request, Request(key));
  SHARDRT_ASSIGN_OR_RETURN(ComputationPtr computation, client_.Compile(request));
  MutexLock lock(mu_);
  return programs_.emplace(key, computation).first->second;
}

int64_t LlamaModel::ChunkTokens(int64_t start, int64_t remaining) const {
  const int64_t cap = std::min(options_.chunk, options_.cache_len - start);
  return std::min(remaining, Bucket(remaining, options_.granule, cap));
}

int64_t LlamaModel::DecodeBatch(int64_t n, int64_t rows) {
  int64_t batch = 1;
  while (batch < n) batch *= 2;
  return std::min(batch, rows);
}

absl::StatusOr<std::vector<LlamaModel::Key>> LlamaModel::Needed(int64_t prompt_len,
                                                                int64_t max_tokens) const {
  if (prompt_len < 1 || max_tokens < 1 || prompt_len + max_tokens - 1 > options_.cache_len) {
    return absl::InvalidArgumentError(absl::StrCat(
        "prepare: a prompt of ", prompt_len, " tokens and ", max_tokens,
        " generated tokens do not fit the cache of ", options_.cache_len, " positions"));
  }
  // The empty caches, the prompt's chunk sizes and the decode step.
  std::vector<Key> keys = {{Kind::kCaches, 0, 1}};
  for (int64_t start = 0; start < prompt_len;) {
    const int64_t run = ChunkTokens(start, prompt_len - start);
    const Key chunk{Kind::kChunk, Bucket(run, options_.granule,
                                         std::min(options_.chunk, options_.cache_len - start)),
                    1};
    if (std::find(keys.begin(), keys.end(), chunk) == keys.end()) keys.push_back(chunk);
    start += run;
  }
  keys.push_back({Kind::kDecode, 1, 1});
  return keys;
}

absl::Status LlamaModel::Ready(const std::vector<Key>& keys, bool load,
                               const std::function<void()>& after_each_load) {
  SHARDRT_RETURN_IF_ERROR(ParallelFor(
      client_.pool(), int64_t(keys.size()), ParallelCost{.per_item_ns = 1e9},
      [&](int64_t begin, int64_t end) -> absl::Status {
        for (int64_t i = begin; i < end; ++i) {
          SHARDRT_ASSIGN_OR_RETURN(CompileRequest request, Request(keys[i]));
          SHARDRT_RETURN_IF_ERROR(client_.Precompile(request));
        }
        return absl::OkStatus();
      }));
  if (!load) return absl::OkStatus();
  for (const Key& key : keys) {
    SHARDRT_RETURN_IF_ERROR(Program(key).status());
    if (after_each_load) after_each_load();
  }
  return absl::OkStatus();
}

absl::Status LlamaModel::Precompile(int64_t prompt_len, int64_t max_tokens) {
  SHARDRT_ASSIGN_OR_RETURN(std::vector<Key> wanted, Needed(prompt_len, max_tokens));
  return Ready(wanted, false, nullptr);
}

absl::StatusOr<bool> LlamaModel::IsPrecompiled(int64_t prompt_len, int64_t max_tokens) {
  SHARDRT_ASSIGN_OR_RETURN(std::vector<Key> wanted, Needed(prompt_len, max_tokens));
  for (const Key& key : wanted) {
    SHARDRT_ASSIGN_OR_RETURN(CompileRequest request, Request(key));
    SHARDRT_ASSIGN_OR_RETURN(bool compiled, client_.IsCompiled(request));
    if (!compiled) return false;
  }
  return true;
}

absl::Status LlamaModel::Prepare(int64_t prompt_len, int64_t max_tokens,
                                 const std::function<void()>& after_each_load) {
  SHARDRT_ASSIGN_OR_RETURN(std::vector<Key> wanted, Needed(prompt_len, max_tokens));
  return Ready(wanted, true, after_each_load);
}

absl::Status LlamaModel::PrepareBatched(int64_t rows) {
  if (rows < 1) {
    return absl::InvalidArgumentError(absl::StrCat("cache rows ", rows, ": expected >= 1"));
  }
  std::vector<Key> keys = {{Kind::kCaches, 0, rows}};
  for (int64_t size = options_.granule;; size = Bucket(size + 1, options_.granule, options_.chunk)) {
    keys.push_back({Kind::kChunk, size, rows});
    if (size >= options_.chunk) break;
  }
  for (int64_t batch = 1;; batch = DecodeBatch(batch + 1, rows)) {
    keys.push_back({Kind::kDecode, batch, rows});
    if (batch >= rows) break;
  }
  return Ready(keys, true, nullptr);
}

absl::Status LlamaModel::CheckLoaded() const {
  if (weights_.empty()) {
    return absl::FailedPreconditionError("generate: the model's weights are not loaded");
  }
  return absl::OkStatus();
}

absl::StatusOr<KvCaches> LlamaModel::NewCaches(int64_t rows) {
  if (rows < 1) {
    return absl::InvalidArgumentError(absl::StrCat("cache rows ", rows, ": expected >= 1"));
  }
  SHARDRT_ASSIGN_OR_RETURN(ComputationPtr program, Program({Kind::kCaches, 0, rows}));
  SHARDRT_ASSIGN_OR_RETURN(std::vector<DataPtr> caches, executor_.Schedule(program, {}));
  return KvCaches{std::move(caches[0]), std::move(caches[1]), rows};
}

absl::StatusOr<StepOutputs> LlamaModel::ScheduleChunk(KvCaches caches, int64_t row,
                                                      std::span<const int32_t> tokens,
                                                      int64_t start, int64_t* consumed) {
  SHARDRT_RETURN_IF_ERROR(CheckLoaded());
  const int64_t remaining = int64_t(tokens.size());
  if (row < 0 || row >= caches.rows || remaining < 1 || start < 0 ||
      start % options_.granule != 0 || start + remaining > options_.cache_len) {
    return absl::InvalidArgumentError(absl::StrCat(
        "prompt chunk: row ", row, " of ", caches.rows, ", ", remaining, " tokens from ", start,
        ": expected a row, >= 1 tokens, a start that is a multiple of ", options_.granule,
        " and an end within the cache of ", options_.cache_len, " positions"));
  }
  const int64_t run = ChunkTokens(start, remaining);
  const int64_t size =
      Bucket(run, options_.granule, std::min(options_.chunk, options_.cache_len - start));
  SHARDRT_ASSIGN_OR_RETURN(ComputationPtr chunk, Program({Kind::kChunk, size, caches.rows}));
  // The chunk padded to its size, its start, length and row.
  std::vector<int32_t> padded(tokens.begin(), tokens.begin() + run);
  padded.resize(size, padded.back());
  const int32_t scalars[] = {int32_t(start), int32_t(run), int32_t(row)};
  const HostArrayView inputs[] = {
      {ElementType::kS32, {size}, std::as_bytes(std::span<const int32_t>(padded))},
      {ElementType::kS32, {}, std::as_bytes(std::span<const int32_t>(scalars, 1))},
      {ElementType::kS32, {}, std::as_bytes(std::span<const int32_t>(scalars + 1, 1))},
      {ElementType::kS32, {}, std::as_bytes(std::span<const int32_t>(scalars + 2, 1))}};
  const std::shared_ptr<const DataLayout> layouts[] = {
      chunk->parameter_layout(ChunkParameter::kTokens),
      chunk->parameter_layout(ChunkParameter::kStart),
      chunk->parameter_layout(ChunkParameter::kLength),
      chunk->parameter_layout(ChunkParameter::kRow)};
  SHARDRT_ASSIGN_OR_RETURN(std::vector<DataPtr> uploaded,
                           client_.TransferToDevice(inputs, layouts));
  std::vector<DataPtr> args = {std::move(caches.k), std::move(caches.v)};
  args.insert(args.end(), uploaded.begin(), uploaded.end());
  args.insert(args.end(), weights_.begin(), weights_.end());
  SHARDRT_ASSIGN_OR_RETURN(std::vector<DataPtr> out, executor_.Schedule(chunk, std::move(args)));
  if (consumed != nullptr) *consumed = run;
  return StepOutputs{KvCaches{std::move(out[ProgramOutput::kKeyCache]),
                              std::move(out[ProgramOutput::kValueCache]), caches.rows},
                     std::move(out[ProgramOutput::kNextTokens]),
                     std::move(out[ProgramOutput::kLogits])};
}

absl::StatusOr<StepOutputs> LlamaModel::ScheduleDecode(KvCaches caches,
                                                       std::span<const int32_t> tokens,
                                                       std::span<const int32_t> positions,
                                                       DataPtr device_tokens) {
  SHARDRT_RETURN_IF_ERROR(CheckLoaded());
  const int64_t batch = int64_t(positions.size());
  if (batch < 1 || batch > caches.rows || int64_t(tokens.size()) != batch) {
    return absl::InvalidArgumentError(
        absl::StrCat("decode step: ", tokens.size(), " tokens and ", batch,
                     " positions over ", caches.rows, " cache rows: expected 1 <= B <= rows "
                     "of each"));
  }
  for (int64_t b = 0; b < batch; ++b) {
    if (positions[b] < -1 || positions[b] >= options_.cache_len ||
        (device_tokens == nullptr && positions[b] >= 0 &&
         (tokens[b] < 0 || tokens[b] >= config_.vocab))) {
      return absl::InvalidArgumentError(absl::StrCat(
          "decode step: row ", b, " has token ", tokens[b], " at position ", positions[b],
          ": expected a token in [0, ", config_.vocab, ") at a position in [-1, ",
          options_.cache_len, ")"));
    }
  }
  SHARDRT_ASSIGN_OR_RETURN(ComputationPtr decode, Program({Kind::kDecode, batch, caches.rows}));
  std::vector<HostArrayView> inputs;
  std::vector<std::shared_ptr<const DataLayout>> layouts;
  if (device_tokens == nullptr) {
    inputs.push_back({ElementType::kS32, {batch}, std::as_bytes(tokens)});
    layouts.push_back(decode->parameter_layout(DecodeParameter::kTokens));
  }
  inputs.push_back({ElementType::kS32, {batch}, std::as_bytes(positions)});
  layouts.push_back(decode->parameter_layout(DecodeParameter::kPositions));
  SHARDRT_ASSIGN_OR_RETURN(std::vector<DataPtr> uploaded,
                           client_.TransferToDevice(inputs, layouts));
  std::vector<DataPtr> args = {std::move(caches.k), std::move(caches.v),
                               device_tokens != nullptr ? std::move(device_tokens) : uploaded[0],
                               uploaded.back()};
  args.insert(args.end(), weights_.begin(), weights_.end());
  SHARDRT_ASSIGN_OR_RETURN(std::vector<DataPtr> out, executor_.Schedule(decode, std::move(args)));
  return StepOutputs{KvCaches{std::move(out[ProgramOutput::kKeyCache]),
                              std::move(out[ProgramOutput::kValueCache]), caches.rows},
                     std::move(out[ProgramOutput::kNextTokens]),
                     std::move(out[ProgramOutput::kLogits])};
}

absl::StatusOr<GenerateResult> LlamaModel::Generate(const std::vector<int32_t>& prompt,
                                                    const GenerateOptions& options,
                                                    const std::function<bool(int32_t)>& on_token) {
  SHARDRT_RETURN_IF_ERROR(CheckLoaded());
  const int64_t n = int64_t(prompt.size());
  SHARDRT_RETURN_IF_ERROR(CheckPrompt(prompt, config_.vocab));
  SHARDRT_RETURN_IF_ERROR(CheckFits(n, options.max_tokens));
  SHARDRT_RETURN_IF_ERROR(llm::ValidateSampling(options.sampling));
  const bool sampling = options.sampling.temperature > 0;
  const int64_t lookahead = sampling ? 0 : std::max<int64_t>(options.lookahead, 1);
  const bool need_logits = options.keep_logits || sampling || options.on_logits != nullptr;

  GenerateResult result;
  result.prompt_tokens = n;
  std::optional<llm::Sampler> sampler;
  if (sampling) sampler.emplace(options.sampling);
  const Clock::time_point start = Clock::now();
  Clock::time_point first_token, last_token;

  // The prompt, chunk after chunk, into a cache of one row.
  SHARDRT_ASSIGN_OR_RETURN(KvCaches caches, NewCaches(1));
  StepOutputs state;
  for (int64_t done = 0; done < n;) {
    int64_t run = 0;
    SHARDRT_ASSIGN_OR_RETURN(
        state, ScheduleChunk(std::move(caches), 0, std::span(prompt).subspan(done), done, &run));
    caches = std::move(state.caches);
    done += run;
  }
  state.caches = std::move(caches);
  SHARDRT_ASSIGN_OR_RETURN(ComputationPtr decode, Program({Kind::kDecode, 1, 1}));
  // The token's layout, the same as a decode parameter.
  const std::shared_ptr<const DataLayout> token_layout =
      decode->parameter_layout(DecodeParameter::kTokens);
  if (options_.retention == ProgramRetention::kReleasePrefill) {
    // The executor holds the chunks until they have run; then their memory goes.
    std::vector<ComputationPtr> released;
    {
      MutexLock lock(mu_);
      for (auto it = programs_.begin(); it != programs_.end();) {
        if (it->first.kind == Kind::kChunk) {
          released.push_back(it->second);
          it = programs_.erase(it);
        } else {
          ++it;
        }
      }
    }
    for (const ComputationPtr& program : released) client_.EvictCompiled(*program);
  }

  // Steps scheduled whose token has not been read: (next_tokens, logits) placeholders.
  std::deque<std::pair<DataPtr, DataPtr>> pending;
  pending.emplace_back(state.next_tokens, need_logits ? state.logits : nullptr);
  bool stop = false;
  int64_t scheduled = 1;  // tokens whose step is scheduled
  // Reads the oldest pending token (sampling it from the logits when sampling); false once
  // generation must stop.
  auto read_one = [&]() -> absl::StatusOr<int32_t> {
    auto [token_data, logits_data] = std::move(pending.front());
    pending.pop_front();
    int32_t token;
    std::vector<float> logits;
    if (need_logits) {
      SHARDRT_ASSIGN_OR_RETURN(logits, HostLogits(client_, logits_data, config_.vocab));
    }
    if (sampling) {
      SHARDRT_ASSIGN_OR_RETURN(token, RowToken(-1, logits, &*sampler));
    } else {
      SHARDRT_ASSIGN_OR_RETURN(std::vector<int32_t> ids, HostValues<int32_t>(client_, token_data));
      if (ids.empty()) return absl::InternalError("generate: a step returned no token");
      SHARDRT_ASSIGN_OR_RETURN(token, StepToken(ids[0]));
    }
    last_token = Clock::now();
    if (result.tokens.empty()) first_token = last_token;
    result.tokens.push_back(token);
    if (options.on_logits) {
      SHARDRT_RETURN_IF_ERROR(options.on_logits(int64_t(result.tokens.size()) - 1, logits));
    }
    if (options.keep_logits) result.logits.push_back(std::move(logits));
    const bool is_stop = std::find(options.stop_tokens.begin(), options.stop_tokens.end(),
                                   token) != options.stop_tokens.end();
    if ((on_token && !on_token(token)) || is_stop ||
        int64_t(result.tokens.size()) >= options.max_tokens) {
      stop = true;
    }
    return token;
  };

  DataPtr sampled;  // the host's choice, uploaded, when sampling
  while (!stop) {
    // Read tokens until at most `lookahead` steps are ahead of the host.
    while (!stop && !pending.empty() && int64_t(pending.size()) > lookahead) {
      SHARDRT_ASSIGN_OR_RETURN(int32_t token, read_one());
      if (sampling) {
        const HostArrayView view{ElementType::kS32, {1},
                                 std::as_bytes(std::span<const int32_t>(&token, 1))};
        SHARDRT_ASSIGN_OR_RETURN(sampled, client_.TransferToDevice(view, token_layout));
      }
    }
    if (stop) break;
    if (scheduled >= options.max_tokens) {  // every step is scheduled: read the rest
      SHARDRT_RETURN_IF_ERROR(read_one().status());
      continue;
    }
    // Decode step `scheduled`: the newest token at position n + scheduled - 1.
    const int32_t position = int32_t(n + scheduled - 1), unused = 0;
    DataPtr token = sampling ? sampled : state.next_tokens;
    SHARDRT_ASSIGN_OR_RETURN(state, ScheduleDecode(std::move(state.caches), {&unused, 1},
                                                   {&position, 1}, std::move(token)));
    pending.emplace_back(state.next_tokens, need_logits ? state.logits : nullptr);
    ++scheduled;
  }
  // Steps scheduled past a stop are discarded; wait for them so the caches are released.
  pending.clear();
  state = StepOutputs{};
  SHARDRT_RETURN_IF_ERROR(executor_.WaitForAll());
  result.prefill_seconds = Seconds(start, first_token);
  result.decode_seconds = Seconds(first_token, last_token);
  return result;
}

}  // namespace shardrt::llama
