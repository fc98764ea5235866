// Helpers for ComputationClient integration tests: host arrays from vectors and back, and a
// client over the shared 8-device test client.
#pragma once

#include <cstring>
#include <memory>
#include <vector>

#include "shardrt/client/computation_client.h"
#include "gtest/gtest.h"
#include "shardrt/sharding/text.h"
#include "test_env.h"

namespace shardrt::testing {

template <typename T>
HostArray MakeArray(ElementType type, std::vector<int64_t> dims, const std::vector<T>& values) {
  HostArray a{type, std::move(dims), std::vector<std::byte>(values.size() * sizeof(T))};
  std::memcpy(a.data.data(), values.data(), a.data.size());
  return a;
}

template <typename T>
std::vector<T> Values(const HostArray& a) {
  std::vector<T> out(a.data.size() / sizeof(T));
  std::memcpy(out.data(), a.data.data(), a.data.size());
  return out;
}

inline Sharding MustParse(const char* text) {
  auto s = ParseSharding(text);
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? *s : Sharding::Replicated();
}

// A test's own runtime (MakeTestRuntime), used through its ComputationClient: `->`, `*` and
// get() reach the client, runtime() the whole front door.
class TestRuntime {
 public:
  TestRuntime() = default;
  explicit TestRuntime(std::unique_ptr<Runtime> runtime) : runtime_(std::move(runtime)) {}
  ComputationClient* get() const { return runtime_ ? &runtime_->client() : nullptr; }
  ComputationClient* operator->() const { return get(); }
  ComputationClient& operator*() const { return *get(); }
  explicit operator bool() const { return runtime_ != nullptr; }
  friend bool operator==(const TestRuntime& r, std::nullptr_t) { return r.runtime_ == nullptr; }
  Runtime& runtime() const { return *runtime_; }
  void reset() { runtime_.reset(); }

 private:
  std::unique_ptr<Runtime> runtime_;
};

inline TestRuntime MakeClient() { return TestRuntime(MakeTestRuntime()); }

// Compiles tests/testdata/<file> for `partitions` devices.
inline ComputationPtr CompileTestProgram(ComputationClient& client, const char* file,
                                         int partitions) {
  CompileRequest request;
  request.name = file;
  request.program = ReadTestData(file);
  request.options.num_partitions = partitions;
  auto c = client.Compile(request);
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? *c : nullptr;
}

// Uploads `array` with `sharding` on the first N default devices.
inline DataPtr Upload(ComputationClient& client, const HostArray& array, const Sharding& sharding,
                      size_t num_devices = kNumDevices) {
  auto devices = client.DefaultDevices(num_devices);
  EXPECT_TRUE(devices.ok());
  auto layout = client.MakeLayout({array.type, array.dims}, sharding, *devices);
  EXPECT_TRUE(layout.ok()) << layout.status();
  if (!layout.ok()) return nullptr;
  HostArrayView view = array.view();
  auto data = client.TransferToDevice({&view, 1}, {&*layout, 1});
  EXPECT_TRUE(data.ok()) << data.status();
  return data.ok() ? (*data)[0] : nullptr;
}

inline HostArray Download(ComputationClient& client, const DataPtr& data) {
  auto host = client.TransferFromDevice({&data, 1});
  EXPECT_TRUE(host.ok()) << host.status();
  return host.ok() ? std::move((*host)[0]) : HostArray{};
}

}  // namespace shardrt::testing
