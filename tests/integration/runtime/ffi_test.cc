// Custom kernels: an XLA FFI handler written against XLA's FFI headers (those of the pinned
// jaxlib wheel, .cache/xla_ffi/include), registered through Runtime::RegisterFfiHandler, runs
// inside programs on the real CPU plugin: on one device, on 8 devices inside an SPMD program
// (manual sharding around the custom call, each device on its own shard), and from the
// persistent compile cache. Checked against the host. Registration errors are clear.
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "shardrt/base/metrics.h"
#include "shardrt/pjrt/ffi.h"
#include "shardrt/runtime/runtime.h"
#include "test_env.h"
#include "xla/ffi/api/ffi.h"

namespace shardrt {
namespace {

namespace ffi = ::xla::ffi;

// y = 2 x + 1, element by element, over whatever shard it is given.
ffi::Error TwoXPlusOne(ffi::Buffer<ffi::F32> x, ffi::ResultBuffer<ffi::F32> y) {
  const float* in = x.typed_data();
  float* out = y->typed_data();
  for (size_t i = 0; i < x.element_count(); ++i) out[i] = 2.0f * in[i] + 1.0f;
  return ffi::Error::Success();
}
XLA_FFI_DEFINE_HANDLER(kTwoXPlusOne, TwoXPlusOne,
                       ffi::Ffi::Bind().Arg<ffi::Buffer<ffi::F32>>().Ret<ffi::Buffer<ffi::F32>>());

constexpr char kTarget[] = "shardrt_test_two_x_plus_one";

// One device: y = custom_call(x) on 16 values.
constexpr char kOneDevice[] = R"(
module @ffi_one attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%x: tensor<16xf32>) -> tensor<16xf32> {
    %y = stablehlo.custom_call @shardrt_test_two_x_plus_one(%x) {api_version = 4 : i32} : (tensor<16xf32>) -> tensor<16xf32>
    return %y : tensor<16xf32>
  }
})";

// 8 devices: x split in 8 along its only dimension; the custom call runs under manual sharding
// on each device's 4 values, and y is split as x was.
constexpr char kEightDevices[] = R"(
module @ffi_eight attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%x: tensor<32xf32> {mhlo.sharding = "{devices=[8]<=[8]}"})
      -> (tensor<32xf32> {mhlo.sharding = "{devices=[8]<=[8]}"}) {
    %0 = stablehlo.custom_call @Sharding(%x) {mhlo.sharding = "{devices=[8]<=[8]}"} : (tensor<32xf32>) -> tensor<32xf32>
    %1 = stablehlo.custom_call @SPMDFullToShardShape(%0) {mhlo.sharding = "{manual}"} : (tensor<32xf32>) -> tensor<4xf32>
    %2 = stablehlo.custom_call @shardrt_test_two_x_plus_one(%1) {api_version = 4 : i32, mhlo.sharding = "{manual}"} : (tensor<4xf32>) -> tensor<4xf32>
    %3 = stablehlo.custom_call @Sharding(%2) {mhlo.sharding = "{manual}"} : (tensor<4xf32>) -> tensor<4xf32>
    %4 = stablehlo.custom_call @SPMDShardToFullShape(%3) {mhlo.sharding = "{devices=[8]<=[8]}"} : (tensor<4xf32>) -> tensor<32xf32>
    return %4 : tensor<32xf32>
  }
})";

// Registers the handler once per process (the registry is process-wide) through `runtime`.
void RegisterOnce(const Runtime& runtime) {
  static const absl::Status status = runtime.RegisterFfiHandler(kTarget, kTwoXPlusOne);
  ASSERT_TRUE(status.ok()) << status;
}

// Compiles `program` on `runtime` for `partitions` devices, runs it on x = i - n/2 and checks
// y = 2 x + 1 (computed here) element by element.
void RunAndCheck(Runtime& runtime, const char* program, int64_t partitions, int64_t n) {
  ComputationClient& client = runtime.client();
  CompileRequest request;
  request.name = "ffi";
  request.program = program;
  request.options.num_partitions = partitions;
  auto computation = client.Compile(request);
  ASSERT_TRUE(computation.ok()) << computation.status();
  std::vector<float> x(n);
  for (int64_t i = 0; i < n; ++i) x[i] = static_cast<float>(i) - static_cast<float>(n / 2);
  const HostArrayView view{ElementType::kF32, {n}, std::as_bytes(std::span(x))};
  auto arg = client.TransferToDevice(view, (*computation)->parameter_layout(0));
  ASSERT_TRUE(arg.ok()) << arg.status();
  auto out = client.ExecuteReplicated(**computation, {*arg});
  ASSERT_TRUE(out.ok()) << out.status();
  auto host = client.TransferFromDevice(*out);
  ASSERT_TRUE(host.ok()) << host.status();
  ASSERT_EQ((*host)[0].data.size(), static_cast<size_t>(n) * sizeof(float));
  const auto* y = reinterpret_cast<const float*>((*host)[0].data.data());
  for (int64_t i = 0; i < n; ++i) EXPECT_EQ(y[i], 2.0f * x[i] + 1.0f) << "element " << i;
}

