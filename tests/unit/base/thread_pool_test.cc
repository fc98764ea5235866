#include "shardrt/base/thread_pool.h"

#include <sched.h>

#include <atomic>
#include <cstdint>
#include <latch>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "shardrt/base/mutex.h"

namespace shardrt {
namespace {

using ::testing::HasSubstr;

TEST(ThreadPoolTest, RunsEveryScheduledTask) {
  ThreadPool pool(4);
  EXPECT_EQ(pool.num_threads(), 4);
  std::atomic<int> ran{0};
  std::latch done(100);
  for (int i = 0; i < 100; ++i) {
    pool.Schedule([&] {
      ran.fetch_add(1);
      done.count_down();
    });
  }
  done.wait();
  EXPECT_EQ(ran.load(), 100);
}

TEST(ThreadPoolTest, DestructorDrainsQueuedTasks) {
  std::atomic<int> ran{0};
  {
    ThreadPool pool(2);
    for (int i = 0; i < 200; ++i) pool.Schedule([&] { ran.fetch_add(1); });
  }
  EXPECT_EQ(ran.load(), 200);
}

TEST(ThreadPoolTest, ClampsThreadCount) {
  ThreadPool pool(0);
  EXPECT_EQ(pool.num_threads(), 1);
}

TEST(ThreadPoolTest, CurrentThreadId) {
  ThreadPool pool(3);
  EXPECT_EQ(pool.CurrentThreadId(), -1);
  std::atomic<int> id{-2};
  std::latch done(1);
  pool.Schedule([&] {
    id = pool.CurrentThreadId();
    done.count_down();
  });
  done.wait();
  EXPECT_GE(id.load(), 0);
  EXPECT_LT(id.load(), 3);
}

// Runs ParallelFor and checks that the blocks are disjoint, contiguous and cover [0, n).
void ExpectCoversOnce(ThreadPool* pool, int64_t n, double per_item_ns) {
  std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
  std::atomic<int64_t> calls{0};
  absl::Status status =
      ParallelFor(pool, n, ParallelCost{per_item_ns}, [&](int64_t begin, int64_t end) {
        EXPECT_LE(0, begin);
        EXPECT_LT(begin, end);
        EXPECT_LE(end, n);
        for (int64_t i = begin; i < end; ++i) hits[static_cast<size_t>(i)].fetch_add(1);
        calls.fetch_add(1);
        return absl::OkStatus();
      });
  ASSERT_TRUE(status.ok()) << status;
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_EQ(hits[static_cast<size_t>(i)].load(), 1) << "index " << i << " n " << n;
  }
  if (pool != nullptr) {
    EXPECT_LE(calls.load(), pool->num_threads() + 1);
  }
}

TEST(ParallelForTest, CoversEveryIndexExactlyOnce) {
  ThreadPool pool(4, /*cores=*/8);
  for (int64_t n : {1, 2, 3, 5, 7, 16, 31, 100, 1000, 4097}) {
    for (double cost : {0.0, 1.0, 100.0, 3000.0, 10000.0, 1e6, 1e12}) {
      ExpectCoversOnce(&pool, n, cost);
    }
  }
}

TEST(ParallelForTest, ZeroItemsCallsNothing) {
  ThreadPool pool(2);
  bool called = false;
  absl::Status status = ParallelFor(&pool, 0, ParallelCost{1e9}, [&](int64_t, int64_t) {
    called = true;
    return absl::OkStatus();
  });
  EXPECT_TRUE(status.ok());
  EXPECT_FALSE(called);
}

TEST(ParallelForTest, NegativeCountIsAnError) {
  absl::Status status =
      ParallelFor(nullptr, -1, ParallelCost{}, [](int64_t, int64_t) { return absl::OkStatus(); });
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
}

// Records every (begin, end, thread) call. A shardrt::Mutex (a std::mutex), which
// ThreadSanitizer understands even when Abseil was built without it.
class CallLog {
 public:
  absl::Status Record(int64_t begin, int64_t end) ABSL_LOCKS_EXCLUDED(mu_) {
    MutexLock lock(mu_);
    ranges_.emplace_back(begin, end);
    threads_.push_back(std::this_thread::get_id());
    return absl::OkStatus();
  }
  // Copies of what was recorded, in call order.
  std::vector<std::pair<int64_t, int64_t>> Ranges() ABSL_LOCKS_EXCLUDED(mu_) {
    MutexLock lock(mu_);
    return ranges_;
  }
  std::vector<std::thread::id> Threads() ABSL_LOCKS_EXCLUDED(mu_) {
    MutexLock lock(mu_);
    return threads_;
  }

