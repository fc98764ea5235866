// Plugin: a loaded PJRT C API plugin (a shared library exporting GetPjrtApi).
//
// Loading dlopens the library (RTLD_NOW | RTLD_LOCAL), never unloads it (plugins keep static
// state), checks the API version (major 0, minor at least the header shardrt was built with)
// and calls PJRT_Plugin_Initialize once. Any PJRT plugin works, not only the CPU one. Which
// plugin to load is decided above this layer (see shardrt/runtime/plugin_search.h).
// Thread-safety: immutable after Load; share it freely (std::shared_ptr<const Plugin>).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "shardrt/base/export.h"
#include "shardrt/pjrt/named_value.h"
#include "shardrt/pjrt/opaque.h"
#include "shardrt/pjrt/plugin_log.h"

namespace shardrt::pjrt {

struct PluginLoadOptions {
  // Which of the plugin's own log lines reach stderr (shardrt/pjrt/plugin_log.h). Applied right
  // after dlopen, before the plugin runs anything. The setting belongs to the plugin's library,
  // so it is process-wide: the latest load of the same library decides.
  PluginLogLevel log_level = PluginLogLevel::kUnchanged;
};

class SHARDRT_EXPORT Plugin {
 public:
  // Loads the plugin at `path`. Errors: NotFound if the file does not exist,
  // InvalidArgument if it is not a loadable library or exports no GetPjrtApi,
  // FailedPrecondition on an incompatible API version; the plugin's own error if its
  // initialization fails. Loading the same path twice returns two Plugin objects sharing
  // the (process-wide) library; each initializes it once more, which plugins allow.
  // Thread-safe.
  [[nodiscard]] static absl::StatusOr<std::shared_ptr<const Plugin>> Load(
      const std::string& path, const PluginLoadOptions& options = {});

  // The plugin's function table; valid for the whole process (plugins are never unloaded).
  const PJRT_Api* api() const { return api_; }
  // The path it was loaded from, and the PJRT C API version it reports.
  const std::string& path() const { return path_; }
  int api_major() const { return major_; }
  int api_minor() const { return minor_; }
  // Attributes the plugin reports (e.g. xla_version, stablehlo_current_version), copied here.
  const std::vector<NamedValue>& attributes() const { return attributes_; }
  // What Load did about PluginLoadOptions::log_level.
  PluginLogControl log_control() const { return log_control_; }

 private:
  Plugin() = default;
  const PJRT_Api* api_ = nullptr;
  std::string path_;
  int major_ = 0;
  int minor_ = 0;
  std::vector<NamedValue> attributes_;
  PluginLogControl log_control_ = PluginLogControl::kUnchanged;
};

}  // namespace shardrt::pjrt
