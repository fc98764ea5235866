#include "pjrt/call.h"

#include <cstdio>
#include <string>

#include "absl/strings/str_cat.h"
#include "shardrt/base/metrics.h"

namespace shardrt::pjrt::internal {
namespace {

absl::StatusCode MapCode(PJRT_Error_Code code) {
  int value = static_cast<int>(code);
  // PJRT_Error_Code uses the canonical absl codes (1..16).
  if (value >= 1 && value <= 16) return static_cast<absl::StatusCode>(value);
  return absl::StatusCode::kUnknown;
}

}  // namespace

absl::Status ConsumeError(const PJRT_Api* api, PJRT_Error* error, absl::string_view what) {
  if (error == nullptr) return absl::OkStatus();
  SHARDRT_PJRT_ARGS(PJRT_Error_Message_Args, message);
  message.error = error;
  api->PJRT_Error_Message(&message);
  std::string text(message.message, message.message_size);

  SHARDRT_PJRT_ARGS(PJRT_Error_GetCode_Args, get_code);
  get_code.error = error;
  absl::StatusCode code = absl::StatusCode::kUnknown;
  if (PJRT_Error* code_error = api->PJRT_Error_GetCode(&get_code); code_error == nullptr) {
    code = MapCode(get_code.code);
  } else {
    SHARDRT_PJRT_ARGS(PJRT_Error_Destroy_Args, destroy_code_error);
    destroy_code_error.error = code_error;
    api->PJRT_Error_Destroy(&destroy_code_error);
  }

  SHARDRT_PJRT_ARGS(PJRT_Error_Destroy_Args, destroy);
  destroy.error = error;
  api->PJRT_Error_Destroy(&destroy);
  return absl::Status(code, absl::StrCat(what, ": ", text));
}

void ReportDestroyError(const absl::Status& status) {
  if (status.ok()) return;
  static Counter* const errors = GlobalMetrics().GetCounter(kPjrtDestroyError);
  if (errors->Add(1) == 0) {
    std::fprintf(stderr,
                 "shardrt: the PJRT plugin failed to destroy a handle (%s); further failures are "
                 "counted in the %s metric only\n",
                 std::string(status.message()).c_str(), std::string(kPjrtDestroyError).c_str());
  }
}

}  // namespace shardrt::pjrt::internal

namespace shardrt::pjrt::internal {
namespace {
struct TypePair {
  ElementType ours;
  PJRT_Buffer_Type pjrt;
};
constexpr TypePair kTypePairs[] = {
    {ElementType::kPred, PJRT_Buffer_Type_PRED}, {ElementType::kS8, PJRT_Buffer_Type_S8},
    {ElementType::kS16, PJRT_Buffer_Type_S16},   {ElementType::kS32, PJRT_Buffer_Type_S32},
    {ElementType::kS64, PJRT_Buffer_Type_S64},   {ElementType::kU8, PJRT_Buffer_Type_U8},
    {ElementType::kU16, PJRT_Buffer_Type_U16},   {ElementType::kU32, PJRT_Buffer_Type_U32},
    {ElementType::kU64, PJRT_Buffer_Type_U64},   {ElementType::kF16, PJRT_Buffer_Type_F16},
    {ElementType::kF32, PJRT_Buffer_Type_F32},   {ElementType::kF64, PJRT_Buffer_Type_F64},
    {ElementType::kBF16, PJRT_Buffer_Type_BF16},
};
}  // namespace

absl::StatusOr<PJRT_Buffer_Type> ToPjrtType(ElementType type) {
  for (const TypePair& p : kTypePairs) {
    if (p.ours == type) return p.pjrt;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("element type ", ElementTypeName(type), " has no PJRT buffer type"));
}

absl::StatusOr<ElementType> FromPjrtType(PJRT_Buffer_Type type) {
  for (const TypePair& p : kTypePairs) {
    if (p.pjrt == type) return p.ours;
  }
  return absl::UnimplementedError(
      absl::StrCat("PJRT buffer type ", static_cast<int>(type), " is not supported by shardrt"));
}

}  // namespace shardrt::pjrt::internal
