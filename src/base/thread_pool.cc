#include "shardrt/base/thread_pool.h"

#include <sched.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <latch>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"

// Eigen's pool uses std::atomic_thread_fence, which GCC flags under -fsanitize=thread because the
// sanitizer does not model fences. That can only add false reports, never hide a race.
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 12
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wtsan"
#endif
#define EIGEN_USE_THREADS
#include <unsupported/Eigen/CXX11/ThreadPool>
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 12
#pragma GCC diagnostic pop
#endif

namespace shardrt {

struct ThreadPool::Impl {
  explicit Impl(int num_threads) : pool(num_threads) {}
  Eigen::ThreadPool pool;
};

namespace {

// The CPUs this process may run on (its affinity mask), else the machine's.
int AvailableCores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    const int n = CPU_COUNT(&set);
    if (n > 0) return n;
  }
  return std::max(1u, std::thread::hardware_concurrency());
}

}  // namespace

ThreadPool::ThreadPool(int num_threads) : ThreadPool(num_threads, AvailableCores()) {}

ThreadPool::ThreadPool(int num_threads, int cores)
    : impl_(std::make_unique<Impl>(std::clamp(num_threads, 1, kMaxThreads))),
      cores_(std::max(cores, 1)) {}

// Eigen's destructor lets the workers finish every queued task before they exit and are joined.
ThreadPool::~ThreadPool() = default;

int ThreadPool::num_threads() const { return impl_->pool.NumThreads(); }

void ThreadPool::Schedule(std::function<void()> task) {
  tasks_scheduled_.fetch_add(1, std::memory_order_relaxed);
  impl_->pool.Schedule(std::move(task));
}

int ThreadPool::CurrentThreadId() const { return impl_->pool.CurrentThreadId(); }

namespace {

// What the caller and the helper tasks of one ParallelFor share. Helpers hold it through a
// shared_ptr: a helper may start only after the caller has returned, and then it must still find
// the block counter (it sees no block left and returns without touching `body`).
struct LoopState {
  LoopState(int64_t n, int64_t block_size, int num_blocks, ParallelForBody body)
      : n(n), block_size(block_size), num_blocks(num_blocks), body(body),
        blocks_done(num_blocks) {}

  const int64_t n;
  const int64_t block_size;
  const int num_blocks;
  // Valid while blocks remain: the caller waits for every block before returning.
  const ParallelForBody body;

  std::atomic<int> next_block{0};  // the next block to hand out; may run past num_blocks
  std::atomic<bool> failed{false};
  absl::Status first_error;  // written once, by the thread that set `failed`
  // Counts every block once, run or skipped. Counting down is lock-free; the caller's wait
  // returns after the last count and sees every block's writes (its results, `first_error`).
  // std::latch rather than absl::BlockingCounter: same contract, but header-only, so
  // ThreadSanitizer sees its synchronization even when Abseil is a prebuilt library.
  std::latch blocks_done;
};

// Takes blocks until none is left.
void RunBlocks(LoopState& state) {
  while (true) {
    const int block = state.next_block.fetch_add(1, std::memory_order_relaxed);
    if (block >= state.num_blocks) return;
    if (!state.failed.load(std::memory_order_relaxed)) {
      const int64_t begin = block * state.block_size;
      const int64_t end = std::min(state.n, begin + state.block_size);
      absl::Status status = state.body(begin, end);
      if (!status.ok() && !state.failed.exchange(true, std::memory_order_relaxed)) {
        state.first_error = std::move(status);
      }
    }
    state.blocks_done.count_down();
  }
}

// How many blocks to cut [0, n) into; 1 means "run inline".
int NumBlocks(const ThreadPool* pool, int64_t n, double per_item_ns) {
  if (pool == nullptr || pool->num_threads() <= 1 || n < 2) return 1;
  if (!(per_item_ns > 0.0)) return 1;  // also catches NaN
  const double total_ns = static_cast<double>(n) * per_item_ns;
  if (total_ns < kParallelForInlineThresholdNs) return 1;
  const double blocks = std::min({static_cast<double>(pool->num_threads()) + 1.0,
                                  static_cast<double>(pool->cores()),
                                  std::floor(total_ns / kParallelForMinBlockNs),
                                  static_cast<double>(n)});
  return blocks < 2.0 ? 1 : static_cast<int>(blocks);
}

}  // namespace

absl::Status ParallelFor(ThreadPool* pool, int64_t n, const ParallelCost& cost,
                         ParallelForBody body) {
  if (n < 0) return absl::InvalidArgumentError(absl::StrCat("ParallelFor: negative count ", n));
  if (n == 0) return absl::OkStatus();
  int num_blocks = NumBlocks(pool, n, cost.per_item_ns);
  if (num_blocks <= 1) return body(0, n);

  // Near-equal blocks; rounding the size up may leave fewer blocks than planned.
  const int64_t block_size = (n + num_blocks - 1) / num_blocks;
  num_blocks = static_cast<int>((n + block_size - 1) / block_size);
  auto state = std::make_shared<LoopState>(n, block_size, num_blocks, body);
  // The caller works too, so one helper fewer than blocks is enough.
  for (int i = 1; i < num_blocks; ++i) {
    pool->Schedule([state] { RunBlocks(*state); });
  }
  RunBlocks(*state);
  // Waits only for blocks that helpers have taken: every block is taken by now.
  state->blocks_done.wait();
  return std::move(state->first_error);
}

}  // namespace shardrt
