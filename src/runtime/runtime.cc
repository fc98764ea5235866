#include "shardrt/runtime/runtime.h"

#include <algorithm>
#include <cstdlib>
#include <thread>
#include <variant>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "shardrt/base/limits.h"
#include "shardrt/base/status_macros.h"
#include "shardrt/pjrt/executable.h"
#include "shardrt/program/program_text.h"

namespace shardrt {
namespace {

constexpr char kCpuPlatform[] = "cpu";
constexpr char kCpuDeviceCount[] = "cpu_device_count";

const pjrt::NamedValue* FindOption(const std::vector<pjrt::NamedValue>& options,
                                   absl::string_view name) {
  for (const pjrt::NamedValue& v : options) {
    if (v.name == name) return &v;
  }
  return nullptr;
}

// The plugin's log level: the option, else $SHARDRT_LOG, else errors only. (Whether the process
// has TF_CPP_MIN_LOG_LEVEL says nothing: importing JAX sets it to 1.)
absl::StatusOr<pjrt::PluginLogLevel> PluginLogLevelOf(const RuntimeOptions& options) {
  if (options.plugin_log_level.has_value()) return *options.plugin_log_level;
  if (const char* env = std::getenv(kLogEnv); env != nullptr && *env != '\0') {
    const absl::string_view value = env;
    if (value == "info") return pjrt::PluginLogLevel::kInfo;
    if (value == "warning") return pjrt::PluginLogLevel::kWarning;
    if (value == "error") return pjrt::PluginLogLevel::kError;
    if (value == "plugin") return pjrt::PluginLogLevel::kUnchanged;
    return absl::InvalidArgumentError(absl::StrCat(
        "$", kLogEnv, ": expected info, warning, error or plugin, got '", absl::CEscape(value),
        "'"));
  }
  return pjrt::PluginLogLevel::kError;
}

absl::Status ValidateOptions(const RuntimeOptions& options) {
  if (options.devices < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("RuntimeOptions::devices must be >= 0, got ", options.devices));
  }
  if (options.devices > limits::kMaxCpuDevices) {
    return absl::InvalidArgumentError(absl::StrCat("RuntimeOptions::devices is ", options.devices,
                                                   "; the limit is ", limits::kMaxCpuDevices));
  }
  if (options.host_threads < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("RuntimeOptions::host_threads must be >= 0, got ", options.host_threads));
  }
  if (options.plugin_threads < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "RuntimeOptions::plugin_threads must be >= 0, got ", options.plugin_threads));
  }
  // The CPU plugin reads this option with an unchecked variant access: anything but an int64
  // aborts the process, and a count below 1 is meaningless. Check it whatever the plugin.
  if (const pjrt::NamedValue* count = FindOption(options.plugin_options, kCpuDeviceCount)) {
    const int64_t* value = std::get_if<int64_t>(&count->value);
    if (value == nullptr || *value < 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "plugin option ", kCpuDeviceCount, " must be an int64 >= 1, got ",
          pjrt::NamedValueToString(*count)));
    }
  }
  return absl::OkStatus();
}

// The CPU plugin's worker threads for a client with `devices` devices: $PJRT_NPROC, else
// $NPROC, else the core count, and at least one per device (as the plugin computes it).
int64_t CpuPluginThreads(int64_t devices) {
  int64_t threads = 0;
  for (const char* name : {"PJRT_NPROC", "NPROC"}) {
    const char* value = std::getenv(name);
    if (value != nullptr && absl::SimpleAtoi(value, &threads) && threads > 0) break;
    threads = 0;
  }
  if (threads <= 0) threads = std::max<int64_t>(1, std::thread::hardware_concurrency());
  return std::max(threads, devices);
}

