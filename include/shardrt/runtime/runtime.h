// Runtime: the front door. One object that loads a PJRT plugin, creates its client, a host
// thread pool, the ComputationClient and the asynchronous Executor, from one options struct.
//
//   shardrt::RuntimeOptions options;
//   options.devices = 8;
//   auto runtime = shardrt::Runtime::Create(options);      // StatusOr<unique_ptr<Runtime>>
//   auto program = (*runtime)->Compile(stablehlo_text);    // one partition per device
//   auto x = (*runtime)->Put(HostArrayView::Of<float>(values, {16, 3}),
//                            (*program)->parameter_layout(0));
//   auto outputs = (*runtime)->Execute(**program, {*x});   // one PJRT Execute, sharded outputs
//   auto y = (*runtime)->ToHost((*outputs)[0]);            // a HostArray; y->values<float>()
//
// Compile, Put, Execute and ToHost cover the common path; client() (ComputationClient: explicit
// compile options, several arrays at once, shards, placeholders) and executor() (asynchronous
// runs) have everything else.
//
// Policy lives here, not in the layers below: which plugin to load (plugin_search.h), what a
// plugin is (from the platform name its client reports, never its file name), how many devices
// the CPU plugin creates, and how many multi-device executions may be in flight on it.
//
// Ownership: the Runtime owns everything it creates and destroys it in reverse order (executor,
// computation client, pool, PJRT client, plugin); Data and Computations created through it keep
// the PJRT client alive, so they may outlive the Runtime. The process environment is read,
// never changed. Thread-safety: all methods are thread-safe; the objects it hands out are
// thread-safe as their headers say.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "shardrt/base/export.h"
#include "shardrt/base/mutex.h"
#include "shardrt/base/thread_pool.h"
#include "shardrt/client/computation_client.h"
#include "shardrt/executor/executor.h"
#include "shardrt/pjrt/client.h"
#include "shardrt/pjrt/ffi.h"
#include "shardrt/pjrt/named_value.h"
#include "shardrt/pjrt/plugin.h"
#include "shardrt/runtime/plugin_search.h"

namespace shardrt {

// The environment variable naming the persistent compile cache's directory when
// RuntimeOptions::compile_cache does not.
inline constexpr char kCompileCacheEnv[] = "SHARDRT_COMPILE_CACHE";
// The environment variable choosing which of the plugin's log lines reach stderr when
// RuntimeOptions::plugin_log_level does not: info, warning, error, or plugin (the plugin's own
// setting, e.g. from TF_CPP_MIN_LOG_LEVEL).
inline constexpr char kLogEnv[] = "SHARDRT_LOG";

// Whether that variable may name the cache (applications that decide themselves, like the CLI,
// ignore it).
enum class CompileCacheEnv { kRead, kIgnore };

struct SHARDRT_EXPORT RuntimeOptions {
  // Path of the PJRT plugin. Empty (default): $SHARDRT_PJRT_PLUGIN, then the CPU plugin next to
  // libshardrt (see plugin_search.h).
  std::string plugin;

  // Devices to run on; 0 (default): every addressable device of the client. The CPU plugin
  // makes as many devices as asked (its int64 create option cpu_device_count; 0: its own
  // default, 4); other plugins have the devices they have, and the first `devices` are used.
  // Error if the plugin has fewer.
  int64_t devices = 0;

  // Passed to PJRT_Client_Create as they are, e.g. {"memory_fraction", 0.5f} for the CUDA
  // plugin. A cpu_device_count given here wins over `devices`.
  std::vector<pjrt::NamedValue> plugin_options;

  // Threads of the host pool that uploads and downloads shards and fills argument lists;
  // 0 (default): the number of cores.
  int host_threads = 0;

  // Worker threads the plugin runs device programs on; 0 (default): the plugin's own choice.
  // The CPU plugin (xla-cpu-pjrt 0.0.1) has no create option for this: it reads $PJRT_NPROC
  // (else $NPROC, else the core count, and at least one thread per device) when its client is
  // created. shardrt does not change the process environment behind the caller's back, so for
  // that plugin a non-zero value is checked, not applied: Create fails with FailedPrecondition,
  // naming the value to export, when the plugin would run a different number. Applications
  // choose the count by starting the process with PJRT_NPROC set (the CLI does so).
  int64_t plugin_threads = 0;

  // Which of the plugin's own log lines reach stderr (shardrt/pjrt/plugin_log.h: set through
  // the plugin's private copy of Abseil's logging, never through the process environment).
  // Unset (default): $SHARDRT_LOG when set, else errors only, so that a program using shardrt
  // prints nothing it did not ask for (kUnchanged, or SHARDRT_LOG=plugin, lets the plugin read
  // TF_CPP_MIN_LOG_LEVEL as it does by itself; importing JAX sets that variable to 1). The level belongs to the plugin's library,
  // process-wide: the latest Runtime created on it decides.
  std::optional<pjrt::PluginLogLevel> plugin_log_level;

  // The asynchronous executor's settings.
  ExecutorOptions executor;

