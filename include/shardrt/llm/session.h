// Session: a language model loaded on a Runtime's devices, ready to generate text.
//
//   auto runtime = shardrt::Runtime::Create({.devices = 8});
//   auto session = shardrt::llm::Session::Open(**runtime, {.model_path = "model.gguf"});
//   shardrt::llm::GenerateRequest request;
//   request.prompt = "The capital of France is";
//   auto result = (*session)->Generate(request, [](const shardrt::llm::TokenEvent& e) {
//     std::cout << e.text << std::flush;                  // streams as tokens arrive
//     return shardrt::llm::StreamControl::kContinue;
//   });
//
// A session reads a Llama-family GGUF file (`llama` or `qwen2`: its tokenizer, chat template
// and sizes), splits the model over `devices` devices (tensor parallel: attention features and
// MLP columns, in equal shares, padded where a width does not divide),
// and runs each request as a prefill program and one decode step per token on the runtime's
// asynchronous executor. Programs compile on first use, into the runtime's persistent compile
// cache when it has one. Steps can be taken one at a time (Precompile, Load, Prepare) by
// callers that want to control when compilation and loading happen and what memory they
// hold; Generate does whatever is still missing.
//
// Ownership: the session borrows the Runtime, which must outlive it; it owns the model's
// weights on the devices and its compiled programs. Thread safety: every method may be called
// from any thread; Generate runs one request at a time per session (a second caller waits for
// the first); the read-only methods (Tokenize, Detokenize, ApplyChatTemplate, PromptTokens,
// info) run concurrently with a generation.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "shardrt/base/export.h"
#include "shardrt/llm/cancellation.h"
#include "shardrt/llm/chat.h"
#include "shardrt/llm/sampling.h"
#include "shardrt/llm/weight_format.h"
#include "shardrt/runtime/runtime.h"

