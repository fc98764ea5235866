#include "shardrt/client/computation_client.h"

#include <algorithm>
#include <optional>
#include <thread>

#include "absl/strings/str_cat.h"
#include "shardrt/base/limits.h"
#include "shardrt/base/metrics.h"
#include "shardrt/base/status_macros.h"
#include "shardrt/base/trace.h"
#include "client/program_text.h"
#include "client/execution_limiter.h"
#include "data/transfer.h"

namespace shardrt {
namespace {

Counter* CounterNamed(absl::string_view name) { return GlobalMetrics().GetCounter(name); }

}  // namespace

absl::StatusOr<std::unique_ptr<ComputationClient>> ComputationClient::Create(
    std::shared_ptr<pjrt::Client> client, const ComputationClientOptions& options) {
  if (client == nullptr || client->addressable_devices().empty()) {
    return absl::InvalidArgumentError("ComputationClient needs a client with devices");
  }
  std::unique_ptr<ComputationClient> c(new ComputationClient());
  c->client_ = std::move(client);
  c->limiter_ =
      std::make_shared<ExecutionLimiter>(std::max<int64_t>(0, options.max_device_parts_in_flight));
  if (options.pool != nullptr) {
    c->pool_ = options.pool;
  } else {
    int threads = options.num_threads > 0 ? options.num_threads
                                          : static_cast<int>(std::thread::hardware_concurrency());
    c->own_pool_ = std::make_unique<ThreadPool>(std::max(threads, 1));
    c->pool_ = c->own_pool_.get();
  }
  return c;
}

ComputationClient::~ComputationClient() {
  limiter_->WaitIdle();  // executions still running hold client state through their callbacks
  {
    absl::MutexLock lock(&cache_mu_);
    compile_cache_.clear();
  }
  own_pool_.reset();
}

absl::StatusOr<std::vector<const pjrt::Device*>> ComputationClient::DefaultDevices(
    size_t n) const {
  absl::Span<const pjrt::Device> all = client_->addressable_devices();
  if (n < 1 || n > all.size()) {
    return absl::InvalidArgumentError(absl::StrCat("asked for ", n, " devices, the client has ",
                                                   all.size()));
  }
  std::vector<const pjrt::Device*> devices;
  for (size_t i = 0; i < n; ++i) devices.push_back(&all[i]);
  return devices;
}

absl::StatusOr<std::shared_ptr<const DataLayout>> ComputationClient::MakeLayout(
    const ArrayShape& shape, const Sharding& sharding,
    std::vector<const pjrt::Device*> devices) const {
  if (devices.empty()) {
    size_t n = sharding.num_devices().value_or(client_->addressable_devices().size());
    SHARDRT_ASSIGN_OR_RETURN(devices, DefaultDevices(n));
  }
  return DataLayout::Create(shape, sharding, std::move(devices));
}

absl::StatusOr<std::vector<DataPtr>> ComputationClient::TransferToDevice(
    absl::Span<const HostArrayView> arrays,
    absl::Span<const std::shared_ptr<const DataLayout>> layouts) {
  SHARDRT_TRACE_SPAN("TransferToDevice", "transfer");
  return shardrt::TransferToDevice(client_, pool_, arrays, layouts);
}

absl::StatusOr<DataPtr> ComputationClient::TransferShardsToDevice(
    std::shared_ptr<const DataLayout> layout, absl::Span<const std::span<const std::byte>> shards) {
  SHARDRT_TRACE_SPAN("TransferShardsToDevice", "transfer");
  return shardrt::TransferShardsToDevice(client_, pool_, std::move(layout), shards);
}

absl::StatusOr<std::vector<HostArray>> ComputationClient::TransferFromDevice(
    absl::Span<const DataPtr> data) {
  SHARDRT_TRACE_SPAN("TransferFromDevice", "transfer");
  return shardrt::TransferFromDevice(pool_, data);
}

DataPtr ComputationClient::CreateDataPlaceholder(std::shared_ptr<const DataLayout> layout) const {
  return Data::CreatePlaceholder(client_, std::move(layout));
}

absl::StatusOr<ComputationPtr> ComputationClient::Compile(const CompileRequest& request) {
  static Metric* const compile_time = GlobalMetrics().GetMetric(kCompileTime, MetricRepr::kTime);
  static Counter* const cached = CounterNamed(kCachedCompile);
  static Counter* const uncached = CounterNamed(kUncachedCompile);
  const std::string name = request.name.empty() ? "computation" : request.name;
  // Before the program is copied into the cache key, or read.
  if (static_cast<int64_t>(request.program.size()) > limits::kMaxFileBytes) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": the program has ", request.program.size(),
                                                   " bytes; the limit is ", limits::kMaxFileBytes));
  }
  pjrt::CompileOptions options = request.options;
  if (options.device_assignment.empty()) {
    SHARDRT_ASSIGN_OR_RETURN(
        std::vector<const pjrt::Device*> devices,
        DefaultDevices(static_cast<size_t>(std::max<int64_t>(
            1, options.num_replicas * options.num_partitions))));
    for (const pjrt::Device* d : devices) options.device_assignment.push_back(d->id);
  }
  std::string key = absl::StrCat(pjrt::EncodeCompileOptions(options), "\n", request.program);
  if (request.global_shapes.has_value()) {
    for (const auto* shapes : {&request.global_shapes->parameters, &request.global_shapes->results}) {
      absl::StrAppend(&key, "\n");
      for (const ArrayShape& shape : *shapes) absl::StrAppend(&key, ShapeToString(shape), ";");
    }
  }
  {
    absl::MutexLock lock(&cache_mu_);
    if (auto it = compile_cache_.find(key); it != compile_cache_.end()) {
      cached->Add(1);
      return it->second;
    }
  }
  ScopedTimer timer(compile_time);
  TraceSpan span("Compile", "client");
  span.AddArg("computation", name);
  SHARDRT_ASSIGN_OR_RETURN(ProgramInfo info, InspectProgram(request.program));
  if (info.declared_partitions.has_value() && *info.declared_partitions != options.num_partitions) {
    return absl::InvalidArgumentError(absl::StrCat(
        name, ": the program declares mhlo.num_partitions = ", *info.declared_partitions,
        " but is compiled for ", options.num_partitions, " partitions"));
  }
  if (info.declared_replicas.has_value() && *info.declared_replicas != options.num_replicas) {
    return absl::InvalidArgumentError(absl::StrCat(
        name, ": the program declares mhlo.num_replicas = ", *info.declared_replicas,
        " but is compiled for ", options.num_replicas, " replicas"));
  }
  // GSPMD cannot read sdy.* annotations: a Shardy program needs the Shardy partitioner.
  if (info.uses_shardy) options.partitioner = pjrt::Partitioner::kShardy;
  SHARDRT_ASSIGN_OR_RETURN(std::unique_ptr<pjrt::LoadedExecutable> executable,
                           pjrt::LoadedExecutable::Compile(client_, request.program,
                                                           pjrt::ProgramFormat::kMlir, options));
  GlobalShapes globals;
  if (info.signature.has_value()) {
    globals = {info.signature->parameters, info.signature->results};
  }
  if (request.global_shapes.has_value()) {
    if (info.signature.has_value() && (request.global_shapes->parameters != globals.parameters ||
                                       request.global_shapes->results != globals.results)) {
      return absl::InvalidArgumentError(absl::StrCat(
          name, ": the global shapes given differ from the ones the program's @main states"));
    }
    globals = *request.global_shapes;
  }
  SHARDRT_ASSIGN_OR_RETURN(ComputationPtr computation,
                           Computation::Create(name, std::move(executable), globals.parameters,
                                               globals.results));
  uncached->Add(1);
  absl::MutexLock lock(&cache_mu_);
  auto [it, inserted] = compile_cache_.emplace(std::move(key), computation);
  return it->second;
}

}  // namespace shardrt
