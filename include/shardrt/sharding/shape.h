// Shape: array dimensions, major to minor (row-major), as a plain vector of int64.
// Helpers here validate shapes and do overflow-checked arithmetic on them.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "shardrt/base/array_shape.h"  // DimsToString
#include "shardrt/base/export.h"

namespace shardrt {

using Shape = std::vector<int64_t>;

// a * b, or false on int64 overflow.
[[nodiscard]] inline bool CheckedMul(int64_t a, int64_t b, int64_t* out) {
  return !__builtin_mul_overflow(a, b, out);
}

// Number of elements of `dims`: 1 for rank 0.
// Error: InvalidArgument naming the dimension if one is negative, or if the count overflows
// int64. `what` names the shape in the message ("the shape", "tile dims", ...).
[[nodiscard]] SHARDRT_EXPORT absl::StatusOr<int64_t> NumElements(
    std::span<const int64_t> dims, absl::string_view what = "the shape");

}  // namespace shardrt
