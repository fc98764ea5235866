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

// Uploads one s32 scalar with `layout`.
absl::StatusOr<DataPtr> UploadScalar(ComputationClient& client, int32_t value,
                                     const std::shared_ptr<const DataLayout>& layout) {
  const HostArrayView view{ElementType::kS32, {},
                           std::as_bytes(std::span<const int32_t>(&value, 1))};
  return client.TransferToDevice(view, layout);
}

absl::StatusOr<int32_t> ReadToken(ComputationClient& client, const DataPtr& token) {
  SHARDRT_ASSIGN_OR_RETURN(std::vector<HostArray> host, client.TransferFromDevice({&token, 1}));
  int32_t id = 0;
  std::memcpy(&id, host[0].data.data(), sizeof(id));
  return id;
}

absl::StatusOr<std::vector<float>> ReadLogits(ComputationClient& client, const DataPtr& logits) {
  SHARDRT_ASSIGN_OR_RETURN(std::vector<HostArray> host, client.TransferFromDevice({&logits, 1}));
  std::vector<float> values(host[0].data.size() / sizeof(float));
  std::memcpy(values.data(), host[0].data.data(), values.size() * sizeof(float));
  return values;
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
  SHARDRT_RETURN_IF_ERROR(CheckPartitions(config, options.partitions));
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
  const int64_t unit = std::lcm(o.granule, o.block);
  o.cache_len = (o.cache_len + unit - 1) / unit * unit;
  const int64_t max_cache = config.context / unit * unit;
  if (o.cache_len > max_cache) {
    return absl::InvalidArgumentError(
        absl::StrCat("cache length ", options.cache_len, ": the model's context holds ",
                     config.context, " positions"));
  }
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
  const auto types = [](const std::optional<NativeWeights>& n) {
    return n ? std::vector<GgufType>{n->token_embd, n->wqkv, n->wo, n->wgu, n->wdown}
             : std::vector<GgufType>{};
  };
  if (file_config.vocab != config_.vocab || file_config.d_model != config_.d_model ||
      file_config.n_layers != config_.n_layers || file_config.ffn != config_.ffn ||
      file_config.n_heads != config_.n_heads || file_config.n_kv_heads != config_.n_kv_heads ||
      types(file_config.native) != types(config_.native)) {
    return absl::InvalidArgumentError(absl::StrCat("GGUF file ", file.path(),
                                                   ": its model has other sizes or weight types than this one"));
  }
  SHARDRT_ASSIGN_OR_RETURN(weights_,
                           llama::LoadWeights(file, config_, options_.partitions, client_));
  return absl::OkStatus();
}

absl::StatusOr<CompileRequest> LlamaModel::Request(bool prefill, int64_t size) const {
  ProgramShape shape{options_.partitions, options_.cache_len, prefill ? size : 0,
                     prefill ? 0 : options_.block};
  SHARDRT_ASSIGN_OR_RETURN(LlamaProgram program,
                           prefill ? EmitPrefill(config_, shape) : EmitDecode(config_, shape));
  CompileRequest request;
  request.name = program.name;
  request.program = std::move(program.mlir);
  request.options.num_partitions = options_.partitions;
  request.global_shapes = GlobalShapes{std::move(program.signature.parameters),
                                       std::move(program.signature.results)};
  return request;
}

absl::StatusOr<ComputationPtr> LlamaModel::Program(bool prefill, int64_t size) {
  {
    MutexLock lock(mu_);
    auto it = programs_.find({prefill, size});
    if (it != programs_.end()) return it->second;
  }
  // Compiled without the lock, so that several programs compile at once (Prepare); two
  // threads asking for the same program both compile it and the first one kept wins.
  SHARDRT_ASSIGN_OR_RETURN(CompileRequest request, Request(prefill, size));
  SHARDRT_ASSIGN_OR_RETURN(ComputationPtr computation, client_.Compile(request));
  MutexLock lock(mu_);
  return programs_.emplace(std::make_pair(prefill, size), computation).first->second;
}

