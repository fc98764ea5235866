#include "shardrt/pjrt/plugin.h"

#include <dlfcn.h>
#include <link.h>
#include <sys/stat.h>

#include <cctype>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "shardrt/base/status_macros.h"
#include "pjrt/call.h"
#include "pjrt/elf_symbols.h"

namespace shardrt::pjrt {
namespace {

NamedValue ToAttribute(const PJRT_NamedValue& v) {
  NamedValue a;
  a.name.assign(v.name, v.name_size);
  switch (v.type) {
    case PJRT_NamedValue_kString:
      a.value = std::string(v.string_value, v.value_size);
      break;
    case PJRT_NamedValue_kInt64:
      a.value = v.int64_value;
      break;
    case PJRT_NamedValue_kInt64List:
      a.value = std::vector<int64_t>(v.int64_array_value, v.int64_array_value + v.value_size);
      break;
    case PJRT_NamedValue_kFloat:
      a.value = v.float_value;
      break;
    case PJRT_NamedValue_kBool:
      a.value = v.bool_value;
      break;
  }
  return a;
}

// Whether `name` is the mangled name of absl::SetMinLogLevel(absl::LogSeverityAtLeast), with or
// without Abseil's inline namespace (lts_YYYYMMDD).
bool IsAbslSetMinLogLevel(absl::string_view name) {
  constexpr absl::string_view kPrefix = "_ZN4absl";
  if (!absl::ConsumePrefix(&name, kPrefix)) return false;
  if (name == "14SetMinLogLevelENS_18LogSeverityAtLeastE") return true;
  size_t length = 0;
  size_t digits = 0;
  while (digits < name.size() && digits < 3 && std::isdigit(static_cast<unsigned char>(name[digits]))) {
    length = length * 10 + static_cast<size_t>(name[digits] - '0');
    ++digits;
  }
  if (digits == 0 || name.size() < digits + length) return false;
  if (!absl::StartsWith(name.substr(digits), "lts_")) return false;
  return name.substr(digits + length) == "14SetMinLogLevelENS0_18LogSeverityAtLeastE";
}

// Sets the threshold of the plugin's own copy of Abseil's logging (shardrt/pjrt/plugin_log.h):
// its absl::SetMinLogLevel, found in the library's symbol table, called at the address the
// library was loaded to, after checking that address lies in the same library as GetPjrtApi.
PluginLogControl ApplyLogLevel(void* handle, void* get_api, const std::string& path,
                               PluginLogLevel level) {
  if (level == PluginLogLevel::kUnchanged) return PluginLogControl::kUnchanged;
  absl::StatusOr<uint64_t> offset =
      FindElfFunction(path, IsAbslSetMinLogLevel, /*name_contains=*/"SetMinLogLevel");
  link_map* map = nullptr;
  if (!offset.ok() || ::dlinfo(handle, RTLD_DI_LINKMAP, &map) != 0 || map == nullptr) {
    return PluginLogControl::kNotAvailable;
  }
  const uintptr_t address = static_cast<uintptr_t>(map->l_addr) + *offset;
  Dl_info target{};
  Dl_info api{};
  if (::dladdr(reinterpret_cast<void*>(address), &target) == 0 || ::dladdr(get_api, &api) == 0 ||
      target.dli_fbase != api.dli_fbase) {
    return PluginLogControl::kNotAvailable;
  }
  // absl::LogSeverityAtLeast: kInfo 0, kWarning 1, kError 2 (an enum of int, passed as one).
  const int severity = level == PluginLogLevel::kInfo ? 0 : level == PluginLogLevel::kWarning ? 1 : 2;
  using SetMinLogLevelFn = void (*)(int);
  reinterpret_cast<SetMinLogLevelFn>(address)(severity);
  return PluginLogControl::kApplied;
}

}  // namespace

absl::StatusOr<std::shared_ptr<const Plugin>> Plugin::Load(const std::string& path,
                                                           const PluginLoadOptions& options) {
  struct stat st {};
  if (path.empty() || ::stat(path.c_str(), &st) != 0) {
    return absl::NotFoundError(absl::StrCat("PJRT plugin '", path, "' does not exist"));
  }
  if (!S_ISREG(st.st_mode)) {
    return absl::InvalidArgumentError(absl::StrCat("PJRT plugin '", path, "' is not a file"));
  }
  // Never dlclose: plugins keep thread pools and static state alive for the process.
  void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  if (handle == nullptr) {
    const char* why = ::dlerror();
    return absl::InvalidArgumentError(absl::StrCat("'", path, "' is not a loadable PJRT plugin: ",
                                                   why ? why : "dlopen failed"));
  }
  using GetPjrtApiFn = const PJRT_Api* (*)();
  auto get_api = reinterpret_cast<GetPjrtApiFn>(::dlsym(handle, "GetPjrtApi"));
  if (get_api == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", path, "' is not a PJRT plugin: it exports no GetPjrtApi symbol"));
  }
  const PluginLogControl log_control =
      ApplyLogLevel(handle, reinterpret_cast<void*>(get_api), path, options.log_level);
  const PJRT_Api* api = get_api();
  if (api == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("'", path, "': GetPjrtApi returned null"));
  }
  std::shared_ptr<Plugin> plugin(new Plugin());
  plugin->api_ = api;
  plugin->path_ = path;
  plugin->log_control_ = log_control;
  plugin->major_ = api->pjrt_api_version.major_version;
  plugin->minor_ = api->pjrt_api_version.minor_version;
  if (plugin->major_ != PJRT_API_MAJOR || plugin->minor_ < PJRT_API_MINOR) {
    return absl::FailedPreconditionError(absl::StrCat(
        "PJRT plugin '", path, "' has C API version ", plugin->major_, ".", plugin->minor_,
        "; shardrt was built against ", PJRT_API_MAJOR, ".", PJRT_API_MINOR,
        " and needs major ", PJRT_API_MAJOR, " and minor >= ", PJRT_API_MINOR));
  }
  if (api->struct_size < offsetof(PJRT_Api, PJRT_Plugin_Attributes) + sizeof(void*)) {
    return absl::FailedPreconditionError(
        absl::StrCat("PJRT plugin '", path, "' has a truncated PJRT_Api table"));
  }
  SHARDRT_PJRT_ARGS(PJRT_Plugin_Initialize_Args, init);
  SHARDRT_RETURN_IF_ERROR(SHARDRT_PJRT_CALL(api, PJRT_Plugin_Initialize, &init));

  SHARDRT_PJRT_ARGS(PJRT_Plugin_Attributes_Args, attrs);
  if (SHARDRT_PJRT_CALL(api, PJRT_Plugin_Attributes, &attrs).ok()) {
    for (size_t i = 0; i < attrs.num_attributes; ++i) {
      plugin->attributes_.push_back(ToAttribute(attrs.attributes[i]));
    }
  }
  return std::shared_ptr<const Plugin>(std::move(plugin));
}

}  // namespace shardrt::pjrt
