// ElementType: the array element types shardrt knows, with their sizes and names.
// Values follow XLA's PrimitiveType numbering (xla_data.proto), which is what HLO protos carry;
// the PJRT layer maps them to PJRT_Buffer_Type (a different numbering) at its boundary.
#pragma once

#include <cstdint>
#include "absl/strings/string_view.h"

#include "absl/status/statusor.h"

#include "shardrt/base/export.h"

namespace shardrt {

enum class ElementType : int32_t {
  kInvalid = 0,
  kPred = 1,
  kS8 = 2,
  kS16 = 3,
  kS32 = 4,
  kS64 = 5,
  kU8 = 6,
  kU16 = 7,
  kU32 = 8,
  kU64 = 9,
  kF16 = 10,
  kF32 = 11,
  kF64 = 12,
  kBF16 = 16,
};

// Size of one element in bytes (pred is one byte); 0 for kInvalid. Thread-safe, pure.
[[nodiscard]] SHARDRT_EXPORT int64_t ElementSizeInBytes(ElementType type);

// The MLIR / HLO spelling: "f32", "s32" / "i32" parse; prints "f32", "s32", "pred", "bf16".
[[nodiscard]] SHARDRT_EXPORT absl::string_view ElementTypeName(ElementType type);

// The MLIR element type: "f32", "i32", "ui8", "i1" for pred, "bf16"; empty for kInvalid and
// values outside the enum. Thread-safe, pure.
[[nodiscard]] SHARDRT_EXPORT absl::string_view ElementTypeMlirName(ElementType type);

// Parses an HLO name ("f32", "s8", "u64", "pred", "bf16") or an MLIR one ("i32", "ui8", "i1").
// Error: InvalidArgument naming the text when it is not a known type.
[[nodiscard]] SHARDRT_EXPORT absl::StatusOr<ElementType> ParseElementType(absl::string_view name);

// Converts an xla::PrimitiveType number (as found in ShapeProto) to an ElementType.
// Error: InvalidArgument for types shardrt does not support (tuples, complex, fp8, ...).
[[nodiscard]] SHARDRT_EXPORT absl::StatusOr<ElementType> ElementTypeFromPrimitiveType(
    int32_t primitive_type);

}  // namespace shardrt
