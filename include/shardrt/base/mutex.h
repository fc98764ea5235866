// Mutex, MutexLock and CondVar: a mutex that Clang's thread-safety analysis understands.
//
// Every member that a mutex guards is declared ABSL_GUARDED_BY(that mutex) (or
// ABSL_PT_GUARDED_BY for what a pointer points to), and functions that expect the caller to
// hold it are ABSL_EXCLUSIVE_LOCKS_REQUIRED. Clang (-Wthread-safety, scripts/thread_safety.sh)
// then rejects every access made without the lock; GCC, which builds the library, ignores the
// annotations.
//
//   class Queue {
//    public:
//     void Push(int v) ABSL_LOCKS_EXCLUDED(mu_) {
//       { MutexLock lock(mu_); items_.push_back(v); }
//       cv_.NotifyOne();
//     }
//    private:
//     Mutex mu_;
//     CondVar cv_;
//     std::vector<int> items_ ABSL_GUARDED_BY(mu_);
//   };
//
// Why not absl::Mutex, which is annotated already: the test suite runs under ThreadSanitizer
// (scripts/sanitize.sh), and Debian's prebuilt Abseil is not instrumented for it, so TSan would
// not see absl::Mutex's synchronization and would report races that are not there. Mutex is a
// std::mutex (whose pthread calls TSan intercepts) with annotations and nothing else: the same
// size, the same cost.
//
// Waiting: CondVar::Wait and friends take the MutexLock that holds the mutex and, like
// std::condition_variable, may wake spuriously. Wait in a loop whose condition is written in
// the function that holds the lock (not in a predicate lambda: the analysis checks a lambda's
// body as a function of its own, with no lock held):
//
//   MutexLock lock(mu_);
//   while (items_.empty()) {
//     if (cv_.WaitUntil(lock, deadline) == std::cv_status::timeout) return false;
//   }
//
// Thread-safety: as std::mutex and std::condition_variable. MutexLock is used by one thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>

#include "absl/base/thread_annotations.h"

#include "shardrt/base/export.h"

namespace shardrt {

// A non-recursive exclusive mutex (a std::mutex), known to the thread-safety analysis as a
// capability. Prefer MutexLock to calling Lock/Unlock by hand. lock/unlock/try_lock make it a
// standard Lockable, so std::lock_guard, std::unique_lock and std::condition_variable_any work
// with it at run time, but the analysis does not see what those do: use MutexLock where
// guarded members are touched. Not copyable or movable.
class SHARDRT_EXPORT ABSL_LOCKABLE Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  // Blocks until the calling thread holds the mutex. The caller must not hold it already.
  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() { mu_.lock(); }
  // Releases the mutex, which the calling thread holds.
  void Unlock() ABSL_UNLOCK_FUNCTION() { mu_.unlock(); }
  // Takes the mutex if no thread holds it; true when it did. May fail spuriously, as
  // std::mutex::try_lock.
  [[nodiscard]] bool TryLock() ABSL_EXCLUSIVE_TRYLOCK_FUNCTION(true) { return mu_.try_lock(); }

  // The standard Lockable names of the three above.
  void lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() { mu_.lock(); }
  void unlock() ABSL_UNLOCK_FUNCTION() { mu_.unlock(); }
  [[nodiscard]] bool try_lock() ABSL_EXCLUSIVE_TRYLOCK_FUNCTION(true) { return mu_.try_lock(); }

 private:
  friend class MutexLock;
  std::mutex mu_;
};

// Holds a Mutex for its scope (locks in the constructor, unlocks in the destructor unless
// already unlocked). Unlock and Lock release and take it again within the scope. Used by one
// thread; not copyable or movable.
class SHARDRT_EXPORT ABSL_SCOPED_LOCKABLE MutexLock {
 public:
  // Blocks until `mu` is held. `mu` must outlive the lock.
  explicit MutexLock(Mutex& mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu) : lock_(mu.mu_) {}
  // Releases the mutex if this lock holds it.
  ~MutexLock() ABSL_UNLOCK_FUNCTION() = default;

  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

  // Releases the mutex early; the lock must hold it.
  void Unlock() ABSL_UNLOCK_FUNCTION() { lock_.unlock(); }
  // Takes the mutex again after Unlock.
  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() { lock_.lock(); }

 private:
  friend class CondVar;
  std::unique_lock<std::mutex> lock_;
};

// A condition variable (a std::condition_variable) for threads waiting on a Mutex, through the
// MutexLock that holds it. Every wait releases the mutex while it blocks and holds it again when
// it returns, so to the analysis the lock is held throughout. Waits may wake spuriously: wait
// in a loop (see the top of this file). Not copyable or movable.
class SHARDRT_EXPORT CondVar {
 public:
  CondVar() = default;
  CondVar(const CondVar&) = delete;
  CondVar& operator=(const CondVar&) = delete;

  // Blocks until notified (or a spurious wakeup). `lock` must hold its mutex.
  void Wait(MutexLock& lock) { cv_.wait(lock.lock_); }
  // As Wait, but for at most `timeout`: std::cv_status::timeout when it ran out.
  template <typename Rep, typename Period>
  std::cv_status WaitFor(MutexLock& lock, const std::chrono::duration<Rep, Period>& timeout) {
    return cv_.wait_for(lock.lock_, timeout);
  }
  // As Wait, but until `deadline` at the latest: std::cv_status::timeout when it has passed.
  template <typename Clock, typename Duration>
  std::cv_status WaitUntil(MutexLock& lock,
                           const std::chrono::time_point<Clock, Duration>& deadline) {
    return cv_.wait_until(lock.lock_, deadline);
  }

  // Wakes one waiting thread / every waiting thread. The mutex need not be held.
  void NotifyOne() noexcept { cv_.notify_one(); }
  void NotifyAll() noexcept { cv_.notify_all(); }

 private:
  std::condition_variable cv_;
};

}  // namespace shardrt