namespace shardrt::llm {

// Which compiled programs a session keeps after using them.
enum class ProgramRetention {
  kKeepAll,  // every program stays compiled: repeated requests compile nothing (default)
  // A prompt's prefill program is released once it has run: a process that answers one
  // request holds only the decode step while it decodes; a later request compiles its
  // prefill again (or loads it from the persistent compile cache).
  kReleasePrefill,
};

struct SHARDRT_EXPORT SessionOptions {
  std::string model_path;  // a Llama-family GGUF file (llama, qwen2)
  // Devices the model is split over (the first ones of the runtime); 0: all of them.
  int64_t devices = 0;
  // Positions the key/value cache holds: a request's prompt plus its generated tokens must
  // fit. Rounded up to the programs' granularity; at most the model's context. 0: 2048, or the
  // model's context when smaller.
  int64_t context_length = 0;
  // Positions per iteration of the decode step's attention loop; 0: 256, or 32 per device when
  // 256 is not a multiple of the devices. Must be a multiple of the devices.
  int64_t attention_block = 0;
  ProgramRetention retention = ProgramRetention::kKeepAll;
  // The weight matrices as their GGUF blocks (native, the default: the quantized kernels are
  // registered with the runtime's plugin at Open) or dequantized to f32.
  WeightFormat weights = WeightFormat::kNative;
};

// How GenerateRequest::prompt is turned into tokens.
enum class PromptFormat {
  kRaw,   // tokenized as it is
  kChat,  // wrapped in the model's chat template as one user turn (with `system`, if set)
};

// Whether the model's own end tokens (end of text, end of turn) end a generation.
enum class ModelStopTokens { kStop, kIgnore };

struct SHARDRT_EXPORT StopConditions {
  ModelStopTokens model_tokens = ModelStopTokens::kStop;
  std::vector<int32_t> tokens;       // more token ids that end a generation
  std::vector<std::string> strings;  // text that ends a generation (not part of the answer)
};

// Whether a generation returns every step's logits (a download of the vocabulary per token):
// kKeep keeps them all in GenerateResult::logits; kStream hands each step's to
// GenerateRequest::on_logits as it comes and keeps none (a long generation's logits never
// gather in memory).
enum class LogitsOutput { kDiscard, kKeep, kStream };

struct SHARDRT_EXPORT GenerateRequest {
  // The prompt: text (`prompt`), or token ids (`prompt_tokens`, used as they are). Exactly one
  // of the two is set.
  std::string prompt;
  std::vector<int32_t> prompt_tokens;
  PromptFormat format = PromptFormat::kRaw;  // for `prompt`
  std::string system;                        // kChat: the system turn; empty: the template's
  int64_t max_tokens = 128;                  // generated tokens at most, a stop token included
  SamplingOptions sampling;
  StopConditions stop;
  LogitsOutput logits = LogitsOutput::kDiscard;
  // With LogitsOutput::kStream: called with each generated token's index and its logits (the
  // vocabulary's values, valid during the call only), on the thread that runs Generate, before
  // the token's callback. An error ends Generate with it. Session::Generate only (the
  // Scheduler refuses kStream).
  std::function<absl::Status(int64_t index, std::span<const float> logits)> on_logits;
  // Checked before each token is handed out: once cancelled, the generation ends with
  // FinishReason::kCancelled. Borrowed; may be null.
  const Cancellation* cancel = nullptr;
};

// Why a generation ended.
enum class FinishReason {
  kStopToken,   // a stop token (the model's or the request's)
  kStopString,  // one of the request's stop strings
  kMaxTokens,   // max_tokens were generated
  kCallback,    // the token callback returned StreamControl::kStop
  kCancelled,   // the request's Cancellation was cancelled
};
// "stop_token", "stop_string", "max_tokens", "callback", "cancelled".
SHARDRT_EXPORT std::string_view FinishReasonName(FinishReason reason);

// One generated token, as the callback sees it.
struct SHARDRT_EXPORT TokenEvent {
  int32_t token = 0;
  int64_t index = 0;      // among the generated tokens, from 0
  std::string_view text;  // the answer's text this token completes: whole UTF-8 characters,
                          // possibly empty (held back while it may begin a stop string or
                          // ends inside a character; a stop token adds none)
};

enum class StreamControl { kContinue, kStop };
// Called on the generating thread for each token, in order, as soon as it is on the host.
using TokenCallback = std::function<StreamControl(const TokenEvent&)>;

struct SHARDRT_EXPORT GenerateStats {
  int64_t prompt_tokens = 0;
  int64_t generated_tokens = 0;
  double prefill_seconds = 0;  // from the prompt's upload to the first token on the host
  double decode_seconds = 0;   // from the first token to the last
  // prompt_tokens / prefill_seconds, and (generated_tokens - 1) / decode_seconds (0 when
  // undefined).
  double prefill_tokens_per_second() const;
  double decode_tokens_per_second() const;
};

struct SHARDRT_EXPORT GenerateResult {
  std::vector<int32_t> prompt_tokens;  // as the model saw them
  std::vector<int32_t> tokens;         // generated, in order (a stop token included)
  // The answer: the tokens' text without stop tokens, cut before a stop string; bytes that are
  // not valid UTF-8 (a generation can end inside a character) replaced by U+FFFD.
  std::string text;
  FinishReason finish_reason = FinishReason::kMaxTokens;
  GenerateStats stats;
  std::vector<std::vector<float>> logits;  // LogitsOutput::kKeep: one row per generated token
};

// What a session's model is.
struct SHARDRT_EXPORT ModelInfo {
  std::string architecture;  // "llama"
  std::string name;          // general.name, when the file has one
  int64_t vocab = 0;
  int64_t context = 0;  // positions the model was trained for
  int64_t layers = 0;
  int64_t d_model = 0;
  int64_t heads = 0;
  int64_t kv_heads = 0;
};

class SHARDRT_EXPORT Session {
 public:
  // Reads the model file's metadata, tokenizer and chat template (weights stay in the file
  // until Load). Errors: InvalidArgument for options out of range or a model that cannot be
  // split over the devices (naming both); the file's errors (NotFound, a file that is not a
  // supported GGUF model, naming the file).
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<Session>> Open(
      Runtime& runtime, const SessionOptions& options);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  const ModelInfo& info() const;
  int64_t devices() const;
  int64_t context_length() const;  // after rounding (SessionOptions::context_length)

