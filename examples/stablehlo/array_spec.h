// ArraySpec: one array a program takes or returns, as the model emitters describe their
// programs' signatures: name, element type, global shape, and the one dimension split evenly
// across the partitions (or none).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"

#include "shardrt/base/element_type.h"

namespace shardrt::stablehlo {

struct ArraySpec {
  std::string name;
  ElementType type = ElementType::kF32;
  std::vector<int64_t> dims;
  int split_dim = -1;  // -1: replicated on every device

  int64_t num_elements() const;
};

// The `mhlo.sharding` text of `spec` over `num_partitions` devices: "{replicated}" when the array
// is not split or there is one partition, else e.g. "{devices=[1,8]<=[8]}" for split_dim 1.
std::string ShardingText(const ArraySpec& spec, int64_t num_partitions);

// The shape every device holds: dims with dims[split_dim] divided by num_partitions.
std::vector<int64_t> ShardDims(const ArraySpec& spec, int64_t num_partitions);

// The MLIR tensor type of `spec` ("tensor<4x8xf32>"; s32 arrays are "i32").
std::string SpecTypeText(const ArraySpec& spec);

// A whole SPMD module around a function body: `module @NAME attributes {mhlo.num_partitions = P,
// mhlo.num_replicas = 1}` with `func.func public @main(%arg0, ...)` whose parameters and results
// carry the specs' types and `mhlo.sharding`, parameter i donated to output j for each (i, j) of
// `aliases` (`tf.aliasing_output`), `body` (Builder::body()), and a return of `results`.
struct Signature {
  std::vector<ArraySpec> parameters, outputs;
  std::vector<std::pair<int64_t, int64_t>> aliases;
};
std::string ModuleText(absl::string_view name, int64_t num_partitions, const Signature& signature,
                       const std::string& body, const std::vector<std::string>& result_refs,
                       const std::vector<std::string>& result_types);

}  // namespace shardrt::stablehlo
