// Shared set-up for integration tests: one real CPU plugin client with 8 devices per test
// process, and helpers to read test programs.
#pragma once

#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include "gtest/gtest.h"
#include "pjrt/client.h"
#include "pjrt/plugin.h"

namespace shardrt::testing {

inline constexpr int kNumDevices = 8;

// The process-wide test client (8 CPU devices), created on first use.
inline std::shared_ptr<pjrt::Client> TestClient() {
  static std::shared_ptr<pjrt::Client> client = [] {
    setenv("TF_CPP_MIN_LOG_LEVEL", "2", 0);
    auto plugin = pjrt::Plugin::Load(pjrt::Plugin::DefaultPath());
    if (!plugin.ok()) {
      ADD_FAILURE() << plugin.status();
      return std::shared_ptr<pjrt::Client>();
    }
    pjrt::ClientOptions options;
    options.cpu_device_count = kNumDevices;
    auto client = pjrt::Client::Create(*plugin, options);
    if (!client.ok()) {
      ADD_FAILURE() << client.status();
      return std::shared_ptr<pjrt::Client>();
    }
    return *client;
  }();
  return client;
}

// Contents of tests/testdata/<name>.
inline std::string ReadTestData(const std::string& name) {
  std::ifstream in(std::string(SHARDRT_TESTDATA_DIR) + "/" + name, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace shardrt::testing
