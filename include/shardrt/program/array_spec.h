// ArraySpec and WriteModule: the arrays an SPMD program takes and returns, and the module text
// around a Builder's body.
//
// An ArraySpec is one array of a program's signature as the model emitters describe it: name,
// element type, global shape, and the one dimension split evenly across the partitions (or
// none). Its sharding is a Sharding of the sharding layer (ShardingOf), printed by that layer's
// printer, and its per-device shape comes from the same Sharding (ShardDims).
//
// All functions are pure and thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "shardrt/base/array_shape.h"
#include "shardrt/base/element_type.h"
#include "shardrt/base/export.h"
#include "shardrt/program/builder.h"
#include "shardrt/program/program_text.h"
#include "shardrt/sharding/sharding.h"

namespace shardrt::stablehlo {

struct SHARDRT_EXPORT ArraySpec {
  std::string name;
  ElementType type = ElementType::kF32;
  std::vector<int64_t> dims;
  int split_dim = -1;  // -1: replicated on every device

  // The global type.
  ArrayShape shape() const { return ArrayShape{type, dims}; }
  // The element count. Error: InvalidArgument naming the array for a negative dimension or a
  // count that overflows int64.
  [[nodiscard]] absl::StatusOr<int64_t> num_elements() const;
};

// The placement of `spec` over `num_partitions` devices: replicated when the array is not split
// or there is one partition, else tiled along split_dim over devices 0..P-1 in order (printed
// "{devices=[1,8]<=[8]}" for split_dim 1 of a rank-2 array over 8).
// Error: InvalidArgument naming the array for num_partitions < 1, a split_dim outside
// [-1, rank), a negative dimension or overflowing element count, or a split dimension that is
// not a multiple of num_partitions.
[[nodiscard]] SHARDRT_EXPORT absl::StatusOr<Sharding> ShardingOf(const ArraySpec& spec,
                                                                 int64_t num_partitions);

// The shape every device holds: dims with dims[split_dim] divided by num_partitions.
// Errors: ShardingOf's.
[[nodiscard]] SHARDRT_EXPORT absl::StatusOr<std::vector<int64_t>> ShardDims(const ArraySpec& spec,
                                                                            int64_t num_partitions);

// A module's signature: parameters and results in order, parameter i donated to output j for
// each (i, j) of `aliases` (`tf.aliasing_output`).
struct SHARDRT_EXPORT ModuleSpec {
  std::vector<ArraySpec> parameters, outputs;
  std::vector<std::pair<int64_t, int64_t>> aliases;
};

// A written module: its text and the global shapes of @main it states (what a CompileRequest's
// global_shapes takes, so nobody has to read them back from the text).
struct SHARDRT_EXPORT WrittenModule {
  std::string text;
  ProgramSignature signature;
};

// The whole SPMD module around `body`: `module @NAME attributes {mhlo.num_partitions = P,
// mhlo.num_replicas = 1}` with `func.func public @main(%arg0, ...)` whose parameters and
// results carry the specs' types and `mhlo.sharding` (ShardingOf), the aliases, the body's
// operations and a return of `results`.
// Error: InvalidArgument for the body's status(), a name that is not an MLIR identifier
// ([A-Za-z_][A-Za-z0-9_$.]*), a spec ShardingOf refuses or whose type MlirTensorType cannot
// write, a result count or type that differs from the outputs', or an alias whose indices are
// out of range or whose parameter and output types differ.
[[nodiscard]] SHARDRT_EXPORT absl::StatusOr<WrittenModule> WriteModule(
    absl::string_view name, int64_t num_partitions, const ModuleSpec& spec, const Builder& body,
    const std::vector<Value>& results);

}  // namespace shardrt::stablehlo