  // The persistent compile cache (shardrt/client/persistent_cache.h): its directory, else
  // (with compile_cache_env kRead) $SHARDRT_COMPILE_CACHE when that is set, not empty and not
  // "off"; off when neither names one.
  PersistentCacheOptions compile_cache;
  CompileCacheEnv compile_cache_env = CompileCacheEnv::kRead;
};

class SHARDRT_EXPORT Runtime {
 public:
  // Loads the plugin, creates its client and the objects above it. Errors (nothing is left
  // behind): NotFound naming every place searched for the plugin; InvalidArgument for negative
  // counts, a cpu_device_count option that is not an int64 >= 1 (checked before the plugin
  // sees it, which would abort on it), or fewer devices than asked for; FailedPrecondition for
  // a plugin_threads value the plugin cannot honour; InvalidArgument for a $SHARDRT_LOG that is
  // not info, warning, error or plugin; the plugin's own errors (loading, version,
  // client creation), message kept.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<Runtime>> Create(
      const RuntimeOptions& options = {});
  // Waits for the executor's work, then destroys everything in reverse order of creation.
  ~Runtime();
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  // The loaded plugin.
  const pjrt::Plugin& plugin() const { return *pjrt_client_->plugin(); }
  // Where its path came from (the explicit option, $SHARDRT_PJRT_PLUGIN or the default).
  PluginSource plugin_source() const { return plugin_source_; }
  // The PJRT client (shared with every Data created through it).
  const std::shared_ptr<pjrt::Client>& pjrt_client() const { return pjrt_client_; }
  // What the plugin reports it is, e.g. "cpu".
  const std::string& platform_name() const { return pjrt_client_->platform_name(); }
  // The devices used, in order: the first `devices` addressable devices.
  absl::Span<const pjrt::Device* const> devices() const { return devices_; }
  // The plugin's worker threads when known (the CPU plugin), else 0.
  int64_t plugin_threads() const { return plugin_threads_; }
  // The host thread pool, compile / transfer / execute, and asynchronous scheduling. Borrowed
  // references, valid for the Runtime's lifetime.
  ThreadPool& pool() const { return *pool_; }
  ComputationClient& client() const { return *client_; }
  Executor& executor() const { return *executor_; }

  // --- The common path (each is the ComputationClient call named, on this runtime's devices) ---

  // Compiles a StableHLO program (MLIR text or bytecode) with one partition per device: the
  // module's mhlo.num_partitions when it declares one (which must not exceed the runtime's
  // devices), else devices().size(); the default device assignment; the Shardy partitioner for
  // a program written with the sdy dialect; the persistent compile cache when configured.
  // `name` labels it in metrics and traces. Errors: InvalidArgument for a declared partition
  // count above the device count; ComputationClient::Compile's. Thread-safe.
  [[nodiscard]] absl::StatusOr<ComputationPtr> Compile(std::string program,
                                                       std::string name = "main") const;
  // Uploads `array`, split by `layout` (a computation's parameter_layout(i), or any layout of
  // client().MakeLayout): ComputationClient::TransferToDevice. Blocks until `array`'s memory is
  // no longer needed. Errors: InvalidArgument when the array's type, dims or byte size differ
  // from the layout's; the plugin's. Thread-safe.
  [[nodiscard]] absl::StatusOr<DataPtr> Put(const HostArrayView& array,
                                            const std::shared_ptr<const DataLayout>& layout) const;
  // Uploads `array` split by `sharding` over this runtime's devices (as many as the sharding
  // needs, or all of them when it is replicated). Errors: MakeLayout's (a sharding that does
  // not fit the shape or the devices), then Put's. Thread-safe.
  [[nodiscard]] absl::StatusOr<DataPtr> Put(const HostArrayView& array,
                                            const Sharding& sharding) const;
  // Runs `computation` on its devices with sharded `arguments` (one PJRT Execute) and returns
  // its outputs: ComputationClient::ExecuteReplicated, same errors. Thread-safe.
  [[nodiscard]] absl::StatusOr<std::vector<DataPtr>> Execute(
      const Computation& computation, absl::Span<const DataPtr> arguments,
      const ExecuteReplicatedOptions& options = {}) const;
  // Downloads `data` as one global host array (HostArray::values<T>() reads it typed).
  // Errors: InvalidArgument for null data; the data's own (a failed placeholder, donated
  // data); the plugin's. Thread-safe.
  [[nodiscard]] absl::StatusOr<HostArray> ToHost(const DataPtr& data) const;

  // Registers an XLA FFI handler (a custom kernel, shardrt/pjrt/ffi.h) for custom calls to
  // `target`, then proves the plugin will run it: compiles a one-op program that calls `target`
  // on one device (no cache, no metrics), so that a handler the plugin refused (an FFI API
  // version it does not implement, an unknown platform) is an error here rather than at the
  // first compile of a real program. Errors: those of pjrt::RegisterFfiHandler;
  // FailedPrecondition naming the target and the platform, with the plugin's message, when the
  // probe finds no handler. The registration is process-wide and permanent; the plugin keeps
  // the first handler of a target (see shardrt/pjrt/ffi.h). A registration this runtime has
  // already proven (the same target, handler, platform and traits) returns OK at once, without
  // registering or compiling again. Thread-safe.
  [[nodiscard]] absl::Status RegisterFfiHandler(absl::string_view target,
                                                XLA_FFI_Handler* handler,
                                                const pjrt::FfiHandlerOptions& options = {}) const;

 private:
  Runtime() = default;

  // Members are destroyed bottom-up: executor first, plugin (held by the client) last.
  std::shared_ptr<pjrt::Client> pjrt_client_;
  PluginSource plugin_source_ = PluginSource::kDefault;
  std::vector<const pjrt::Device*> devices_;
  int64_t plugin_threads_ = 0;
  std::unique_ptr<ThreadPool> pool_;
  std::unique_ptr<ComputationClient> client_;
  std::unique_ptr<Executor> executor_;
  // RegisterFfiHandler's registrations proven by a probe: (target, handler, platform, traits).
  mutable Mutex ffi_mu_;
  mutable std::set<std::tuple<std::string, XLA_FFI_Handler*, std::string, uint32_t>> proven_ffi_
      ABSL_GUARDED_BY(ffi_mu_);
};

}  // namespace shardrt
