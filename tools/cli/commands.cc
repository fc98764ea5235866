#include "cli/commands.h"

namespace shardrt::cli {
namespace {

// In the order help lists them. The entries are constant-initialized (no start-up order).
constexpr const CommandDef* kCommands[] = {
    &kDevicesCommand, &kShardInfoCommand, &kRunCommand, &kGenerateCommand, &kServeCommand,
    &kCacheCommand,
};

}  // namespace

std::span<const CommandDef* const> Commands() { return kCommands; }

const CommandDef* FindCommand(absl::string_view name) {
  for (const CommandDef* command : kCommands) {
    if (command->name == name) return command;
  }
  return nullptr;
}

}  // namespace shardrt::cli
