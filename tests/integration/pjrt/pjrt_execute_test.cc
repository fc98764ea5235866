// The PJRT layer on the real CPU plugin with 8 devices: compile an SPMD program whose result
// needs a collective, upload per-device inputs by hand, execute, and compare with a host
// computation. Also the clean errors the layer promises.
#include <atomic>
#include <cstring>
#include <random>
#include <vector>

#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"
#include "shardrt/pjrt/buffer.h"
#include "shardrt/pjrt/executable.h"
#include "checked_execute.h"
#include "test_env.h"

namespace shardrt::pjrt {
namespace {

using shardrt::testing::kNumDevices;
using shardrt::testing::ReadTestData;
using shardrt::testing::TestClient;

CompileOptions EightPartitions() {
  CompileOptions options;
  options.num_partitions = kNumDevices;
  for (int i = 0; i < kNumDevices; ++i) options.device_assignment.push_back(i);
  return options;
}

Buffer Upload(const Client& client, const std::vector<float>& data, std::vector<int64_t> dims,
              const Device& device) {
  auto upload = Buffer::FromHost(client, data.data(), ElementType::kF32, dims, device,
                                 HostBufferSemantics::kImmutableUntilTransferCompletes);
  EXPECT_TRUE(upload.ok()) << upload.status();
  EXPECT_TRUE(upload->done_with_host_buffer.Await().ok());
  return std::move(upload->buffer);
}

std::vector<float> Download(const Buffer& buffer, size_t n) {
  std::vector<float> out(n);
  auto event = buffer.ToHost(out.data(), n * sizeof(float));
  EXPECT_TRUE(event.ok()) << event.status();
  EXPECT_TRUE(event->Await().ok());
  return out;
}

class PjrtExecuteTest : public ::testing::Test {
 protected:
  void SetUp() override {
    client_ = TestClient();
    ASSERT_NE(client_, nullptr);
    ASSERT_EQ(client_->addressable_devices().size(), static_cast<size_t>(kNumDevices));
  }
  std::shared_ptr<Client> client_;
};

TEST_F(PjrtExecuteTest, ShardedMatmulWithAllReduceMatchesHost) {
  auto exe = LoadedExecutable::Compile(client_, ReadTestData("sharded_matmul_sum.mlir"),
                                       ProgramFormat::kMlir, EightPartitions());
  ASSERT_TRUE(exe.ok()) << exe.status();
  const ExecutableSignature& sig = (*exe)->signature();
  EXPECT_EQ(sig.num_partitions, kNumDevices);
  ASSERT_EQ(sig.parameters.size(), 2u);
  EXPECT_EQ(sig.parameters[0], (ArrayShape{ElementType::kF32, {2, 4}}));  // a row shard
  EXPECT_EQ(sig.parameters[1], (ArrayShape{ElementType::kF32, {4, 3}}));
  ASSERT_EQ(sig.outputs.size(), 1u);
  EXPECT_EQ(sig.outputs[0], (ArrayShape{ElementType::kF32, {3}}));
  EXPECT_FALSE(sig.parameter_shardings[0].empty());

  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-1, 1);
  std::vector<float> x(16 * 4), w(4 * 3);
  for (float& v : x) v = dist(rng);
  for (float& v : w) v = dist(rng);
  // Host reference: sum over rows of x @ w.
  std::vector<double> expected(3, 0.0);
  for (int r = 0; r < 16; ++r)
    for (int c = 0; c < 3; ++c)
      for (int k = 0; k < 4; ++k) expected[c] += double(x[r * 4 + k]) * w[k * 3 + c];

