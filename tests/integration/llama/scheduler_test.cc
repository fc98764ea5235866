// llm::Scheduler on the real model (SmolLM2-135M-Instruct) and the real plugin (4 devices),
// through the public headers: requests batched together give exactly their solo answers
// (Session::Generate's), long prompts run in chunks beside decoding ones, seeded sampling is
// reproducible, a cancelled request frees its row, a full queue and bad requests are refused,
// and Drain waits for what was accepted. (Session::Generate's tokens are checked against an
// independent NumPy implementation by tests/model/test_generate.py.)
#include "shardrt/llm/scheduler.h"

#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "shardrt/base/mutex.h"
#include "test_env.h"

namespace shardrt::llm {
namespace {

// Every wait below ends by this.
constexpr auto kDeadline = std::chrono::seconds(300);

// What the scheduler gave one request.
struct Outcome {
  Mutex mu;
  CondVar done_cv;
  bool done ABSL_GUARDED_BY(mu) = false;
  absl::StatusOr<GenerateResult> result ABSL_GUARDED_BY(mu) = absl::UnknownError("not done");
  std::string streamed ABSL_GUARDED_BY(mu);

  // The result once the request has ended (an error after kDeadline).
  absl::StatusOr<GenerateResult> Wait() {
    MutexLock lock(mu);
    const auto deadline = std::chrono::steady_clock::now() + kDeadline;
    while (!done) {
      if (done_cv.WaitUntil(lock, deadline) == std::cv_status::timeout && !done) {
        return absl::DeadlineExceededError("the request did not end");
      }
    }
    return result;
  }
};

class SchedulerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!std::filesystem::exists(SHARDRT_MODEL_PATH)) return;
    runtime_ = testing::MakeTestRuntime().release();
    auto session = Session::Open(
        *runtime_, {.model_path = SHARDRT_MODEL_PATH, .devices = 4, .context_length = 512});
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

  // Submits `request` to `scheduler`; the outcome fills in as it runs.
  static std::shared_ptr<Outcome> Submit(Scheduler& scheduler, GenerateRequest request,
                                         absl::Status* refused = nullptr) {
    auto outcome = std::make_shared<Outcome>();
    absl::Status status = scheduler.Submit(
        std::move(request),
        [outcome](const TokenEvent& e) {
          MutexLock lock(outcome->mu);
          outcome->streamed.append(e.text);
          return StreamControl::kContinue;
        },
        [outcome](absl::StatusOr<GenerateResult> result) {
          {
            MutexLock lock(outcome->mu);
            outcome->result = std::move(result);
            outcome->done = true;
          }
          outcome->done_cv.NotifyAll();
        });
    if (refused != nullptr) *refused = status;
    if (!status.ok()) {
      EXPECT_NE(refused, nullptr) << status;
      MutexLock lock(outcome->mu);
      outcome->result = status;
      outcome->done = true;
    }
    return outcome;
  }

  static GenerateRequest Chat(std::string prompt, int64_t max_tokens) {
    GenerateRequest r;
    r.prompt = std::move(prompt);
    r.format = PromptFormat::kChat;
    r.max_tokens = max_tokens;
    return r;
  }

  // A long prompt: several chunks.
  static std::string Document() {
    std::string text = "Summarize: ";
    for (int i = 0; i < 50; ++i) absl::StrAppend(&text, "the river runs past the old mill ");
    return text;
  }

  static inline Runtime* runtime_ = nullptr;
  static inline Session* session_ = nullptr;
};