// Creates the client. For the CPU plugin, which makes as many devices as its cpu_device_count
// option says, a client with another count than asked for is created again with that option.
absl::StatusOr<std::shared_ptr<pjrt::Client>> CreateClient(
    std::shared_ptr<const pjrt::Plugin> plugin, const RuntimeOptions& options) {
  pjrt::ClientOptions client_options{options.plugin_options};
  SHARDRT_ASSIGN_OR_RETURN(std::shared_ptr<pjrt::Client> client,
                           pjrt::Client::Create(plugin, client_options));
  const bool resize = client->platform_name() == kCpuPlatform && options.devices > 0 &&
                      FindOption(options.plugin_options, kCpuDeviceCount) == nullptr &&
                      static_cast<int64_t>(client->addressable_devices().size()) !=
                          options.devices;
  if (!resize) return client;
  client.reset();
  client_options.create_options.push_back({kCpuDeviceCount, options.devices});
  return pjrt::Client::Create(std::move(plugin), client_options);
}

}  // namespace

absl::StatusOr<std::unique_ptr<Runtime>> Runtime::Create(const RuntimeOptions& options) {
  SHARDRT_RETURN_IF_ERROR(ValidateOptions(options));
  pjrt::PluginLoadOptions load_options;
  SHARDRT_ASSIGN_OR_RETURN(load_options.log_level, PluginLogLevelOf(options));
  SHARDRT_ASSIGN_OR_RETURN(FoundPlugin found, FindPlugin(options.plugin));
  SHARDRT_ASSIGN_OR_RETURN(std::shared_ptr<const pjrt::Plugin> plugin,
                           pjrt::Plugin::Load(found.path, load_options));
  std::unique_ptr<Runtime> runtime(new Runtime());
  runtime->plugin_source_ = found.source;
  SHARDRT_ASSIGN_OR_RETURN(runtime->pjrt_client_, CreateClient(std::move(plugin), options));
  const pjrt::Client& client = *runtime->pjrt_client_;

  absl::Span<const pjrt::Device> addressable = client.addressable_devices();
  const int64_t available = static_cast<int64_t>(addressable.size());
  const int64_t devices = options.devices > 0 ? options.devices : available;
  if (devices < 1 || devices > available) {
    return absl::InvalidArgumentError(absl::StrCat(
        "RuntimeOptions::devices asks for ", devices, " devices; the '", client.platform_name(),
        "' plugin at '", client.plugin()->path(), "' has ", available, " addressable devices"));
  }
  for (int64_t i = 0; i < devices; ++i) runtime->devices_.push_back(&addressable[i]);

  // Multi-device programs on the CPU plugin each hold one of its worker threads per device
  // until all have arrived at a collective: bound what is in flight by its thread count.
  int64_t max_parts_in_flight = 0;  // no bound
  if (client.platform_name() == kCpuPlatform) {
    runtime->plugin_threads_ = CpuPluginThreads(available);
    max_parts_in_flight = runtime->plugin_threads_;
    if (options.plugin_threads > 0 && options.plugin_threads != runtime->plugin_threads_) {
      return absl::FailedPreconditionError(absl::StrCat(
          "RuntimeOptions::plugin_threads is ", options.plugin_threads, " but the CPU plugin "
          "will run ", runtime->plugin_threads_, " worker threads: it reads the count from "
          "$PJRT_NPROC when its client is created (at least one per device), and shardrt does "
          "not change the process environment; start the process with PJRT_NPROC=",
          options.plugin_threads));
    }
  } else if (options.plugin_threads > 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "RuntimeOptions::plugin_threads is ", options.plugin_threads, " but the '",
        client.platform_name(), "' plugin takes no worker-thread count; leave it 0"));
  }

  const int host_threads = options.host_threads > 0
                               ? options.host_threads
                               : static_cast<int>(std::thread::hardware_concurrency());
  runtime->pool_ = std::make_unique<ThreadPool>(std::max(host_threads, 1));
  ComputationClientOptions client_options;
  client_options.pool = runtime->pool_.get();
  client_options.max_device_parts_in_flight = max_parts_in_flight;
  client_options.persistent_cache = options.compile_cache;
  if (client_options.persistent_cache.directory.empty() &&
      options.compile_cache_env == CompileCacheEnv::kRead) {
    const char* dir = std::getenv(kCompileCacheEnv);
    // "off" means none, as for the CLI (not a directory of that name).
    if (dir != nullptr && absl::string_view(dir) != "off") {
      client_options.persistent_cache.directory = dir;
    }
  }
  SHARDRT_ASSIGN_OR_RETURN(runtime->client_,
                           ComputationClient::Create(runtime->pjrt_client_, client_options));
  runtime->executor_ = std::make_unique<Executor>(runtime->client_.get(), options.executor);
  return runtime;
}

