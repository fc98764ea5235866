// ElementType: the array element types shardrt knows, with their sizes and names.
// Values follow XLA's PrimitiveType numbering (xla_data.proto), which is what HLO protos carry;
// the PJRT layer maps them to PJRT_Buffer_Type (a different numbering) at its boundary.
#pragma once

#include <cstdint>
#include <type_traits>
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

// The ElementType of the C++ type T: bool (pred), the fixed-width integers, float, double;
// kInvalid for any other type (half-precision types have no standard C++ type here).
// Constant, usable in static_assert.
template <typename T>
constexpr ElementType ElementTypeOf() {
  using U = std::remove_cv_t<T>;
  if constexpr (std::is_same_v<U, bool>) return ElementType::kPred;
  else if constexpr (std::is_same_v<U, int8_t>) return ElementType::kS8;
  else if constexpr (std::is_same_v<U, int16_t>) return ElementType::kS16;
  else if constexpr (std::is_same_v<U, int32_t>) return ElementType::kS32;
  else if constexpr (std::is_same_v<U, int64_t>) return ElementType::kS64;
  else if constexpr (std::is_same_v<U, uint8_t>) return ElementType::kU8;
  else if constexpr (std::is_same_v<U, uint16_t>) return ElementType::kU16;
  else if constexpr (std::is_same_v<U, uint32_t>) return ElementType::kU32;
  else if constexpr (std::is_same_v<U, uint64_t>) return ElementType::kU64;
  else if constexpr (std::is_same_v<U, float>) return ElementType::kF32;
  else if constexpr (std::is_same_v<U, double>) return ElementType::kF64;
  else return ElementType::kInvalid;
}

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
