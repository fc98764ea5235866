// Shared CLI set-up: load the plugin, create a PJRT client with N CPU devices, and wrap it in a
// ComputationClient.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "client/computation_client.h"

namespace shardrt::cli {

struct RuntimeOptions {
  int64_t num_devices = 8;
  std::optional<std::string> plugin_path;  // default: pjrt::Plugin::DefaultPath()
};

// Errors: the plugin's (missing file, not a plugin, bad version), or client creation's; and
// InvalidArgument when the plugin offers fewer devices than asked for.
[[nodiscard]] absl::StatusOr<std::unique_ptr<ComputationClient>> CreateRuntime(
    const RuntimeOptions& options);

}  // namespace shardrt::cli
