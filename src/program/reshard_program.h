// The one-op program ComputationClient::Reshard compiles: XLA moves an array between two
// shardings of the same devices.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "shardrt/base/array_shape.h"
#include "shardrt/sharding/sharding.h"

namespace shardrt {

// A program of `partitions` partitions whose @main returns its one parameter of `shape`, taken
// with sharding `from` and returned with sharding `to` (the sharding layer's canonical text).
// Error: MlirTensorType's for a shape it cannot write. Pure, thread-safe.
[[nodiscard]] absl::StatusOr<std::string> ReshardProgram(const ArrayShape& shape,
                                                         const Sharding& from, const Sharding& to,
                                                         int64_t partitions);

}  // namespace shardrt
