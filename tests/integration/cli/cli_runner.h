// Runs the CLI binary (SHARDRT_CLI_PATH), or another program built on the CLI's library (the
// decoder demo), for tests through the shell, with stdout and stderr captured apart and a
// deadline (deadline_runner.h): a command that does not end in time is killed and fails the
// test instead of hanging it.
#pragma once

#include <chrono>
#include <string>

#include "cli/deadline_runner.h"
#include "gtest/gtest.h"

namespace shardrt::cli::testing {

using CliResult = TimedResult;
using ShellResult = TimedResult;

// The default deadline of a command (a first run of the real model compiles its programs).
constexpr std::chrono::seconds kCliDeadline(600);

// Runs `<binary> <args>` through the shell (args are shell words and may redirect its output,
// e.g. "> /dev/full" or ">&-", or its input, "< FILE"), with stdin from /dev/null, for at most
// `deadline` (RunWithDeadline: then the command and whatever it started are killed).
inline TimedResult RunShellWithDeadline(const std::string& binary, const std::string& args,
                                        std::chrono::seconds deadline) {
  return RunWithDeadline({"/bin/sh", "-c", "exec " + binary + " " + args}, deadline);
}

// Runs `<binary> <args>` through the shell (args are shell words) for at most `deadline`; a
// command killed at the deadline is a test failure.
inline CliResult RunCaptured(const std::string& binary, const std::string& args,
                             std::chrono::seconds deadline = kCliDeadline) {
  CliResult r = RunShellWithDeadline(binary, args, deadline);
  if (r.timed_out) {
    ADD_FAILURE() << binary << " " << args << ": killed after " << r.seconds
                  << " s, past its deadline of " << deadline.count() << " s";
  }
  return r;
}

// Runs `shardrt <args>` through the shell for at most `deadline`, and reports a timeout in the
// result (timed_out) for the test to check.
inline ShellResult RunCliShell(const std::string& args, std::chrono::seconds deadline) {
  return RunShellWithDeadline(SHARDRT_CLI_PATH, args, deadline);
}

// Runs `shardrt <args>` through the shell (args are shell words) for at most `deadline`; a
// timeout is a test failure.
inline CliResult RunCliCaptured(const std::string& args,
                                std::chrono::seconds deadline = kCliDeadline) {
  return RunCaptured(SHARDRT_CLI_PATH, args, deadline);
}

// Expects a clean failure of `<binary> <args>`: exit 1, one line on stderr that holds
// `expected`.
inline void ExpectCleanErrorOf(const std::string& binary, const std::string& args,
                               const std::string& expected) {
  SCOPED_TRACE(args);
  CliResult r = RunCaptured(binary, args);
  EXPECT_EQ(r.exit_code, 1) << r.err;
  ASSERT_FALSE(r.err.empty());
  EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << "not one line: " << r.err;
  EXPECT_NE(r.err.find(expected), std::string::npos) << r.err;
}

// Expects a clean failure of `shardrt <args>`: exit 1, one line on stderr that holds `expected`.
inline void ExpectCleanError(const std::string& args, const std::string& expected) {
  ExpectCleanErrorOf(SHARDRT_CLI_PATH, args, expected);
}

}  // namespace shardrt::cli::testing