TEST(FfiTest, TheCpuPluginHasTheFfiExtension) {
  auto runtime = testing::MakeTestRuntime();
  ASSERT_NE(runtime, nullptr);
  EXPECT_TRUE(pjrt::HasFfiExtension(runtime->plugin()));
}

TEST(FfiTest, ARegisteredHandlerRunsOnOneDevice) {
  auto runtime = testing::MakeTestRuntime();
  ASSERT_NE(runtime, nullptr);
  RegisterOnce(*runtime);
  RunAndCheck(*runtime, kOneDevice, 1, 16);
}

TEST(FfiTest, ARegisteredHandlerRunsOnEachShardOfAnSpmdProgram) {
  auto runtime = testing::MakeTestRuntime();
  ASSERT_NE(runtime, nullptr);
  RegisterOnce(*runtime);
  RunAndCheck(*runtime, kEightDevices, testing::kNumDevices, 32);
}

// A runtime of `devices` devices whose persistent compile cache is `dir`; null (and a test
// failure) if it cannot be created.
std::unique_ptr<Runtime> RuntimeWithCache(const std::string& dir, int64_t devices) {
  RuntimeOptions options;
  options.devices = devices;
  options.compile_cache.directory = dir;
  auto runtime = Runtime::Create(options);
  EXPECT_TRUE(runtime.ok()) << runtime.status();
  return runtime.ok() ? std::move(*runtime) : nullptr;
}

// An empty cache directory of this process under the temporary folder, named after `name`.
std::string FreshCacheDir(const std::string& name) {
  const std::string dir =
      (std::filesystem::temp_directory_path() / absl::StrCat(name, "-", ::getpid())).string();
  std::filesystem::remove_all(dir);
  return dir;
}

// The persistent compile cache holds the compiled program, not the handler: a second client on
// the same cache directory loads the program (a hit) and the process's registration serves it.
TEST(FfiTest, AProgramLoadedFromThePersistentCacheFindsTheHandler) {
  const std::string dir = FreshCacheDir("shardrt-ffi");
  Counter* hits = GlobalMetrics().GetCounter("PersistentCacheHit");
  const int64_t hits_before = hits->Value();
  for (int run = 0; run < 2; ++run) {
    auto runtime = RuntimeWithCache(dir, testing::kNumDevices);
    ASSERT_NE(runtime, nullptr);
    RegisterOnce(*runtime);
    RunAndCheck(*runtime, kEightDevices, testing::kNumDevices, 32);
    auto info = InspectPersistentCache(dir);
    ASSERT_TRUE(info.ok()) << info.status();
    EXPECT_EQ(info->entries.size(), 1u) << "run " << run;
    EXPECT_EQ(hits->Value() - hits_before, run) << "run " << run;  // the second run loads it
  }
  std::filesystem::remove_all(dir);
}

// The child half of the next test, run in a process of its own (never registers the handler):
// a compile of the one-device program through the cache in $SHARDRT_FFI_TEST_CACHE fails with
// the missing handler's name.
TEST(FfiChild, DISABLED_CompilesWithoutTheHandler) {
  const char* dir = std::getenv("SHARDRT_FFI_TEST_CACHE");
  ASSERT_NE(dir, nullptr);
  auto runtime = RuntimeWithCache(dir, 1);
  ASSERT_NE(runtime, nullptr);
  CompileRequest request;
  request.program = kOneDevice;
  auto computation = runtime->client().Compile(request);
  ASSERT_FALSE(computation.ok());
  EXPECT_EQ(computation.status().code(), absl::StatusCode::kNotFound) << computation.status();
  EXPECT_NE(computation.status().message().find(kTarget), std::string::npos)
      << computation.status();
}

