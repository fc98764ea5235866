#include "shardrt/runtime/plugin_search.h"

#include <dlfcn.h>
#include <sys/stat.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

#ifndef SHARDRT_PLUGIN_SUBDIR
#error "SHARDRT_PLUGIN_SUBDIR (the default plugin's folder relative to libshardrt) is not set"
#endif
#ifndef SHARDRT_DEFAULT_PLUGIN_FILE
#error "SHARDRT_DEFAULT_PLUGIN_FILE is not set"
#endif

namespace shardrt {
namespace {

constexpr char kPluginEnv[] = "SHARDRT_PJRT_PLUGIN";

bool IsFile(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// A symbol of this library, to ask the dynamic loader where the library is.
void Anchor() {}

}  // namespace

absl::StatusOr<std::string> DefaultPluginPath() {
  Dl_info info{};
  if (::dladdr(reinterpret_cast<void*>(&Anchor), &info) == 0 || info.dli_fname == nullptr) {
    return absl::InternalError("cannot determine where libshardrt is loaded from (dladdr failed)");
  }
  std::string library = info.dli_fname;
  if (char* real = ::realpath(library.c_str(), nullptr); real != nullptr) {
    library = real;
    std::free(real);
  }
  const size_t slash = library.find_last_of('/');
  const std::string folder = slash == std::string::npos ? "." : library.substr(0, slash);
  return absl::StrCat(folder, "/", SHARDRT_PLUGIN_SUBDIR, "/", SHARDRT_DEFAULT_PLUGIN_FILE);
}

absl::StatusOr<FoundPlugin> FindPlugin(const std::string& explicit_path) {
  std::vector<std::string> tried;
  auto not_found = [&tried] {
    return absl::NotFoundError(
        absl::StrCat("no PJRT plugin found; tried ", absl::StrJoin(tried, ", then ")));
  };
  if (!explicit_path.empty()) {
    if (IsFile(explicit_path)) return FoundPlugin{explicit_path, PluginSource::kExplicit};
    tried.push_back(absl::StrCat("the explicit plugin path '", explicit_path,
                                 "' (no such file)"));
    return not_found();
  }
  tried.push_back("the explicit plugin path (not given)");
  const char* env = std::getenv(kPluginEnv);
  if (env != nullptr && *env != '\0') {
    if (IsFile(env)) return FoundPlugin{env, PluginSource::kEnvironment};
    tried.push_back(absl::StrCat("$", kPluginEnv, " = '", env, "' (no such file)"));
    return not_found();
  }
  tried.push_back(absl::StrCat("$", kPluginEnv, " (not set)"));
  absl::StatusOr<std::string> fallback = DefaultPluginPath();
  if (!fallback.ok()) {
    tried.push_back(absl::StrCat("the default plugin next to libshardrt (",
                                 fallback.status().message(), ")"));
    return not_found();
  }
  if (IsFile(*fallback)) return FoundPlugin{*fallback, PluginSource::kDefault};
  tried.push_back(absl::StrCat("the default plugin next to libshardrt '", *fallback,
                               "' (no such file)"));
  return not_found();
}

}  // namespace shardrt
