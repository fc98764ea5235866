// Mutex, MutexLock and CondVar on real threads: mutual exclusion, TryLock against a holder,
// early Unlock, waits that are woken and waits that time out, and the standard Lockable names.
// Every wait has a deadline: a lost wakeup fails the test instead of hanging it.
#include "shardrt/base/mutex.h"

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace shardrt {
namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kPatience = std::chrono::seconds(30);

// Whether another thread's TryLock of `mu` succeeds (it unlocks again at once).
bool TakenByAnotherThread(Mutex& mu) {
  bool taken = false;
  std::thread([&] {
    if (mu.TryLock()) {
      taken = true;
      mu.Unlock();
    }
  }).join();
  return taken;
}

// A counter that several threads bump.
class Counter {
 public:
  void Add() ABSL_LOCKS_EXCLUDED(mu_) {
    MutexLock lock(mu_);
    // A read, a yield and a write: without the lock, concurrent adds would lose updates.
    const int64_t v = value_;
    if (v % 64 == 0) std::this_thread::yield();
    value_ = v + 1;
  }
  int64_t value() ABSL_LOCKS_EXCLUDED(mu_) {
    MutexLock lock(mu_);
    return value_;
  }

 private:
  Mutex mu_;
  int64_t value_ ABSL_GUARDED_BY(mu_) = 0;
};

TEST(MutexTest, MutexLockExcludesOtherThreads) {
  Counter counter;
  constexpr int kThreads = 8;
  constexpr int kAdds = 5000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kAdds; ++i) counter.Add();
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(counter.value(), int64_t{kThreads} * kAdds);
}

// A one-shot flag that one thread sets and others wait for, with a deadline.
class Flag {
 public:
  void Set() ABSL_LOCKS_EXCLUDED(mu_) {
    {
      MutexLock lock(mu_);
      set_ = true;
    }
    cv_.NotifyAll();
  }
  // True once set; false if `deadline` passed first.
  bool WaitUntil(Clock::time_point deadline) ABSL_LOCKS_EXCLUDED(mu_) {
    MutexLock lock(mu_);
    while (!set_) {
      if (cv_.WaitUntil(lock, deadline) == std::cv_status::timeout) return set_;
    }
    return true;
  }

 private:
  Mutex mu_;
  CondVar cv_;
  bool set_ ABSL_GUARDED_BY(mu_) = false;
};

TEST(MutexTest, TryLockFailsWhileAnotherThreadHoldsIt) {
  Mutex mu;
  Flag locked, release;
  std::thread holder([&] {
    MutexLock lock(mu);
    locked.Set();
    EXPECT_TRUE(release.WaitUntil(Clock::now() + kPatience));
  });
  EXPECT_TRUE(locked.WaitUntil(Clock::now() + kPatience));
  bool taken_while_held = false;
  if (mu.TryLock()) {
    taken_while_held = true;
    mu.Unlock();
  }
  EXPECT_FALSE(taken_while_held);
  release.Set();
  holder.join();
  // Free now. try_lock may fail spuriously: retry until a deadline.
  const Clock::time_point deadline = Clock::now() + kPatience;
  bool taken = false;
  while (!taken && Clock::now() < deadline) {
    if (mu.TryLock()) {
      taken = true;
      mu.Unlock();
    }
  }
  EXPECT_TRUE(taken);
}

TEST(MutexTest, MutexLockUnlockLetsAnotherThreadInAndLockTakesItBack) {
  Mutex mu;
  Flag entered;
  MutexLock lock(mu);
  std::thread other([&] {
    MutexLock other_lock(mu);  // blocks until the main thread unlocks
    entered.Set();
  });
  // While held, the other thread cannot get in.
  EXPECT_FALSE(entered.WaitUntil(Clock::now() + std::chrono::milliseconds(50)));
  lock.Unlock();
  EXPECT_TRUE(entered.WaitUntil(Clock::now() + kPatience));
  other.join();
  lock.Lock();
  // Held again by this thread: another thread's TryLock fails.
  EXPECT_FALSE(TakenByAnotherThread(mu));
}

// A queue of ints: producers Push, consumers Pop with a deadline (NotifyOne per item).
class Queue {
 public:
  void Push(int v) ABSL_LOCKS_EXCLUDED(mu_) {
    {
      MutexLock lock(mu_);
      items_.push_back(v);
    }
    cv_.NotifyOne();
  }
  // The oldest item; false if none came before `deadline`.
  bool Pop(Clock::time_point deadline, int* out) ABSL_LOCKS_EXCLUDED(mu_) {
    MutexLock lock(mu_);
    while (items_.empty()) {
      if (cv_.WaitUntil(lock, deadline) == std::cv_status::timeout && items_.empty()) {
        return false;
      }
    }
    *out = items_.front();
    items_.erase(items_.begin());
    return true;
  }

