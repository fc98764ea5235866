// The CLI's runtime: the library's front door (shardrt::Runtime) with the CLI's process policy,
// and what a command reports at its end.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "shardrt/base/trace.h"
#include "shardrt/runtime/runtime.h"

namespace shardrt::cli {

// Creates the Runtime for a command on `devices` devices with the plugin given by --plugin (or
// the library's search, see shardrt/runtime/plugin_search.h).
//
// The plugin's log lines stay off stderr (which carries one line per error) by the library's
// default (RuntimeOptions::plugin_log_level; $SHARDRT_LOG=info shows them). The CLI owns its
// process, so it also sets the plugin's environment default that the library leaves to
// applications: PJRT_NPROC = max(cores, 2 x devices) (the CPU plugin's worker threads: two
// multi-device programs in flight), when the variable is unset. Rather than change its own
// environment, the CLI then starts itself once
// more with them (execve of /proc/self/exe with the same arguments); if that is impossible it
// goes on as it is. Errors: Runtime::Create's.
//
// The persistent compile cache is on by default for the CLI: `compile_cache` is the
// --compile-cache flag's value (CompileCacheDirectory decides the directory).
[[nodiscard]] absl::StatusOr<std::unique_ptr<Runtime>> CreateCliRuntime(
    int64_t devices, const std::optional<std::string>& plugin,
    const std::optional<std::string>& compile_cache);

// The CLI's persistent compile cache directory for the --compile-cache flag's value `flag`:
// the flag's folder ("off": none, returned as ""), else $SHARDRT_COMPILE_CACHE ("off": none),
// else $XDG_CACHE_HOME/shardrt/compile, else $HOME/.cache/shardrt/compile ("" when neither
// variable is set). Error: InvalidArgument for an empty flag value.
[[nodiscard]] absl::StatusOr<std::string> CompileCacheDirectory(
    const std::optional<std::string>& flag);

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
