#include "llama/chat.h"

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "llama/gguf.h"
#include "shardrt/base/status_macros.h"

namespace shardrt::llama {

std::vector<int32_t> ModelStopTokens(const GgufFile& file) {
  absl::StatusOr<std::vector<std::string>> tokens = file.GetStringArray("tokenizer.ggml.tokens");
  return ModelStopTokens(file, tokens.ok() ? absl::Span<const std::string>(*tokens)
                                           : absl::Span<const std::string>());
}

std::vector<int32_t> ModelStopTokens(const GgufFile& file, absl::Span<const std::string> tokens) {
  std::vector<int32_t> stops;
  const int64_t n = int64_t(tokens.size());
  auto add = [&](int64_t id) {
    if (id >= 0 && id < n && std::find(stops.begin(), stops.end(), id) == stops.end()) {
      stops.push_back(int32_t(id));
    }
  };
  for (const char* text : {"<|im_end|>", "<|endoftext|>", "<|eot_id|>"}) {
    auto it = std::find(tokens.begin(), tokens.end(), text);
    if (it != tokens.end()) add(it - tokens.begin());
  }
  for (const char* key : {"tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id"}) {
    if (absl::StatusOr<int64_t> id = file.GetInt(key); id.ok()) add(*id);
  }
  return stops;
}

absl::StatusOr<ChatFormat> ReadChatFormat(const GgufFile& file) {
  SHARDRT_ASSIGN_OR_RETURN(std::string tmpl, file.GetString("tokenizer.chat_template"));
  if (!absl::StrContains(tmpl, "<|im_start|>") || !absl::StrContains(tmpl, "<|im_end|>")) {
    return absl::InvalidArgumentError(absl::StrCat(
        "GGUF file ", file.path(), ": tokenizer.chat_template is not ChatML (<|im_start|>)"));
  }
  ChatFormat format;
  // The default system turn, written in the template as a string literal.
  const std::string kOpen = "<|im_start|>system\n";
  const size_t open = tmpl.find(kOpen);
  if (open != std::string::npos) {
    const size_t begin = open + kOpen.size();
    const size_t end = tmpl.find("<|im_end|>", begin);
    const std::string text = tmpl.substr(begin, end == std::string::npos ? 0 : end - begin);
    // A literal default, not the template's `message['content']` expression.
    if (end != std::string::npos && !absl::StrContains(text, "{{") &&
        !absl::StrContains(text, "'")) {
      format.default_system = text;
    }
  }
  return format;
}

std::string ChatPrompt(const ChatFormat& format, absl::string_view prompt,
                       absl::string_view system) {
  const absl::string_view sys = system.empty() ? format.default_system : system;
  std::string text;
  if (!sys.empty()) absl::StrAppend(&text, "<|im_start|>system\n", sys, "<|im_end|>\n");
  absl::StrAppend(&text, "<|im_start|>user\n", prompt, "<|im_end|>\n<|im_start|>assistant\n");
  return text;
}

absl::StatusOr<std::string> ChatMessagesPrompt(const ChatFormat& format,
                                               absl::Span<const llm::ChatMessage> messages) {
  if (messages.empty()) return absl::InvalidArgumentError("chat: the conversation has no turns");
  std::string text;
  if (messages[0].role != "system" && !format.default_system.empty()) {
    absl::StrAppend(&text, "<|im_start|>system\n", format.default_system, "<|im_end|>\n");
  }
  for (size_t i = 0; i < messages.size(); ++i) {
    const llm::ChatMessage& m = messages[i];
    if (m.role != "system" && m.role != "user" && m.role != "assistant") {
      return absl::InvalidArgumentError(
          absl::StrCat("chat: turn ", i, " has role '", absl::string_view(m.role).substr(0, 32),
                       "': expected system, user or assistant"));
    }
    if (m.role == "system" && i > 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("chat: turn ", i, " is a system turn: only the first turn may be one"));
    }
    absl::StrAppend(&text, "<|im_start|>", m.role, "\n", m.content, "<|im_end|>\n");
  }
  absl::StrAppend(&text, "<|im_start|>assistant\n");
  return text;
}

}  // namespace shardrt::llama
