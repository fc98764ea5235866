// The model's chat format: ChatML, as SmolLM2's template (tokenizer.chat_template) writes it.
//
//   <|im_start|>system\n{system}<|im_end|>\n<|im_start|>user\n{prompt}<|im_end|>\n
//   <|im_start|>assistant\n
//
// The template adds its default system turn when the conversation does not start with one; the
// default's text is read from the template itself. The Jinja template is not interpreted: a
// template that is not ChatML is refused.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "shardrt/llm/chat.h"

namespace shardrt::llama {

class GgufFile;

struct ChatFormat {
  std::string default_system;  // empty: no system turn unless one is given
};

// Reads the format from the file's tokenizer.chat_template. Errors: NotFound without a
// template; InvalidArgument for a template that is not ChatML, naming the file.
[[nodiscard]] absl::StatusOr<ChatFormat> ReadChatFormat(const GgufFile& file);

// The token ids that end a model's turn or text: tokenizer.ggml.eos_token_id and
// eot_token_id, and the tokens <|im_end|>, <|endoftext|> and <|eot_id|> where the vocabulary
// has them (from tokenizer.ggml.tokens, without making the tokenizer); ids out of the token
// list's range and keys of the wrong type are left out. Thread-safe (reads the file).
std::vector<int32_t> ModelStopTokens(const GgufFile& file);

// The same, with the file's tokenizer.ggml.tokens already read (`tokens`, empty when the file
// has none): for callers that hold the vocabulary, so that it is not read twice. Thread-safe.
std::vector<int32_t> ModelStopTokens(const GgufFile& file, absl::Span<const std::string> tokens);

// A one-turn conversation as text: the system turn (`system`, or the default when empty), the
// user's `prompt`, and the opening of the assistant's turn. Thread-safe (pure).
std::string ChatPrompt(const ChatFormat& format, absl::string_view prompt,
                       absl::string_view system = "");

// A conversation as text: each turn as `<|im_start|>{role}\n{content}<|im_end|>\n` (the default
// system turn first when the conversation does not start with a system turn), then the opening
// of the assistant's turn. Errors: InvalidArgument for an empty conversation, a role other than
// system, user or assistant, or a system turn after the first. Thread-safe (pure).
[[nodiscard]] absl::StatusOr<std::string> ChatMessagesPrompt(
    const ChatFormat& format, absl::Span<const llm::ChatMessage> messages);

}  // namespace shardrt::llama
