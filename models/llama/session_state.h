// Session::State: what a Session holds, for the classes of this library that work on a session
// (the Scheduler). Not a public header.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "llama/chat.h"
#include "llama/gguf.h"
#include "llama/llama_config.h"
#include "llama/llama_model.h"
#include "llama/tokenizer.h"
#include "shardrt/base/mutex.h"
#include "shardrt/llm/session.h"

namespace shardrt::llm {

struct Session::State {
  Runtime* runtime = nullptr;
  ModelInfo info;
  llama::LlamaConfig config;
  absl::StatusOr<llama::ChatFormat> chat_format = absl::UnknownError("unset");
  std::vector<int32_t> model_stop_tokens;  // end of text / end of turn
  // The tokenizer, made from its data on first use (Tokenizer()).
  mutable Mutex tokenizer_mu;
  mutable absl::StatusOr<llama::TokenizerData> tokenizer_data ABSL_GUARDED_BY(tokenizer_mu) =
      absl::UnknownError("unset");
  mutable std::unique_ptr<const llama::Tokenizer> tokenizer ABSL_GUARDED_BY(tokenizer_mu);
  mutable absl::Status tokenizer_error ABSL_GUARDED_BY(tokenizer_mu);
  int64_t devices = 0;
  // Generate, Load and the other steps run one at a time, under this.
  Mutex mu;
  std::unique_ptr<llama::GgufFile> file ABSL_GUARDED_BY(mu);  // until the weights are loaded
  std::unique_ptr<llama::LlamaModel> model ABSL_GUARDED_BY(mu);
  std::atomic<bool> loaded{false};
  llama::ModelOptions model_options ABSL_GUARDED_BY(mu);  // before the context's rounding
  std::atomic<int64_t> context_length{0};  // the model's, after rounding

  // The tokenizer, made on the first call; valid as long as the session. Error: why the file's
  // tokenizer cannot be made (the same on every call). Thread-safe.
  absl::StatusOr<const llama::Tokenizer*> Tokenizer() const;

  // The tokenizer a generation of `request` streams its text with: null when the file's
  // tokenizer cannot be made and the request needs no text (a token prompt without stop
  // strings: its tokens come without text). Error: the tokenizer's, when the request needs
  // text. Thread-safe.
  absl::StatusOr<const llama::Tokenizer*> TextFor(const GenerateRequest& request) const;

  // The token ids that end a generation under `stop`: its own, then the model's unless it
  // ignores them. Thread-safe (reads what Open set).
  std::vector<int32_t> StopTokens(const StopConditions& stop) const;
};

// The checks of a request that do not depend on the model's state: its sampling options and
// its stop strings (none empty). Error: InvalidArgument naming what is wrong. Thread-safe.
[[nodiscard]] absl::Status CheckRequestOptions(const GenerateRequest& request);

}  // namespace shardrt::llm
