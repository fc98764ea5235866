#include "client/computation_client.h"

#include <atomic>
#include <optional>
#include <thread>

#include "absl/strings/str_cat.h"
#include "base/metrics.h"
#include "base/status_macros.h"
#include "base/trace.h"
#include "client/program_signature.h"
#include "data/transfer.h"
#include "sharding/text.h"

namespace shardrt {
namespace {

// Per-argument cost of checking one argument and writing its column of the buffer matrix.
constexpr double kArgumentCostNsPerDevice = 40.0;
// Per-output cost of wrapping one output's buffers into Data.
constexpr double kOutputCostNsPerDevice = 60.0;

Counter* CounterNamed(absl::string_view name) { return GlobalMetrics().GetCounter(name); }

// Gives `slots` back to `limiter` once every event in `completions` has fired.
void ReleaseWhenComplete(const std::shared_ptr<ExecutionLimiter>& limiter,
                         std::vector<pjrt::Event> completions, int64_t slots) {
  struct Pending {
    std::shared_ptr<ExecutionLimiter> limiter;
    int64_t slots = 0;
    std::atomic<size_t> remaining{0};
  };
  auto pending = std::make_shared<Pending>();
  pending->limiter = limiter;
  pending->slots = slots;
  pending->remaining.store(completions.size());
  auto done = [pending](absl::Status) {
    if (pending->remaining.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      pending->limiter->Release(pending->slots);
    }
  };
  if (completions.empty()) limiter->Release(slots);
  for (pjrt::Event& event : completions) {
    if (!event.OnReady(done).ok()) done(absl::OkStatus());  // could not watch it: count it
  }
}

std::string ArgumentMismatch(const Computation& c, size_t i, const DataLayout& expected,
                             const DataLayout& got) {
  return absl::StrCat(c.name(), ": argument ", i, " expected ", expected.ToString(), ", got ",
                      got.ToString());
}

}  // namespace

absl::StatusOr<std::unique_ptr<ComputationClient>> ComputationClient::Create(
    std::shared_ptr<pjrt::Client> client, const ComputationClientOptions& options) {
  if (client == nullptr || client->addressable_devices().empty()) {
    return absl::InvalidArgumentError("ComputationClient needs a client with devices");
  }
  std::unique_ptr<ComputationClient> c(new ComputationClient());
  c->client_ = std::move(client);
  const int64_t parts = options.max_device_parts_in_flight == 0
                            ? c->client_->cpu_pool_threads()
                            : std::max<int64_t>(0, options.max_device_parts_in_flight);
  c->limiter_ = std::make_shared<ExecutionLimiter>(parts);
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
  pjrt::CompileOptions options = request.options;
  if (options.device_assignment.empty()) {
    SHARDRT_ASSIGN_OR_RETURN(
        std::vector<const pjrt::Device*> devices,
        DefaultDevices(static_cast<size_t>(std::max<int64_t>(
            1, options.num_replicas * options.num_partitions))));
    for (const pjrt::Device* d : devices) options.device_assignment.push_back(d->id);
  }
  std::string key = absl::StrCat(pjrt::EncodeCompileOptions(options), "\n", request.program);
  {
    absl::MutexLock lock(&cache_mu_);
    if (auto it = compile_cache_.find(key); it != compile_cache_.end()) {
      cached->Add(1);
      return it->second;
    }
  }
  ScopedTimer timer(compile_time);
  const std::string name = request.name.empty() ? "computation" : request.name;
  TraceSpan span("Compile", "client");
  span.AddArg("computation", name);
  SHARDRT_ASSIGN_OR_RETURN(std::optional<ProgramSignature> signature,
                           ParseProgramSignature(request.program));
  SHARDRT_ASSIGN_OR_RETURN(std::unique_ptr<pjrt::LoadedExecutable> executable,
                           pjrt::LoadedExecutable::Compile(client_, request.program,
                                                           pjrt::ProgramFormat::kMlir, options));
  SHARDRT_ASSIGN_OR_RETURN(
      ComputationPtr computation,
      Computation::Create(name, std::move(executable),
                          signature ? signature->parameters : std::vector<ArrayShape>{},
                          signature ? signature->results : std::vector<ArrayShape>{}));
  uncached->Add(1);
  absl::MutexLock lock(&cache_mu_);
  auto [it, inserted] = compile_cache_.emplace(std::move(key), computation);
  return it->second;
}

absl::StatusOr<std::vector<DataPtr>> ComputationClient::ExecuteReplicated(
    const Computation& computation, absl::Span<const DataPtr> arguments,
    const ExecuteReplicatedOptions& options) {
  static Metric* const time =
      GlobalMetrics().GetMetric(kExecuteReplicatedTime, MetricRepr::kTime);
  ScopedTimer timer(time);
  TraceSpan span("ExecuteReplicated", "client");
  span.AddArg("computation", computation.name());
  return Execute(computation, arguments, options);
}

absl::StatusOr<std::vector<DataPtr>> ComputationClient::ExecuteComputation(
    const Computation& computation, absl::Span<const DataPtr> arguments,
    const ExecuteReplicatedOptions& options) {
  static Metric* const time = GlobalMetrics().GetMetric(kExecuteTime, MetricRepr::kTime);
  if (computation.num_devices() != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ExecuteComputation: ", computation.name(), " runs on ", computation.num_devices(),
        " devices; use ExecuteReplicated"));
  }
  ScopedTimer timer(time);
  TraceSpan span("ExecuteComputation", "client");
  span.AddArg("computation", computation.name());
  return Execute(computation, arguments, options);
}