absl::Status Runtime::RegisterFfiHandler(absl::string_view target, XLA_FFI_Handler* handler,
                                         const pjrt::FfiHandlerOptions& options) const {
  const auto key = std::make_tuple(std::string(target), handler, options.platform,
                                   static_cast<uint32_t>(options.traits));
  {
    MutexLock lock(ffi_mu_);
    if (proven_ffi_.contains(key)) return absl::OkStatus();
  }
  SHARDRT_RETURN_IF_ERROR(
      pjrt::RegisterFfiHandler(*pjrt_client_->plugin(), target, handler, options));
  // The probe: one side-effecting call of `target`, never run. The plugin resolves custom-call
  // targets when it compiles, so this fails exactly when a real program would.
  const std::string probe = absl::StrCat(
      "module @shardrt_ffi_probe attributes {mhlo.num_partitions = 1 : i32, "
      "mhlo.num_replicas = 1 : i32} {\n"
      "  func.func public @main() {\n"
      "    \"stablehlo.custom_call\"() {call_target_name = \"", target,
      "\", api_version = 4 : i32, has_side_effect = true} : () -> ()\n"
      "    return\n"
      "  }\n"
      "}\n");
  pjrt::CompileOptions compile_options;
  compile_options.device_assignment = {devices_.front()->id};
  absl::StatusOr<std::unique_ptr<pjrt::LoadedExecutable>> compiled =
      pjrt::LoadedExecutable::Compile(pjrt_client_, probe, pjrt::ProgramFormat::kMlir,
                                      compile_options);
  if (!compiled.ok()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "FFI handler for '", target, "' on platform '", options.platform,
        "' was handed to the plugin, but a program calling it does not compile (the plugin may "
        "have refused the handler, e.g. for an FFI API version it does not implement; see its "
        "log): ", compiled.status().message()));
  }
  MutexLock lock(ffi_mu_);
  proven_ffi_.insert(key);
  return absl::OkStatus();
}

Runtime::~Runtime() {
  executor_.reset();
  client_.reset();
  pool_.reset();
}

absl::StatusOr<ComputationPtr> Runtime::Compile(std::string program, std::string name) const {
  SHARDRT_ASSIGN_OR_RETURN(std::optional<int64_t> declared, DeclaredPartitions(program));
  const int64_t devices = static_cast<int64_t>(devices_.size());
  if (declared.has_value() && *declared > devices) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Runtime::Compile: the program declares mhlo.num_partitions = ", *declared,
        " but the runtime has ", devices, " devices"));
  }
  CompileRequest request;
  request.name = std::move(name);
  request.program = std::move(program);
  request.options.num_partitions = declared.value_or(devices);
  return client_->Compile(request);
}

absl::StatusOr<DataPtr> Runtime::Put(const HostArrayView& array,
                                     const std::shared_ptr<const DataLayout>& layout) const {
  return client_->TransferToDevice(array, layout);
}

absl::StatusOr<DataPtr> Runtime::Put(const HostArrayView& array, const Sharding& sharding) const {
  SHARDRT_ASSIGN_OR_RETURN(std::shared_ptr<const DataLayout> layout,
                           client_->MakeLayout(ArrayShape{array.type, array.dims}, sharding));
  return client_->TransferToDevice(array, layout);
}

absl::StatusOr<std::vector<DataPtr>> Runtime::Execute(const Computation& computation,
                                                      absl::Span<const DataPtr> arguments,
                                                      const ExecuteReplicatedOptions& options) const {
  return client_->ExecuteReplicated(computation, arguments, options);
}

absl::StatusOr<HostArray> Runtime::ToHost(const DataPtr& data) const {
  if (data == nullptr) return absl::InvalidArgumentError("Runtime::ToHost: the data is null");
  SHARDRT_ASSIGN_OR_RETURN(std::vector<HostArray> host, client_->TransferFromDevice({&data, 1}));
  return std::move(host.front());
}

}  // namespace shardrt
