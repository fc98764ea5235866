// ExecutionLimiter: a bound on the device parts of multi-device executions in flight.
//
// The CPU plugin runs every device's part of a launch on one shared worker pool, and a part that
// reaches a collective holds its thread until the parts of all devices arrive. With more parts
// in flight than threads, every thread can end up waiting for a part that has no thread left:
// the plugin aborts the process after 40 s. ComputationClient therefore takes `devices` slots
// before each multi-device launch and gives them back when every device has finished it.
//
// Thread-safety: all methods are thread-safe; Release may run on plugin threads.
#pragma once

#include <cstdint>

#include "shardrt/base/mutex.h"

namespace shardrt {

class ExecutionLimiter {
 public:
  // `capacity` slots; 0 disables the limiter (Acquire never waits).
  explicit ExecutionLimiter(int64_t capacity) : capacity_(capacity) {}

  bool enabled() const { return capacity_ > 0; }
  int64_t capacity() const { return capacity_; }
  // Blocks until `slots` are free and takes them. A request above the capacity waits until
  // nothing else is held, so it still makes progress.
  void Acquire(int64_t slots) ABSL_LOCKS_EXCLUDED(mu_);
  // Gives back `slots` taken by Acquire.
  void Release(int64_t slots) ABSL_LOCKS_EXCLUDED(mu_);
  // Blocks until no slot is held (for shutdown).
  void WaitIdle() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  const int64_t capacity_;
  Mutex mu_;
  CondVar cv_;
  int64_t used_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace shardrt