absl::StatusOr<std::vector<DataPtr>> ComputationClient::Execute(
    const Computation& computation, absl::Span<const DataPtr> arguments,
    const ExecuteReplicatedOptions& options) {
  const size_t num_args = computation.num_parameters();
  const size_t num_devices = computation.num_devices();
  const size_t num_outputs = computation.num_outputs();
  if (arguments.size() != num_args) {
    return absl::InvalidArgumentError(absl::StrCat(computation.name(), ": got ",
                                                   arguments.size(), " arguments, expected ",
                                                   num_args));
  }
  // Arguments resharded for this call live until the call returns.
  std::vector<DataPtr> resharded;
  absl::Span<const DataPtr> args = arguments;
  if (options.resharding == ArgumentResharding::kReshardCopy) {
    for (size_t i = 0; i < num_args; ++i) {
      const DataPtr& arg = arguments[i];
      if (arg != nullptr && arg->client() == client_ && arg->state() == Data::State::kReady &&
          !arg->layout().SameAs(*computation.parameter_layout(i))) {
        if (resharded.empty()) resharded.assign(arguments.begin(), arguments.end());
        SHARDRT_ASSIGN_OR_RETURN(resharded[i], Reshard(arg, computation.parameter_layout(i)));
      }
    }
    if (!resharded.empty()) args = resharded;
  }

  // 1. Check every argument against its cached layout and fill column i of the matrix.
  std::optional<TraceSpan> phase(std::in_place, "ArgumentPlumbing", "client");
  std::vector<PJRT_Buffer*> matrix(num_devices * num_args);
  SHARDRT_RETURN_IF_ERROR(ParallelFor(
      pool_, static_cast<int64_t>(num_args),
      ParallelCost{.per_item_ns = kArgumentCostNsPerDevice * static_cast<double>(num_devices)},
      [&](int64_t begin, int64_t end) -> absl::Status {
        for (int64_t i = begin; i < end; ++i) {
          const Data* arg = args[i].get();
          if (arg == nullptr) {
            return absl::InvalidArgumentError(
                absl::StrCat(computation.name(), ": argument ", i, " is null"));
          }
          if (arg->client() != client_) {
            return absl::InvalidArgumentError(absl::StrCat(
                computation.name(), ": argument ", i, " belongs to another client"));
          }
          const ShardBuffers* buffers = arg->buffers();
          if (buffers == nullptr) {
            absl::Status why = arg->Usable();
            return absl::Status(why.code(), absl::StrCat(computation.name(), ": argument ", i,
                                                         ": ", why.message()));
          }
          const DataLayout& expected = *computation.parameter_layout(i);
          if (arg->layout().fingerprint != expected.fingerprint) {
            return absl::InvalidArgumentError(
                ArgumentMismatch(computation, i, expected, arg->layout()));
          }
          PJRT_Buffer* const* handles = buffers->handles.data();
          for (size_t d = 0; d < num_devices; ++d) matrix[d * num_args + i] = handles[d];
        }
        return absl::OkStatus();
      }));

  // 2. One PJRT Execute for every device.
  phase.emplace("PjrtExecute", "client");
  std::vector<PJRT_Buffer* const*> argument_lists(num_devices);
  std::vector<PJRT_Buffer*> outputs(num_devices * num_outputs, nullptr);
  std::vector<PJRT_Buffer**> output_lists(num_devices);
  for (size_t d = 0; d < num_devices; ++d) {
    argument_lists[d] = matrix.data() + d * num_args;
    output_lists[d] = outputs.data() + d * num_outputs;
  }
  pjrt::ExecuteOptions exec_options;
  exec_options.non_donatable_input_indices = options.non_donatable_input_indices;
  // Multi-device launches take one limiter slot per device until every device has finished.
  const bool limited = limiter_->enabled() && num_devices > 1;
  std::vector<pjrt::Event> completions;
  if (limited) {
    SHARDRT_TRACE_SPAN("InFlightWait", "client");
    limiter_->Acquire(static_cast<int64_t>(num_devices));
  }
  absl::Status launched = computation.executable().ExecuteRaw(
      argument_lists.data(), num_devices, num_args, output_lists.data(), exec_options,
      limited ? &completions : nullptr);
  if (limited) {
    if (launched.ok()) {
      ReleaseWhenComplete(limiter_, std::move(completions), static_cast<int64_t>(num_devices));
    } else {
      limiter_->Release(static_cast<int64_t>(num_devices));
    }
  }
  SHARDRT_RETURN_IF_ERROR(launched);

  // 3. Donated arguments are spent.
  for (int64_t p : computation.donated_parameters()) {
    bool kept = false;
    for (int64_t n : options.non_donatable_input_indices) kept |= (n == p);
    if (!kept) args[p]->MarkDonated();
  }

  // 4. Wrap each output's per-device buffers with its cached layout.
  phase.emplace("OutputWrapping", "client");
  std::vector<DataPtr> results(num_outputs);
  const PJRT_Api* api = client_->api();
  SHARDRT_RETURN_IF_ERROR(ParallelFor(
      pool_, static_cast<int64_t>(num_outputs),
      ParallelCost{.per_item_ns = kOutputCostNsPerDevice * static_cast<double>(num_devices)},
      [&](int64_t begin, int64_t end) -> absl::Status {
        for (int64_t o = begin; o < end; ++o) {
          auto shards = std::make_shared<ShardBuffers>();
          shards->buffers.reserve(num_devices);
          shards->handles.reserve(num_devices);
          for (size_t d = 0; d < num_devices; ++d) {
            PJRT_Buffer* b = outputs[d * num_outputs + o];
            shards->handles.push_back(b);
            shards->buffers.emplace_back(api, b);
          }
          results[o] = Data::CreateUnchecked(client_, computation.output_layout(o),
                                             std::move(shards));
        }
        return absl::OkStatus();
      }));
  return results;
}

