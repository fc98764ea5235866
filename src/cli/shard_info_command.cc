// Placeholder until the sharding layer lands.
#include "absl/status/status.h"
#include "cli/commands.h"

namespace shardrt::cli {
absl::Status ShardInfoCommand(const std::vector<std::string>& args) {
  return absl::UnimplementedError("shard-info is not implemented yet");
}
}  // namespace shardrt::cli
