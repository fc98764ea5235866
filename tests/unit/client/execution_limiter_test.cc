// ExecutionLimiter: slots are bounded, an oversized request still runs alone, releases from other
// threads wake waiters, and a disabled limiter never waits. A limiter that fails to wake a waiter
// fails the test after a bounded wait instead of hanging it.
#include "client/execution_limiter.h"

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "../../common/finishes_within.h"
#include "gtest/gtest.h"
#include "shardrt/base/mutex.h"

namespace shardrt {
namespace {

constexpr auto kPatience = std::chrono::seconds(30);

// FinishesWithin (tests/common/finishes_within.h), waiting kPatience unless told otherwise.
bool FinishesWithin(std::function<void()> work, std::chrono::seconds limit = kPatience) {
  return testing::FinishesWithin(std::move(work), limit);
}

TEST(ExecutionLimiterTest, BoundsConcurrentHolders) {
  auto limiter = std::make_shared<ExecutionLimiter>(16);
  auto held = std::make_shared<std::atomic<int64_t>>(0);
  auto peak = std::make_shared<std::atomic<int64_t>>(0);
  ASSERT_TRUE(FinishesWithin([=] {
    std::vector<std::thread> threads;
    for (int t = 0; t < 8; ++t) {
      threads.emplace_back([=] {
        for (int i = 0; i < 200; ++i) {
          limiter->Acquire(8);
          int64_t now = held->fetch_add(8) + 8;
          int64_t prev = peak->load();
          while (now > prev && !peak->compare_exchange_weak(prev, now)) {
          }
          std::this_thread::yield();
          held->fetch_sub(8);
          limiter->Release(8);
        }
      });
    }
    for (auto& t : threads) t.join();
    limiter->WaitIdle();
  })) << "holders never finished: a waiter was not woken";
  EXPECT_LE(peak->load(), 16);
  EXPECT_GE(peak->load(), 8);
}

TEST(ExecutionLimiterTest, OversizedRequestRunsWhenNothingElseIsHeld) {
  auto limiter = std::make_shared<ExecutionLimiter>(4);
  auto got = std::make_shared<std::atomic<bool>>(false);
  limiter->Acquire(2);
  auto big = [=] {
    limiter->Acquire(8);  // more than the capacity: waits for an empty limiter
    *got = true;
    limiter->Release(8);
  };
  EXPECT_FALSE(FinishesWithin(big, std::chrono::seconds(1))) << "ran while 2 slots were held";
  EXPECT_FALSE(got->load());
  limiter->Release(2);  // from another thread than the waiter: wakes the first `big`
  ASSERT_TRUE(FinishesWithin([=] {
    while (!got->load()) std::this_thread::yield();
    limiter->WaitIdle();
  })) << "the oversized request was not woken by the release";
  EXPECT_TRUE(FinishesWithin(big)) << "a second oversized request on an empty limiter waited";
}

TEST(ExecutionLimiterTest, DisabledNeverWaits) {
  auto limiter = std::make_shared<ExecutionLimiter>(0);
  EXPECT_FALSE(limiter->enabled());
  EXPECT_TRUE(FinishesWithin([=] {
    for (int i = 0; i < 100; ++i) limiter->Acquire(1000);
    limiter->WaitIdle();
  })) << "a disabled limiter waited";
}

}  // namespace
}  // namespace shardrt
