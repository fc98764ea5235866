// Runs a program for tests with a deadline: a command that blocks (on a FIFO, say) is killed
// when the deadline passes and reported as timed out, instead of hanging the test. Also reports
// the command's peak resident set (wait4's rusage), so a test can check that a file was refused
// without being read. RunCliWithDeadline runs the CLI binary (SHARDRT_CLI_PATH) without a
// shell; cli_runner.h runs commands through the shell on top of RunWithDeadline.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_split.h"

namespace shardrt::cli::testing {

struct TimedResult {
  int exit_code = -1;         // the exit status; 128 + N when killed by signal N
  bool timed_out = false;     // killed at the deadline
  std::string out;            // stdout
  std::string err;            // stderr
  int64_t peak_rss_kib = 0;   // the command's peak resident set
  double seconds = 0;         // wall time until it exited (or was killed)
};

// A new empty folder under /tmp.
inline std::string MakeTempDir() {
  char tmpl[] = "/tmp/shardrt_cli_test_XXXXXX";
  return mkdtemp(tmpl);
}

// Runs the program `words[0]` (a path) with arguments `words[1..]`, stdin from /dev/null and
// stdout and stderr in files, in a process group of its own, for at most `deadline`: then the
// group (the command and whatever it started) is killed (SIGKILL) and the result says timed_out.
inline TimedResult RunWithDeadline(std::vector<std::string> words,
                                   std::chrono::seconds deadline) {
  static const std::string io_dir = MakeTempDir();
  const std::string out_path = io_dir + "/stdout", err_path = io_dir + "/stderr";
  std::vector<char*> argv;
  for (std::string& w : words) argv.push_back(w.data());
  argv.push_back(nullptr);
  TimedResult r;
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
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  int status = 0;
  struct rusage usage {};
  while (true) {
    const pid_t done = ::wait4(pid, &status, WNOHANG, &usage);
    if (done == pid) break;
    if (done < 0 && errno != EINTR) return r;
    if (std::chrono::steady_clock::now() - start > deadline) {
      r.timed_out = true;
      ::kill(-pid, SIGKILL);
      ::wait4(pid, &status, 0, &usage);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.peak_rss_kib = usage.ru_maxrss;
  for (auto [path, text] : {std::pair{&out_path, &r.out}, std::pair{&err_path, &r.err}}) {
    std::ifstream in(*path);
    std::stringstream ss;
    ss << in.rdbuf();
    *text = ss.str();
  }
  return r;
}

// Runs `shardrt <args>` (words split at spaces, no shell: no quoting) for at most `deadline`.
inline TimedResult RunCliWithDeadline(const std::string& args, std::chrono::seconds deadline) {
  std::vector<std::string> words = {SHARDRT_CLI_PATH};
  for (absl::string_view w : absl::StrSplit(args, ' ', absl::SkipEmpty())) words.emplace_back(w);
  return RunWithDeadline(std::move(words), deadline);
}

}  // namespace shardrt::cli::testing