// A cached program whose kernel a process has not registered is not a damaged entry: that
// process gets the compile error naming the kernel, and the entry stays for the next process
// that registers it (a hit).
TEST(FfiTest, ACachedProgramKeepsItsEntryInAProcessWithoutItsHandler) {
  const std::string dir = FreshCacheDir("shardrt-ffi-child");
  {
    auto runtime = RuntimeWithCache(dir, 1);
    ASSERT_NE(runtime, nullptr);
    RegisterOnce(*runtime);
    RunAndCheck(*runtime, kOneDevice, 1, 16);  // compiles and stores the entry
  }
  const std::string child = absl::StrCat(
      "SHARDRT_FFI_TEST_CACHE='", dir, "' /proc/", ::getpid(), "/exe --gtest_also_run_disabled_",
      "tests --gtest_filter=FfiChild.DISABLED_CompilesWithoutTheHandler > '", dir, "/child.log' 2>&1");
  EXPECT_EQ(std::system(child.c_str()), 0) << "the child's log is " << dir << "/child.log";
  auto info = InspectPersistentCache(dir);
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->entries.size(), 1u);
  Counter* hits = GlobalMetrics().GetCounter("PersistentCacheHit");
  const int64_t hits_before = hits->Value();
  auto runtime = RuntimeWithCache(dir, 1);
  ASSERT_NE(runtime, nullptr);
  RunAndCheck(*runtime, kOneDevice, 1, 16);
  EXPECT_EQ(hits->Value() - hits_before, 1);
  std::filesystem::remove_all(dir);
}

TEST(FfiTest, RegistrationErrorsAreClear) {
  auto runtime = testing::MakeTestRuntime();
  ASSERT_NE(runtime, nullptr);
  absl::Status null_handler = runtime->RegisterFfiHandler("shardrt_test_null", nullptr);
  EXPECT_EQ(null_handler.code(), absl::StatusCode::kInvalidArgument) << null_handler;
  EXPECT_NE(null_handler.message().find("shardrt_test_null"), std::string::npos);
  absl::Status empty = runtime->RegisterFfiHandler("", kTwoXPlusOne);
  EXPECT_EQ(empty.code(), absl::StatusCode::kInvalidArgument) << empty;
  absl::Status quoted = runtime->RegisterFfiHandler("a\"b", kTwoXPlusOne);
  EXPECT_EQ(quoted.code(), absl::StatusCode::kInvalidArgument) << quoted;
  // A platform the plugin has no handlers for: the probe does not find the handler.
  pjrt::FfiHandlerOptions elsewhere;
  elsewhere.platform = "NoSuchPlatform";
  absl::Status unknown = runtime->RegisterFfiHandler("shardrt_test_elsewhere", kTwoXPlusOne,
                                                     elsewhere);
  EXPECT_FALSE(unknown.ok());
  EXPECT_NE(unknown.message().find("shardrt_test_elsewhere"), std::string::npos) << unknown;
}

// y = 10 x: another handler, for a target that already has one.
ffi::Error TenX(ffi::Buffer<ffi::F32> x, ffi::ResultBuffer<ffi::F32> y) {
  for (size_t i = 0; i < x.element_count(); ++i) y->typed_data()[i] = 10.0f * x.typed_data()[i];
  return ffi::Error::Success();
}
XLA_FFI_DEFINE_HANDLER(kTenX, TenX,
                       ffi::Ffi::Bind().Arg<ffi::Buffer<ffi::F32>>().Ret<ffi::Buffer<ffi::F32>>());

// What the plugin does with a second registration of a target (documented in pjrt/ffi.h): it
// succeeds and the first handler stays.
TEST(FfiTest, TheFirstRegistrationOfATargetStays) {
  auto runtime = testing::MakeTestRuntime();
  ASSERT_NE(runtime, nullptr);
  RegisterOnce(*runtime);
  EXPECT_TRUE(runtime->RegisterFfiHandler(kTarget, kTenX).ok());
  RunAndCheck(*runtime, kOneDevice, 1, 16);  // still 2 x + 1
}

// A program that calls a target nobody registered does not compile, and says which.
TEST(FfiTest, AnUnregisteredTargetIsACompileError) {
  auto runtime = testing::MakeTestRuntime();
  ASSERT_NE(runtime, nullptr);
  std::string program = kOneDevice;
  program.replace(program.find(kTarget), sizeof(kTarget) - 1, "shardrt_test_never_registered");
  CompileRequest request;
  request.program = program;
  auto computation = runtime->client().Compile(request);
  ASSERT_FALSE(computation.ok());
  EXPECT_NE(computation.status().message().find("shardrt_test_never_registered"),
            std::string::npos)
      << computation.status();
}

}  // namespace
}  // namespace shardrt
