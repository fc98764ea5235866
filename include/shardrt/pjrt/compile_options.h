// CompileOptions: what shardrt tells the PJRT compiler, and its encoding as XLA's
// CompileOptionsProto (our own minimal proto, XLA's field numbers). Shardings are not options:
// they come from the program's own annotations.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

#include "shardrt/base/export.h"

namespace shardrt::pjrt {

// Which SPMD partitioner XLA runs.
enum class Partitioner {
  kGspmd,   // reads mhlo.sharding annotations (PJRT's default)
  kShardy,  // reads sdy.* annotations (and mhlo.sharding)
};

// Whether sharding propagation may change the shardings written in the program.
enum class ShardingPropagation {
  kKeepAnnotated,  // parameters and outputs keep the program's shardings
  kAllowToParameters,
  kAllowToOutputs,
  kAllowToParametersAndOutputs,
};

struct SHARDRT_EXPORT CompileOptions {
  int64_t num_replicas = 1;
  int64_t num_partitions = 1;
  // Global device id of each (replica r, partition p), at index r * num_partitions + p.
  // Empty: the plugin's default assignment.
  std::vector<int64_t> device_assignment;
  Partitioner partitioner = Partitioner::kGspmd;
  ShardingPropagation propagation = ShardingPropagation::kKeepAnnotated;
  // XLA DebugOptions overrides by field name, e.g. {"xla_cpu_enable_fast_min_max", "false"}.
  std::vector<std::pair<std::string, std::string>> debug_option_overrides;
};

// Checks the options against `num_devices` addressable devices. Errors (InvalidArgument):
// counts < 1, more replicas x partitions than devices, an assignment of the wrong size, an
// unknown or repeated device id.
[[nodiscard]] SHARDRT_EXPORT absl::Status ValidateCompileOptions(
    const CompileOptions& options, const std::vector<int64_t>& device_ids);

// Serializes `options` as CompileOptionsProto bytes: device_ordinal -1, num_replicas,
// num_partitions (always written), use_spmd_partitioning (when partitions > 1), the device
// assignment, propagation flags, use_shardy_partitioner and DebugOptions overrides. Pure.
[[nodiscard]] SHARDRT_EXPORT std::string EncodeCompileOptions(const CompileOptions& options);

}  // namespace shardrt::pjrt
