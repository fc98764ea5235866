// Running one command from a process's arguments: what build/shardrt does with the subcommand
// it is given, and what a program of its own built on a CommandDef does (bench/decoder_demo).
#pragma once

#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "cli/commands.h"

namespace shardrt::cli {

// Runs `command` with `args` (the arguments after `invocation`). `invocation` is how the command
// is typed, e.g. "shardrt generate": it starts the help's usage line and every error line.
// First --timeout SECONDS is taken out of `args` (past it the process prints
// "INVOCATION: timed out after N s (--timeout); stopped" and exits 1); then `args` are parsed
// with the command's flags: --help or -h prints CommandHelp(command, invocation) on stdout and
// returns 0, whatever else is wrong; a bad flag prints "INVOCATION: MESSAGE (see: INVOCATION
// --help)". Then the command runs; its error prints "INVOCATION: MESSAGE". Every error is one
// line on stderr and returns 1. Call from the main thread, once per process.
[[nodiscard]] int RunCommandLine(const CommandDef& command, std::vector<std::string> args,
                                 absl::string_view invocation);

}  // namespace shardrt::cli
