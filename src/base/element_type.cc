#include "shardrt/base/element_type.h"

#include <string>

#include "absl/strings/str_cat.h"

namespace shardrt {
namespace {

struct TypeInfo {
  ElementType type;
  int64_t size;
  absl::string_view hlo_name;
  absl::string_view mlir_name;
};

constexpr TypeInfo kTypes[] = {
    {ElementType::kPred, 1, "pred", "i1"},  {ElementType::kS8, 1, "s8", "i8"},
    {ElementType::kS16, 2, "s16", "i16"},   {ElementType::kS32, 4, "s32", "i32"},
    {ElementType::kS64, 8, "s64", "i64"},   {ElementType::kU8, 1, "u8", "ui8"},
    {ElementType::kU16, 2, "u16", "ui16"},  {ElementType::kU32, 4, "u32", "ui32"},
    {ElementType::kU64, 8, "u64", "ui64"},  {ElementType::kF16, 2, "f16", "f16"},
    {ElementType::kF32, 4, "f32", "f32"},   {ElementType::kF64, 8, "f64", "f64"},
    {ElementType::kBF16, 2, "bf16", "bf16"},
};

const TypeInfo* Find(ElementType type) {
  for (const TypeInfo& info : kTypes) {
    if (info.type == type) return &info;
  }
  return nullptr;
}

}  // namespace

int64_t ElementSizeInBytes(ElementType type) {
  const TypeInfo* info = Find(type);
  return info ? info->size : 0;
}

absl::string_view ElementTypeName(ElementType type) {
  const TypeInfo* info = Find(type);
  return info ? info->hlo_name : absl::string_view("invalid");
}

absl::string_view ElementTypeMlirName(ElementType type) {
  const TypeInfo* info = Find(type);
  return info ? info->mlir_name : absl::string_view();
}

absl::StatusOr<ElementType> ParseElementType(absl::string_view name) {
  for (const TypeInfo& info : kTypes) {
    if (name == info.hlo_name || name == info.mlir_name) return info.type;
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown element type '", name, "'"));
}

absl::StatusOr<ElementType> ElementTypeFromPrimitiveType(int32_t primitive_type) {
  const TypeInfo* info = Find(static_cast<ElementType>(primitive_type));
  if (info == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("unsupported XLA primitive type ", primitive_type));
  }
  return info->type;
}

}  // namespace shardrt
