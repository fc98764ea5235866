#include "shardrt/pjrt/ffi.h"

#include <cstddef>

#include "absl/strings/str_cat.h"
#include "pjrt/call.h"
#include "pjrt_c_api.h"

namespace shardrt::pjrt {
namespace {

// The FFI extension's structures. The plugin's pjrt_c_api.h names the extension type
// (PJRT_Extension_Type_FFI) but not its structures; these are the layouts the plugin reads,
// checked against it by the tests (tests/integration/pjrt/ffi_test.cc): a handler registered
// here runs.
struct FfiRegisterHandlerArgs {
  size_t struct_size;
  const char* target_name;
  size_t target_name_size;
  XLA_FFI_Handler* handler;
  const char* platform_name;
  size_t platform_name_size;
  uint32_t traits;
};
// struct_size counts up to the end of `traits` (52), as the plugin's own header computes it:
// the padded sizeof (56) is logged by the plugin as an unexpected size.
constexpr size_t kRegisterHandlerArgsSize =
    offsetof(FfiRegisterHandlerArgs, traits) + sizeof(uint32_t);

using FfiRegisterHandler = PJRT_Error*(FfiRegisterHandlerArgs* args);

struct FfiExtension {
  PJRT_Extension_Base base;
  void* type_id_register;
  void* user_data_add;
  FfiRegisterHandler* register_handler;
};

const FfiExtension* FindFfiExtension(const PJRT_Api* api) {
  for (const PJRT_Extension_Base* ext = api->extension_start; ext != nullptr; ext = ext->next) {
    if (ext->type == PJRT_Extension_Type_FFI) return reinterpret_cast<const FfiExtension*>(ext);
  }
  return nullptr;
}

absl::Status CheckTarget(absl::string_view target) {
  if (target.empty()) return absl::InvalidArgumentError("FFI target name is empty");
  for (char c : target) {
    if (c < 0x21 || c > 0x7e || c == '"' || c == '\\') {
      return absl::InvalidArgumentError(absl::StrCat(
          "FFI target name '", target,
          "': expected printable ASCII without spaces, quotes or backslashes"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

bool HasFfiExtension(const Plugin& plugin) { return FindFfiExtension(plugin.api()) != nullptr; }

absl::Status RegisterFfiHandler(const Plugin& plugin, absl::string_view target,
                                XLA_FFI_Handler* handler, const FfiHandlerOptions& options) {
  if (absl::Status s = CheckTarget(target); !s.ok()) return s;
  if (handler == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("FFI handler for '", target, "' is null"));
  }
  if (options.platform.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("FFI handler for '", target, "': the platform name is empty"));
  }
  const FfiExtension* ffi = FindFfiExtension(plugin.api());
  if (ffi == nullptr) {
    return absl::UnimplementedError(
        absl::StrCat("the PJRT plugin ", plugin.path(), " has no FFI extension"));
  }
  if (ffi->base.struct_size < offsetof(FfiExtension, register_handler) + sizeof(void*) ||
      ffi->register_handler == nullptr) {
    return absl::UnimplementedError(absl::StrCat("the PJRT plugin ", plugin.path(),
                                                 "'s FFI extension cannot register handlers"));
  }
  FfiRegisterHandlerArgs args{};
  args.struct_size = kRegisterHandlerArgsSize;
  args.target_name = target.data();
  args.target_name_size = target.size();
  args.handler = handler;
  args.platform_name = options.platform.data();
  args.platform_name_size = options.platform.size();
  args.traits = static_cast<uint32_t>(options.traits);
  return internal::ConsumeError(plugin.api(), ffi->register_handler(&args),
                                "PJRT_FFI_Register_Handler");
}

}  // namespace shardrt::pjrt
