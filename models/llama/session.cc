#include "shardrt/llm/session.h"

#include <algorithm>
#include <atomic>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "llama/chat.h"
#include "llama/gguf.h"
#include "llama/llama_config.h"
#include "llama/llama_model.h"
#include "llama/quant_ffi.h"
#include "llama/session_state.h"
#include "llama/token_stream.h"
#include "llama/tokenizer.h"
#include "llama/utf8.h"
#include "shardrt/base/mutex.h"
#include "shardrt/base/status_macros.h"

namespace shardrt::llm {

std::string_view FinishReasonName(FinishReason reason) {
  switch (reason) {
    case FinishReason::kStopToken:
      return "stop_token";
    case FinishReason::kStopString:
      return "stop_string";
    case FinishReason::kMaxTokens:
      return "max_tokens";
    case FinishReason::kCallback:
      return "callback";
    case FinishReason::kCancelled:
      return "cancelled";
  }
  return "unknown";
}

double GenerateStats::prefill_tokens_per_second() const {
  return prefill_seconds > 0 ? double(prompt_tokens) / prefill_seconds : 0.0;
}

double GenerateStats::decode_tokens_per_second() const {
  return generated_tokens > 1 && decode_seconds > 0
             ? double(generated_tokens - 1) / decode_seconds
             : 0.0;
}

Session::Session(std::unique_ptr<State> state) : state_(std::move(state)) {}
Session::~Session() = default;

namespace {

// `value` when set, else `fallback`; the options' zero means "the default".
int64_t OrDefault(int64_t value, int64_t fallback) { return value != 0 ? value : fallback; }

absl::Status CheckOptions(const SessionOptions& options) {
  if (options.model_path.empty()) {
    return absl::InvalidArgumentError("session: no model path (SessionOptions::model_path)");
  }
  for (auto [name, value] : {std::pair<const char*, int64_t>{"devices", options.devices},
                             {"context_length", options.context_length},
                             {"attention_block", options.attention_block}}) {
    if (value < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("session: ", name, " ", value, ": expected >= 0 (0: the default)"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<Session>> Session::Open(Runtime& runtime,
                                                       const SessionOptions& options) {
  SHARDRT_RETURN_IF_ERROR(CheckOptions(options));
  auto state = std::make_unique<State>();
  state->runtime = &runtime;
  const int64_t available = int64_t(runtime.devices().size());
  state->devices = OrDefault(options.devices, available);
  if (state->devices > available) {
    return absl::InvalidArgumentError(absl::StrCat("session: ", state->devices,
                                                   " devices asked for; the runtime has ",
                                                   available));
  }
  // Not shared yet; locked for the analysis' sake.
  MutexLock lock(state->mu);
  SHARDRT_ASSIGN_OR_RETURN(state->file, llama::GgufFile::Open(options.model_path));
  SHARDRT_ASSIGN_OR_RETURN(state->config,
                           llama::LlamaConfig::FromGguf(*state->file, options.weights));
  if (options.weights == WeightFormat::kNative) {
    SHARDRT_RETURN_IF_ERROR(llama::RegisterModelKernels(runtime));
  }
  {
    // Only the tokenizer's data is read now; it is made when text is first needed. The stop
    // tokens are looked up in the vocabulary it read (the file's is read again only without it).
    MutexLock tokenizer_lock(state->tokenizer_mu);
    state->tokenizer_data = llama::ReadTokenizerData(*state->file);
    state->model_stop_tokens =
        state->tokenizer_data.ok()
            ? llama::ModelStopTokens(*state->file, state->tokenizer_data->tokens)
            : llama::ModelStopTokens(*state->file);
  }
  state->chat_format = llama::ReadChatFormat(*state->file);

  const llama::LlamaConfig& c = state->config;
  state->info = ModelInfo{.architecture = c.architecture == llama::Architecture::kQwen2 ? "qwen2"
                                                                                : "llama",
                          .name = state->file->GetString("general.name").value_or(""),
                          .vocab = c.vocab,
                          .context = c.context,
                          .layers = c.n_layers,
                          .d_model = c.d_model,
                          .heads = c.n_heads,
                          .kv_heads = c.n_kv_heads};
  const int64_t p = state->devices;
  llama::ModelOptions model_options;
  model_options.partitions = p;
  model_options.weights = options.weights;
  model_options.granule = 16 % p == 0 ? 16 : p * 8;
  model_options.block = OrDefault(options.attention_block, 256 % p == 0 ? 256 : p * 32);
  model_options.cache_len = OrDefault(options.context_length, std::min<int64_t>(2048, c.context));
  model_options.retention = options.retention == ProgramRetention::kReleasePrefill
                                ? llama::ProgramRetention::kReleasePrefill
                                : llama::ProgramRetention::kKeepAll;
  state->model_options = model_options;
  SHARDRT_ASSIGN_OR_RETURN(state->model,
                           llama::LlamaModel::Create(state->config, runtime.client(),
                                                     runtime.executor(), model_options));
  state->context_length = state->model->cache_len();
  lock.Unlock();
  return std::unique_ptr<Session>(new Session(std::move(state)));
}

absl::Status Session::SetContextLength(int64_t positions) {
  if (positions < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("session: context length ", positions, ": expected >= 0 (0: the default)"));
  }
  MutexLock lock(state_->mu);
  if (loaded()) {
    return absl::FailedPreconditionError(
        "session: the context length cannot change once the weights are loaded");
  }
  llama::ModelOptions options = state_->model_options;
  options.cache_len = OrDefault(positions, std::min<int64_t>(2048, state_->config.context));
  // The model holds no weights yet: a new one costs nothing but its (uncompiled) programs.
  SHARDRT_ASSIGN_OR_RETURN(state_->model,
                           llama::LlamaModel::Create(state_->config, state_->runtime->client(),
                                                     state_->runtime->executor(), options));
  state_->model_options = options;
  state_->context_length = state_->model->cache_len();
  return absl::OkStatus();
}

const ModelInfo& Session::info() const { return state_->info; }
int64_t Session::devices() const { return state_->devices; }
int64_t Session::context_length() const {
  return state_->context_length.load(std::memory_order_acquire);
}
bool Session::loaded() const { return state_->loaded.load(std::memory_order_acquire); }

absl::StatusOr<const llama::Tokenizer*> Session::State::Tokenizer() const {
  MutexLock lock(tokenizer_mu);
  if (tokenizer == nullptr && tokenizer_error.ok()) {
    if (!tokenizer_data.ok()) {
      tokenizer_error = tokenizer_data.status();
    } else {
      absl::StatusOr<std::unique_ptr<llama::Tokenizer>> made =
          llama::Tokenizer::Create(*std::move(tokenizer_data));
      if (made.ok()) {
        tokenizer = *std::move(made);
      } else {
        tokenizer_error = made.status();
      }
      tokenizer_data = absl::FailedPreconditionError("the tokenizer's data was used");
    }
  }
  if (tokenizer == nullptr) return tokenizer_error;
  return tokenizer.get();
}

absl::StatusOr<const llama::Tokenizer*> Session::State::TextFor(
    const GenerateRequest& request) const {
  absl::StatusOr<const llama::Tokenizer*> tokenizer = Tokenizer();
  if (tokenizer.ok()) return tokenizer;
  if (!request.prompt.empty() || !request.stop.strings.empty()) {
    return absl::Status(tokenizer.status().code(),
                        absl::StrCat("the request needs text (a text prompt or stop strings): ",
                                     tokenizer.status().message()));
  }
  return nullptr;
}

absl::Status Session::TextStatus() const { return state_->Tokenizer().status(); }

absl::StatusOr<std::vector<int32_t>> Session::Tokenize(std::string_view text) const {
  SHARDRT_ASSIGN_OR_RETURN(const llama::Tokenizer* tokenizer, state_->Tokenizer());
  return tokenizer->Encode(absl::string_view(text.data(), text.size()));
}

absl::StatusOr<std::string> Session::Detokenize(std::span<const int32_t> tokens) const {
  SHARDRT_ASSIGN_OR_RETURN(const llama::Tokenizer* tokenizer, state_->Tokenizer());
  return tokenizer->Decode(absl::MakeConstSpan(tokens.data(), tokens.size()));
}

absl::StatusOr<std::string> Session::ApplyChatTemplate(
    std::span<const ChatMessage> messages) const {
  if (!state_->chat_format.ok()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the model has no chat template this session can apply: ",
        state_->chat_format.status().message()));
  }
  return llama::ChatMessagesPrompt(*state_->chat_format,
                                   absl::MakeConstSpan(messages.data(), messages.size()));
}

absl::StatusOr<std::vector<int32_t>> Session::PromptTokens(const GenerateRequest& request) const {
  const bool has_text = !request.prompt.empty(), has_tokens = !request.prompt_tokens.empty();
  if (has_text == has_tokens) {
    return absl::InvalidArgumentError(
        "request: set exactly one of prompt (text) and prompt_tokens (ids)");
  }
  std::vector<int32_t> tokens;
  if (has_tokens) {
    if (request.format != PromptFormat::kRaw || !request.system.empty()) {
      return absl::InvalidArgumentError(
          "request: the chat format and the system turn apply to a text prompt, not to "
          "prompt_tokens");
    }
    tokens = request.prompt_tokens;
  } else {
    if (request.format == PromptFormat::kRaw && !request.system.empty()) {
      return absl::InvalidArgumentError("request: a system turn needs PromptFormat::kChat");
    }
    std::string text = request.prompt;
    if (request.format == PromptFormat::kChat) {
      ChatMessage turns[2] = {{"system", request.system}, {"user", request.prompt}};
      SHARDRT_ASSIGN_OR_RETURN(text, ApplyChatTemplate(request.system.empty()
                                                           ? std::span(turns + 1, 1)
                                                           : std::span(turns, 2)));
    }
    SHARDRT_ASSIGN_OR_RETURN(const llama::Tokenizer* tokenizer, state_->Tokenizer());
    SHARDRT_ASSIGN_OR_RETURN(tokens, tokenizer->Encode(absl::string_view(text.data(), text.size())));
    // A model that expects BOS first (SentencePiece-style files, Llama 3) gets it, unless the
    // chat template already wrote it.
    if (tokenizer->add_bos() && tokenizer->bos_id() >= 0 &&
        (tokens.empty() || tokens.front() != tokenizer->bos_id())) {
      tokens.insert(tokens.begin(), tokenizer->bos_id());
    }
  }
  SHARDRT_RETURN_IF_ERROR(llama::CheckPrompt(tokens, state_->config.vocab));
  return tokens;
}

absl::Status Session::Precompile(int64_t prompt_tokens, int64_t max_tokens) {
  MutexLock lock(state_->mu);
  return state_->model->Precompile(prompt_tokens, max_tokens);
}

absl::StatusOr<bool> Session::IsPrecompiled(int64_t prompt_tokens, int64_t max_tokens) {
  MutexLock lock(state_->mu);
  return state_->model->IsPrecompiled(prompt_tokens, max_tokens);
}

namespace {

// Session::Load's work, with the session's mutex held.
absl::Status LoadLocked(std::unique_ptr<llama::GgufFile>& file, llama::LlamaModel& model,
                        std::atomic<bool>& loaded) {
  if (loaded.load(std::memory_order_acquire)) return absl::OkStatus();
  SHARDRT_RETURN_IF_ERROR(model.LoadWeights(*file));
  // The weights are on the devices: the file's mapping can go.
  file.reset();
  loaded.store(true, std::memory_order_release);
  return absl::OkStatus();
}

}  // namespace

absl::Status Session::Load() {
  MutexLock lock(state_->mu);
  return LoadLocked(state_->file, *state_->model, state_->loaded);
}

absl::Status Session::Prepare(int64_t prompt_tokens, int64_t max_tokens,
                              const std::function<void()>& after_each_load) {
  MutexLock lock(state_->mu);
  return state_->model->Prepare(prompt_tokens, max_tokens, after_each_load);
}

std::vector<int32_t> Session::State::StopTokens(const StopConditions& stop) const {
  std::vector<int32_t> tokens = stop.tokens;
  if (stop.model_tokens == ModelStopTokens::kStop) {
    tokens.insert(tokens.end(), model_stop_tokens.begin(), model_stop_tokens.end());
  }
  return tokens;
}

absl::Status CheckRequestOptions(const GenerateRequest& request) {
  SHARDRT_RETURN_IF_ERROR(ValidateSampling(request.sampling));
  for (const std::string& s : request.stop.strings) {
    if (s.empty()) return absl::InvalidArgumentError("request: an empty stop string");
  }
  if (request.logits == LogitsOutput::kStream && !request.on_logits) {
    return absl::InvalidArgumentError("request: LogitsOutput::kStream needs on_logits");
  }
  return absl::OkStatus();
}

absl::StatusOr<GenerateResult> Session::Generate(const GenerateRequest& request,
                                                 const TokenCallback& on_token) {
  // Everything about the request is checked before anything is loaded or compiled.
  SHARDRT_ASSIGN_OR_RETURN(std::vector<int32_t> prompt, PromptTokens(request));
  SHARDRT_RETURN_IF_ERROR(CheckRequestOptions(request));
  MutexLock lock(state_->mu);
  SHARDRT_RETURN_IF_ERROR(state_->model->CheckFits(int64_t(prompt.size()), request.max_tokens));
  SHARDRT_RETURN_IF_ERROR(LoadLocked(state_->file, *state_->model, state_->loaded));

  llama::GenerateOptions options;
  options.max_tokens = request.max_tokens;
  options.sampling = request.sampling;
  options.keep_logits = request.logits == LogitsOutput::kKeep;
  if (request.logits == LogitsOutput::kStream) options.on_logits = request.on_logits;
  options.stop_tokens = state_->StopTokens(request.stop);

  SHARDRT_ASSIGN_OR_RETURN(const llama::Tokenizer* tokenizer, state_->TextFor(request));
  llama::TokenStream stream(tokenizer, request, options.stop_tokens, on_token);
  absl::Status stream_status;
  auto on_model_token = [&](int32_t token) -> bool {
    absl::StatusOr<bool> more = stream.Push(token);
    if (!more.ok()) stream_status = more.status();
    return more.ok() && *more;
  };
  SHARDRT_ASSIGN_OR_RETURN(llama::GenerateResult generated,
                           state_->model->Generate(prompt, options, on_model_token));
  SHARDRT_RETURN_IF_ERROR(stream_status);
  GenerateResult result =
      stream.Result(std::move(prompt), GenerateStats{.prompt_tokens = generated.prompt_tokens,
                                                     .prefill_seconds = generated.prefill_seconds,
                                                     .decode_seconds = generated.decode_seconds});
  result.logits = std::move(generated.logits);
  return result;
}

}  // namespace shardrt::llm
