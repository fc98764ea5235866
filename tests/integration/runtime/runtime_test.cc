// The front door on the real CPU plugin: plugin search (explicit path, $SHARDRT_PJRT_PLUGIN,
// the default next to libshardrt), what a plugin is from what it reports, device counts, named
// plugin options, the plugin-thread setting, errors before the plugin, and a whole run (compile,
// upload, schedule on the executor, download) checked against the host.
#include "shardrt/runtime/runtime.h"

#include <unistd.h>

#include <cstdlib>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "shardrt/sharding/text.h"
#include "test_env.h"

namespace shardrt {
namespace {

using ::shardrt::testing::ReadTestData;

// Sets (or unsets, for null) an environment variable for one scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value != nullptr) {
      setenv(name, value, 1);
    } else {
      unsetenv(name);
    }
  }
  ~ScopedEnv() {
    if (old_.has_value()) {
      setenv(name_, old_->c_str(), 1);
    } else {
      unsetenv(name_);
    }
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

std::string DefaultPlugin() {
  auto path = DefaultPluginPath();
  EXPECT_TRUE(path.ok()) << path.status();
  return path.ok() ? *path : "";
}

TEST(PluginSearchTest, TheDefaultSitsNextToLibshardrt) {
  const std::string path = DefaultPlugin();
  EXPECT_NE(path.find("/shardrt/plugins/xla_cpu_pjrt.so"), std::string::npos) << path;
  EXPECT_EQ(access(path.c_str(), R_OK), 0) << path;
  ScopedEnv env("SHARDRT_PJRT_PLUGIN", nullptr);
  auto found = FindPlugin("");
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ(found->path, path);
  EXPECT_EQ(found->source, PluginSource::kDefault);
}

TEST(PluginSearchTest, ExplicitThenEnvironmentThenDefault) {
  const std::string real = DefaultPlugin();
  {
    ScopedEnv env("SHARDRT_PJRT_PLUGIN", "/nonexistent/env_plugin.so");
    auto found = FindPlugin(real);  // explicit wins over the environment
    ASSERT_TRUE(found.ok()) << found.status();
    EXPECT_EQ(found->source, PluginSource::kExplicit);
  }
  {
    ScopedEnv env("SHARDRT_PJRT_PLUGIN", real.c_str());
    auto found = FindPlugin("");
    ASSERT_TRUE(found.ok()) << found.status();
    EXPECT_EQ(found->source, PluginSource::kEnvironment);
    EXPECT_EQ(found->path, real);
  }
}

TEST(PluginSearchTest, AMissingPluginNamesEveryPlaceTried) {
  {
    ScopedEnv env("SHARDRT_PJRT_PLUGIN", "/nonexistent/env_plugin.so");
    auto found = FindPlugin("");
    ASSERT_FALSE(found.ok());
    EXPECT_EQ(found.status().code(), absl::StatusCode::kNotFound);
    const std::string message(found.status().message());
    EXPECT_NE(message.find("explicit plugin path (not given)"), std::string::npos) << message;
    EXPECT_NE(message.find("$SHARDRT_PJRT_PLUGIN = '/nonexistent/env_plugin.so' (no such file)"),
              std::string::npos)
        << message;
  }
  auto explicit_missing = FindPlugin("/nonexistent/explicit.so");
  ASSERT_FALSE(explicit_missing.ok());
  EXPECT_NE(explicit_missing.status().message().find("'/nonexistent/explicit.so' (no such file)"),
            absl::string_view::npos);
  // Runtime::Create reports the same, and no word of CLI flags or scripts.
  RuntimeOptions options;
  options.plugin = "/nonexistent/explicit.so";
  auto runtime = Runtime::Create(options);
  ASSERT_FALSE(runtime.ok());
  EXPECT_EQ(runtime.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(runtime.status().message().find("--"), absl::string_view::npos);
  EXPECT_EQ(runtime.status().message().find("scripts/"), absl::string_view::npos);
}

TEST(RuntimeTest, TheCpuPluginIsRecognisedByWhatItReportsAndMakesTheDevicesAskedFor) {
  for (int64_t devices : {1, 3, 8}) {
    RuntimeOptions options;
    options.devices = devices;
    auto runtime = Runtime::Create(options);
    ASSERT_TRUE(runtime.ok()) << runtime.status();
    EXPECT_EQ((*runtime)->platform_name(), "cpu");
    EXPECT_EQ((*runtime)->devices().size(), static_cast<size_t>(devices));
    EXPECT_EQ((*runtime)->pjrt_client()->addressable_devices().size(),
              static_cast<size_t>(devices));
    EXPECT_GE((*runtime)->plugin_threads(), devices);
    EXPECT_EQ((*runtime)->client().pjrt_client(), (*runtime)->pjrt_client());
  }
}

// The plugin's log level is set through the plugin's own absl::SetMinLogLevel (found in its
// symbol table), or left alone: the option, then $SHARDRT_LOG decide; TF_CPP_MIN_LOG_LEVEL
// does not (importing JAX sets it). (Which lines then reach stderr: CliTest.ThePluginsLogLinesStayOffStderr...)
TEST(RuntimeTest, ThePluginsLogLevelIsSetThroughThePluginNotTheEnvironment) {
  ScopedEnv no_level("TF_CPP_MIN_LOG_LEVEL", nullptr);
  ScopedEnv no_log("SHARDRT_LOG", nullptr);
  auto control_of = [](std::optional<pjrt::PluginLogLevel> level) {
    RuntimeOptions options;
    options.devices = 1;
    options.plugin_log_level = level;
    auto runtime = Runtime::Create(options);
    EXPECT_TRUE(runtime.ok()) << runtime.status();
    return runtime.ok() ? (*runtime)->plugin().log_control() : pjrt::PluginLogControl::kUnchanged;
  };
  EXPECT_EQ(control_of(std::nullopt), pjrt::PluginLogControl::kApplied);
  EXPECT_EQ(control_of(pjrt::PluginLogLevel::kInfo), pjrt::PluginLogControl::kApplied);
  EXPECT_EQ(control_of(pjrt::PluginLogLevel::kUnchanged), pjrt::PluginLogControl::kUnchanged);
  {
    ScopedEnv plugin("SHARDRT_LOG", "plugin");
    EXPECT_EQ(control_of(std::nullopt), pjrt::PluginLogControl::kUnchanged);
    EXPECT_EQ(control_of(pjrt::PluginLogLevel::kError), pjrt::PluginLogControl::kApplied);
  }
  {
    ScopedEnv application("TF_CPP_MIN_LOG_LEVEL", "1");  // as importing JAX sets it
    EXPECT_EQ(control_of(std::nullopt), pjrt::PluginLogControl::kApplied);
    EXPECT_STREQ(std::getenv("TF_CPP_MIN_LOG_LEVEL"), "1");  // never changed
  }
  ScopedEnv bad("SHARDRT_LOG", "verbose");
  RuntimeOptions options;
  options.devices = 1;
  auto runtime = Runtime::Create(options);
  ASSERT_FALSE(runtime.ok());
  EXPECT_EQ(runtime.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(runtime.status().message(),
            "$SHARDRT_LOG: expected info, warning, error or plugin, got 'verbose'");
  EXPECT_EQ(std::getenv("TF_CPP_MIN_LOG_LEVEL"), nullptr);
}

TEST(RuntimeTest, NamedPluginOptionsReachThePlugin) {
  RuntimeOptions options;  // devices = 0: whatever the client has
  options.plugin_options.push_back({"cpu_device_count", int64_t{5}});
  auto runtime = Runtime::Create(options);
  ASSERT_TRUE(runtime.ok()) << runtime.status();
  EXPECT_EQ((*runtime)->devices().size(), 5u);
}

TEST(RuntimeTest, BadOptionsAreRejectedBeforeThePluginSeesThem) {
  struct Case {
    RuntimeOptions options;
    std::string expected;
  };
  std::vector<Case> cases(5);
  cases[0].options.devices = -1;
  cases[0].expected = "RuntimeOptions::devices must be >= 0, got -1";
  cases[1].options.plugin_options.push_back({"cpu_device_count", true});
  cases[1].expected = "plugin option cpu_device_count must be an int64 >= 1, got "
                      "cpu_device_count=true";
  cases[2].options.plugin_options.push_back({"cpu_device_count", int64_t{0}});
  cases[2].expected = "must be an int64 >= 1, got cpu_device_count=0";
  cases[3].options.host_threads = -2;
  cases[3].expected = "RuntimeOptions::host_threads must be >= 0, got -2";
  cases[4].options.plugin_options.push_back({"cpu_device_count", int64_t{2}});
  cases[4].options.devices = 4;
  cases[4].expected = "asks for 4 devices; the 'cpu' plugin at '";
  for (const Case& c : cases) {
    auto runtime = Runtime::Create(c.options);
    ASSERT_FALSE(runtime.ok()) << c.expected;
    EXPECT_EQ(runtime.status().code(), absl::StatusCode::kInvalidArgument) << runtime.status();
    EXPECT_NE(runtime.status().message().find(c.expected), absl::string_view::npos)
        << runtime.status();
  }
}

TEST(RuntimeTest, PluginThreadsAreCheckedNotApplied) {
  ScopedEnv nproc("PJRT_NPROC", "12");
  RuntimeOptions options;
  options.devices = 8;
  options.plugin_threads = 12;
  auto runtime = Runtime::Create(options);
  ASSERT_TRUE(runtime.ok()) << runtime.status();
  EXPECT_EQ((*runtime)->plugin_threads(), 12);
  EXPECT_STREQ(std::getenv("PJRT_NPROC"), "12");  // the environment is left as it was

  options.plugin_threads = 20;
  auto mismatch = Runtime::Create(options);
  ASSERT_FALSE(mismatch.ok());
  EXPECT_EQ(mismatch.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(mismatch.status().message().find("start the process with PJRT_NPROC=20"),
            absl::string_view::npos)
      << mismatch.status();
  EXPECT_STREQ(std::getenv("PJRT_NPROC"), "12");
}

TEST(RuntimeTest, ANonPluginFileIsACleanError) {
  RuntimeOptions options;
  options.plugin = std::string(SHARDRT_TESTDATA_DIR) + "/sharded_matmul_sum.mlir";
  auto runtime = Runtime::Create(options);
  ASSERT_FALSE(runtime.ok());
  EXPECT_EQ(runtime.status().code(), absl::StatusCode::kInvalidArgument) << runtime.status();
  EXPECT_NE(runtime.status().message().find("is not a loadable PJRT plugin"),
            absl::string_view::npos)
      << runtime.status();
}

// A whole run through the front door: y = sum over rows of (x @ w) on 8 devices, scheduled
// twice on the executor (the second step chained on a placeholder), against the host.
TEST(RuntimeTest, CompileUploadScheduleDownloadOnEightDevices) {
  RuntimeOptions options;
  options.devices = 8;
  auto runtime = Runtime::Create(options);
  ASSERT_TRUE(runtime.ok()) << runtime.status();
  ComputationClient& client = (*runtime)->client();
  CompileRequest request;
  request.name = "sharded_matmul_sum";
  request.program = ReadTestData("sharded_matmul_sum.mlir");
  request.options.num_partitions = 8;
  auto program = client.Compile(request);
  ASSERT_TRUE(program.ok()) << program.status();

  std::vector<float> x(16 * 4), w(4 * 3);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 7) - 3.0f;
  for (size_t i = 0; i < w.size(); ++i) w[i] = 0.5f * static_cast<float>(i);
  const HostArrayView views[] = {
      {ElementType::kF32, {16, 4}, std::as_bytes(std::span(x))},
      {ElementType::kF32, {4, 3}, std::as_bytes(std::span(w))}};
  const std::shared_ptr<const DataLayout> layouts[] = {(*program)->parameter_layout(0),
                                                       (*program)->parameter_layout(1)};
  auto args = client.TransferToDevice(views, layouts);
  ASSERT_TRUE(args.ok()) << args.status();
  auto out = (*runtime)->executor().Schedule(*program, *args);
  ASSERT_TRUE(out.ok()) << out.status();
  auto host = client.TransferFromDevice(*out);
  ASSERT_TRUE(host.ok()) << host.status();
  ASSERT_TRUE((*runtime)->executor().WaitForAll().ok());
  const auto* y = reinterpret_cast<const float*>((*host)[0].data.data());
  for (int j = 0; j < 3; ++j) {
    double expected = 0;
    for (int i = 0; i < 16; ++i) {
      for (int k = 0; k < 4; ++k) expected += double{x[i * 4 + k]} * w[k * 3 + j];
    }
    EXPECT_NEAR(y[j], expected, 1e-3) << "column " << j;
  }
}

// The common path through the front door alone: Compile (partitions from the program), Put
// (with a parameter layout, and with a sharding), Execute, ToHost and typed values, checked
// against the host; a wrong element type and a program for more devices are clean errors.
TEST(RuntimeTest, TheFrontDoorCompilesPutsExecutesAndDownloadsTyped) {
  RuntimeOptions options;
  options.devices = 8;
  auto runtime = Runtime::Create(options);
  ASSERT_TRUE(runtime.ok()) << runtime.status();
  const Runtime& rt = **runtime;
  auto program = rt.Compile(ReadTestData("sharded_matmul_sum.mlir"), "matmul");
  ASSERT_TRUE(program.ok()) << program.status();
  std::vector<float> x(16 * 4), w(4 * 3);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 7) - 3.0f;
  for (size_t i = 0; i < w.size(); ++i) w[i] = 0.5f * static_cast<float>(i);
  auto px = rt.Put(HostArrayView::Of<float>(x, {16, 4}), (*program)->parameter_layout(0));
  ASSERT_TRUE(px.ok()) << px.status();
  // w by a sharding: the layout the program wants, made from its text.
  auto w_sharding = ParseSharding((*program)->parameter_layout(1)->sharding.ToString());
  ASSERT_TRUE(w_sharding.ok()) << w_sharding.status();
  auto pw = rt.Put(HostArrayView::Of<float>(w, {4, 3}), *w_sharding);
  ASSERT_TRUE(pw.ok()) << pw.status();
  auto out = rt.Execute(**program, {*px, *pw});
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->size(), 1u);
  auto host = rt.ToHost(out->front());
  ASSERT_TRUE(host.ok()) << host.status();
  auto y = host->values<float>();
  ASSERT_TRUE(y.ok()) << y.status();
  ASSERT_EQ(y->size(), 3u);
  for (int j = 0; j < 3; ++j) {
    double expected = 0;
    for (int i = 0; i < 16; ++i) {
      for (int k = 0; k < 4; ++k) expected += double{x[i * 4 + k]} * w[k * 3 + j];
    }
    EXPECT_NEAR((*y)[j], expected, 1e-3) << "column " << j;
  }
  auto as_int = host->values<int32_t>();
  ASSERT_FALSE(as_int.ok());
  EXPECT_EQ(as_int.status().message(), "HostArray::values: the array holds f32, not s32");
  EXPECT_EQ(rt.ToHost(nullptr).status().code(), absl::StatusCode::kInvalidArgument);
  // A wrong shape for the layout is the client's clean error, before the plugin.
  auto wrong = rt.Put(HostArrayView::Of<float>(w, {3, 4}), (*program)->parameter_layout(1));
  EXPECT_EQ(wrong.status().code(), absl::StatusCode::kInvalidArgument) << wrong.status();

  options.devices = 4;
  auto four = Runtime::Create(options);
  ASSERT_TRUE(four.ok()) << four.status();
  auto too_many = (*four)->Compile(ReadTestData("sharded_matmul_sum.mlir"));
  ASSERT_FALSE(too_many.ok());
  EXPECT_EQ(too_many.status().message(),
            "Runtime::Compile: the program declares mhlo.num_partitions = 8 but the runtime has "
            "4 devices");
}

}  // namespace
}  // namespace shardrt
