// shardrt serve's request bodies (tools/server/api_request.h): what a well-formed request
// becomes, and that every kind of bad body is a 400 naming the field. And the /metrics text
// (tools/server/prometheus.h).
#include "server/api_request.h"

#include <string>
#include <variant>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/prometheus.h"

namespace shardrt::server {
namespace {

using ::testing::HasSubstr;

CompletionParams Accept(Endpoint endpoint, const std::string& body) {
  auto parsed = ParseCompletionRequest(endpoint, body);
  EXPECT_TRUE(std::holds_alternative<CompletionParams>(parsed))
      << body << ": " << std::get<ApiError>(parsed).message;
  return std::holds_alternative<CompletionParams>(parsed) ? std::get<CompletionParams>(parsed)
                                                          : CompletionParams{};
}

ApiError Refuse(Endpoint endpoint, const std::string& body) {
  auto parsed = ParseCompletionRequest(endpoint, body);
  EXPECT_TRUE(std::holds_alternative<ApiError>(parsed)) << body;
  return std::holds_alternative<ApiError>(parsed) ? std::get<ApiError>(parsed) : ApiError{};
}

constexpr Endpoint kChat = Endpoint::kChatCompletions;
constexpr Endpoint kText = Endpoint::kCompletions;

TEST(ApiRequestTest, AChatRequestAsTheOpenAiClientSendsIt) {
  const CompletionParams p = Accept(
      kChat, R"({"model": "m", "messages": [{"role": "developer", "content": "Be brief."},
                 {"role": "user", "content": [{"type": "text", "text": "Hi, "},
                                             {"type": "text", "text": "there"}]}],
                 "max_completion_tokens": 7, "max_tokens": 9, "temperature": 0.5,
                 "top_p": 0.9, "seed": 42, "stop": "\n", "stream": true,
                 "stream_options": {"include_usage": true}, "user": "u", "n": 1,
                 "presence_penalty": 0, "unknown_field": [1, 2]})");
  ASSERT_EQ(p.messages.size(), 2u);
  EXPECT_EQ(p.messages[0].role, "system");  // developer is the system turn
  EXPECT_EQ(p.messages[1].content, "Hi, there");
  EXPECT_EQ(p.max_tokens, 7);  // max_completion_tokens wins
  EXPECT_EQ(p.temperature, 0.5);
  EXPECT_EQ(p.top_p, 0.9);
  EXPECT_EQ(p.seed, 42u);
  EXPECT_EQ(p.stop, std::vector<std::string>{"\n"});
  EXPECT_TRUE(p.stream && p.include_usage);
  EXPECT_EQ(p.model, "m");
}

TEST(ApiRequestTest, DefaultsAreOpenAis) {
  const CompletionParams p = Accept(kText, R"({"prompt": ["Once upon a time"]})");
  EXPECT_EQ(p.prompt, "Once upon a time");
  EXPECT_EQ(p.temperature, 1.0);
  EXPECT_EQ(p.top_p, 1.0);
  EXPECT_FALSE(p.max_tokens.has_value());
  EXPECT_FALSE(p.seed.has_value());
  EXPECT_FALSE(p.stream);
}

TEST(ApiRequestTest, BadBodiesAre400sNamingTheField) {
  struct Case {
    Endpoint endpoint;
    std::string body, param, message;
  };
  const Case cases[] = {
      {kChat, "{", "", "not valid JSON"},
      {kChat, "[1]", "", "must be a JSON object"},
      {kChat, std::string(40, '[') + std::string(40, ']'), "", "nests deeper than 16"},
      {kChat, "{\"messages\": [{\"role\": \"user\", \"content\": \"\xff\"}]}", "", "not UTF-8"},
      {kChat, R"({"messages": []})", "messages", "non-empty array"},
      {kChat, R"({"messages": [{"role": "robot", "content": "x"}]})", "messages[0].role",
       "expected system, developer, user or assistant"},
      {kChat, R"({"messages": [{"role": "user"}]})", "messages[0].content", "missing"},
      {kChat, R"({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]})",
       "messages[0].content[0]", "not supported"},
      {kText, R"({"prompt": ""})", "prompt", "empty"},
      {kText, R"({"prompt": [1, 2]})", "prompt", "not supported"},
      {kText, R"({"prompt": "a", "max_tokens": 0})", "max_tokens", "integer >= 1"},
      {kText, R"({"prompt": "a", "max_tokens": 2.5})", "max_tokens", "integer >= 1"},
      {kText, R"({"prompt": "a", "temperature": 3})", "temperature", "outside [0, 2]"},
      {kText, R"({"prompt": "a", "top_p": 0})", "top_p", "outside (0, 1]"},
      {kText, R"({"prompt": "a", "temperature": "hot"})", "temperature", "expected a number"},
      {kText, R"({"prompt": "a", "seed": 1.5})", "seed", "expected an integer"},
      {kText, R"({"prompt": "a", "stop": ["a", "b", "c", "d", "e"]})", "stop", "at most 4"},
      {kText, R"({"prompt": "a", "stop": [""]})", "stop", "non-empty"},
      {kText, R"({"prompt": "a", "stream": "yes"})", "stream", "expected a boolean"},
      {kText, R"({"prompt": "a", "stream_options": {"include_usage": true}})", "stream_options",
       "only allowed with stream"},
      {kText, R"({"prompt": "a", "n": 2})", "n", "not supported"},
      {kChat, R"({"messages": [{"role": "user", "content": "x"}], "tools": []})", "tools",
       "not supported"},
      {kText, R"({"prompt": "a", "logprobs": 2})", "logprobs", "not supported"},
      {kText, R"({"prompt": "a", "frequency_penalty": 0.5})", "frequency_penalty",
       "not supported"},
      {kText, R"({"prompt": "a", "model": 3})", "model", "expected a string"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.body.substr(0, 80));
    const ApiError e = Refuse(c.endpoint, c.body);
    EXPECT_EQ(e.status, 400);
    EXPECT_EQ(e.type, "invalid_request_error");
    EXPECT_EQ(e.param, c.param);
    EXPECT_THAT(e.message, HasSubstr(c.message));
  }
}

TEST(ApiRequestTest, JsonDepthSkipsStringsAndStopsAtItsLimit) {
  EXPECT_EQ(JsonDepth(R"({"a": [1, {"b": "[[[["}]})", 16), 3);
  EXPECT_EQ(JsonDepth(R"(["\"[[["])", 16), 1);
  EXPECT_EQ(JsonDepth(std::string(1000, '['), 16), 17);
}

TEST(PrometheusTest, HistogramsAreCumulativeAndNamesSnakeCase) {
  Histogram h({0.1, 1});
  for (double v : {0.05, 0.5, 0.5, 5.0}) h.Observe(v);
  PrometheusText text;
  text.Histogram("x_seconds", "help", h.snapshot());
  EXPECT_EQ(text.text(),
            "# HELP x_seconds help\n# TYPE x_seconds histogram\n"
            "x_seconds_bucket{le=\"0.1\"} 1\nx_seconds_bucket{le=\"1\"} 3\n"
            "x_seconds_bucket{le=\"+Inf\"} 4\nx_seconds_sum 6.05\nx_seconds_count 4\n");
  EXPECT_EQ(MetricName("TransferToDeviceTime"), "transfer_to_device_time");
  EXPECT_EQ(MetricName("Compile.Cache-Hit"), "compile_cache_hit");
}

}  // namespace
}  // namespace shardrt::server