 private:
  Mutex mu_;
  std::vector<std::pair<int64_t, int64_t>> ranges_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread::id> threads_ ABSL_GUARDED_BY(mu_);
};

TEST(ParallelForTest, SmallWorkRunsInlineAsOneBlock) {
  ThreadPool pool(4);
  CallLog log;
  // 10 items x 1 us = 10 us, below the inline threshold.
  ASSERT_TRUE(ParallelFor(&pool, 10, ParallelCost{1000.0}, [&](int64_t b, int64_t e) {
                return log.Record(b, e);
              }).ok());
  ASSERT_EQ(log.Ranges().size(), 1u);
  EXPECT_EQ(log.Ranges()[0], std::make_pair(int64_t{0}, int64_t{10}));
  EXPECT_EQ(log.Threads()[0], std::this_thread::get_id());
  EXPECT_EQ(pool.tasks_scheduled(), 0);  // nothing went to the pool
}

TEST(ParallelForTest, NullPoolRunsInline) {
  CallLog log;
  ASSERT_TRUE(ParallelFor(nullptr, 1000, ParallelCost{1e6}, [&](int64_t b, int64_t e) {
                return log.Record(b, e);
              }).ok());
  ASSERT_EQ(log.Ranges().size(), 1u);
  EXPECT_EQ(log.Ranges()[0], std::make_pair(int64_t{0}, int64_t{1000}));
  EXPECT_EQ(log.Threads()[0], std::this_thread::get_id());
}

TEST(ParallelForTest, SingleThreadPoolRunsInline) {
  ThreadPool pool(1);
  CallLog log;
  ASSERT_TRUE(ParallelFor(&pool, 1000, ParallelCost{1e6}, [&](int64_t b, int64_t e) {
                return log.Record(b, e);
              }).ok());
  ASSERT_EQ(log.Ranges().size(), 1u);
  EXPECT_EQ(log.Threads()[0], std::this_thread::get_id());
}

TEST(ParallelForTest, LargeWorkIsSplitIntoThreadsPlusOneBlocks) {
  ThreadPool pool(3, /*cores=*/8);
  CallLog log;
  ASSERT_TRUE(ParallelFor(&pool, 400, ParallelCost{1e6}, [&](int64_t b, int64_t e) {
                return log.Record(b, e);
              }).ok());
  EXPECT_EQ(log.Ranges().size(), 4u);  // 3 workers + the caller
  for (const auto& [begin, end] : log.Ranges()) EXPECT_EQ(end - begin, 100);
  EXPECT_EQ(pool.tasks_scheduled(), 3);  // one helper task per block but the caller's
}

TEST(ParallelForTest, BlocksAreAtLeastTheMinimumCost) {
  ThreadPool pool(8, /*cores=*/16);
  CallLog log;
  // 3 x kParallelForMinBlockNs of work in total: at most 3 blocks.
  const int64_t n = static_cast<int64_t>(3 * kParallelForMinBlockNs / 1000.0);
  ASSERT_TRUE(ParallelFor(&pool, n, ParallelCost{1000.0}, [&](int64_t b, int64_t e) {
                return log.Record(b, e);
              }).ok());
  EXPECT_EQ(log.Ranges().size(), 3u);
}

TEST(ParallelForTest, NoMoreBlocksThanCores) {
  ThreadPool pool(8, /*cores=*/2);
  EXPECT_EQ(pool.cores(), 2);
  CallLog log;
  ASSERT_TRUE(ParallelFor(&pool, 400, ParallelCost{1e6}, [&](int64_t b, int64_t e) {
                return log.Record(b, e);
              }).ok());
  ASSERT_EQ(log.Ranges().size(), 2u);  // the caller and one worker, 200 items each
  for (const auto& [begin, end] : log.Ranges()) EXPECT_EQ(end - begin, 200);
}

TEST(ParallelForTest, OneCoreRunsInline) {
  ThreadPool pool(4, /*cores=*/1);
  CallLog log;
  ASSERT_TRUE(ParallelFor(&pool, 400, ParallelCost{1e6}, [&](int64_t b, int64_t e) {
                return log.Record(b, e);
              }).ok());
  ASSERT_EQ(log.Ranges().size(), 1u);
  EXPECT_EQ(log.Threads()[0], std::this_thread::get_id());
}

TEST(ThreadPoolTest, CoresDefaultToTheAffinityMask) {
  ThreadPool pool(2);
  cpu_set_t set;
  CPU_ZERO(&set);
  ASSERT_EQ(sched_getaffinity(0, sizeof(set), &set), 0);
  EXPECT_EQ(pool.cores(), CPU_COUNT(&set));
  EXPECT_EQ(ThreadPool(2, 0).cores(), 1);
}

TEST(ParallelForTest, ReturnsTheErrorOfAFailingBlock) {
  ThreadPool pool(4);
  for (int repeat = 0; repeat < 20; ++repeat) {
    absl::Status status = ParallelFor(&pool, 100, ParallelCost{1e6}, [](int64_t b, int64_t e) {
      if (b <= 57 && 57 < e) return absl::InternalError("item 57 failed");
      return absl::OkStatus();
    });
    EXPECT_EQ(status.code(), absl::StatusCode::kInternal);
    EXPECT_THAT(status.message(), HasSubstr("item 57"));
  }
}

TEST(ParallelForTest, ReturnsOneOfSeveralErrors) {
  ThreadPool pool(4);
  absl::Status status = ParallelFor(&pool, 100, ParallelCost{1e6}, [](int64_t b, int64_t) {
    return absl::OutOfRangeError(absl::StrCat("block at ", b));
  });
  EXPECT_EQ(status.code(), absl::StatusCode::kOutOfRange);
  EXPECT_THAT(status.message(), HasSubstr("block at "));
}

TEST(ParallelForTest, InlineErrorIsReturned) {
  absl::Status status = ParallelFor(nullptr, 3, ParallelCost{}, [](int64_t, int64_t) {
    return absl::NotFoundError("nope");
  });
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
}

TEST(ParallelForTest, NestedInsidePoolThreadsDoesNotDeadlock) {
  ThreadPool pool(2);
  std::atomic<int64_t> sum{0};
  // The outer loop occupies every worker; each outer block runs an inner loop on the same pool.
  absl::Status status = ParallelFor(&pool, 8, ParallelCost{1e7}, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      absl::Status inner = ParallelFor(&pool, 100, ParallelCost{1e6}, [&](int64_t ib, int64_t ie) {
        for (int64_t j = ib; j < ie; ++j) sum.fetch_add(j);
        return absl::OkStatus();
      });
      if (!inner.ok()) return inner;
    }
    return absl::OkStatus();
  });
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(sum.load(), 8 * (99 * 100 / 2));
}

