// Which PJRT plugin a Runtime loads.
//
// The search, in order; the first place that is set decides, and a place that is set but holds
// no file is an error (a mistyped path never silently loads another plugin):
//   1. the explicit path (RuntimeOptions::plugin), when not empty;
//   2. the environment variable SHARDRT_PJRT_PLUGIN, when set and not empty;
//   3. the default plugin, found relative to libshardrt itself:
//      <folder of libshardrt.so>/shardrt/plugins/xla_cpu_pjrt.so. `cmake --install` puts the
//      pinned CPU plugin there, and the build tree mirrors that layout, so an installed or a
//      freshly built shardrt finds its plugin wherever it was moved to.
#pragma once

#include <string>

#include "absl/status/statusor.h"

#include "shardrt/base/export.h"

namespace shardrt {

// Where a plugin path came from.
enum class PluginSource {
  kExplicit,     // RuntimeOptions::plugin
  kEnvironment,  // $SHARDRT_PJRT_PLUGIN
  kDefault,      // next to libshardrt (installed or built)
};

struct SHARDRT_EXPORT FoundPlugin {
  std::string path;
  PluginSource source = PluginSource::kDefault;
};

// The default plugin's path (step 3), whether or not the file exists. Error: Internal when the
// location of libshardrt cannot be determined. Thread-safe.
[[nodiscard]] SHARDRT_EXPORT absl::StatusOr<std::string> DefaultPluginPath();

// Runs the search above for `explicit_path` (may be empty). Reads the environment, changes
// nothing. Error: NotFound naming every place tried, what each held, and why it was refused.
// Thread-safe (as long as nothing else changes the environment meanwhile).
[[nodiscard]] SHARDRT_EXPORT absl::StatusOr<FoundPlugin> FindPlugin(
    const std::string& explicit_path);

}  // namespace shardrt
