// ExecutionLimiter: slots are bounded, an oversized request still runs alone, releases from other
// threads wake waiters, and a disabled limiter never waits.
#include "client/execution_limiter.h"

#include <atomic>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace shardrt {
namespace {

TEST(ExecutionLimiterTest, BoundsConcurrentHolders) {
  ExecutionLimiter limiter(16);
  std::atomic<int64_t> held{0}, peak{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 200; ++i) {
        limiter.Acquire(8);
        int64_t now = held.fetch_add(8) + 8;
        int64_t prev = peak.load();
        while (now > prev && !peak.compare_exchange_weak(prev, now)) {
        }
        std::this_thread::yield();
        held.fetch_sub(8);
        limiter.Release(8);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_LE(peak.load(), 16);
  EXPECT_GE(peak.load(), 8);
  limiter.WaitIdle();
}

TEST(ExecutionLimiterTest, OversizedRequestRunsWhenNothingElseIsHeld) {
  ExecutionLimiter limiter(4);
  limiter.Acquire(2);
  std::atomic<bool> got{false};
  std::thread big([&] {
    limiter.Acquire(8);  // more than the capacity: waits for an empty limiter
    got = true;
    limiter.Release(8);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_FALSE(got.load());
  limiter.Release(2);  // from another thread than the waiter
  big.join();
  EXPECT_TRUE(got.load());
}

TEST(ExecutionLimiterTest, DisabledNeverWaits) {
  ExecutionLimiter limiter(0);
  EXPECT_FALSE(limiter.enabled());
  for (int i = 0; i < 100; ++i) limiter.Acquire(1000);
  limiter.WaitIdle();
}

}  // namespace
}  // namespace shardrt