TEST(ParallelForTest, CalledFromEveryWorkerAtOnceDoesNotDeadlock) {
  ThreadPool pool(3);
  std::atomic<int64_t> total{0};
  std::latch done(6);
  for (int t = 0; t < 6; ++t) {
    pool.Schedule([&] {
      absl::Status status = ParallelFor(&pool, 1000, ParallelCost{1e5}, [&](int64_t b, int64_t e) {
        total.fetch_add(e - b);
        return absl::OkStatus();
      });
      EXPECT_TRUE(status.ok());
      done.count_down();
    });
  }
  done.wait();
  EXPECT_EQ(total.load(), 6 * 1000);
}

TEST(ParallelForTest, ManyConcurrentCallersFromOutside) {
  ThreadPool pool(4);
  std::vector<std::thread> callers;
  std::atomic<int64_t> total{0};
  for (int t = 0; t < 4; ++t) {
    callers.emplace_back([&] {
      for (int r = 0; r < 50; ++r) {
        ASSERT_TRUE(ParallelFor(&pool, 64, ParallelCost{1e5}, [&](int64_t b, int64_t e) {
                      total.fetch_add(e - b);
                      return absl::OkStatus();
                    }).ok());
      }
    });
  }
  for (std::thread& t : callers) t.join();
  EXPECT_EQ(total.load(), 4 * 50 * 64);
}

}  // namespace
}  // namespace shardrt
