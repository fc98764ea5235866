#include "cli/runtime_setup.h"

#include "absl/strings/str_cat.h"
#include <cstdio>

#include "base/metrics.h"
#include "base/status_macros.h"
#include "pjrt/plugin.h"

namespace shardrt::cli {

absl::StatusOr<std::shared_ptr<pjrt::Client>> CreatePjrtClient(const RuntimeOptions& options) {
  const std::string path = options.plugin_path.value_or(pjrt::Plugin::DefaultPath());
  SHARDRT_ASSIGN_OR_RETURN(std::shared_ptr<const pjrt::Plugin> plugin, pjrt::Plugin::Load(path));
  pjrt::ClientOptions client_options;
  const std::string file = path.substr(path.find_last_of('/') + 1);
  if (file.find("cpu") != std::string::npos) client_options.cpu_device_count = options.num_devices;
  return pjrt::Client::Create(plugin, client_options);
}

absl::StatusOr<std::unique_ptr<ComputationClient>> CreateRuntime(const RuntimeOptions& options) {
  SHARDRT_ASSIGN_OR_RETURN(std::shared_ptr<pjrt::Client> client, CreatePjrtClient(options));
  if (static_cast<int64_t>(client->addressable_devices().size()) < options.num_devices) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--devices ", options.num_devices, ": the plugin has only ",
        client->addressable_devices().size(), " addressable devices"));
  }
  return ComputationClient::Create(std::move(client));
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
