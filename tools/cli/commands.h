// The CLI's subcommands. Each takes its arguments (after the subcommand name), writes its
// results to stdout, and returns a Status: the caller prints a non-OK one as one line on
// stderr and exits non-zero, as it does when stdout could not take what was written to it
// (RunCommandLine, cli/command_main.h). Each is described by a CommandDef whose flag table is the one the
// command parses with and the one its help lists (cli/help.h).
#pragma once

#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "cli/flags.h"
#include "shardrt/base/limits.h"

namespace shardrt::cli {

// One subcommand: what help says about it and what runs it. A constant.
struct CommandDef {
  absl::string_view name;     // e.g. "generate"
  absl::string_view usage;    // the arguments after `shardrt NAME`, e.g. "PROGRAM.mlir [flags]"
  absl::string_view summary;  // one sentence
  std::span<const FlagDef> flags;  // the table the command parses its arguments with
  absl::Status (*run)(const std::vector<std::string>& args);
};

// The subcommands, in the order help lists them. Static; thread-safe.
std::span<const CommandDef* const> Commands();
// The subcommand named `name`, or nullptr. Thread-safe.
const CommandDef* FindCommand(absl::string_view name);

// Flags several commands share, with one wording.
inline constexpr FlagDef kDevicesFlag{
    .name = "devices", .type = FlagType::kInteger, .value_name = "N",
    .description = "CPU devices to use (one partition each)", .default_text = "8",
    .int_min = 1, .int_max = limits::kMaxCpuDevices};
inline constexpr FlagDef kPluginFlag{
    .name = "plugin", .value_name = "PATH", .description = "the PJRT plugin (.so) to load",
    .default_text = "$SHARDRT_PJRT_PLUGIN, else the one installed next to libshardrt"};
inline constexpr FlagDef kCompileCacheFlag{
    .name = "compile-cache", .value_name = "DIR|off",
    .description = "folder of the persistent compile cache; off for none",
    .default_text = "$SHARDRT_COMPILE_CACHE, else $XDG_CACHE_HOME/shardrt/compile or "
                    "~/.cache/shardrt/compile"};
inline constexpr FlagDef kMetricsFlag{
    .name = "metrics", .type = FlagType::kBoolean,
    .description = "print the runtime's metrics report at the end", .default_text = "off"};
inline constexpr FlagDef kTraceFlag{
    .name = "trace", .value_name = "FILE",
    .description = "write Chrome trace events (chrome://tracing, Perfetto) to FILE"};
// Every command's --timeout, which main() takes out of the arguments before the command's own
// flags are parsed: past it the process prints one line and exits 1.
inline constexpr FlagDef kTimeoutFlag{
    .name = "timeout", .type = FlagType::kInteger, .value_name = "SECONDS",
    .description = "stop with one line on stderr and exit 1 once the command has run this long",
    .int_min = 1, .int_max = 86400};

// The commands, each with its flag table (in its file).
extern const CommandDef kDevicesCommand;
extern const CommandDef kShardInfoCommand;
extern const CommandDef kRunCommand;
extern const CommandDef kGenerateCommand;
extern const CommandDef kCacheCommand;
extern const CommandDef kServeCommand;

// The commands' bodies; each parses `args` with its CommandDef's flags (InvalidArgument for bad
// flags) and returns its own errors as its file describes them.
[[nodiscard]] absl::Status DevicesCommand(const std::vector<std::string>& args);
[[nodiscard]] absl::Status ShardInfoCommand(const std::vector<std::string>& args);
[[nodiscard]] absl::Status RunCommand(const std::vector<std::string>& args);
[[nodiscard]] absl::Status GenerateCommand(const std::vector<std::string>& args);
[[nodiscard]] absl::Status CacheCommand(const std::vector<std::string>& args);
[[nodiscard]] absl::Status ServeCommand(const std::vector<std::string>& args);

}  // namespace shardrt::cli
