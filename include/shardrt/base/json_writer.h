// Small helpers for writing JSON by hand: string escaping and integer lists.
#pragma once

#include <cstdint>
#include <string>
#include "absl/strings/string_view.h"

#include "absl/types/span.h"

#include "shardrt/base/export.h"

namespace shardrt {

// `text` as a JSON string literal, quotes included, with control characters escaped.
SHARDRT_EXPORT std::string JsonString(absl::string_view text);
// `[1,2,3]`.
SHARDRT_EXPORT std::string JsonIntList(absl::Span<const int64_t> values);

}  // namespace shardrt
