#include "shardrt/pjrt/plugin.h"

#include <dlfcn.h>
#include <sys/stat.h>

#include "absl/strings/str_cat.h"
#include "shardrt/base/status_macros.h"
#include "pjrt/call.h"

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

}  // namespace

absl::StatusOr<std::shared_ptr<const Plugin>> Plugin::Load(const std::string& path) {
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
  const PJRT_Api* api = get_api();
  if (api == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("'", path, "': GetPjrtApi returned null"));
  }
  std::shared_ptr<Plugin> plugin(new Plugin());
  plugin->api_ = api;
  plugin->path_ = path;
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
