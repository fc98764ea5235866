#include "llama/token_stream.h"

#include <algorithm>
#include <string>
#include <utility>

#include "llama/utf8.h"

namespace shardrt::llama {

TokenStream::TokenStream(const Tokenizer* tokenizer, const llm::GenerateRequest& request,
                         std::vector<int32_t> stop_tokens, const llm::TokenCallback& on_token)
    : request_(request),
      stop_tokens_(std::move(stop_tokens)),
      on_token_(on_token),
      text_(request.stop.strings) {
  // The tokens continue the prompt: a leading space of their text is kept.
  if (tokenizer != nullptr) decoder_.emplace(*tokenizer, StreamDecoder::Position::kContinuation);
}

bool TokenStream::cancelled() const {
  return request_.cancel != nullptr && request_.cancel->cancelled();
}

void TokenStream::End(llm::FinishReason reason) {
  if (!reason_.has_value()) reason_ = reason;
}

absl::StatusOr<bool> TokenStream::Push(int32_t token) {
  if (reason_.has_value()) return false;
  if (cancelled()) {
    reason_ = llm::FinishReason::kCancelled;
    return false;
  }
  tokens_.push_back(token);
  const int64_t index = int64_t(tokens_.size()) - 1;
  const bool stop_token =
      std::find(stop_tokens_.begin(), stop_tokens_.end(), token) != stop_tokens_.end();
  const bool last = stop_token || index + 1 >= request_.max_tokens;
  if (!stop_token && decoder_.has_value()) {  // a stop token adds no text
    absl::StatusOr<std::string> piece = decoder_->Push(token);
    if (!piece.ok()) return piece.status();
    text_.Append(*piece);
  }
  if (last && decoder_.has_value()) text_.Append(utf8::ReplaceInvalidUtf8(decoder_->Finish()));
  const bool stop_string = text_.stopped();
  const std::string piece = text_.Release(last);
  if (stop_token) reason_ = llm::FinishReason::kStopToken;
  if (stop_string) reason_ = llm::FinishReason::kStopString;
  const llm::TokenEvent event{.token = token, .index = index, .text = piece};
  if (on_token_ && on_token_(event) == llm::StreamControl::kStop && !reason_.has_value()) {
    reason_ = llm::FinishReason::kCallback;
  }
  if (last && !reason_.has_value()) reason_ = llm::FinishReason::kMaxTokens;
  return !reason_.has_value();
}

llm::GenerateResult TokenStream::Result(std::vector<int32_t> prompt,
                                        const llm::GenerateStats& stats) const {
  llm::GenerateResult result;
  result.prompt_tokens = std::move(prompt);
  result.tokens = tokens_;
  result.text = utf8::ReplaceInvalidUtf8(text_.text());
  result.finish_reason = reason_.value_or(llm::FinishReason::kMaxTokens);
  result.stats = stats;
  result.stats.generated_tokens = int64_t(tokens_.size());
  return result;
}

}  // namespace shardrt::llama
