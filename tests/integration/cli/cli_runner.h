// Runs the CLI binary (SHARDRT_CLI_PATH), or another program built on the CLI's library (the
// decoder demo), for tests, with stdout and stderr captured apart.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

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

struct ShellResult {
  int exit_code = -1;      // the exit status; 128 + N when killed by signal N
  bool timed_out = false;  // killed at the deadline
  std::string out;         // stdout (empty when `args` send it elsewhere)
  std::string err;         // stderr
  double seconds = 0;      // wall time until it exited (or was killed)
};

// Runs `shardrt <args>` through the shell (args are shell words and may redirect its output,
// e.g. "> /dev/full" or ">&-"), with stdin from /dev/null and stdout and stderr in files, for
// at most `deadline`: then the command and whatever it started (its process group) are killed
// (SIGKILL) and the result says timed_out.
inline ShellResult RunCliShell(const std::string& args, std::chrono::seconds deadline) {
  static const std::string io_dir = MakeTempDir();
  const std::string out_path = io_dir + "/stdout", err_path = io_dir + "/stderr";
  const std::string command = std::string("exec " SHARDRT_CLI_PATH " ") + args;
  ShellResult r;
  const auto start = std::chrono::steady_clock::now();
  const pid_t pid = ::fork();
  if (pid < 0) return r;
  if (pid == 0) {  // only async-signal-safe calls until exec
    ::setpgid(0, 0);
    const int in = ::open("/dev/null", O_RDONLY);
    const int out = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int err = ::open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (in < 0 || out < 0 || err < 0) ::_exit(126);
    ::dup2(in, 0);
    ::dup2(out, 1);
    ::dup2(err, 2);
    ::execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  int status = 0;
  while (true) {
    const pid_t done = ::waitpid(pid, &status, WNOHANG);
    if (done == pid) break;
    if (done < 0 && errno != EINTR) return r;
    if (std::chrono::steady_clock::now() - start > deadline) {
      r.timed_out = true;
      ::kill(-pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  for (auto [path, text] : {std::pair{&out_path, &r.out}, std::pair{&err_path, &r.err}}) {
    std::ifstream in(*path);
    std::stringstream ss;
    ss << in.rdbuf();
    *text = ss.str();
  }
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