 private:
  Mutex mu_;
  CondVar cv_;
  std::vector<int> items_ ABSL_GUARDED_BY(mu_);
};

TEST(CondVarTest, EveryPushedItemIsPoppedExactlyOnce) {
  Queue queue;
  constexpr int kProducers = 4;
  constexpr int kConsumers = 4;
  constexpr int kPerProducer = 2000;
  const Clock::time_point deadline = Clock::now() + kPatience;
  std::vector<std::vector<int>> popped(kConsumers);
  std::vector<std::thread> threads;
  for (int c = 0; c < kConsumers; ++c) {
    threads.emplace_back([&, c] {
      int v;
      // Each consumer takes its share; a lost wakeup shows as a deadline miss.
      for (int i = 0; i < kProducers * kPerProducer / kConsumers; ++i) {
        if (!queue.Pop(deadline, &v)) return;
        popped[c].push_back(v);
      }
    });
  }
  for (int p = 0; p < kProducers; ++p) {
    threads.emplace_back([&, p] {
      for (int i = 0; i < kPerProducer; ++i) queue.Push(p * kPerProducer + i);
    });
  }
  for (std::thread& t : threads) t.join();
  std::set<int> seen;
  size_t total = 0;
  for (const std::vector<int>& values : popped) {
    total += values.size();
    seen.insert(values.begin(), values.end());
  }
  EXPECT_EQ(total, size_t{kProducers * kPerProducer});
  ASSERT_EQ(seen.size(), size_t{kProducers * kPerProducer});
  EXPECT_EQ(*seen.begin(), 0);
  EXPECT_EQ(*seen.rbegin(), kProducers * kPerProducer - 1);
}

TEST(CondVarTest, WaitForTimesOutWithTheLockHeld) {
  Mutex mu;
  CondVar cv;
  MutexLock lock(mu);
  const auto timeout = std::chrono::milliseconds(30);
  const Clock::time_point start = Clock::now();
  // Nobody notifies: it times out (a spurious wakeup may come first; then wait again).
  std::cv_status status = std::cv_status::no_timeout;
  while (status == std::cv_status::no_timeout && Clock::now() - start < kPatience) {
    status = cv.WaitFor(lock, timeout);
  }
  EXPECT_EQ(status, std::cv_status::timeout);
  EXPECT_GE(Clock::now() - start, timeout);
  // The lock is held again on return.
  EXPECT_FALSE(TakenByAnotherThread(mu));
}

TEST(CondVarTest, WaitUntilAPastDeadlineReturnsTimeoutAtOnce) {
  Mutex mu;
  CondVar cv;
  MutexLock lock(mu);
  const Clock::time_point start = Clock::now();
  EXPECT_EQ(cv.WaitUntil(lock, start - std::chrono::seconds(1)), std::cv_status::timeout);
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(5));
}

TEST(CondVarTest, WaitReturnsOnceNotified) {
  struct State {
    Mutex mu;
    CondVar cv;
    bool ready ABSL_GUARDED_BY(mu) = false;
    bool gave_up ABSL_GUARDED_BY(mu) = false;  // set by the watchdog
  } state;
  std::thread setter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    {
      MutexLock lock(state.mu);
      state.ready = true;
    }
    state.cv.NotifyAll();
  });
  // Wait has no deadline of its own: a watchdog ends the wait if the wakeup is lost.
  Flag finished;
  std::thread watchdog([&] {
    if (finished.WaitUntil(Clock::now() + kPatience)) return;
    {
      MutexLock lock(state.mu);
      state.gave_up = true;
    }
    state.cv.NotifyAll();
  });
  {
    MutexLock lock(state.mu);
    while (!state.ready && !state.gave_up) state.cv.Wait(lock);
    EXPECT_TRUE(state.ready);
    EXPECT_FALSE(state.gave_up);
  }
  finished.Set();
  setter.join();
  watchdog.join();
}

TEST(MutexTest, WorksWithTheStandardLockTypes) {
  Mutex mu;
  std::condition_variable_any cv;
  int value = 0;  // under mu
  std::thread writer([&] {
    std::lock_guard<Mutex> lock(mu);
    value = 42;
    cv.notify_all();
  });
  {
    std::unique_lock<Mutex> lock(mu);
    EXPECT_TRUE(cv.wait_for(lock, kPatience, [&] { return value == 42; }));
  }
  writer.join();
  std::scoped_lock both(mu);
  EXPECT_EQ(value, 42);
}

}  // namespace
}  // namespace shardrt
