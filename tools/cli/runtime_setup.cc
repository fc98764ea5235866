#include "cli/runtime_setup.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "shardrt/base/status_macros.h"
#include "shardrt/base/metrics.h"

extern char** environ;

namespace shardrt::cli {
namespace {

// Longest command line the CLI re-reads from /proc/self/cmdline.
constexpr std::streamsize kMaxCommandLine = 1 << 20;

// Starts this program again with `additions` in its environment (execve does not return on
// success). Returns when that cannot be done; the caller goes on unchanged.
void RestartWith(const std::vector<std::string>& additions) {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  std::string cmdline;
  cmdline.resize(kMaxCommandLine);
  in.read(cmdline.data(), kMaxCommandLine);
  cmdline.resize(static_cast<size_t>(in.gcount()));
  if (cmdline.empty() || cmdline.size() == static_cast<size_t>(kMaxCommandLine)) return;
  std::vector<char*> argv;
  for (size_t i = 0; i < cmdline.size(); i += std::char_traits<char>::length(&cmdline[i]) + 1) {
    argv.push_back(&cmdline[i]);
  }
  argv.push_back(nullptr);
  std::vector<std::string> storage = additions;
  std::vector<char*> envp;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) envp.push_back(*e);
  for (std::string& a : storage) envp.push_back(a.data());
  envp.push_back(nullptr);
  std::fflush(stdout);
  ::execve("/proc/self/exe", argv.data(), envp.data());
}

void ApplyProcessDefaults(int64_t devices) {
  std::vector<std::string> additions;
  if (std::getenv("PJRT_NPROC") == nullptr) {
    const int64_t cores = std::max<int64_t>(1, std::thread::hardware_concurrency());
    additions.push_back(absl::StrCat("PJRT_NPROC=", std::max(cores, 2 * devices)));
  }
  if (!additions.empty()) RestartWith(additions);
}

}  // namespace

absl::StatusOr<std::string> CompileCacheDirectory(const std::optional<std::string>& flag) {
  if (flag.has_value()) {
    if (flag->empty()) {
      return absl::InvalidArgumentError(
          "flag --compile-cache: expected a folder or 'off', got ''");
    }
    return *flag == "off" ? "" : *flag;
  }
  if (const char* env = std::getenv(kCompileCacheEnv); env != nullptr && *env != '\0') {
    return std::string(env) == "off" ? "" : std::string(env);
  }
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg != nullptr && *xdg == '/') {
    return absl::StrCat(xdg, "/shardrt/compile");
  }
  if (const char* home = std::getenv("HOME"); home != nullptr && *home == '/') {
    return absl::StrCat(home, "/.cache/shardrt/compile");
  }
  return std::string();
}

absl::StatusOr<std::unique_ptr<Runtime>> CreateCliRuntime(
    int64_t devices, const std::optional<std::string>& plugin,
    const std::optional<std::string>& compile_cache) {
  SHARDRT_ASSIGN_OR_RETURN(std::string cache_dir, CompileCacheDirectory(compile_cache));
  ApplyProcessDefaults(devices);
  RuntimeOptions options;
  options.devices = devices;
  options.plugin = plugin.value_or("");
  options.compile_cache.directory = cache_dir;
  options.compile_cache_env = CompileCacheEnv::kIgnore;  // decided above
  return Runtime::Create(options);
}

absl::Status CommandReports::Start() {
  return trace_path_.has_value() ? recorder_.Start() : absl::OkStatus();
}

absl::Status CommandReports::Finish() {
  if (metrics_) std::fputs(GlobalMetrics().TextReport().c_str(), stdout);
  if (!trace_path_.has_value()) return absl::OkStatus();
  recorder_.Stop();
  SHARDRT_RETURN_IF_ERROR(recorder_.WriteJson(*trace_path_));
  std::printf("trace: %lld events -> %s\n", static_cast<long long>(recorder_.num_events()),
              trace_path_->c_str());
  return absl::OkStatus();
}

}  // namespace shardrt::cli