absl::StatusOr<DataPtr> ComputationClient::ReshardData(const DataPtr& data,
                                                       const Sharding& sharding) {
  static Counter* const counter = CounterNamed(kReshardData);
  counter->Add(1);
  return ReshardTo(data, sharding);
}

absl::StatusOr<DataPtr> ComputationClient::ReplicateShardedData(const DataPtr& data) {
  static Counter* const counter = CounterNamed(kReplicateShardedData);
  counter->Add(1);
  return ReshardTo(data, Sharding::Replicated());
}

absl::StatusOr<DataPtr> ComputationClient::ReshardTo(const DataPtr& data,
                                                     const Sharding& sharding) {
  if (data == nullptr) return absl::InvalidArgumentError("resharding null data");
  SHARDRT_ASSIGN_OR_RETURN(
      std::shared_ptr<const DataLayout> target,
      DataLayout::Create(data->shape(), sharding, data->layout().devices));
  return Reshard(data, std::move(target));
}

absl::StatusOr<DataPtr> ComputationClient::Reshard(const DataPtr& data,
                                                   std::shared_ptr<const DataLayout> target) {
  SHARDRT_RETURN_IF_ERROR(data->Await());
  const DataLayout& source = data->layout();
  if (source.global != target->global) {
    return absl::InvalidArgumentError(absl::StrCat("cannot reshard ", source.ToString(), " to ",
                                                   target->ToString()));
  }
  if (source.devices != target->devices) {
    return absl::InvalidArgumentError(
        absl::StrCat("resharding across device sets is not supported: ", source.ToString(),
                     " to ", target->ToString()));
  }
  const std::string tensor = absl::StrCat(
      "tensor<",
      [&] {
        std::string dims;
        for (int64_t d : source.global.dims) absl::StrAppend(&dims, d, "x");
        return dims;
      }(),
      source.global.type == ElementType::kPred ? "i1"
      : ElementTypeName(source.global.type)[0] == 's'
          ? absl::StrCat("i", ElementTypeName(source.global.type).substr(1))
      : ElementTypeName(source.global.type)[0] == 'u'
          ? absl::StrCat("ui", ElementTypeName(source.global.type).substr(1))
          : std::string(ElementTypeName(source.global.type)),
      ">");
  const size_t n = source.devices.size();
  const std::string program = absl::StrCat(
      "module @reshard attributes {mhlo.num_partitions = ", n,
      " : i32, mhlo.num_replicas = 1 : i32} {\n"
      "  func.func public @main(%arg0: ", tensor, " {mhlo.sharding = \"",
      source.sharding.ToString(), "\"}) -> (", tensor, " {mhlo.sharding = \"",
      target->sharding.ToString(), "\"}) {\n    return %arg0 : ", tensor, "\n  }\n}\n");
  CompileRequest request;
  request.name = "reshard";
  request.program = program;
  request.options.num_partitions = static_cast<int64_t>(n);
  for (const pjrt::Device* d : source.devices) request.options.device_assignment.push_back(d->id);
  SHARDRT_ASSIGN_OR_RETURN(ComputationPtr computation, Compile(request));
  ExecuteReplicatedOptions options;
  options.non_donatable_input_indices = {0};
  SHARDRT_ASSIGN_OR_RETURN(std::vector<DataPtr> out, Execute(*computation, {&data, 1}, options));
  return out[0];
}

}  // namespace shardrt
