// Shared set-up for integration tests: the real CPU plugin with 8 devices through the library's
// front door (shardrt::Runtime), and helpers to read test programs. The plugin is found as any
// user's would be (see shardrt/runtime/plugin_search.h).
#pragma once

#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include "gtest/gtest.h"
#include "shardrt/runtime/runtime.h"

namespace shardrt::testing {

inline constexpr int kNumDevices = 8;

// A new runtime with kNumDevices CPU devices and a 4-thread host pool; null (and a test
// failure) if it cannot be created.
inline std::unique_ptr<Runtime> MakeTestRuntime() {
  RuntimeOptions options;
  options.devices = kNumDevices;
  options.host_threads = 4;
  auto runtime = Runtime::Create(options);
  EXPECT_TRUE(runtime.ok()) << runtime.status();
  return runtime.ok() ? std::move(*runtime) : nullptr;
}

// The process-wide test runtime's PJRT client (8 CPU devices), created on first use.
inline std::shared_ptr<pjrt::Client> TestClient() {
  static const std::unique_ptr<Runtime> runtime = MakeTestRuntime();
  return runtime != nullptr ? runtime->pjrt_client() : nullptr;
}

// Contents of tests/testdata/<name>.
inline std::string ReadTestData(const std::string& name) {
  std::ifstream in(std::string(SHARDRT_TESTDATA_DIR) + "/" + name, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace shardrt::testing
