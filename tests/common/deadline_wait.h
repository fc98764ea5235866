// WITH_DEADLINE(expr): evaluates a call that blocks (Data::Await, Executor::WaitForAll, a
// thread's join, a download) with a deadline, so a test whose wait never ends fails, naming
// the wait, instead of hanging. Built on FinishesWithin (finishes_within.h).
#pragma once

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <type_traits>
#include <utility>

#include "absl/status/status.h"
#include "finishes_within.h"
#include "gtest/gtest.h"

namespace shardrt::testing {

// How long a test waits for any one thing before it gives up.
inline constexpr std::chrono::seconds kWaitDeadline{30};

// Runs `wait` on a thread of its own and returns what it returns. When it has not returned
// within `deadline`, records a test failure at `file`:`line` naming `what`, and ends the
// process at once: the wait's thread still runs and may touch the test's objects, so the test
// can neither go on nor unwind.
template <typename Wait>
auto WaitWithDeadline(const char* what, const char* file, int line, Wait wait,
                      std::chrono::seconds deadline = kWaitDeadline) {
  using Result = std::invoke_result_t<Wait&>;
  if constexpr (std::is_void_v<Result>) {
    WaitWithDeadline(what, file, line, [&wait] { return (wait(), true); }, deadline);
  } else {
    auto result = std::make_shared<std::optional<Result>>();
    if (!FinishesWithin([result, &wait] { result->emplace(wait()); }, deadline)) {
      ADD_FAILURE_AT(file, line) << what << " did not finish within " << deadline.count()
                                 << " s; ending the test process";
      std::fflush(nullptr);
      std::_Exit(1);
    }
    return std::move(**result);
  }
}

}  // namespace shardrt::testing

// `expr` (a blocking call) with the test deadline; its value, if it has one.
#define WITH_DEADLINE(expr) \
  ::shardrt::testing::WaitWithDeadline(#expr, __FILE__, __LINE__, [&] { return (expr); })

// `expr` (a blocking call returning absl::Status) finishes within the deadline and returns OK;
// the status is printed otherwise.
#define ASSERT_OK_WITHIN(expr) ASSERT_EQ(WITH_DEADLINE(expr), ::absl::OkStatus())
#define EXPECT_OK_WITHIN(expr) EXPECT_EQ(WITH_DEADLINE(expr), ::absl::OkStatus())
