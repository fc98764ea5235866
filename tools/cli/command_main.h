// Running one command from a process's arguments: what build/shardrt does with the subcommand
// it is given, and what a program of its own built on a CommandDef does (bench/decoder_demo).
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "cli/commands.h"

namespace shardrt::cli {

// Runs `command` with `args` (the arguments after `invocation`). `invocation` is how the command
// is typed, e.g. "shardrt generate": it starts the help's usage line and every error line.
// Standard output is the command's result: a closed one (fd 1) is given a stand-in that takes
// no bytes, so that no file the command opens lands on fd 1 and receives its output, and a
// command that prints fails (CheckOutputOpen, WriteOutput, FlushOutput). A --trace FILE flag
// of the command's table is checked first (CheckOutputFile), before anything runs.
// First --timeout SECONDS is taken out of `args` (past it the process prints
// "INVOCATION: timed out after N s (--timeout); stopped" and exits 1); then `args` are parsed
// with the command's flags: --help or -h prints CommandHelp(command, invocation) on stdout and
// returns 0, whatever else is wrong; a bad flag prints "INVOCATION: MESSAGE (see: INVOCATION
// --help)". Then the command runs; its error prints "INVOCATION: MESSAGE"; once it returns
// OK, standard output is flushed, and a write to it that failed at any time prints
// "INVOCATION: writing the output: REASON" (--help's too). Every error is one line on stderr
// and returns 1. Call from the main thread, once per process.
[[nodiscard]] int RunCommandLine(const CommandDef& command, std::vector<std::string> args,
                                 absl::string_view invocation);

// OK while standard output is open; FailedPrecondition "writing the output: standard output is
// closed" when RunCommandLine found it closed. For a command that prints its results after
// long work: call before the work, so that it fails first. Thread-safe.
[[nodiscard]] absl::Status CheckOutputOpen();

// Writes `bytes` to standard output and flushes it. Error: Unavailable "writing the output:
// REASON" (the system's reason, e.g. "No space left on device", or "standard output is
// closed"), for this write or an earlier one that failed. Thread-safe (stdio's lock); call from
// one thread at a time for the bytes to stay in order.
[[nodiscard]] absl::Status WriteOutput(absl::string_view bytes);

// Flushes standard output and reports whether every write to it succeeded since the process
// started. Error: as WriteOutput's. Thread-safe as WriteOutput.
[[nodiscard]] absl::Status FlushOutput();

}  // namespace shardrt::cli
