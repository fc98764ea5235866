// FFI: custom kernels. Registers XLA FFI handlers (functions written against XLA's FFI headers,
// xla/ffi/api/ffi.h, e.g. with XLA_FFI_DEFINE_HANDLER) with a plugin's FFI extension, so that a
// program's `stablehlo.custom_call @target(...) {api_version = 4 : i32}` runs them.
//
// The handler must be built against FFI headers of the API version the plugin implements (the
// CPU plugin xla-cpu-pjrt 0.0.1: XLA FFI API 0.2, the headers of jaxlib 0.9.0, which
// scripts/bootstrap.sh unpacks into .cache/xla_ffi/include); the plugin refuses other versions.
// XLA's handler registry is process-wide: a registration serves every client of the plugin,
// and lasts until the process ends. The plugin keeps the first handler registered for a target
// and platform: registering the target again, even with another handler, succeeds and changes
// nothing (FfiTest.TheFirstRegistrationOfATargetStays).
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "shardrt/base/export.h"
#include "shardrt/pjrt/plugin.h"

// XLA FFI's C types (xla/ffi/api/c_api.h), declared as that header declares them, so this
// header needs no FFI header.
extern "C" {
typedef struct XLA_FFI_Error XLA_FFI_Error;
typedef struct XLA_FFI_CallFrame XLA_FFI_CallFrame;
typedef XLA_FFI_Error* XLA_FFI_Handler(XLA_FFI_CallFrame* call_frame);
}

namespace shardrt::pjrt {

// What a handler promises XLA (XLA_FFI_Handler_TraitsBits).
enum class FfiTraits : uint32_t {
  kNone = 0,
  kCommandBufferCompatible = 1,  // may be captured in a GPU command buffer
};

struct SHARDRT_EXPORT FfiHandlerOptions {
  // XLA's name for the platform the handler runs on: "Host" for the CPU plugin, "CUDA" or
  // "ROCM" for GPU plugins.
  std::string platform = "Host";
  FfiTraits traits = FfiTraits::kNone;
};

// True when `plugin` has the FFI extension. Thread-safe.
[[nodiscard]] SHARDRT_EXPORT bool HasFfiExtension(const Plugin& plugin);

// Registers `handler` for custom calls to `target` on `options.platform` through the plugin's
// FFI extension. This only hands the handler over: the plugin checks the handler's API version
// and may refuse it without failing this call (it only logs), so callers that need proof
// compile a program that calls `target` (Runtime::RegisterFfiHandler does). Errors:
// InvalidArgument for a null handler, an empty target or platform, or a target that is not
// printable ASCII without quotes or backslashes (it must fit an MLIR symbol name);
// Unimplemented when the plugin has no FFI extension or one too old to register handlers; the
// plugin's own error. The handler must stay callable for the rest of the process. Thread-safe.
[[nodiscard]] SHARDRT_EXPORT absl::Status RegisterFfiHandler(const Plugin& plugin,
                                                             absl::string_view target,
                                                             XLA_FFI_Handler* handler,
                                                             const FfiHandlerOptions& options);

}  // namespace shardrt::pjrt
