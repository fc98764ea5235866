// Internal to src/pjrt: the one helper every PJRT call goes through. It checks that the plugin
// has the function (a slot past the plugin's struct_size or a null slot is Unimplemented),
// calls it, and turns a returned PJRT_Error into an absl::Status (code mapped, message kept,
// the error destroyed exactly once). Only .cc files of this folder include this header.
#pragma once

#include <cstddef>
#include "absl/strings/string_view.h"

#include "absl/status/status.h"
#include "pjrt_c_api.h"

namespace shardrt::pjrt::internal {

// Converts `error` (may be null: OK) into a Status and destroys it. `what` names the call.
absl::Status ConsumeError(const PJRT_Api* api, PJRT_Error* error, absl::string_view what);

// For the destroy calls of RAII owners, which cannot return an error: a failure is counted in
// the PjrtDestroyError metric, and the first one in the process is also written to stderr.
void ReportDestroyError(const absl::Status& status);

// True when the plugin's PJRT_Api table is large enough to hold the slot at `offset`.
inline bool HasSlot(const PJRT_Api* api, size_t offset, size_t size) {
  return api->struct_size >= offset + size;
}

}  // namespace shardrt::pjrt::internal

// Declares `args` of PJRT type `Type`, zero-initialized with struct_size set from the header.
#define SHARDRT_PJRT_ARGS(Type, args) \
  Type args{};                        \
  args.struct_size = Type##_STRUCT_SIZE

// Calls api->Fn(args_ptr) and evaluates to an absl::Status.
#define SHARDRT_PJRT_CALL(api, Fn, args_ptr)                                                  \
  (::shardrt::pjrt::internal::HasSlot((api), offsetof(PJRT_Api, Fn), sizeof(void*)) &&     \
           (api)->Fn != nullptr                                                             \
       ? ::shardrt::pjrt::internal::ConsumeError((api), (api)->Fn(args_ptr), #Fn)           \
       : ::absl::UnimplementedError("the PJRT plugin does not implement " #Fn))

// Calls a PJRT *_Destroy function from a destructor: never fails, never drops an error silently.
#define SHARDRT_PJRT_DESTROY(api, Fn, args_ptr) \
  ::shardrt::pjrt::internal::ReportDestroyError(SHARDRT_PJRT_CALL(api, Fn, args_ptr))

#include "absl/status/statusor.h"
#include "shardrt/base/element_type.h"

namespace shardrt::pjrt::internal {

// ElementType <-> PJRT_Buffer_Type (the two numberings differ; never cast between them).
absl::StatusOr<PJRT_Buffer_Type> ToPjrtType(ElementType type);
absl::StatusOr<ElementType> FromPjrtType(PJRT_Buffer_Type type);

}  // namespace shardrt::pjrt::internal
