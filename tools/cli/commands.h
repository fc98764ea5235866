// The CLI's subcommands. Each takes its arguments (after the subcommand name), writes its
// results to stdout, and returns a Status: the caller prints a non-OK one as one line on
// stderr and exits non-zero.
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"

namespace shardrt::cli {

// shardrt devices [--devices N] [--plugin PATH] [--json]
[[nodiscard]] absl::Status DevicesCommand(const std::vector<std::string>& args);
// shardrt shard-info --shape 8,7 --sharding TEXT [--devices N] [--json]
[[nodiscard]] absl::Status ShardInfoCommand(const std::vector<std::string>& args);
// shardrt run PROGRAM.mlir --devices N [--arg FILE.npy[@SHARDING]]... [--out DIR] [--repeat K]
//             [--result-shape TYPE[DIMS]]...
//             [--metrics] [--plugin PATH] [--partitioner gspmd|shardy]
[[nodiscard]] absl::Status RunCommand(const std::vector<std::string>& args);
// shardrt demo [--devices N] [--tokens T] [--layers L] [--d-model D] [--seed S] [--trace FILE]
//              [--metrics] [--plugin PATH] [--compile-cache DIR|off]
[[nodiscard]] absl::Status DemoCommand(const std::vector<std::string>& args);
// shardrt generate (--prompt TEXT [--chat [--system TEXT]] | --prompt-tokens IDS)
//                  [--model FILE.gguf] [--max-tokens N] [--devices N]
//                  [--temperature T [--top-p P] [--seed S]] [--json] [--logits-out FILE.npy]
//                  [--metrics] [--trace FILE] [--plugin PATH]
[[nodiscard]] absl::Status GenerateCommand(const std::vector<std::string>& args);
// shardrt cache info|clear [--compile-cache DIR] [--json]
[[nodiscard]] absl::Status CacheCommand(const std::vector<std::string>& args);

}  // namespace shardrt::cli
