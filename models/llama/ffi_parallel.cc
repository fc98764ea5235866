#include "llama/ffi_parallel.h"

#include <algorithm>
#include <atomic>
#include <memory>
#include <thread>
#include <utility>

namespace shardrt::llama {
namespace {

// Shared by the caller and the tasks, kept alive by the tasks that hold it: a task that starts
// after the caller returned only finds the counter exhausted and never calls `run`.
struct Chunks {
  Chunks(int64_t count, std::function<void(int64_t)> run) : count(count), run(std::move(run)) {}
  const int64_t count;
  const std::function<void(int64_t)> run;  // valid while chunks remain unfinished
  std::atomic<int64_t> next{0};
  std::atomic<int64_t> finished{0};

  void Drain() {
    for (int64_t c; (c = next.fetch_add(1, std::memory_order_relaxed)) < count;) {
      run(c);
      finished.fetch_add(1, std::memory_order_release);
    }
  }
};

}  // namespace

void RunChunks(xla::ffi::ThreadPool& pool, int64_t count, int64_t partitions,
               std::function<void(int64_t)> run) {
  if (count <= 1) {
    if (count == 1) run(0);
    return;
  }
  auto chunks = std::make_shared<Chunks>(count, std::move(run));
  static const int64_t cores = std::max<int64_t>(1, std::thread::hardware_concurrency());
  const int64_t share = std::max<int64_t>(1, cores / std::max<int64_t>(1, partitions));
  const int64_t helpers = std::min({pool.num_threads(), share, count}) - 1;
  for (int64_t h = 0; h < helpers; ++h) pool.Schedule([chunks] { chunks->Drain(); });
  chunks->Drain();
  // Only chunks that some task took and is running remain.
  while (chunks->finished.load(std::memory_order_acquire) < count) std::this_thread::yield();
}

}  // namespace shardrt::llama
