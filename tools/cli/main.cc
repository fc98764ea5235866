// build/shardrt: the command-line front door. Dispatches to one subcommand; any error becomes
// one line on stderr and a non-zero exit (1 for a failed command, 2 for usage). Every command
// takes --timeout SECONDS: past it the process prints one line and exits 1 (a program running
// on a device cannot be interrupted, so the process ends instead of waiting for it).
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/match.h"
#include "cli/commands.h"

namespace {

constexpr char kUsage[] =
    "usage: shardrt <command> [flags]\n"
    "commands:\n"
    "  devices     [--devices N] [--plugin PATH] [--json]\n"
    "  shard-info  --shape D0,D1,... --sharding TEXT [--devices N] [--json]\n"
    "  run         PROGRAM.mlir --devices N [--arg FILE.npy[@SHARDING]]... [--out DIR]\n"
    "              [--repeat K] [--metrics] [--trace FILE] [--plugin PATH]\n"
    "              [--partitioner gspmd|shardy] [--result-shape TYPE[DIMS]]...\n"
    "  generate    (--prompt TEXT [--chat [--system TEXT]] | --prompt-tokens IDS)\n"
    "              [--model FILE.gguf] [--max-tokens N] [--devices N] [--temperature T\n"
    "              [--top-p P] [--seed S]] [--json] [--logits-out FILE.npy] [--metrics]\n"
    "              [--trace FILE] [--plugin PATH] [--attention-block N] [--compile-only]\n"
    "  demo        [--devices N] [--tokens T] [--layers L] [--d-model D] [--seed S]\n"
    "              [--trace FILE] [--metrics] [--plugin PATH]\n"
    "  cache       info|clear [--compile-cache DIR] [--json]\n"
    "run, demo, generate: [--compile-cache DIR|off] (default $SHARDRT_COMPILE_CACHE, else\n"
    "              $XDG_CACHE_HOME/shardrt/compile or ~/.cache/shardrt/compile)\n"
    "every command: [--timeout SECONDS] (exit 1 with one line once it has run that long)\n";

struct Command {
  const char* name;
  absl::Status (*run)(const std::vector<std::string>&);
};

constexpr Command kCommands[] = {
    {"devices", shardrt::cli::DevicesCommand},
    {"shard-info", shardrt::cli::ShardInfoCommand},
    {"run", shardrt::cli::RunCommand},
    {"demo", shardrt::cli::DemoCommand},
    {"generate", shardrt::cli::GenerateCommand},
    {"cache", shardrt::cli::CacheCommand},
};

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
    if (!absl::SimpleAtoi(value, &s) || s < 1 || s > 86400) {
      return absl::InvalidArgumentError(absl::StrCat(
          "flag --timeout: expected a whole number of seconds in [1, 86400], got '", value, "'"));
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
      : thread_([this, command, seconds] {
          std::unique_lock<std::mutex> lock(mu_);
          if (!cv_.wait_for(lock, std::chrono::seconds(seconds), [this] { return done_; })) {
            std::fprintf(stderr, "shardrt %s: timed out after %lld s (--timeout); stopped\n",
                         command.c_str(), static_cast<long long>(seconds));
            std::fflush(stdout);
            std::_Exit(1);
          }
        }) {}
  ~Watchdog() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      done_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;  // guarded by mu_
  std::thread thread_;  // last: starts once the members above exist
};

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || std::string(argv[1]) == "--help" || std::string(argv[1]) == "help") {
    std::fputs(kUsage, argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  std::string name = argv[1];
  std::vector<std::string> args(argv + 2, argv + argc);
  for (const Command& command : kCommands) {
    if (name != command.name) continue;
    absl::StatusOr<std::optional<int64_t>> timeout = TakeTimeout(args);
    absl::Status status = timeout.status();
    if (status.ok()) {
      std::optional<Watchdog> watchdog;
      if (timeout->has_value()) watchdog.emplace(name, **timeout);
      status = command.run(args);
    }
    if (!status.ok()) {
      std::string message(status.message());
      for (char& c : message) {
        if (c == '\n') c = ' ';
      }
      std::fprintf(stderr, "shardrt %s: %s\n", name.c_str(), message.c_str());
      return 1;
    }
    return 0;
  }
  std::fprintf(stderr, "shardrt: unknown command '%s' (try: shardrt --help)\n", name.c_str());
  return 2;
}
