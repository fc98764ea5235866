// Generation (generation.h): Session::Generate on a thread, its pieces in a queue.
#include "generation.h"

#include <utility>

namespace shardrt::python {

Generation::Generation(llm::Session& session, llm::GenerateRequest request, bool queue_pieces)
    : request_(std::move(request)) {
  request_.cancel = &cancel_;
  thread_ = std::thread([this, &session, queue_pieces] { Run(session, queue_pieces); });
}

Generation::~Generation() { Stop(); }

void Generation::Run(llm::Session& session, bool queue_pieces) {
  auto on_token = [this, queue_pieces](const llm::TokenEvent& event) {
    if (queue_pieces && !event.text.empty()) {
      MutexLock lock(mu_);
      pieces_.emplace_back(event.text);
      cv_.NotifyAll();
    }
    return stop_.load(std::memory_order_acquire) ? llm::StreamControl::kStop
                                                 : llm::StreamControl::kContinue;
  };
  absl::StatusOr<llm::GenerateResult> result = session.Generate(request_, on_token);
  MutexLock lock(mu_);
  result_ = std::move(result);
  done_ = true;
  cv_.NotifyAll();
}

Generation::Step Generation::Next(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  MutexLock lock(mu_);
  while (pieces_.empty() && !done_) {
    if (cv_.WaitUntil(lock, deadline) == std::cv_status::timeout && pieces_.empty() && !done_) {
      return Step{};
    }
  }
  if (!pieces_.empty()) {
    Step step{Step::kPiece, std::move(pieces_.front())};
    pieces_.pop_front();
    return step;
  }
  return Step{Step::kDone, {}};
}

bool Generation::WaitDone(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  MutexLock lock(mu_);
  while (!done_) {
    if (cv_.WaitUntil(lock, deadline) == std::cv_status::timeout) return done_;
  }
  return true;
}

void Generation::Stop() {
  stop_.store(true, std::memory_order_release);
  cancel_.Cancel();
  Join();
}

void Generation::Join() {
  MutexLock lock(join_mu_);
  if (thread_.joinable()) thread_.join();
}

const absl::StatusOr<llm::GenerateResult>& Generation::Result() {
  Join();
  return *result_;  // the thread set it before it ended
}

}  // namespace shardrt::python
