// build/shardrt: the command-line front door. Dispatches to one subcommand, which
// RunCommandLine (cli/command_main.h) runs; any error becomes one line on stderr and a non-zero
// exit (1 for a failed command, 2 for usage). `shardrt help [COMMAND]`, `shardrt --help` and
// `shardrt COMMAND --help` print help made from the commands' flag tables (cli/help.h) on stdout
// and exit 0. Every command takes --timeout SECONDS: past it the process prints one line and
// exits 1 (a program running on a device cannot be interrupted, so the process ends instead of
// waiting for it).
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "cli/command_main.h"
#include "cli/commands.h"
#include "cli/help.h"

namespace {

using shardrt::cli::CommandDef;

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
  return shardrt::cli::RunCommandLine(*command, std::move(args),
                                      absl::StrCat("shardrt ", command->name));
}