  // Changes the positions the key/value cache holds (as SessionOptions::context_length; 0:
  // the default), for a caller that sizes it to its first request: e.g. a one-shot command
  // that tokenizes its prompt first, so that the cache holds exactly what it needs. Errors:
  // FailedPrecondition once the weights are loaded (Load, Generate); InvalidArgument for a
  // length beyond the model's context or below 0.
  [[nodiscard]] absl::Status SetContextLength(int64_t positions);

  // Whether this session has text: OK, or why not (the file's tokenizer is missing or not
  // supported; the error names the key or model and the supported ones). The tokenizer is
  // made the first time text is tokenized or decoded, so that a file whose tokenizer this
  // session cannot read still runs prompt_tokens (its tokens then come without text).
  // Thread-safe.
  [[nodiscard]] absl::Status TextStatus() const;
  // Text to token ids (special tokens such as <|im_end|> are matched literally; no BOS).
  // Errors: InvalidArgument for text over the tokenizer's limit; TextStatus()'s.
  [[nodiscard]] absl::StatusOr<std::vector<int32_t>> Tokenize(std::string_view text) const;
  // Token ids to text (bytes as the tokens hold them). Errors: InvalidArgument for an id
  // outside the vocabulary; TextStatus()'s.
  [[nodiscard]] absl::StatusOr<std::string> Detokenize(std::span<const int32_t> tokens) const;
  // A conversation as the model's chat template writes it, ending with the opening of the
  // assistant's turn. Errors: InvalidArgument for an empty conversation or a bad role;
  // FailedPrecondition when the model has no (supported) chat template.
  [[nodiscard]] absl::StatusOr<std::string> ApplyChatTemplate(
      std::span<const ChatMessage> messages) const;
  // The token ids Generate feeds the model for `request` (format applied, tokenized, checked
  // against the vocabulary). Errors: InvalidArgument naming what is wrong with the prompt.
  [[nodiscard]] absl::StatusOr<std::vector<int32_t>> PromptTokens(
      const GenerateRequest& request) const;

  // Compiles the programs a request of `prompt_tokens` and `max_tokens` uses, several at
  // once, into the runtime's persistent compile cache (nothing is loaded), or into memory
  // without one. Errors: InvalidArgument when they do not fit the context; compile errors.
  [[nodiscard]] absl::Status Precompile(int64_t prompt_tokens, int64_t max_tokens);
  // Whether Precompile would compile nothing. Errors: as Precompile's, before compiling.
  [[nodiscard]] absl::StatusOr<bool> IsPrecompiled(int64_t prompt_tokens, int64_t max_tokens);
  // Uploads the weights (each device receives only its shards) and lets go of the file; does
  // nothing when they are loaded. Errors: the file's (a tensor missing or damaged, naming it);
  // the plugin's.
  [[nodiscard]] absl::Status Load();
  bool loaded() const;
  // Precompile, then loads those programs one at a time, calling `after_each_load` (if set)
  // on this thread after each. Errors: Precompile's; load errors.
  [[nodiscard]] absl::Status Prepare(int64_t prompt_tokens, int64_t max_tokens,
                                     const std::function<void()>& after_each_load = nullptr);

  // Generates an answer to `request`, loading and compiling whatever is missing first, and
  // calls `on_token` (if set) for each token as it arrives. Ends at a stop condition, after
  // max_tokens, when the callback says kStop, or when cancelled: all of these return a result.
  // Errors (before anything runs): InvalidArgument for a bad request (prompt, max_tokens,
  // sampling, a prompt and max_tokens that do not fit the context, naming them); Load's,
  // compile and execution errors.
  [[nodiscard]] absl::StatusOr<GenerateResult> Generate(const GenerateRequest& request,
                                                        const TokenCallback& on_token = nullptr);

 private:
  friend class Scheduler;
  struct State;
  explicit Session(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace shardrt::llm
