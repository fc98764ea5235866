// TokenStream: the text side of one generation. Each token the model generates becomes the
// TokenEvent the caller's callback sees (whole UTF-8 characters, stop strings held back and
// cut), and the stream decides when the generation ends: a stop token, a stop string,
// max_tokens, the callback's kStop, or the request's Cancellation. Session::Generate and the
// Scheduler both run their requests through one.
//
// Thread safety: one generation's; not shared (used by the thread that runs it).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "llama/stop_text.h"
#include "llama/tokenizer.h"
#include "shardrt/llm/session.h"

namespace shardrt::llama {

class TokenStream {
 public:
  // `stop_tokens`: every token id that ends the generation (the model's, when the request
  // keeps them, and the request's). Borrows `tokenizer` (null: no text; every event's text is
  // empty), `request` and `on_token` (may be null), which must outlive the stream.
  TokenStream(const Tokenizer* tokenizer, const llm::GenerateRequest& request,
              std::vector<int32_t> stop_tokens, const llm::TokenCallback& on_token);

  // Whether the request's Cancellation is raised; once it is, Push ends the generation.
  bool cancelled() const;
  // Takes the next generated token: hands its event to the callback and returns whether the
  // generation goes on. Error: the tokenizer's (an id outside the vocabulary).
  [[nodiscard]] absl::StatusOr<bool> Push(int32_t token);
  // Ends a generation the caller stops for its own reasons (e.g. cancelled before its first
  // token): the finish reason becomes `reason` unless one is set.
  void End(llm::FinishReason reason);

  // Whether the generation has ended (Push returned false, or End).
  bool ended() const { return reason_.has_value(); }
  const std::vector<int32_t>& stop_tokens() const { return stop_tokens_; }
  const std::vector<int32_t>& tokens() const { return tokens_; }
  // The result so far: tokens, answer text (invalid UTF-8 replaced), finish reason (kMaxTokens
  // until another one is set). `prompt` and `stats` are the caller's.
  llm::GenerateResult Result(std::vector<int32_t> prompt, const llm::GenerateStats& stats) const;

 private:
  const llm::GenerateRequest& request_;
  const std::vector<int32_t> stop_tokens_;
  const llm::TokenCallback& on_token_;
  std::optional<StreamDecoder> decoder_;  // none without a tokenizer
  StopText text_;
  std::vector<int32_t> tokens_;
  std::optional<llm::FinishReason> reason_;
};

}  // namespace shardrt::llama
