// Shared CLI set-up: load the plugin, create a PJRT client with N CPU devices, and wrap it in a
// ComputationClient.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "base/trace.h"
#include "client/computation_client.h"

namespace shardrt::cli {

struct RuntimeOptions {
  int64_t num_devices = 8;
  std::optional<std::string> plugin_path;  // default: pjrt::Plugin::DefaultPath()
};

// Loads the plugin and creates its client. A CPU plugin (its file name says "cpu", as the
// default one's does) gets cpu_device_count = num_devices; other plugins use their own devices.
// Errors: the plugin's (missing file, not a plugin, bad version), or client creation's.
[[nodiscard]] absl::StatusOr<std::shared_ptr<pjrt::Client>> CreatePjrtClient(
    const RuntimeOptions& options);

// CreatePjrtClient wrapped in a ComputationClient. Errors: CreatePjrtClient's, and
// InvalidArgument when the plugin offers fewer devices than asked for.
[[nodiscard]] absl::StatusOr<std::unique_ptr<ComputationClient>> CreateRuntime(
    const RuntimeOptions& options);

// What a command reports at its end: --metrics prints the metrics report, --trace FILE records
// Chrome trace events from Start() and writes them in Finish(). Not thread-safe; one per command.
class CommandReports {
 public:
  CommandReports(bool metrics, std::optional<std::string> trace_path)
      : metrics_(metrics), trace_path_(std::move(trace_path)) {}
  // Starts tracing when asked. Error: FailedPrecondition if another recorder is current.
  [[nodiscard]] absl::Status Start();
  // Prints the metrics report and writes the trace file. Error: the file could not be written.
  [[nodiscard]] absl::Status Finish();

 private:
  bool metrics_;
  std::optional<std::string> trace_path_;
  TraceRecorder recorder_;
};

}  // namespace shardrt::cli
