// ArrayShape: the element type and dimensions of one array, and the one way shardrt writes
// dimensions and shapes in messages.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "shardrt/base/element_type.h"

namespace shardrt {

// Element type and dimensions (major to minor, row-major) of a dense array. Plain value.
struct ArrayShape {
  ElementType type = ElementType::kInvalid;
  std::vector<int64_t> dims;
  bool operator==(const ArrayShape&) const = default;
};

// "[8,7]" (no spaces; the form XLA uses in sharding text). Pure, thread-safe.
[[nodiscard]] std::string DimsToString(std::span<const int64_t> dims);
// "f32[8,7]" (XLA's short form). Pure, thread-safe.
[[nodiscard]] std::string ShapeToString(const ArrayShape& shape);

}  // namespace shardrt
