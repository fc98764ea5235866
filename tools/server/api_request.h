// The OpenAI API's request bodies as shardrt serve reads them: POST /v1/chat/completions and
// POST /v1/completions, parsed and checked into CompletionParams, or refused with the ApiError
// (HTTP status and OpenAI's error object) that the client gets. Request bodies are untrusted:
// the text is checked for nesting depth before it is parsed, the parser (nlohmann::json)
// refuses text that is not UTF-8, and every list and string has a bound.
//
// Fields that would change the answer in ways shardrt does not do (n > 1, tools, logprobs,
// penalties, ...) are refused with 400 naming the field rather than ignored; fields that do
// not change it (user, metadata, store, ...) and unknown fields are ignored, as OpenAI's own
// clients send some of them.
//
// Thread safety: the functions are pure.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include "absl/strings/string_view.h"
#include <variant>
#include <vector>

namespace shardrt::server {

// What the client gets for a refused request: the HTTP status and OpenAI's
// {"error": {"message", "type", "param", "code"}} (param and code null when empty).
struct ApiError {
  int status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::string param;
  std::string code;
};

enum class Endpoint { kChatCompletions, kCompletions };

struct ChatTurn {
  std::string role;  // system, developer, user or assistant
  std::string content;
};

// A checked request.
struct CompletionParams {
  Endpoint endpoint = Endpoint::kChatCompletions;
  std::string model;               // as sent; empty when absent
  std::vector<ChatTurn> messages;  // kChatCompletions: at least one
  std::string prompt;              // kCompletions: not empty
  std::optional<int64_t> max_tokens;  // max_tokens or max_completion_tokens, >= 1
  double temperature = 1.0;           // [0, 2]; OpenAI's default
  double top_p = 1.0;                 // (0, 1]
  std::optional<uint64_t> seed;
  std::vector<std::string> stop;  // up to 4, none empty
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
};

// Limits on a body's content (the body's size is the HTTP layer's).
inline constexpr int kMaxJsonDepth = 16;
inline constexpr size_t kMaxMessages = 1024;
inline constexpr size_t kMaxStopStrings = 4;
inline constexpr size_t kMaxStopBytes = 256;

// Parses and checks `body` for `endpoint`. Never throws; every refusal is an ApiError with
// status 400 naming the field (param) and what was expected.
std::variant<CompletionParams, ApiError> ParseCompletionRequest(Endpoint endpoint,
                                                                absl::string_view body);

// The deepest nesting of arrays and objects in `text` (strings skipped, escapes honoured);
// stops counting past `limit` (returns limit + 1).
int JsonDepth(absl::string_view text, int limit);

}  // namespace shardrt::server
