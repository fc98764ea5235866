// Runs the CLI binary (SHARDRT_CLI_PATH), or another program built on the CLI's library (the
// decoder demo), for tests, with stdout and stderr captured apart.
#pragma once

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "gtest/gtest.h"

namespace shardrt::cli::testing {

struct CliResult {
  int exit_code = -1;  // the exit status; 128 + N when killed by signal N
  std::string out;     // stdout
  std::string err;     // stderr
};

// A new empty folder under /tmp.
inline std::string MakeTempDir() {
  char tmpl[] = "/tmp/shardrt_cli_test_XXXXXX";
  return mkdtemp(tmpl);
}

// Runs `<binary> <args>` through the shell (args are shell words).
inline CliResult RunCaptured(const std::string& binary, const std::string& args) {
  static const std::string err_dir = MakeTempDir();
  const std::string err_path = err_dir + "/stderr";
  const std::string cmd = binary + " " + args + " 2>" + err_path;
  CliResult r;
  FILE* pipe = popen(cmd.c_str(), "r");
  if (pipe == nullptr) return r;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0) r.out.append(buf.data(), n);
  const int status = pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  std::ifstream in(err_path);
  std::stringstream ss;
  ss << in.rdbuf();
  r.err = ss.str();
  return r;
}

// Runs `shardrt <args>` through the shell (args are shell words).
inline CliResult RunCliCaptured(const std::string& args) {
  return RunCaptured(SHARDRT_CLI_PATH, args);
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
