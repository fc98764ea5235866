#include "stablehlo/array_spec.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "stablehlo/builder.h"

namespace shardrt::stablehlo {

int64_t ArraySpec::num_elements() const {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

std::string ShardingText(const ArraySpec& spec, int64_t num_partitions) {
  if (spec.split_dim < 0 || num_partitions == 1) return "{replicated}";
  std::vector<int64_t> tiles(spec.dims.size(), 1);
  tiles[spec.split_dim] = num_partitions;
  return absl::StrCat("{devices=[", absl::StrJoin(tiles, ","), "]<=[", num_partitions, "]}");
}

std::vector<int64_t> ShardDims(const ArraySpec& spec, int64_t num_partitions) {
  std::vector<int64_t> dims = spec.dims;
  if (spec.split_dim >= 0) dims[spec.split_dim] /= num_partitions;
  return dims;
}

std::string SpecTypeText(const ArraySpec& spec) {
  return TypeText(Type{spec.dims, spec.type == ElementType::kS32 ? "i32" : "f32"});
}

}  // namespace shardrt::stablehlo