TEST_F(SchedulerTest, BatchedRequestsGiveTheirSoloAnswers) {
  std::vector<GenerateRequest> requests = {
      Chat("What is the capital of France?", 24), Chat("Name three colors.", 16),
      Chat(Document(), 12), Chat("Write a haiku about the sea.", 30),
      Chat("What is 2 + 2?", 8), Chat("Say hello.", 20)};
  GenerateRequest sampled = Chat("Tell me a story.", 16);
  sampled.sampling = {.temperature = 0.8, .top_p = 0.95, .seed = 7};
  requests.push_back(sampled);
  requests.push_back(Chat("Count from one to twenty.", 40));

  std::vector<GenerateResult> solo;
  for (const GenerateRequest& r : requests) {
    auto result = session_->Generate(r);
    ASSERT_TRUE(result.ok()) << result.status();
    solo.push_back(*std::move(result));
  }
  // The last request again, with a stop string from the middle of its answer.
  ASSERT_GE(solo[7].text.size(), 8u) << solo[7].text;
  requests[7].stop.strings = {solo[7].text.substr(solo[7].text.size() / 2, 3)};
  auto stopped = session_->Generate(requests[7]);
  ASSERT_TRUE(stopped.ok()) << stopped.status();
  solo[7] = *std::move(stopped);
  auto scheduler = Scheduler::Start(*session_, {.max_batch = 4, .max_queue = 16});
  ASSERT_TRUE(scheduler.ok()) << scheduler.status();
  std::vector<std::shared_ptr<Outcome>> outcomes;
  for (const GenerateRequest& r : requests) outcomes.push_back(Submit(**scheduler, r));
  for (size_t i = 0; i < requests.size(); ++i) {
    SCOPED_TRACE(i);
    auto result = outcomes[i]->Wait();
    ASSERT_TRUE(result.ok()) << result.status();
    EXPECT_EQ(result->tokens, solo[i].tokens);
    EXPECT_EQ(result->text, solo[i].text);
    EXPECT_EQ(result->finish_reason, solo[i].finish_reason);
    EXPECT_EQ(result->prompt_tokens, solo[i].prompt_tokens);
    MutexLock lock(outcomes[i]->mu);
    EXPECT_EQ(outcomes[i]->streamed, solo[i].text);
  }
  EXPECT_EQ(solo[7].finish_reason, FinishReason::kStopString);
  // A request is counted after its callback returns, which may be after its waiter woke.
  EXPECT_TRUE((*scheduler)->Drain(absl::Seconds(60)).ok());
  const SchedulerStats stats = (*scheduler)->stats();
  EXPECT_EQ(stats.finished, int64_t(requests.size()));
  EXPECT_EQ(stats.running, 0);
  EXPECT_EQ(stats.queued, 0);
  EXPECT_GT(stats.prefill_chunks, int64_t(requests.size()));  // the document takes several
  EXPECT_EQ(stats.last_batch >= 1 && stats.last_batch <= 4, true);
}

TEST_F(SchedulerTest, CancellingFreesTheRowAndAFullQueueIsRefused) {
  auto scheduler = Scheduler::Start(*session_, {.max_batch = 1, .max_queue = 1});
  ASSERT_TRUE(scheduler.ok()) << scheduler.status();
  Cancellation cancel;
  GenerateRequest first = Chat("Write a long story about a dragon.", 400);
  first.stop.model_tokens = ModelStopTokens::kIgnore;
  first.cancel = &cancel;
  auto running = Submit(**scheduler, first);
  auto waiting = Submit(**scheduler, Chat("Say hello.", 4));
  // One running, one waiting: a third request finds the queue full.
  absl::Status refused;
  Submit(**scheduler, Chat("Say hello.", 4), &refused);
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted) << refused;
  cancel.Cancel();
  auto result = running->Wait();
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->finish_reason, FinishReason::kCancelled);
  EXPECT_LT(result->tokens.size(), 400u);
  auto next = waiting->Wait();  // the freed row runs the waiting request
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_FALSE(next->tokens.empty());

  // Bad requests are refused before they are queued.
  EXPECT_EQ((*scheduler)->Submit(Chat("", 4), nullptr, [](auto) {}).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*scheduler)->Submit(Chat("hi", 600), nullptr, [](auto) {}).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*scheduler)->Submit(Chat("hi", 4), nullptr, nullptr).code(),
            absl::StatusCode::kInvalidArgument);
  GenerateRequest streamed_logits = Chat("hi", 4);
  streamed_logits.logits = LogitsOutput::kStream;
  streamed_logits.on_logits = [](int64_t, std::span<const float>) { return absl::OkStatus(); };
  EXPECT_EQ((*scheduler)->Submit(streamed_logits, nullptr, [](auto) {}).code(),
            absl::StatusCode::kInvalidArgument);
  // Drained: no more requests.
  EXPECT_TRUE((*scheduler)->Drain(absl::Seconds(60)).ok());
  EXPECT_EQ((*scheduler)->Submit(Chat("hi", 4), nullptr, [](auto) {}).code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST_F(SchedulerTest, DestroyingTheSchedulerEndsWhatIsLeftAsCancelled) {
  std::vector<std::shared_ptr<Outcome>> outcomes;
  {
    // The first test's batch: its programs are compiled already.
    auto scheduler = Scheduler::Start(*session_, {.max_batch = 4, .max_queue = 8});
    ASSERT_TRUE(scheduler.ok()) << scheduler.status();
    for (int i = 0; i < 6; ++i) {
      GenerateRequest r = Chat("Write a long story.", 300);
      r.stop.model_tokens = ModelStopTokens::kIgnore;
      outcomes.push_back(Submit(**scheduler, r));
    }
  }
  for (auto& outcome : outcomes) {
    auto result = outcome->Wait();
    ASSERT_TRUE(result.ok()) << result.status();
    EXPECT_EQ(result->finish_reason, FinishReason::kCancelled);
  }
}

}  // namespace
}  // namespace shardrt::llm
