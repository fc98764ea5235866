// WITH_DEADLINE(expr): evaluates a call that blocks (Data::Await, Executor::WaitForAll, a
// thread's join, a download) with a deadline, so a test whose wait never ends fails, naming
// the wait, instead of hanging. The call runs on the test's own thread; one watchdog thread per
// process (started on first use) watches every armed deadline, so a wait costs no thread of
// its own.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "shardrt/base/mutex.h"

namespace shardrt::testing {

// How long a test waits for any one thing before it gives up.
inline constexpr std::chrono::seconds kWaitDeadline{30};

// The process's deadlines. When one passes before it is disarmed, records a test failure at
// its file and line naming the wait, and ends the process at once: the waiting thread is stuck
// inside the wait, so the test can neither go on nor unwind. Thread-safe; never destroyed.
class Watchdog {
 public:
  static Watchdog& Get() {
    static Watchdog* const watchdog = new Watchdog();
    return *watchdog;
  }

  // Watches a wait until Disarm(the returned id).
  uint64_t Arm(std::chrono::steady_clock::time_point deadline, std::string what,
               const char* file, int line) {
    MutexLock lock(mu_);
    const uint64_t id = next_id_++;
    armed_.emplace(id, Entry{deadline, std::move(what), file, line});
    cv_.NotifyAll();
    return id;
  }

  void Disarm(uint64_t id) {
    MutexLock lock(mu_);
    armed_.erase(id);
  }

 private:
  struct Entry {
    std::chrono::steady_clock::time_point deadline;
    std::string what;
    const char* file;
    int line;
  };

  Watchdog() { std::thread([this] { Run(); }).detach(); }

  void Run() {
    MutexLock lock(mu_);
    while (true) {
      const Entry* first = nullptr;
      for (const auto& [id, entry] : armed_) {
        if (first == nullptr || entry.deadline < first->deadline) first = &entry;
      }
      if (first == nullptr) {
        cv_.Wait(lock);
        continue;
      }
      // A copy: the wait releases the lock, and a Disarm meanwhile erases the entry.
      const std::chrono::steady_clock::time_point deadline = first->deadline;
      if (std::chrono::steady_clock::now() < deadline) {
        (void)cv_.WaitUntil(lock, deadline);  // or an arm/disarm: look again
        continue;
      }
      ADD_FAILURE_AT(first->file, first->line) << first->what << "; ending the test process";
      std::fflush(nullptr);
      std::_Exit(1);
    }
  }

  Mutex mu_;
  CondVar cv_;
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<uint64_t, Entry> armed_ ABSL_GUARDED_BY(mu_);
};

// Runs `wait` on this thread and returns what it returns; if it has not returned within
// `deadline`, the watchdog fails the test at `file`:`line` naming `what` and ends the process.
template <typename Wait>
auto WaitWithDeadline(const char* what, const char* file, int line, Wait wait,
                      std::chrono::seconds deadline = kWaitDeadline) {
  Watchdog& watchdog = Watchdog::Get();
  const uint64_t id =
      watchdog.Arm(std::chrono::steady_clock::now() + deadline,
                   absl::StrCat(what, " did not finish within ", deadline.count(), " s"), file,
                   line);
  struct Disarm {
    Watchdog& watchdog;
    uint64_t id;
    ~Disarm() { watchdog.Disarm(id); }
  } disarm{watchdog, id};
  return wait();
}

}  // namespace shardrt::testing

// `expr` (a blocking call) with the test deadline; its value, if it has one.
#define WITH_DEADLINE(expr) \
  ::shardrt::testing::WaitWithDeadline(#expr, __FILE__, __LINE__, [&] { return (expr); })

// `expr` (a blocking call returning absl::Status) finishes within the deadline and returns OK;
// the status is printed otherwise.
#define ASSERT_OK_WITHIN(expr) ASSERT_EQ(WITH_DEADLINE(expr), ::absl::OkStatus())
#define EXPECT_OK_WITHIN(expr) EXPECT_EQ(WITH_DEADLINE(expr), ::absl::OkStatus())