absl::StatusOr<std::vector<std::pair<bool, int64_t>>> LlamaModel::Needed(
    int64_t prompt_len, int64_t max_tokens) const {
  if (prompt_len < 1 || max_tokens < 1 || prompt_len + max_tokens - 1 > options_.cache_len) {
    return absl::InvalidArgumentError(absl::StrCat(
        "prepare: a prompt of ", prompt_len, " tokens and ", max_tokens,
        " generated tokens do not fit the cache of ", options_.cache_len, " positions"));
  }
  // The prompt's prefill bucket and the decode step.
  return std::vector<std::pair<bool, int64_t>>{
      {true, Bucket(prompt_len, options_.granule, options_.cache_len)}, {false, 0}};
}

absl::Status LlamaModel::Precompile(int64_t prompt_len, int64_t max_tokens) {
  SHARDRT_ASSIGN_OR_RETURN(auto wanted, Needed(prompt_len, max_tokens));
  return ParallelFor(client_.pool(), int64_t(wanted.size()), ParallelCost{.per_item_ns = 1e9},
                     [&](int64_t begin, int64_t end) -> absl::Status {
                       for (int64_t i = begin; i < end; ++i) {
                         SHARDRT_ASSIGN_OR_RETURN(CompileRequest request,
                                                  Request(wanted[i].first, wanted[i].second));
                         SHARDRT_RETURN_IF_ERROR(client_.Precompile(request));
                       }
                       return absl::OkStatus();
                     });
}

absl::StatusOr<bool> LlamaModel::IsPrecompiled(int64_t prompt_len, int64_t max_tokens) {
  SHARDRT_ASSIGN_OR_RETURN(auto wanted, Needed(prompt_len, max_tokens));
  for (const auto& [prefill, size] : wanted) {
    SHARDRT_ASSIGN_OR_RETURN(CompileRequest request, Request(prefill, size));
    SHARDRT_ASSIGN_OR_RETURN(bool compiled, client_.IsCompiled(request));
    if (!compiled) return false;
  }
  return true;
}