  std::vector<Buffer> owned;
  owned.reserve(2 * kNumDevices);
  std::vector<std::vector<const Buffer*>> args(kNumDevices);
  for (int d = 0; d < kNumDevices; ++d) {
    const Device& device = *sig.devices[d];
    std::vector<float> rows(x.begin() + d * 8, x.begin() + (d + 1) * 8);
    owned.push_back(Upload(*client_, rows, {2, 4}, device));
    args[d].push_back(&owned.back());
    owned.push_back(Upload(*client_, w, {4, 3}, device));
    args[d].push_back(&owned.back());
  }
  auto outputs = shardrt::testing::CheckedExecute(**exe, args, {});
  ASSERT_TRUE(outputs.ok()) << outputs.status();
  ASSERT_EQ(outputs->size(), static_cast<size_t>(kNumDevices));
  for (int d = 0; d < kNumDevices; ++d) {
    std::vector<float> got = Download((*outputs)[d][0], 3);
    for (int c = 0; c < 3; ++c) EXPECT_NEAR(got[c], expected[c], 1e-4) << "device " << d;
  }
}

TEST_F(PjrtExecuteTest, UnparsableMlirKeepsTheCompilerMessage) {
  auto exe = LoadedExecutable::Compile(client_, "module { func.func @main( garbage",
                                       ProgramFormat::kMlir, CompileOptions{});
  ASSERT_FALSE(exe.ok());
  EXPECT_NE(exe.status().message().find("PJRT_Client_Compile"), absl::string_view::npos)
      << exe.status();
  EXPECT_GT(exe.status().message().size(), 30u) << exe.status();
}

TEST_F(PjrtExecuteTest, MorePartitionsThanDevicesIsAnError) {
  CompileOptions options;
  options.num_partitions = 16;
  auto exe = LoadedExecutable::Compile(client_, ReadTestData("sharded_matmul_sum.mlir"),
                                       ProgramFormat::kMlir, options);
  ASSERT_FALSE(exe.ok());
  EXPECT_EQ(exe.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(exe.status().message().find("need 16 devices, but the client has 8"),
            absl::string_view::npos)
      << exe.status();
}

TEST_F(PjrtExecuteTest, WrongArgumentsAreRejectedBeforeThePlugin) {
  auto exe = LoadedExecutable::Compile(client_, ReadTestData("sharded_matmul_sum.mlir"),
                                       ProgramFormat::kMlir, EightPartitions());
  ASSERT_TRUE(exe.ok()) << exe.status();
  const ExecutableSignature& sig = (*exe)->signature();
  std::vector<Buffer> owned;
  owned.reserve(4 * kNumDevices);
  std::vector<std::vector<const Buffer*>> good(kNumDevices), wrong_shape(kNumDevices),
      wrong_count(kNumDevices), wrong_type(kNumDevices);
  std::vector<int32_t> ints(8, 1);
  for (int d = 0; d < kNumDevices; ++d) {
    const Device& device = *sig.devices[d];
    owned.push_back(Upload(*client_, std::vector<float>(8, 1.f), {2, 4}, device));
    const Buffer* x = &owned.back();
    owned.push_back(Upload(*client_, std::vector<float>(12, 1.f), {4, 3}, device));
    const Buffer* w = &owned.back();
    owned.push_back(Upload(*client_, std::vector<float>(12, 1.f), {3, 4}, device));
    const Buffer* w_t = &owned.back();
    auto int_upload = Buffer::FromHost(*client_, ints.data(), ElementType::kS32, {2, 4}, device,
                                       HostBufferSemantics::kImmutableOnlyDuringCall);
    ASSERT_TRUE(int_upload.ok());
    owned.push_back(std::move(int_upload->buffer));
    const Buffer* x_int = &owned.back();
    good[d] = {x, w};
    wrong_shape[d] = {x, w_t};
    wrong_count[d] = {x};
    wrong_type[d] = {x_int, w};
  }
  absl::Status count = shardrt::testing::CheckedExecute(**exe, wrong_count, {}).status();
  EXPECT_EQ(count.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(count.message().find("got 1 arguments, expected 2"), absl::string_view::npos) << count;

  absl::Status shape = shardrt::testing::CheckedExecute(**exe, wrong_shape, {}).status();
  EXPECT_NE(shape.message().find("argument 1 on device 0: expected f32[4,3], got f32[3,4]"),
            absl::string_view::npos)
      << shape;

  absl::Status type = shardrt::testing::CheckedExecute(**exe, wrong_type, {}).status();
  EXPECT_NE(type.message().find("argument 0 on device 0: expected f32[2,4], got s32[2,4]"),
            absl::string_view::npos)
      << type;

  // Buffers on the wrong device.
  std::vector<std::vector<const Buffer*>> swapped = good;
  std::swap(swapped[0], swapped[1]);
  absl::Status device = shardrt::testing::CheckedExecute(**exe, swapped, {}).status();
  EXPECT_NE(device.message().find("buffer is on device 1, expected device 0"),
            absl::string_view::npos)
      << device;

  // The good arguments still work after all those errors.
  EXPECT_TRUE(shardrt::testing::CheckedExecute(**exe, good, {}).ok());
}

TEST(PjrtPluginTest, MissingAndInvalidPluginsAreCleanErrors) {
  auto missing = Plugin::Load("/nonexistent/dir/plugin.so");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("does not exist"), absl::string_view::npos);

  auto not_a_library = Plugin::Load(std::string(SHARDRT_TESTDATA_DIR) + "/sharded_matmul_sum.mlir");
  EXPECT_EQ(not_a_library.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(not_a_library.status().message().find("not a loadable PJRT plugin"),
            absl::string_view::npos)
      << not_a_library.status();

  // A real shared library that is not a PJRT plugin (libc has no GetPjrtApi).
  auto not_pjrt = Plugin::Load("/lib/x86_64-linux-gnu/libm.so.6");
  EXPECT_EQ(not_pjrt.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(not_pjrt.status().message().find("exports no GetPjrtApi"), absl::string_view::npos)
      << not_pjrt.status();
}

TEST_F(PjrtExecuteTest, DevicesAndPlatform) {
  EXPECT_EQ(client_->platform_name(), "cpu");
  for (int d = 0; d < kNumDevices; ++d) {
    const Device& device = client_->addressable_devices()[d];
    EXPECT_EQ(device.id, d);
    EXPECT_EQ(device.kind, "cpu");
    EXPECT_EQ(device.process_index, 0);
  }
  EXPECT_FALSE(client_->DeviceById(42).ok());
}

}  // namespace
}  // namespace shardrt::pjrt

namespace shardrt::pjrt {
namespace {

TEST_F(PjrtExecuteTest, EventOnReadyRunsOnceWithTheStatus) {
  const Device& device = client_->addressable_devices()[0];
  std::vector<float> data(1024, 2.f);
  auto upload = Buffer::FromHost(*client_, data.data(), ElementType::kF32, {1024}, device,
                                 HostBufferSemantics::kImmutableUntilTransferCompletes);
  ASSERT_TRUE(upload.ok());
  ASSERT_TRUE(upload->done_with_host_buffer.Await().ok());
  auto ready = upload->buffer.ReadyEvent();
  ASSERT_TRUE(ready.ok());
  std::atomic<int> calls{0};
  absl::Notification done;
  ASSERT_TRUE(ready->OnReady([&](absl::Status s) {
                     EXPECT_TRUE(s.ok()) << s;
                     ++calls;
                     done.Notify();
                   })
                  .ok());
  EXPECT_TRUE(ready->empty());  // consumed
  done.WaitForNotification();
  EXPECT_EQ(calls.load(), 1);
  auto size = upload->buffer.OnDeviceSizeInBytes();
  ASSERT_TRUE(size.ok());
  EXPECT_EQ(*size, 4096u);
}

}  // namespace
}  // namespace shardrt::pjrt
