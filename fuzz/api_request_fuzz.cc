// libFuzzer target for shardrt serve's parser of request bodies (tools/server/api_request.h).
// The first byte picks the endpoint (chat or text completions), the rest is the body. For any
// input: no crash, no exception; a refusal is a 400 with a message; an accepted request holds
// only values in range (a non-empty conversation of known roles or a non-empty prompt, at most
// 4 non-empty stop strings, temperature in [0, 2], top_p in (0, 1], max_tokens >= 1, usage
// only when streaming); and the request written back as JSON parses to the same values. Any
// violation aborts.
#include <cstdint>
#include <string>
#include <variant>

#include "fuzz_util.h"
#include "nlohmann/json.hpp"
#include "server/api_request.h"

namespace {

using shardrt::server::ApiError;
using shardrt::server::CompletionParams;
using shardrt::server::Endpoint;
constexpr char kTarget[] = "api_request_fuzz";

// `p` as a request body.
std::string Write(const CompletionParams& p) {
  nlohmann::json body = {{"model", p.model}, {"temperature", p.temperature},
                         {"top_p", p.top_p}, {"stream", p.stream}, {"stop", p.stop}};
  if (p.endpoint == Endpoint::kChatCompletions) {
    body["messages"] = nlohmann::json::array();
    for (const auto& m : p.messages) {
      body["messages"].push_back({{"role", m.role}, {"content", m.content}});
    }
  } else {
    body["prompt"] = p.prompt;
  }
  if (p.max_tokens) body["max_tokens"] = *p.max_tokens;
  if (p.seed) body["seed"] = *p.seed;
  if (p.stream) body["stream_options"] = {{"include_usage", p.include_usage}};
  return body.dump();
}

bool Same(const CompletionParams& a, const CompletionParams& b) {
  if (a.messages.size() != b.messages.size()) return false;
  for (size_t i = 0; i < a.messages.size(); ++i) {
    if (a.messages[i].role != b.messages[i].role ||
        a.messages[i].content != b.messages[i].content) {
      return false;
    }
  }
  return a.endpoint == b.endpoint && a.model == b.model && a.prompt == b.prompt &&
         a.max_tokens == b.max_tokens && a.temperature == b.temperature && a.top_p == b.top_p &&
         a.seed == b.seed && a.stop == b.stop && a.stream == b.stream &&
         a.include_usage == b.include_usage;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const Endpoint endpoint = data[0] % 2 ? Endpoint::kCompletions : Endpoint::kChatCompletions;
  const std::string body(reinterpret_cast<const char*>(data + 1), size - 1);
  auto parsed = shardrt::server::ParseCompletionRequest(endpoint, body);
  if (const auto* e = std::get_if<ApiError>(&parsed)) {
    if (e->status != 400 || e->message.empty() || e->type.empty()) {
      shardrt::fuzz::Fail(kTarget, "a refusal that is not a 400 with a message", body,
                          e->message);
    }
    return 0;
  }
  const CompletionParams& p = std::get<CompletionParams>(parsed);
  bool ok = p.endpoint == endpoint && p.temperature >= 0 && p.temperature <= 2 &&
            p.top_p > 0 && p.top_p <= 1 && (!p.max_tokens || *p.max_tokens >= 1) &&
            p.stop.size() <= 4 && (p.stream || !p.include_usage);
  for (const std::string& s : p.stop) ok = ok && !s.empty();
  if (endpoint == Endpoint::kChatCompletions) {
    ok = ok && !p.messages.empty();
    for (const auto& m : p.messages) {
      ok = ok && (m.role == "system" || m.role == "user" || m.role == "assistant");
    }
  } else {
    ok = ok && !p.prompt.empty();
  }
  if (!ok) shardrt::fuzz::Fail(kTarget, "an accepted request out of range", body, Write(p));
  auto again = shardrt::server::ParseCompletionRequest(endpoint, Write(p));
  if (!std::holds_alternative<CompletionParams>(again) ||
      !Same(std::get<CompletionParams>(again), p)) {
    shardrt::fuzz::Fail(kTarget, "the request written back parses to other values", body,
                        Write(p));
  }
  return 0;
}
