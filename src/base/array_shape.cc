#include "shardrt/base/array_shape.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "shardrt/base/limits.h"

namespace shardrt {

std::string DimsToString(std::span<const int64_t> dims) {
  return absl::StrCat("[", absl::StrJoin(dims, ","), "]");
}

std::string ShapeToString(const ArrayShape& shape) {
  return absl::StrCat(ElementTypeName(shape.type), DimsToString(shape.dims));
}

absl::StatusOr<ArrayShape> ParseShape(absl::string_view text) {
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat(
        "shape '", text.substr(0, 80), text.size() > 80 ? "...'" : "'", ": ", why,
        " (expected e.g. f32[8,7] or s32[])"));
  };
  const size_t open = text.find('[');
  if (open == absl::string_view::npos || text.empty() || text.back() != ']') {
    return bad("no [dims]");
  }
  absl::StatusOr<ElementType> type = ParseElementType(text.substr(0, open));
  if (!type.ok()) return bad(type.status().message());
  ArrayShape shape{*type, {}};
  const absl::string_view dims = text.substr(open + 1, text.size() - open - 2);
  if (dims.empty()) return shape;
  for (absl::string_view piece : absl::StrSplit(dims, ',')) {
    int64_t d = 0;
    if (!absl::SimpleAtoi(piece, &d) || d < 0) {
      return bad(absl::StrCat("dimension '", piece.substr(0, 24), "' is not a count"));
    }
    if (static_cast<int64_t>(shape.dims.size()) >= limits::kMaxRank) {
      return bad(absl::StrCat("rank above ", limits::kMaxRank));
    }
    shape.dims.push_back(d);
  }
  return shape;
}

}  // namespace shardrt
