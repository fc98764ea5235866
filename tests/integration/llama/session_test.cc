// llm::Session on the real model (SmolLM2-135M-Instruct) and the real plugin, through the
// public header only: what streams is the answer, stop strings cut it where the text says,
// the callback and a Cancellation end a generation with their reason, the chat template is
// ChatML, and bad requests are refused before anything runs. (The tokens themselves are
// checked against an independent NumPy implementation by tests/model/test_generate.py, which
// runs `shardrt generate`, a command over this API.)
#include "shardrt/llm/session.h"

#include <filesystem>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "test_env.h"

namespace shardrt::llm {
namespace {

class SessionTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!std::filesystem::exists(SHARDRT_MODEL_PATH)) return;
    runtime_ = testing::MakeTestRuntime().release();
    auto session = Session::Open(
        *runtime_, {.model_path = SHARDRT_MODEL_PATH, .devices = 4, .context_length = 128});
    ASSERT_TRUE(session.ok()) << session.status();
    session_ = session->release();
  }
  static void TearDownTestSuite() {
    delete session_;
    delete runtime_;
  }
  void SetUp() override {
    if (session_ == nullptr) GTEST_SKIP() << "no model file (scripts/bootstrap.sh fetches it)";
  }

  // Generates greedily from kPrompt, collecting what streams.
  static GenerateResult Run(GenerateRequest request, std::string* streamed = nullptr,
                            const TokenCallback& also = nullptr) {
    if (request.prompt.empty() && request.prompt_tokens.empty()) request.prompt = kPrompt;
    auto result = session_->Generate(request, [&](const TokenEvent& e) {
      if (streamed != nullptr) streamed->append(e.text);
      return also ? also(e) : StreamControl::kContinue;
    });
    EXPECT_TRUE(result.ok()) << result.status();
    return result.ok() ? *std::move(result) : GenerateResult{};
  }

  static constexpr char kPrompt[] = "Once upon a time";
  static inline Runtime* runtime_ = nullptr;
  static inline Session* session_ = nullptr;
};

TEST_F(SessionTest, StreamsTheAnswerItReturns) {
  EXPECT_EQ(session_->info().architecture, "llama");
  EXPECT_EQ(session_->info().vocab, 49152);
  EXPECT_EQ(session_->devices(), 4);
  EXPECT_GE(session_->context_length(), 128);
  std::string streamed;
  GenerateResult r = Run({.max_tokens = 24}, &streamed);
  auto prompt = session_->Tokenize(kPrompt);
  ASSERT_TRUE(prompt.ok());
  EXPECT_EQ(r.prompt_tokens, *prompt);
  ASSERT_FALSE(r.tokens.empty());
  EXPECT_LE(r.tokens.size(), 24u);
  EXPECT_EQ(streamed, r.text);
  // The answer is the tokens' text (without a stop token).
  std::vector<int32_t> answer = r.tokens;
  if (r.finish_reason == FinishReason::kStopToken) answer.pop_back();
  auto decoded = session_->Detokenize(answer);
  ASSERT_TRUE(decoded.ok());
  EXPECT_EQ(*decoded, r.text);
  EXPECT_EQ(r.finish_reason, r.tokens.size() == 24 ? FinishReason::kMaxTokens
                                                   : FinishReason::kStopToken);
  EXPECT_EQ(r.stats.prompt_tokens, int64_t(prompt->size()));
  EXPECT_EQ(r.stats.generated_tokens, int64_t(r.tokens.size()));
  EXPECT_GT(r.stats.prefill_seconds, 0);
  // The same request gives the same tokens (greedy), from text or from its token ids.
  GenerateResult again = Run({.prompt_tokens = *prompt, .max_tokens = 24});
  EXPECT_EQ(again.tokens, r.tokens);
}

