// PluginLogLevel: which of a plugin's own log lines reach stderr.
//
// PJRT plugins log through their own, statically linked copy of Abseil's logging (the XLA CPU
// plugin prints an "All log messages before absl::InitializeLog()" warning, a device-count line
// per client and a GSPMD deprecation warning per compile). The PJRT C API has no call for it and
// the plugin exports nothing but GetPjrtApi; its only documented knob is TF_CPP_MIN_LOG_LEVEL,
// an environment variable, which shardrt never changes (other libraries in the process, JAX
// among them, read it too). Instead, Plugin::Load finds the plugin's own
// absl::SetMinLogLevel in the library's ELF symbol table and calls it right after dlopen: that
// changes the threshold of the plugin's private copy of Abseil's logging and nothing else in the
// process (JAX's jaxlib and any other library keep their own copies and their own settings).
// A plugin whose symbol table lacks the function (a stripped library, another logger) is left
// as it is; Plugin::log_control() tells which happened.
#pragma once

namespace shardrt::pjrt {

enum class PluginLogLevel {
  kUnchanged,  // Leave the plugin's logging as the plugin sets it (TF_CPP_MIN_LOG_LEVEL for XLA).
  kInfo,       // Everything the plugin logs: information, warnings, errors.
  kWarning,    // Warnings and errors.
  kError,      // Errors only.
};

// What Plugin::Load did about the log level it was asked for.
enum class PluginLogControl {
  kUnchanged,     // Asked to leave it (PluginLogLevel::kUnchanged).
  kApplied,       // The plugin's own threshold was set.
  kNotAvailable,  // The plugin's library has no absl::SetMinLogLevel in its symbol table.
};

}  // namespace shardrt::pjrt
