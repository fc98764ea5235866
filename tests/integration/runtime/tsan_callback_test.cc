// ThreadSanitizer still checks shardrt's callbacks that run on plugin threads: the suppressions
// in tests/tsan.supp do not hide a race in one. Under ThreadSanitizer (scripts/sanitize.sh
// thread), the test starts this binary again on a deliberately racy callback and expects the
// report; in other builds it is skipped.
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "cli/deadline_runner.h"
#include "gtest/gtest.h"
#include "shardrt/runtime/runtime.h"
#include "test_env.h"

namespace shardrt {
namespace {

// Written by a callback and by the test thread, unsynchronized on purpose (volatile: the
// compiler may not move the test thread's write past its wait).
volatile int racy_value = 0;

// The racy case (run only in the child process): an OnReady callback on a plugin thread writes
// racy_value while the test thread writes it too, with no ordering between the two writes.
TEST(TsanCallbackTest, DISABLED_RacyOnReadyCallback) {
  std::unique_ptr<Runtime> runtime = testing::MakeTestRuntime();
  ASSERT_NE(runtime, nullptr);
  // An 8-device program that takes a while (a loop of 30,000,000 steps): the plugin runs each
  // device's part on its worker threads, so the output becomes ready later, on one of them.
  CompileRequest request;
  request.name = "count";
  request.program = R"(
module @count attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%x: tensor<i32> {mhlo.sharding = "{replicated}"})
      -> (tensor<i32> {mhlo.sharding = "{replicated}"}) {
    %r = stablehlo.while(%i = %x) : tensor<i32>
      cond {
        %n = stablehlo.constant dense<30000000> : tensor<i32>
        %c = stablehlo.compare LT, %i, %n : (tensor<i32>, tensor<i32>) -> tensor<i1>
        stablehlo.return %c : tensor<i1>
      } do {
        %one = stablehlo.constant dense<1> : tensor<i32>
        %next = stablehlo.add %i, %one : tensor<i32>
        stablehlo.return %next : tensor<i32>
      }
    return %r : tensor<i32>
  }
})";
  request.options.num_partitions = 8;
  auto program = runtime->client().Compile(request);
  ASSERT_TRUE(program.ok()) << program.status();
  const int32_t zero = 0;
  const HostArrayView view{ElementType::kS32, {}, std::as_bytes(std::span(&zero, 1))};
  auto x = runtime->client().TransferToDevice({&view, 1}, {&(*program)->parameter_layout(0), 1});
  ASSERT_TRUE(x.ok()) << x.status();
  auto out = runtime->client().ExecuteReplicated(**program, *x);
  ASSERT_TRUE(out.ok()) << out.status();
  auto event = (*out)[0]->buffers()->buffers[7].ReadyEvent();  // the last device's part
  ASSERT_TRUE(event.ok()) << event.status();
  std::atomic<bool> called{false};
  ASSERT_TRUE(event->OnReady([&](absl::Status) {
    racy_value = 1;
    called.store(true, std::memory_order_release);
  }).ok());
  racy_value = 2;
  while (!called.load(std::memory_order_acquire)) std::this_thread::yield();
}

TEST(TsanCallbackTest, ARaceInACallbackIsReported) {
#if !defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "only meaningful under ThreadSanitizer (scripts/sanitize.sh thread)";
#else
  const char* inherited = std::getenv("TSAN_OPTIONS");
  const std::string options =
      std::string(inherited != nullptr ? inherited : "") + " halt_on_error=1 exitcode=66";
  // Through the shell for the variable; the run is bounded (a hang fails the test).
  const std::string cmd = "TSAN_OPTIONS='" + options + "' exec /proc/" +
                          std::to_string(getpid()) +
                          "/exe --gtest_also_run_disabled_tests "
                          "--gtest_filter=TsanCallbackTest.DISABLED_RacyOnReadyCallback";
  const cli::testing::TimedResult r =
      cli::testing::RunWithDeadline({"/bin/sh", "-c", cmd}, std::chrono::seconds(300));
  const std::string out = r.out + r.err;
  ASSERT_FALSE(r.timed_out) << "the racy child did not end within 300 s\n" << out;
  EXPECT_EQ(r.exit_code, 66) << out;
  EXPECT_NE(out.find("WARNING: ThreadSanitizer: data race"), std::string::npos) << out;
  EXPECT_NE(out.find("racy_value"), std::string::npos) << out;
#endif
}

}  // namespace
}  // namespace shardrt
