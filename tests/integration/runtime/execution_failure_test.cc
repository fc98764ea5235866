// A program that fails while it runs (here: the plugin cannot allocate its 132 GiB temporary)
// stays an error: it reaches the caller with the plugin's message, through the executor's
// Synchronize and through downloads of its outputs, and the runtime keeps working for the next
// execution. Waiting can be bounded: Data::Await with a timeout.
#include <cstring>
#include <fstream>
#include <span>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "shardrt/runtime/runtime.h"
#include "test_env.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
// The sanitizers' allocators report huge requests as errors by default; the plugin's own
// allocation failure is what this test looks at. The sanitizer runtime finds these hooks in the
// executable's dynamic symbols: default visibility, whatever the build's preset (hidden).
extern "C" __attribute__((visibility("default"))) const char* __asan_default_options() {
  return "allocator_may_return_null=1";
}
extern "C" __attribute__((visibility("default"))) const char* __tsan_default_options() {
  return "allocator_may_return_null=1";
}
#endif

namespace shardrt {
namespace {


// 8 partitions: y = x * 3 (replicated scalar).
constexpr char kTriple[] = R"(
module @triple attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%x: tensor<f32> {mhlo.sharding = "{replicated}"})
      -> (tensor<f32> {mhlo.sharding = "{replicated}"}) {
    %three = stablehlo.constant dense<3.0> : tensor<f32>
    %y = stablehlo.multiply %x, %three : tensor<f32>
    return %y : tensor<f32>
  }
})";

bool OvercommitRefusesHugeAllocations() {
  std::ifstream in("/proc/sys/vm/overcommit_memory");
  int mode = -1;
  in >> mode;
  return mode == 0 || mode == 2;
}

float ScalarOf(const HostArray& a) {
  float v = 0;
  std::memcpy(&v, a.data.data(), sizeof(v));
  return v;
}

TEST(ExecutionFailureTest, ARunTimeFailureIsAnErrorAndTheRuntimeGoesOn) {
  if (!OvercommitRefusesHugeAllocations()) {
    GTEST_SKIP() << "vm.overcommit_memory allows any allocation: the failure cannot be made";
  }
  std::unique_ptr<Runtime> runtime = testing::MakeTestRuntime();
  ASSERT_NE(runtime, nullptr);
  ComputationClient& client = runtime->client();
  auto compile = [&](const char* name, const std::string& text) {
    CompileRequest request;
    request.name = name;
    request.program = text;
    request.options.num_partitions = 8;
    return client.Compile(request);
  };
  auto oom = compile("oom", shardrt::testing::ReadTestData("out_of_memory.mlir"));
  ASSERT_TRUE(oom.ok()) << oom.status();
  auto triple = compile("triple", kTriple);
  ASSERT_TRUE(triple.ok()) << triple.status();
  const float two = 2.0f;
  const HostArrayView view{ElementType::kF32, {}, std::as_bytes(std::span(&two, 1))};
  auto x = client.TransferToDevice({&view, 1}, {&(*oom)->parameter_layout(0), 1});
  ASSERT_TRUE(x.ok()) << x.status();

  // Through the executor: the outputs come back as placeholders; Synchronize and a download of
  // them both carry the plugin's message.
  Executor& executor = runtime->executor();
  auto failed = executor.Schedule(*oom, *x);
  ASSERT_TRUE(failed.ok()) << failed.status();
  const absl::Status sync = executor.Synchronize();
  EXPECT_FALSE(sync.ok());
  EXPECT_NE(sync.message().find("Out of memory"), absl::string_view::npos) << sync;
  auto download = client.TransferFromDevice(*failed);
  ASSERT_FALSE(download.ok());
  EXPECT_NE(download.status().message().find("Out of memory"), absl::string_view::npos)
      << download.status();

  // Directly: the same, and the next execution on the same runtime is right.
  auto direct = client.ExecuteReplicated(**oom, *x);
  if (direct.ok()) {
    auto host = client.TransferFromDevice(*direct);
    ASSERT_FALSE(host.ok());
    EXPECT_NE(host.status().message().find("Out of memory"), absl::string_view::npos);
  } else {
    EXPECT_NE(direct.status().message().find("Out of memory"), absl::string_view::npos);
  }
  auto good = executor.Schedule(*triple, *x);
  ASSERT_TRUE(good.ok()) << good.status();
  EXPECT_TRUE(executor.Synchronize().ok());
  auto host = client.TransferFromDevice(*good);
  ASSERT_TRUE(host.ok()) << host.status();
  EXPECT_EQ(ScalarOf((*host)[0]), 6.0f);
}

TEST(ExecutionFailureTest, AwaitCanBeBounded) {
  std::unique_ptr<Runtime> runtime = testing::MakeTestRuntime();
  ASSERT_NE(runtime, nullptr);
  auto layout = runtime->client().MakeLayout({ElementType::kF32, {4}}, Sharding::Replicated());
  ASSERT_TRUE(layout.ok()) << layout.status();
  DataPtr pending = runtime->client().CreateDataPlaceholder(*layout);
  const absl::Status waited = pending->Await(absl::Milliseconds(50));
  EXPECT_EQ(waited.code(), absl::StatusCode::kDeadlineExceeded) << waited;
  EXPECT_NE(waited.message().find("still pending after 50ms"), absl::string_view::npos) << waited;
  EXPECT_EQ(pending->state(), Data::State::kPending);
  pending->Fail(absl::CancelledError("given up"));
  EXPECT_EQ(pending->Await(absl::Milliseconds(50)).code(), absl::StatusCode::kCancelled);
}

}  // namespace
}  // namespace shardrt
