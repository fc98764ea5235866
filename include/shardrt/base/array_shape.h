// ArrayShape: the element type and dimensions of one array, and the one way shardrt writes
// dimensions and shapes in messages.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

#include "shardrt/base/element_type.h"
#include "shardrt/base/export.h"

namespace shardrt {

// Element type and dimensions (major to minor, row-major) of a dense array. Plain value.
struct SHARDRT_EXPORT ArrayShape {
  ElementType type = ElementType::kInvalid;
  std::vector<int64_t> dims;
  bool operator==(const ArrayShape&) const = default;
};

// "[8,7]" (no spaces; the form XLA uses in sharding text). Pure, thread-safe.
[[nodiscard]] SHARDRT_EXPORT std::string DimsToString(std::span<const int64_t> dims);
// "f32[8,7]" (XLA's short form). Pure, thread-safe.
[[nodiscard]] SHARDRT_EXPORT std::string ShapeToString(const ArrayShape& shape);

// Parses ShapeToString's form, e.g. "f32[8,7]" or "s32[]". Error: InvalidArgument naming the
// text for an unknown element type, a malformed or negative dimension, or a rank above
// limits::kMaxRank. Pure, thread-safe.
[[nodiscard]] SHARDRT_EXPORT absl::StatusOr<ArrayShape> ParseShape(absl::string_view text);

}  // namespace shardrt
