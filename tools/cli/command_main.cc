#include "cli/command_main.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "cli/flags.h"
#include "cli/help.h"
#include "shardrt/base/mutex.h"

namespace shardrt::cli {
namespace {

// Whether standard output was closed when RunCommandLine started (fd 1 then holds /dev/full).
std::atomic<bool> output_closed{false};

// Gives a closed fd 1 a stand-in, /dev/full, which takes no bytes: the command's output then
// fails to be written (and is reported) rather than going to the next file the process opens.
// The stand-in closes on exec, so a process the CLI starts again finds fd 1 closed too.
void HoldClosedOutput() {
  if (::fcntl(STDOUT_FILENO, F_GETFD) >= 0 || errno != EBADF) return;
  output_closed = true;
  const int fd = ::open("/dev/full", O_WRONLY | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) return;
  if (fd != STDOUT_FILENO) {
    ::dup3(fd, STDOUT_FILENO, O_CLOEXEC);
    ::close(fd);
  }
}

// The error for output that could not be written, with errno value `error` (0: unknown).
absl::Status OutputError(int error) {
  if (output_closed) return CheckOutputOpen();
  return absl::UnavailableError(absl::StrCat(
      "writing the output: ", error != 0 ? std::strerror(error) : "a write failed"));
}

// Takes --timeout SECONDS / --timeout=SECONDS out of `args`. Error: a value that is not a whole
// number of seconds in [1, 86400], or a missing one.
absl::StatusOr<std::optional<int64_t>> TakeTimeout(std::vector<std::string>& args) {
  std::optional<int64_t> seconds;
  for (size_t i = 0; i < args.size(); ++i) {
    std::string value;
    size_t taken = 1;
    if (args[i] == "--timeout") {
      if (i + 1 >= args.size()) return absl::InvalidArgumentError("flag --timeout needs a value");
      value = args[i + 1];
      taken = 2;
    } else if (absl::StartsWith(args[i], "--timeout=")) {
      value = args[i].substr(10);
    } else {
      continue;
    }
    int64_t s = 0;
    if (!absl::SimpleAtoi(value, &s) || s < kTimeoutFlag.int_min || s > kTimeoutFlag.int_max) {
      return absl::InvalidArgumentError(
          absl::StrCat("flag --timeout: expected a whole number of seconds in [",
                       kTimeoutFlag.int_min, ", ", kTimeoutFlag.int_max, "], got '", value, "'"));
    }
    seconds = s;
    args.erase(args.begin() + static_cast<std::ptrdiff_t>(i),
               args.begin() + static_cast<std::ptrdiff_t>(i + taken));
    --i;
  }
  return seconds;
}

// Ends the process with one line on stderr, prefixed with `prefix`, if the command has not
// finished within `seconds`.
class Watchdog {
 public:
  Watchdog(const std::string& prefix, int64_t seconds)
      : thread_([this, prefix, seconds] { Watch(prefix, seconds); }) {}
  ~Watchdog() {
    {
      MutexLock lock(mu_);
      done_ = true;
    }
    cv_.NotifyAll();
    thread_.join();
  }

 private:
  void Watch(const std::string& prefix, int64_t seconds) ABSL_LOCKS_EXCLUDED(mu_) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
    MutexLock lock(mu_);
    while (!done_) {
      if (cv_.WaitUntil(lock, deadline) == std::cv_status::timeout && !done_) {
        std::fprintf(stderr, "%s: timed out after %lld s (--timeout); stopped\n", prefix.c_str(),
                     static_cast<long long>(seconds));
        std::fflush(stdout);
        std::_Exit(1);
      }
    }
  }

  Mutex mu_;
  CondVar cv_;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;  // last: starts once the members above exist
};

// Prints `message` as one line on stderr, prefixed with `prefix`.
void PrintError(const std::string& prefix, absl::string_view message) {
  std::string line(message);
  for (char& c : line) {
    if (c == '\n') c = ' ';
  }
  std::fprintf(stderr, "%s: %s\n", prefix.c_str(), line.c_str());
}

}  // namespace

int RunCommandLine(const CommandDef& command, std::vector<std::string> args,
                   absl::string_view invocation) {
  const std::string prefix(invocation);
  HoldClosedOutput();
  absl::StatusOr<std::optional<int64_t>> timeout = TakeTimeout(args);
  // The command parses its arguments again, with the same table: this parse is for --help and
  // for errors, which it reports with a pointer to the help.
  absl::StatusOr<Flags> flags = Flags::Parse(args, command.flags);
  if (flags.ok() && flags->help()) {
    if (absl::Status written = WriteOutput(CommandHelp(command, invocation)); !written.ok()) {
      PrintError(prefix, written.message());
      return 1;
    }
    return 0;
  }
  if (!timeout.ok()) {
    PrintError(prefix, timeout.status().message());
    return 1;
  }
  if (!flags.ok()) {
    PrintError(prefix,
               absl::StrCat(flags.status().message(), " (see: ", invocation, " --help)"));
    return 1;
  }
  absl::Status status;
  {
    std::optional<Watchdog> watchdog;
    if (timeout->has_value()) watchdog.emplace(prefix, **timeout);
    if (std::optional<std::string> trace = flags->Get("trace")) {
      status = CheckOutputFile("trace", *trace);
    }
    if (status.ok()) status = command.run(args);
    if (status.ok()) status = FlushOutput();
  }
  if (!status.ok()) {
    PrintError(prefix, status.message());
    return 1;
  }
  return 0;
}

absl::Status CheckOutputOpen() {
  if (!output_closed) return absl::OkStatus();
  return absl::FailedPreconditionError("writing the output: standard output is closed");
}

absl::Status WriteOutput(absl::string_view bytes) {
  if (!bytes.empty() && std::fwrite(bytes.data(), 1, bytes.size(), stdout) != bytes.size()) {
    return OutputError(errno);
  }
  return FlushOutput();
}

absl::Status FlushOutput() {
  errno = 0;
  const bool failed = std::fflush(stdout) != 0;
  const int error = errno;
  if (!failed && !std::ferror(stdout)) return absl::OkStatus();
  return OutputError(failed ? error : 0);
}

}  // namespace shardrt::cli