absl::Status LlamaModel::Prepare(int64_t prompt_len, int64_t max_tokens,
                                 const std::function<void()>& after_each_load) {
  SHARDRT_RETURN_IF_ERROR(Precompile(prompt_len, max_tokens));
  SHARDRT_ASSIGN_OR_RETURN(auto wanted, Needed(prompt_len, max_tokens));
  for (const auto& [prefill, size] : wanted) {
    SHARDRT_RETURN_IF_ERROR(Program(prefill, size).status());
    if (after_each_load) after_each_load();
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<DataPtr>> LlamaModel::SchedulePrefill(
    const std::vector<int32_t>& prompt, int64_t bucket, const ComputationPtr& prefill) {
  // The prompt padded to the bucket, and its length.
  std::vector<int32_t> padded(prompt);
  padded.resize(bucket, prompt.back());
  const int32_t length = int32_t(prompt.size());
  const HostArrayView inputs[] = {
      {ElementType::kS32, {bucket}, std::as_bytes(std::span<const int32_t>(padded))},
      {ElementType::kS32, {}, std::as_bytes(std::span<const int32_t>(&length, 1))}};
  const std::shared_ptr<const DataLayout> input_layouts[] = {
      prefill->parameter_layout(PrefillParameter::kTokens),
      prefill->parameter_layout(PrefillParameter::kLength)};
  SHARDRT_ASSIGN_OR_RETURN(std::vector<DataPtr> args,
                           client_.TransferToDevice(inputs, input_layouts));
  args.insert(args.end(), weights_.begin(), weights_.end());
  return executor_.Schedule(prefill, std::move(args));
}

absl::StatusOr<std::vector<DataPtr>> LlamaModel::ScheduleDecode(const ComputationPtr& decode,
                                                                std::vector<DataPtr> state,
                                                                DataPtr token,
                                                                int32_t position) {
  std::vector<DataPtr> step(DecodeParameter::kFirstWeight);
  SHARDRT_ASSIGN_OR_RETURN(step[DecodeParameter::kPosition],
                           UploadScalar(client_, position,
                                        decode->parameter_layout(DecodeParameter::kPosition)));
  step[DecodeParameter::kKeyCache] = std::move(state[ProgramOutput::kKeyCache]);
  step[DecodeParameter::kValueCache] = std::move(state[ProgramOutput::kValueCache]);
  step[DecodeParameter::kToken] = std::move(token);
  step.insert(step.end(), weights_.begin(), weights_.end());
  return executor_.Schedule(decode, std::move(step));
}

absl::StatusOr<GenerateResult> LlamaModel::Generate(const std::vector<int32_t>& prompt,
                                                    const GenerateOptions& options,
                                                    const std::function<bool(int32_t)>& on_token) {
  if (weights_.empty()) {
    return absl::FailedPreconditionError("generate: the model's weights are not loaded");
  }
  const int64_t n = int64_t(prompt.size());
  SHARDRT_RETURN_IF_ERROR(CheckPrompt(prompt, config_.vocab));
  SHARDRT_RETURN_IF_ERROR(CheckFits(n, options.max_tokens));
  SHARDRT_RETURN_IF_ERROR(llm::ValidateSampling(options.sampling));
  const bool sampling = options.sampling.temperature > 0;
  const int64_t lookahead = sampling ? 0 : std::max<int64_t>(options.lookahead, 1);
  const bool need_logits = options.keep_logits || sampling;

  const int64_t bucket = Bucket(n, options_.granule, options_.cache_len);
  SHARDRT_ASSIGN_OR_RETURN(ComputationPtr prefill, Program(true, bucket));

  GenerateResult result;
  result.prompt_tokens = n;
  std::optional<llm::Sampler> sampler;
  if (sampling) sampler.emplace(options.sampling);
  const Clock::time_point start = Clock::now();
  Clock::time_point first_token, last_token;

  SHARDRT_ASSIGN_OR_RETURN(std::vector<DataPtr> state, SchedulePrefill(prompt, bucket, prefill));
  SHARDRT_ASSIGN_OR_RETURN(ComputationPtr decode, Program(false, 0));
  // The token's layout, the same as a prefill output and a decode parameter.
  const std::shared_ptr<const DataLayout> token_layout =
      prefill->output_layout(ProgramOutput::kNextToken);
  if (options_.retention == ProgramRetention::kReleasePrefill) {
    // The executor holds the prefill until it has run; then its memory goes.
    {
      MutexLock lock(mu_);
      programs_.erase({true, bucket});
    }
    client_.EvictCompiled(*prefill);
    prefill.reset();
  }

  // Steps scheduled whose token has not been read: (next_token, logits) placeholders.
  std::deque<std::pair<DataPtr, DataPtr>> pending;
  pending.emplace_back(state[ProgramOutput::kNextToken],
                       need_logits ? state[ProgramOutput::kLogits] : nullptr);
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
      SHARDRT_ASSIGN_OR_RETURN(logits, ReadLogits(client_, logits_data));
    }
    if (sampling) {
      token = sampler->Sample(logits);
    } else {
      SHARDRT_ASSIGN_OR_RETURN(token, ReadToken(client_, token_data));
    }
    last_token = Clock::now();
    if (result.tokens.empty()) first_token = last_token;
    result.tokens.push_back(token);
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
        SHARDRT_ASSIGN_OR_RETURN(sampled, UploadScalar(client_, token, token_layout));
      }
    }
    if (stop) break;
    if (scheduled >= options.max_tokens) {  // every step is scheduled: read the rest
      SHARDRT_RETURN_IF_ERROR(read_one().status());
      continue;
    }
    // Decode step `scheduled`: the newest token at position n + scheduled - 1.
    DataPtr token = sampling ? sampled : state[ProgramOutput::kNextToken];
    SHARDRT_ASSIGN_OR_RETURN(state, ScheduleDecode(decode, std::move(state), std::move(token),
                                                   int32_t(n + scheduled - 1)));
    pending.emplace_back(state[ProgramOutput::kNextToken],
                       need_logits ? state[ProgramOutput::kLogits] : nullptr);
    ++scheduled;
  }
  // Steps scheduled past a stop are discarded; wait for them so the caches are released.
  pending.clear();
  state.clear();
  SHARDRT_RETURN_IF_ERROR(executor_.WaitForAll());
  result.prefill_seconds = Seconds(start, first_token);
  result.decode_seconds = Seconds(first_token, last_token);
  return result;
}

}  // namespace shardrt::llama
