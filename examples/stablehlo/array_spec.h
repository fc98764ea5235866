// ArraySpec: one array a program takes or returns, as the model emitters describe their
// programs' signatures: name, element type, global shape, and the one dimension split evenly
// across the partitions (or none).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

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

}  // namespace shardrt::stablehlo
