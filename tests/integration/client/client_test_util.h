// Helpers for ComputationClient integration tests: host arrays from vectors and back, and a
// client over the shared 8-device test client.
#pragma once

#include <cstring>
#include <iterator>
#include <memory>
#include <vector>

#include "../../common/deadline_wait.h"
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
  EXPECT_TRUE(devices.ok()) << devices.status();
  if (!devices.ok()) return nullptr;
  auto layout = client.MakeLayout({array.type, array.dims}, sharding, *devices);
  EXPECT_TRUE(layout.ok()) << layout.status();
  if (!layout.ok()) return nullptr;
  HostArrayView view = array.view();
  auto data = client.TransferToDevice({&view, 1}, {&*layout, 1});
  EXPECT_TRUE(data.ok()) << data.status();
  if (!data.ok()) return nullptr;
  EXPECT_EQ(data->size(), 1u);
  return data->size() == 1 ? (*data)[0] : nullptr;
}

// Downloads `data` (waiting for it, with the test deadline); an empty array on error.
inline HostArray Download(ComputationClient& client, const DataPtr& data) {
  auto host = WITH_DEADLINE(client.TransferFromDevice({&data, 1}));
  EXPECT_TRUE(host.ok()) << host.status();
  if (!host.ok()) return HostArray{};
  EXPECT_EQ(host->size(), 1u);
  return host->size() == 1 ? std::move((*host)[0]) : HostArray{};
}

// tests/testdata/executor_same_layout_outputs.mlir: outputs x + 1, 2x and x - 3 with x's own
// layout (f32[16,4] row-sharded over 8 devices), then x * x replicated.
inline constexpr char kSameLayoutOutputsProgram[] = "executor_same_layout_outputs.mlir";

// An input of that program (64 values) on which its four outputs differ everywhere, also after
// `shift` is added to it (as when x - 3 is fed back in).
inline std::vector<float> SameLayoutOutputsInput(float shift = 0.0f) {
  std::vector<float> x(64);
  for (size_t i = 0; i < x.size(); ++i) x[i] = 0.25f * static_cast<float>(i) - 7.9f + shift;
  return x;
}

// Checks `outputs` of that program on input `x`, each against its own host value (one IEEE
// operation each, so exactly), after checking that the first three share one layout: an output
// handed to another's placeholder would keep its layout and differ only in its values.
inline void ExpectSameLayoutOutputs(ComputationClient& client, const std::vector<DataPtr>& outputs,
                                    const std::vector<float>& x) {
  struct Output {
    const char* formula;
    float (*of)(float);
  };
  static constexpr Output kOutputs[] = {{"x + 1", [](float v) { return v + 1.0f; }},
                                        {"2x", [](float v) { return v * 2.0f; }},
                                        {"x - 3", [](float v) { return v - 3.0f; }},
                                        {"x * x", [](float v) { return v * v; }}};
  ASSERT_EQ(outputs.size(), std::size(kOutputs));
  for (const DataPtr& o : outputs) ASSERT_NE(o, nullptr);
  for (size_t o = 1; o < 3; ++o) {
    ASSERT_EQ(outputs[o]->layout().ToString(), outputs[0]->layout().ToString()) << "output " << o;
  }
  for (size_t o = 0; o < std::size(kOutputs); ++o) {
    std::vector<float> expected(x.size());
    for (size_t i = 0; i < x.size(); ++i) expected[i] = kOutputs[o].of(x[i]);
    EXPECT_EQ(Values<float>(Download(client, outputs[o])), expected)
        << "output " << o << " should hold " << kOutputs[o].formula;
  }
}

}  // namespace shardrt::testing
