// Cancellation: a flag one thread raises to end work another thread is doing (e.g. a server
// cancelling a generation whose client went away).
#pragma once

#include <atomic>

#include "shardrt/base/export.h"

namespace shardrt::llm {

// Thread-safe; once cancelled, stays cancelled.
class SHARDRT_EXPORT Cancellation {
 public:
  void Cancel() { cancelled_.store(true, std::memory_order_release); }
  bool cancelled() const { return cancelled_.load(std::memory_order_acquire); }

 private:
  std::atomic<bool> cancelled_{false};
};

}  // namespace shardrt::llm
