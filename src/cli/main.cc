// build/shardrt: the command-line front door. Dispatches to one subcommand; any error becomes
// one line on stderr and a non-zero exit (1 for a failed command, 2 for usage).
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

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
    "  demo        [--devices N] [--tokens T] [--layers L] [--d-model D] [--seed S]\n"
    "              [--trace FILE] [--metrics] [--plugin PATH]\n";

struct Command {
  const char* name;
  absl::Status (*run)(const std::vector<std::string>&);
};

constexpr Command kCommands[] = {
    {"devices", shardrt::cli::DevicesCommand},
    {"shard-info", shardrt::cli::ShardInfoCommand},
    {"run", shardrt::cli::RunCommand},
    {"demo", shardrt::cli::DemoCommand},
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
    absl::Status status = command.run(args);
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
