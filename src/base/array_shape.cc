#include "shardrt/base/array_shape.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace shardrt {

std::string DimsToString(std::span<const int64_t> dims) {
  return absl::StrCat("[", absl::StrJoin(dims, ","), "]");
}

std::string ShapeToString(const ArrayShape& shape) {
  return absl::StrCat(ElementTypeName(shape.type), DimsToString(shape.dims));
}

}  // namespace shardrt