// kStream hands each token's logits to on_logits as they come, before the token's callback,
// with the values kKeep keeps; an error from on_logits ends the generation with it.
TEST_F(SessionTest, StreamedLogitsAreTheKeptOnes) {
  const GenerateResult kept = Run({.max_tokens = 6, .logits = LogitsOutput::kKeep});
  ASSERT_EQ(kept.logits.size(), kept.tokens.size());
  std::vector<std::vector<float>> rows;
  int64_t tokens_seen = 0;
  GenerateRequest request{.max_tokens = 6, .logits = LogitsOutput::kStream};
  request.on_logits = [&](int64_t index, std::span<const float> logits) {
    EXPECT_EQ(index, int64_t(rows.size()));
    EXPECT_EQ(tokens_seen, index);  // before the token's own callback
    rows.emplace_back(logits.begin(), logits.end());
    return absl::OkStatus();
  };
  const GenerateResult streamed = Run(request, nullptr, [&](const TokenEvent&) {
    ++tokens_seen;
    return StreamControl::kContinue;
  });
  EXPECT_EQ(streamed.tokens, kept.tokens);
  EXPECT_TRUE(streamed.logits.empty());
  EXPECT_EQ(rows, kept.logits);
  request.on_logits = [](int64_t index, std::span<const float>) {
    return index == 2 ? absl::DataLossError("disk full") : absl::OkStatus();
  };
  request.prompt = kPrompt;
  auto failed = session_->Generate(request);
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.status().message(), "disk full");
}

TEST_F(SessionTest, StopStringsCutTheAnswer) {
  GenerateResult full = Run({.max_tokens = 32});
  ASSERT_GE(full.text.size(), 20u) << full.text;
  // A stop string from the middle of the answer: the answer ends right before its first
  // occurrence, and what streamed is exactly that (held back while it might begin the stop).
  const std::string stop = full.text.substr(full.text.size() / 2, 3);
  GenerateRequest request{.max_tokens = 32};
  request.stop.strings = {"a string that never appears", stop};
  std::string streamed;
  GenerateResult cut = Run(request, &streamed);
  EXPECT_EQ(cut.finish_reason, FinishReason::kStopString);
  EXPECT_EQ(cut.text, full.text.substr(0, full.text.find(stop)));
  EXPECT_EQ(streamed, cut.text);
  EXPECT_LT(cut.tokens.size(), full.tokens.size());
  EXPECT_EQ(cut.tokens, std::vector<int32_t>(full.tokens.begin(),
                                             full.tokens.begin() + ptrdiff_t(cut.tokens.size())));
}

TEST_F(SessionTest, TheCallbackAndACancellationEndAGeneration) {
  GenerateResult stopped = Run({.max_tokens = 20}, nullptr, [](const TokenEvent& e) {
    return e.index == 2 ? StreamControl::kStop : StreamControl::kContinue;
  });
  EXPECT_EQ(stopped.finish_reason, FinishReason::kCallback);
  EXPECT_EQ(stopped.tokens.size(), 3u);

  Cancellation cancel;
  int64_t seen = 0;
  GenerateRequest request{.max_tokens = 20, .cancel = &cancel};
  GenerateResult cancelled = Run(request, nullptr, [&](const TokenEvent& e) {
    ++seen;
    if (e.index == 1) cancel.Cancel();  // as another thread would
    return StreamControl::kContinue;
  });
  EXPECT_EQ(cancelled.finish_reason, FinishReason::kCancelled);
  EXPECT_EQ(seen, 2);  // no token is handed out once cancelled
  // A request cancelled before it starts hands out nothing.
  int64_t none = 0;
  GenerateResult early = Run(request, nullptr, [&](const TokenEvent&) {
    ++none;
    return StreamControl::kContinue;
  });
  EXPECT_EQ(early.finish_reason, FinishReason::kCancelled);
  EXPECT_EQ(none, 0);
}

TEST_F(SessionTest, ChatTemplateIsChatML) {
  const ChatMessage turns[] = {{"user", "Hi"}, {"assistant", "Hello!"}, {"user", "Why?"}};
  auto text = session_->ApplyChatTemplate(turns);
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_EQ(text->rfind("<|im_start|>system\n", 0), 0u) << *text;  // the template's default
  const std::string tail =
      "<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello!<|im_end|>\n"
      "<|im_start|>user\nWhy?<|im_end|>\n<|im_start|>assistant\n";
  ASSERT_GE(text->size(), tail.size());
  EXPECT_EQ(text->substr(text->size() - tail.size()), tail);
  const ChatMessage with_system[] = {{"system", "Be brief."}, {"user", "Hi"}};
  EXPECT_EQ(*session_->ApplyChatTemplate(with_system),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
            "<|im_start|>assistant\n");
  // A chat request's prompt is that text, tokenized.
  auto tokens = session_->PromptTokens(
      {.prompt = "Hi", .format = PromptFormat::kChat, .system = "Be brief."});
  ASSERT_TRUE(tokens.ok()) << tokens.status();
  EXPECT_EQ(*tokens, *session_->Tokenize(*session_->ApplyChatTemplate(with_system)));
  const ChatMessage bad_role[] = {{"robot", "Hi"}};
  EXPECT_EQ(session_->ApplyChatTemplate(bad_role).status().message(),
            "chat: turn 0 has role 'robot': expected system, user or assistant");
  const ChatMessage late_system[] = {{"user", "Hi"}, {"system", "x"}};
  EXPECT_FALSE(session_->ApplyChatTemplate(late_system).ok());
  EXPECT_FALSE(session_->ApplyChatTemplate({}).ok());
}

