#include "server/api_request.h"

#include <cmath>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace shardrt::server {
namespace {

using Json = nlohmann::json;

ApiError Invalid(std::string param, std::string message) {
  return ApiError{.status = 400, .message = std::move(message), .param = std::move(param)};
}

ApiError Unsupported(const std::string& param, const std::string& what) {
  ApiError e = Invalid(param, absl::StrCat(param, ": ", what, " is not supported by this server"));
  e.code = "unsupported_parameter";
  return e;
}

const char* TypeName(const Json& v) { return v.type_name(); }

// The text of a message's content: a string, or an array of {"type": "text", "text": ...}
// parts joined.
std::variant<std::string, ApiError> ContentText(const Json& content, const std::string& param) {
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) {
    return Invalid(param, absl::StrCat(param, ": expected a string or an array of text parts, got ",
                                       TypeName(content)));
  }
  std::string text;
  for (size_t i = 0; i < content.size(); ++i) {
    const Json& part = content[i];
    const std::string at = absl::StrCat(param, "[", i, "]");
    if (!part.is_object() || !part.contains("type") || !part["type"].is_string()) {
      return Invalid(at, absl::StrCat(at, ": expected an object with a string \"type\""));
    }
    if (part["type"].get<std::string>() != "text") {
      return Unsupported(at, absl::StrCat("a part of type '", part["type"].get<std::string>().substr(0, 32), "'"));
    }
    if (!part.contains("text") || !part["text"].is_string()) {
      return Invalid(at, absl::StrCat(at, ": expected a string \"text\""));
    }
    text += part["text"].get<std::string>();
  }
  return text;
}

// Reads optional number `name` of `body` into `out` within [lo, hi] (open at lo when
// `open_low`). A null is "not given".
std::optional<ApiError> ReadNumber(const Json& body, const char* name, double lo, double hi,
                                   bool open_low, double* out) {
  if (!body.contains(name) || body[name].is_null()) return std::nullopt;
  const Json& v = body[name];
  if (!v.is_number()) {
    return Invalid(name, absl::StrCat(name, ": expected a number, got ", TypeName(v)));
  }
  const double x = v.get<double>();
  if (!std::isfinite(x) || x > hi || (open_low ? x <= lo : x < lo)) {
    return Invalid(name, absl::StrCat(name, ": ", x, " is outside ", open_low ? "(" : "[", lo,
                                      ", ", hi, "]"));
  }
  *out = x;
  return std::nullopt;
}

std::optional<ApiError> ReadBool(const Json& body, const char* name, bool* out) {
  if (!body.contains(name) || body[name].is_null()) return std::nullopt;
  if (!body[name].is_boolean()) {
    return Invalid(name, absl::StrCat(name, ": expected a boolean, got ", TypeName(body[name])));
  }
  *out = body[name].get<bool>();
  return std::nullopt;
}

// Fields that would change the answer in a way this server does not do.
std::optional<ApiError> RefuseUnsupported(const Json& body) {
  for (const char* name : {"tools", "functions", "tool_choice", "function_call", "audio",
                           "prediction", "suffix", "modalities", "web_search_options"}) {
    if (body.contains(name) && !body[name].is_null()) return Unsupported(name, "this field");
  }
  if (body.contains("n") && !body["n"].is_null() && body["n"] != 1) {
    return Unsupported("n", "more than one choice (n != 1)");
  }
  if (body.contains("best_of") && !body["best_of"].is_null() && body["best_of"] != 1) {
    return Unsupported("best_of", "best_of != 1");
  }
  for (const char* name : {"logprobs", "echo"}) {
    if (body.contains(name) && !body[name].is_null() && body[name] != false && body[name] != 0) {
      return Unsupported(name, "this field");
    }
  }
  if (body.contains("top_logprobs") && !body["top_logprobs"].is_null() &&
      body["top_logprobs"] != 0) {
    return Unsupported("top_logprobs", "this field");
  }
  for (const char* name : {"presence_penalty", "frequency_penalty"}) {
    if (body.contains(name) && !body[name].is_null() &&
        !(body[name].is_number() && body[name].get<double>() == 0.0)) {
      return Unsupported(name, "a non-zero penalty");
    }
  }
  if (body.contains("logit_bias") && !body["logit_bias"].is_null() &&
      !(body["logit_bias"].is_object() && body["logit_bias"].empty())) {
    return Unsupported("logit_bias", "this field");
  }
  if (body.contains("response_format") && !body["response_format"].is_null()) {
    const Json& f = body["response_format"];
    if (!f.is_object() || !f.contains("type") || f["type"] != "text") {
      return Unsupported("response_format", "a format other than text");
    }
  }
  return std::nullopt;
}

