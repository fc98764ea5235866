// Generation: one llm::Session::Generate running on a thread of its own, its text pieces queued
// for a consumer on another thread (shardrt.llm's stream), and a way to end it early. Plain C++
// (no Python): the extension waits on it with the GIL released. Private to the extension.
//
//   Generation g(session, request, /*queue_pieces=*/true);
//   for (;;) {
//     Generation::Step step = g.Next(std::chrono::milliseconds(100));
//     if (step.kind == Generation::Step::kPiece) use(step.piece);
//     if (step.kind == Generation::Step::kDone) break;
//   }
//   const absl::StatusOr<llm::GenerateResult>& result = g.Result();
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <deque>
#include <optional>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "shardrt/base/mutex.h"
#include "shardrt/llm/cancellation.h"
#include "shardrt/llm/session.h"

namespace shardrt::python {

class Generation {
 public:
  // What Next found.
  struct Step {
    enum Kind { kPiece, kDone, kTimeout };
    Kind kind = kTimeout;
    std::string piece;  // kPiece: a non-empty piece of the answer's text
  };

  // Starts `request` on `session` (borrowed: it must outlive this object) on a new thread.
  // With `queue_pieces`, each token's non-empty text is queued for Next; without, only the
  // result is kept. `request.cancel` is replaced by this object's own cancellation.
  Generation(llm::Session& session, llm::GenerateRequest request, bool queue_pieces);
  // Stops the generation and joins its thread (Stop).
  ~Generation();
  Generation(const Generation&) = delete;
  Generation& operator=(const Generation&) = delete;

  // Waits at most `timeout` for the next queued piece (kPiece), or for the end once every
  // piece was taken (kDone; the thread may still be finishing: Result joins it).
  Step Next(std::chrono::milliseconds timeout);
  // Waits at most `timeout` for the generation to end; whether it has.
  bool WaitDone(std::chrono::milliseconds timeout);
  // Asks the generation to end (its token callback returns kStop and its cancellation is
  // raised; a prefill that is running finishes first), then joins the thread. Idempotent.
  void Stop();
  // Joins the thread (the generation must have ended: WaitDone or Next said so, or Stop) and
  // returns Generate's result or error.
  const absl::StatusOr<llm::GenerateResult>& Result();

 private:
  // The thread's body: runs Generate and records its outcome.
  void Run(llm::Session& session, bool queue_pieces);
  // Joins the thread once, whichever caller comes first.
  void Join();

  llm::GenerateRequest request_;
  llm::Cancellation cancel_;
  std::atomic<bool> stop_{false};

  Mutex mu_;
  CondVar cv_;  // a piece was queued, or the generation ended
  std::deque<std::string> pieces_ ABSL_GUARDED_BY(mu_);
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  // Set by the thread when it ends; read after Join.
  std::optional<absl::StatusOr<llm::GenerateResult>> result_;

  Mutex join_mu_;  // held while joining, so that one caller joins
  std::thread thread_;
};

}  // namespace shardrt::python
