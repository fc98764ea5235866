// ThreadPool: a fixed set of worker threads, and ParallelFor, a blocking parallel loop over
// [0, n) that splits the range by a cost estimate.
//
// Design. The pool is a thin wrapper over Eigen's non-blocking pool (per-worker lock-free
// queues with work stealing). It is an object that callers create and pass in; there is no
// process-wide pool. ParallelFor does not hand whole blocks to workers: it publishes a block
// counter, and the caller and one helper task per remaining block each grab the next unstarted
// block in a loop. The caller therefore always makes progress on its own, and its final wait
// only covers blocks that a worker has already started. This makes ParallelFor safe to call
// from inside a pool thread (nested loops included) even when every worker is busy: helper
// tasks that start after the work is gone return at once.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"

#include "shardrt/base/export.h"

namespace shardrt {

// A fixed-size pool of worker threads.
//
// Thread-safety: Schedule, num_threads and CurrentThreadId may be called concurrently from any
// thread, pool threads included.
// Shutdown: the destructor waits until every task scheduled so far has run (tasks may schedule
// more tasks while it waits; those run too), then joins the workers. Destroying the pool from
// one of its own threads is not allowed. Nothing may call Schedule once the destructor starts.
class SHARDRT_EXPORT ThreadPool {
 public:
  // Starts `num_threads` workers. Values below 1 are treated as 1; values above
  // kMaxThreads as kMaxThreads. ParallelFor uses at most as many threads at once (caller
  // included) as the process may run on cores: the CPUs of its affinity mask.
  explicit ThreadPool(int num_threads);
  // The same, but ParallelFor assumes `cores` cores (values below 1 are treated as 1), whatever
  // the machine has: for tests, and for callers that reserve cores for other work.
  ThreadPool(int num_threads, int cores);
  ~ThreadPool();

  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  // The most workers a pool may have.
  static constexpr int kMaxThreads = 4096;

  // The number of worker threads.
  int num_threads() const;

  // The cores ParallelFor may keep busy at once, the caller's included (see the constructors).
  int cores() const { return cores_; }

  // Queues `task` to run once on some worker, in no particular order relative to other tasks.
  // Never blocks for the task; if the chosen queue is full the task runs inline on the caller.
  // The task must not throw.
  void Schedule(std::function<void()> task);

  // The index of the calling thread in [0, num_threads()) when it is a worker of this pool,
  // else -1.
  int CurrentThreadId() const;

  // How many tasks Schedule has been given so far: tells a benchmark or test whether
  // ParallelFor split its work or ran it inline. Thread-safe.
  int64_t tasks_scheduled() const { return tasks_scheduled_.load(std::memory_order_relaxed); }

 private:
  struct Impl;  // the Eigen pool, kept out of this header
  std::unique_ptr<Impl> impl_;
  int cores_ = 1;
  std::atomic<int64_t> tasks_scheduled_{0};
};

// The cost estimate that guides ParallelFor's split.
struct SHARDRT_EXPORT ParallelCost {
  // Estimated time to process one item, in nanoseconds of one core. Overestimates create more
  // blocks than useful; underestimates keep work on the caller. Values <= 0 mean "trivial":
  // the loop always runs inline.
  double per_item_ns = 1000.0;
};

// Below this total estimated cost (n * per_item_ns) ParallelFor runs the body inline. Waking a
// parked worker and handing it a block costs 5-20 us on a loaded machine, and a block's results
// then live in another core's cache, from where the caller reads them back; splitting pays only
// when each block saves clearly more. bench/run on 2 cores: argument plumbing of about 50 us
// split in two was 4 % slower per call than inline; of about 110 us (D = 8, k = 1000) split in
// two, 0.99-1.03x the inline time (31 rounds: 1.03 [1.00, 1.05]), no gain to take the risk for.
inline constexpr double kParallelForInlineThresholdNs = 200'000.0;
// Each block carries at least this much estimated work, so that the hop and the trip of its
// results back to the caller's cache are amortized.
inline constexpr double kParallelForMinBlockNs = 100'000.0;

// The body of a ParallelFor: processes items [begin, end). Must not throw.
using ParallelForBody = absl::FunctionRef<absl::Status(int64_t begin, int64_t end)>;

// Runs `body` over [0, n) split into contiguous, disjoint blocks that together cover every index
// exactly once, and returns once every block has run or been skipped (blocking).
//
// The split: when `pool` is null or has one thread, when n * cost.per_item_ns is below
// kParallelForInlineThresholdNs, or when the work does not fill two blocks of
// kParallelForMinBlockNs, body(0, n) runs once on the calling thread. Otherwise the range is cut
// into at most min(pool->num_threads() + 1, pool->cores()) blocks of near-equal size (more
// threads than cores would only take turns); the caller runs blocks itself while pool workers
// take the others.
//
// Errors: returns OK when every block returned OK. Otherwise returns the first non-OK status
// recorded (the earliest to finish, not the lowest index); once an error is recorded, blocks
// that have not started yet are skipped, while blocks already running complete. Returns
// InvalidArgument when n < 0; n == 0 calls nothing and returns OK.
//
// Thread-safety: `body` may run concurrently on several threads, each call on a disjoint range.
// ParallelFor itself may be called from any thread, including a worker of `pool` (nested
// ParallelFor does not deadlock; in the worst case the caller runs every block itself).
// `pool` is borrowed and must outlive the call.
[[nodiscard]] SHARDRT_EXPORT absl::Status ParallelFor(ThreadPool* pool, int64_t n,
                                                      const ParallelCost& cost,
                                                      ParallelForBody body);

}  // namespace shardrt