std::variant<CompletionParams, ApiError> Parse(Endpoint endpoint, const Json& body) {
  if (!body.is_object()) {
    return Invalid("", absl::StrCat("the request body must be a JSON object, got ",
                                    TypeName(body)));
  }
  if (auto e = RefuseUnsupported(body)) return *e;
  CompletionParams p;
  p.endpoint = endpoint;
  if (body.contains("model") && !body["model"].is_null()) {
    if (!body["model"].is_string()) {
      return Invalid("model", absl::StrCat("model: expected a string, got ",
                                           TypeName(body["model"])));
    }
    p.model = body["model"].get<std::string>();
  }
  if (endpoint == Endpoint::kChatCompletions) {
    if (!body.contains("messages") || !body["messages"].is_array() || body["messages"].empty()) {
      return Invalid("messages", "messages: expected a non-empty array of messages");
    }
    const Json& messages = body["messages"];
    if (messages.size() > kMaxMessages) {
      return Invalid("messages", absl::StrCat("messages: ", messages.size(),
                                              " messages; at most ", kMaxMessages));
    }
    for (size_t i = 0; i < messages.size(); ++i) {
      const Json& m = messages[i];
      const std::string at = absl::StrCat("messages[", i, "]");
      if (!m.is_object() || !m.contains("role") || !m["role"].is_string()) {
        return Invalid(at, absl::StrCat(at, ": expected an object with a string \"role\""));
      }
      ChatTurn turn;
      turn.role = m["role"].get<std::string>();
      if (turn.role != "system" && turn.role != "developer" && turn.role != "user" &&
          turn.role != "assistant") {
        return Invalid(at + ".role",
                       absl::StrCat(at, ".role: expected system, developer, user or assistant, got '",
                                    turn.role.substr(0, 32), "'"));
      }
      if (turn.role == "developer") turn.role = "system";
      if (!m.contains("content") || m["content"].is_null()) {
        return Invalid(at + ".content", absl::StrCat(at, ".content: missing"));
      }
      auto text = ContentText(m["content"], at + ".content");
      if (auto* e = std::get_if<ApiError>(&text)) return *e;
      turn.content = std::get<std::string>(std::move(text));
      p.messages.push_back(std::move(turn));
    }
  } else {
    if (!body.contains("prompt") || body["prompt"].is_null()) {
      return Invalid("prompt", "prompt: missing");
    }
    const Json& prompt = body["prompt"];
    if (prompt.is_array() && prompt.size() == 1 && prompt[0].is_string()) {
      p.prompt = prompt[0].get<std::string>();
    } else if (prompt.is_string()) {
      p.prompt = prompt.get<std::string>();
    } else if (prompt.is_array()) {
      return Unsupported("prompt", "a prompt that is not one string (token ids, several prompts)");
    } else {
      return Invalid("prompt", absl::StrCat("prompt: expected a string, got ", TypeName(prompt)));
    }
    if (p.prompt.empty()) return Invalid("prompt", "prompt: empty");
  }
  for (const char* name : {"max_completion_tokens", "max_tokens"}) {
    if (!body.contains(name) || body[name].is_null()) continue;
    const Json& v = body[name];
    if (!v.is_number_integer() || v.get<int64_t>() < 1) {
      return Invalid(name, absl::StrCat(name, ": expected an integer >= 1, got ", v.dump().substr(0, 32)));
    }
    p.max_tokens = v.get<int64_t>();
    break;  // max_completion_tokens first, as OpenAI
  }
  if (auto e = ReadNumber(body, "temperature", 0, 2, false, &p.temperature)) return *e;
  if (auto e = ReadNumber(body, "top_p", 0, 1, true, &p.top_p)) return *e;
  if (body.contains("seed") && !body["seed"].is_null()) {
    const Json& v = body["seed"];
    if (!v.is_number_integer()) {
      return Invalid("seed", absl::StrCat("seed: expected an integer, got ", TypeName(v)));
    }
    p.seed = v.is_number_unsigned() ? v.get<uint64_t>() : uint64_t(v.get<int64_t>());
  }
  if (body.contains("stop") && !body["stop"].is_null()) {
    const Json& v = body["stop"];
    std::vector<Json> items;
    if (v.is_string()) {
      items.push_back(v);
    } else if (v.is_array()) {
      items.assign(v.begin(), v.end());
    } else {
      return Invalid("stop", absl::StrCat("stop: expected a string or an array of strings, got ",
                                          TypeName(v)));
    }
    if (items.size() > kMaxStopStrings) {
      return Invalid("stop", absl::StrCat("stop: ", items.size(), " strings; at most ",
                                          kMaxStopStrings));
    }
    for (const Json& s : items) {
      if (!s.is_string() || s.get<std::string>().empty() ||
          s.get<std::string>().size() > kMaxStopBytes) {
        return Invalid("stop", absl::StrCat("stop: expected non-empty strings of at most ",
                                            kMaxStopBytes, " bytes"));
      }
      p.stop.push_back(s.get<std::string>());
    }
  }
  if (auto e = ReadBool(body, "stream", &p.stream)) return *e;
  if (body.contains("stream_options") && !body["stream_options"].is_null()) {
    const Json& o = body["stream_options"];
    if (!o.is_object()) {
      return Invalid("stream_options", absl::StrCat("stream_options: expected an object, got ",
                                                    TypeName(o)));
    }
    if (!p.stream) {
      return Invalid("stream_options", "stream_options: only allowed with stream: true");
    }
    if (auto e = ReadBool(o, "include_usage", &p.include_usage)) {
      e->param = "stream_options.include_usage";
      return *e;
    }
  }
  return p;
}

}  // namespace

int JsonDepth(absl::string_view text, int limit) {
  int depth = 0, deepest = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
      if (deepest > limit) return limit + 1;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return deepest;
}

std::variant<CompletionParams, ApiError> ParseCompletionRequest(Endpoint endpoint,
                                                                absl::string_view body) {
  if (JsonDepth(body, kMaxJsonDepth) > kMaxJsonDepth) {
    return Invalid("", absl::StrCat("the request body nests deeper than ", kMaxJsonDepth,
                                    " levels"));
  }
  Json parsed = Json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded()) {
    // nlohmann's parser also refuses strings that are not UTF-8.
    return Invalid("", "the request body is not valid JSON (or not UTF-8)");
  }
  try {
    return Parse(endpoint, parsed);
  } catch (const Json::exception& e) {  // a number out of its type's range, ...
    return Invalid("", absl::StrCat("the request body has a value of the wrong type: ", e.what()));
  }
}

}  // namespace shardrt::server
