#include "shardrt/sharding/shape.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace shardrt {

absl::StatusOr<int64_t> NumElements(std::span<const int64_t> dims, absl::string_view what) {
  int64_t count = 1;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("dimension ", i, " of ", what, " ", DimsToString(dims), " is negative"));
    }
  }
  for (int64_t d : dims) {
    if (!CheckedMul(count, d, &count)) {
      return absl::InvalidArgumentError(
          absl::StrCat("the element count of ", what, " ", DimsToString(dims),
                       " overflows int64"));
    }
  }
  return count;
}

}  // namespace shardrt
