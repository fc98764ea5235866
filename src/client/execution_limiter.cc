#include "client/execution_limiter.h"

namespace shardrt {

void ExecutionLimiter::Acquire(int64_t slots) {
  if (!enabled()) return;
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return used_ == 0 || used_ + slots <= capacity_; });
  used_ += slots;
}

void ExecutionLimiter::Release(int64_t slots) {
  if (!enabled()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    used_ -= slots;
  }
  cv_.notify_all();
}

void ExecutionLimiter::WaitIdle() {
  if (!enabled()) return;
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return used_ == 0; });
}

}  // namespace shardrt
