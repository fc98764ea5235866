// build/shardrt: the command-line front door. Dispatches to one subcommand; any error becomes
// one line on stderr and a non-zero exit (1 for a failed command, 2 for usage). `shardrt help
// [COMMAND]`, `shardrt --help` and `shardrt COMMAND --help` print help made from the commands'
// flag tables (cli/help.h) on stdout and exit 0. Every command takes --timeout SECONDS: past it
// the process prints one line and exits 1 (a program running on a device cannot be
// interrupted, so the process ends instead of waiting for it).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/match.h"
#include "cli/commands.h"
#include "shardrt/base/mutex.h"
#include "cli/flags.h"
#include "cli/help.h"

namespace {

using shardrt::cli::CommandDef;
using shardrt::cli::kTimeoutFlag;

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

// Ends the process with one line on stderr if the command has not finished within `seconds`.
class Watchdog {
 public:
  Watchdog(const std::string& command, int64_t seconds)
      : thread_([this, command, seconds] { Watch(command, seconds); }) {}
  ~Watchdog() {
    {
      shardrt::MutexLock lock(mu_);
      done_ = true;
    }
    cv_.NotifyAll();
    thread_.join();
  }

 private:
  void Watch(const std::string& command, int64_t seconds) ABSL_LOCKS_EXCLUDED(mu_) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
    shardrt::MutexLock lock(mu_);
    while (!done_) {
      if (cv_.WaitUntil(lock, deadline) == std::cv_status::timeout && !done_) {
        std::fprintf(stderr, "shardrt %s: timed out after %lld s (--timeout); stopped\n",
                     command.c_str(), static_cast<long long>(seconds));
        std::fflush(stdout);
        std::_Exit(1);
      }
    }
  }

  shardrt::Mutex mu_;
  shardrt::CondVar cv_;
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

// `shardrt help [COMMAND]` (also `--help` and `-h` in its place): the overview, or one
// command's help, on stdout. Exit 2 for an unknown command or more than one.
int Help(const std::vector<std::string>& args) {
  if (args.size() > 1) {
    std::fputs("shardrt: usage: shardrt help [COMMAND]\n", stderr);
    return 2;
  }
  if (args.empty()) {
    std::fputs(shardrt::cli::OverviewHelp().c_str(), stdout);
    return 0;
  }
  const CommandDef* command = shardrt::cli::FindCommand(args[0]);
  if (command == nullptr) {
    std::fprintf(stderr, "shardrt: unknown command '%s' (try: shardrt --help)\n",
                 absl::CHexEscape(args[0].substr(0, 64)).c_str());
    return 2;
  }
  std::fputs(shardrt::cli::CommandHelp(*command).c_str(), stdout);
  return 0;
}

// Runs `command` with `args` (after its name): --timeout, then its flags (--help prints its
// help, whatever else is wrong; a parse error says where the flags are listed), then the
// command itself.
int Run(const CommandDef& command, std::vector<std::string> args) {
  const std::string prefix = absl::StrCat("shardrt ", command.name);
  absl::StatusOr<std::optional<int64_t>> timeout = TakeTimeout(args);
  // The command parses its arguments again, with the same table: this parse is for --help and
  // for errors, which it reports with a pointer to the help.
  absl::StatusOr<shardrt::cli::Flags> flags = shardrt::cli::Flags::Parse(args, command.flags);
  if (flags.ok() && flags->help()) {
    std::fputs(shardrt::cli::CommandHelp(command).c_str(), stdout);
    return 0;
  }
  if (!timeout.ok()) {
    PrintError(prefix, timeout.status().message());
    return 1;
  }
  if (!flags.ok()) {
    PrintError(prefix, absl::StrCat(flags.status().message(), " (see: shardrt ", command.name,
                                    " --help)"));
    return 1;
  }
  absl::Status status;
  {
    std::optional<Watchdog> watchdog;
    if (timeout->has_value()) watchdog.emplace(std::string(command.name), **timeout);
    status = command.run(args);
  }
  if (!status.ok()) {
    PrintError(prefix, status.message());
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fputs(shardrt::cli::OverviewHelp().c_str(), stderr);
    return 2;
  }
  const std::string name = argv[1];
  std::vector<std::string> args(argv + 2, argv + argc);
  if (name == "help" || name == "--help" || name == "-h") return Help(args);
  const CommandDef* command = shardrt::cli::FindCommand(name);
  if (command == nullptr) {
    std::fprintf(stderr, "shardrt: unknown command '%s' (try: shardrt --help)\n",
                 absl::CHexEscape(name.substr(0, 64)).c_str());
    return 2;
  }
  return Run(*command, std::move(args));
}