TEST_F(SessionTest, RefusesBadRequestsBeforeRunning) {
  auto message = [](const GenerateRequest& request) {
    auto r = session_->Generate(request);
    EXPECT_FALSE(r.ok());
    return r.ok() ? std::string("OK") : std::string(r.status().message());
  };
  EXPECT_EQ(message({}), "request: set exactly one of prompt (text) and prompt_tokens (ids)");
  EXPECT_EQ(message({.prompt = "x", .prompt_tokens = {1}}),
            "request: set exactly one of prompt (text) and prompt_tokens (ids)");
  EXPECT_EQ(message({.prompt_tokens = {1, 49152}}),
            "prompt token 1 is 49152, outside the vocabulary [0, 49152)");
  EXPECT_EQ(message({.prompt_tokens = {1, 2}, .format = PromptFormat::kChat}),
            "request: the chat format and the system turn apply to a text prompt, not to "
            "prompt_tokens");
  // The context (128 asked for) is rounded up to the programs' granularity: 256 here.
  const int64_t context = session_->context_length();
  EXPECT_EQ(context, 256);
  EXPECT_EQ(message({.prompt_tokens = {1, 2, 3, 4}, .max_tokens = context}),
            absl::StrCat("a prompt of 4 tokens and ", context, " generated tokens need ",
                         context + 3, " cache positions; the cache holds ", context));
  EXPECT_EQ(message({.prompt_tokens = {1}, .max_tokens = 0}), "max tokens 0: expected >= 1");
  GenerateRequest sampling{.prompt_tokens = {1}};
  sampling.sampling = {.temperature = 1, .top_p = 0};
  EXPECT_EQ(message(sampling), "sampling: top-p 0: expected a value in (0, 1]");
  GenerateRequest empty_stop{.prompt_tokens = {1}};
  empty_stop.stop.strings = {""};
  EXPECT_EQ(message(empty_stop), "request: an empty stop string");
  EXPECT_EQ(message({.prompt_tokens = {1}, .logits = LogitsOutput::kStream}),
            "request: LogitsOutput::kStream needs on_logits");
  // Sizes are fixed once the weights are on the devices.
  ASSERT_TRUE(session_->Load().ok());
  EXPECT_TRUE(session_->loaded());
  EXPECT_EQ(session_->SetContextLength(256).code(), absl::StatusCode::kFailedPrecondition);
}

TEST(SessionOpenTest, RefusesWhatCannotWork) {
  std::unique_ptr<Runtime> runtime = testing::MakeTestRuntime();
  ASSERT_NE(runtime, nullptr);
  EXPECT_EQ(Session::Open(*runtime, {}).status().message(),
            "session: no model path (SessionOptions::model_path)");
  EXPECT_EQ(Session::Open(*runtime, {.model_path = "/nonexistent/model.gguf"}).status().code(),
            absl::StatusCode::kNotFound);
  if (!std::filesystem::exists(SHARDRT_MODEL_PATH)) return;
  EXPECT_EQ(Session::Open(*runtime, {.model_path = SHARDRT_MODEL_PATH, .devices = 9})
                .status()
                .message(),
            "session: 9 devices asked for; the runtime has 8");
  EXPECT_EQ(Session::Open(*runtime, {.model_path = SHARDRT_MODEL_PATH, .context_length = -1})
                .status()
                .message(),
            "session: context_length -1: expected >= 0 (0: the default)");
}

}  // namespace
}  // namespace shardrt::llm
