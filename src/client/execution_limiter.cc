#include "client/execution_limiter.h"

namespace shardrt {

void ExecutionLimiter::Acquire(int64_t slots) {
  if (!enabled()) return;
  MutexLock lock(mu_);
  while (used_ != 0 && used_ + slots > capacity_) cv_.Wait(lock);
  used_ += slots;
}

void ExecutionLimiter::Release(int64_t slots) {
  if (!enabled()) return;
  {
    MutexLock lock(mu_);
    used_ -= slots;
  }
  cv_.NotifyAll();
}

void ExecutionLimiter::WaitIdle() {
  if (!enabled()) return;
  MutexLock lock(mu_);
  while (used_ != 0) cv_.Wait(lock);
}

}  // namespace shardrt
