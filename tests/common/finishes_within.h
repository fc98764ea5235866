// FinishesWithin: a wait with a deadline for tests of code that might block forever (a lost
// wake-up, a read of a FIFO): the test fails instead of hanging.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <thread>

#include "shardrt/base/mutex.h"

namespace shardrt::testing {

// Runs `work` on its own thread and waits for it at most `limit`. Returns false (and leaves the
// thread behind, detached) when it has not finished: `work` must own what it touches.
inline bool FinishesWithin(std::function<void()> work, std::chrono::milliseconds limit) {
  struct Done {
    Mutex mu;
    CondVar cv;
    bool done ABSL_GUARDED_BY(mu) = false;
  };
  auto done = std::make_shared<Done>();
  std::thread([done, work = std::move(work)] {
    work();
    MutexLock lock(done->mu);
    done->done = true;
    done->cv.NotifyAll();
  }).detach();
  const auto deadline = std::chrono::steady_clock::now() + limit;
  MutexLock lock(done->mu);
  while (!done->done) {
    if (done->cv.WaitUntil(lock, deadline) == std::cv_status::timeout) return done->done;
  }
  return true;
}

}  // namespace shardrt::testing
