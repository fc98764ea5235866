#include "shardrt/client/computation_client.h"

#include <algorithm>
#include <optional>
#include <thread>

#include "absl/strings/str_cat.h"
#include "shardrt/base/limits.h"
#include "shardrt/base/metrics.h"
#include "shardrt/base/status_macros.h"
#include "shardrt/base/trace.h"
#include "shardrt/program/program_text.h"
#include "client/execution_limiter.h"
#include "client/persistent_cache_store.h"
#include "data/transfer.h"

namespace shardrt {
namespace {

Counter* CounterNamed(absl::string_view name) { return GlobalMetrics().GetCounter(name); }

cache::ArrayShapeProto ToProto(const ArrayShape& shape) {
  cache::ArrayShapeProto p;
  p.set_element_type(static_cast<int32_t>(shape.type));
  for (int64_t d : shape.dims) p.add_dims(d);
  return p;
}

// Checked, since an entry is outside input (its checksum only says it is what was written).
absl::StatusOr<ArrayShape> FromProto(const cache::ArrayShapeProto& p) {
  ArrayShape shape{static_cast<ElementType>(p.element_type()), {p.dims().begin(), p.dims().end()}};
  if (ElementSizeInBytes(shape.type) <= 0 || int64_t(shape.dims.size()) > limits::kMaxRank ||
      std::any_of(shape.dims.begin(), shape.dims.end(), [](int64_t d) { return d < 0; })) {
    return absl::DataLossError("a shape of the entry is not valid");
  }
  return shape;
}

absl::StatusOr<std::vector<ArrayShape>> FromProto(
    const google::protobuf::RepeatedPtrField<cache::ArrayShapeProto>& shapes) {
  std::vector<ArrayShape> out;
  for (const cache::ArrayShapeProto& p : shapes) {
    SHARDRT_ASSIGN_OR_RETURN(ArrayShape s, FromProto(p));
    out.push_back(std::move(s));
  }
  return out;
}

// The facts of a compiled computation, for the persistent cache.
cache::CompileCacheEntry EntryOf(const std::string& key, const std::string& name,
                                 const pjrt::LoadedExecutable& exe, const GlobalShapes& globals) {
  const pjrt::ExecutableSignature& sig = exe.signature();
  cache::CompileCacheEntry e;
  e.set_key(key);
  e.set_name(name);
  e.set_executable_name(exe.name());
  e.set_num_replicas(sig.num_replicas);
  e.set_num_partitions(sig.num_partitions);
  for (const ArrayShape& s : sig.parameters) *e.add_parameters() = ToProto(s);
  for (const ArrayShape& s : sig.outputs) *e.add_outputs() = ToProto(s);
  for (const std::string& s : sig.parameter_shardings) e.add_parameter_shardings(s);
  for (const std::string& s : sig.output_shardings) e.add_output_shardings(s);
  for (const pjrt::ParameterAlias& a : sig.aliases) {
    cache::AliasProto* alias = e.add_aliases();
    alias->set_output_index(a.output_index);
    alias->set_parameter_index(a.parameter_index);
  }
  for (const pjrt::Device* d : sig.devices) e.add_device_ids(d->id);
  e.set_collective_free(sig.collective_free);
  for (const ArrayShape& s : globals.parameters) *e.add_global_parameters() = ToProto(s);
  for (const ArrayShape& s : globals.results) *e.add_global_results() = ToProto(s);
  return e;
}

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
  if (!options.persistent_cache.directory.empty()) {
    absl::StatusOr<std::unique_ptr<PersistentCacheStore>> store =
        PersistentCacheStore::Open(options.persistent_cache,
                                     CacheEnvironment::Of(*c->client_));
    if (store.ok()) {
      c->persistent_cache_ = std::move(*store);
    } else {
      CounterNamed(kPersistentCacheError)->Add(1);  // no cache; compiling still works
    }
  }
  return c;
}

ComputationClient::~ComputationClient() {
  limiter_->WaitIdle();  // executions still running hold client state through their callbacks
  {
    MutexLock lock(cache_mu_);
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

absl::StatusOr<DataPtr> ComputationClient::TransferToDevice(
    const HostArrayView& array, const std::shared_ptr<const DataLayout>& layout) {
  SHARDRT_TRACE_SPAN("TransferToDevice", "transfer");
  return shardrt::TransferToDevice(client_, pool_, array, layout);
}

absl::StatusOr<DataPtr> ComputationClient::TransferShardsToDevice(
    std::shared_ptr<const DataLayout> layout, absl::Span<const std::span<const std::byte>> shards) {
  SHARDRT_TRACE_SPAN("TransferShardsToDevice", "transfer");
  return shardrt::TransferShardsToDevice(client_, pool_, std::move(layout), shards);
}

absl::StatusOr<DataPtr> ComputationClient::AssembleFromShards(
    std::shared_ptr<const DataLayout> layout,
    absl::FunctionRef<absl::Status(size_t device, std::span<std::byte> into)> produce,
    double produce_ns_per_byte) {
  SHARDRT_TRACE_SPAN("AssembleFromShards", "transfer");
  return shardrt::AssembleFromShards(client_, pool_, std::move(layout), produce,
                                     produce_ns_per_byte);
}

absl::StatusOr<std::vector<HostArray>> ComputationClient::TransferFromDevice(
    absl::Span<const DataPtr> data) {
  SHARDRT_TRACE_SPAN("TransferFromDevice", "transfer");
  return shardrt::TransferFromDevice(pool_, data);
}

absl::Status ComputationClient::TransferFromDevice(absl::Span<const DataPtr> data,
                                                   absl::Span<const std::span<std::byte>> into) {
  SHARDRT_TRACE_SPAN("TransferFromDevice", "transfer");
  return TransferFromDeviceInto(pool_, data, into);
}

DataPtr ComputationClient::CreateDataPlaceholder(std::shared_ptr<const DataLayout> layout) const {
  return Data::CreatePlaceholder(client_, std::move(layout));
}

absl::StatusOr<ComputationClient::KeyedRequest> ComputationClient::Fingerprint(
    const CompileRequest& request) {
  KeyedRequest keyed;
  keyed.name = request.name.empty() ? "computation" : request.name;
  // Before the program is copied into the cache key, or read.
  if (static_cast<int64_t>(request.program.size()) > limits::kMaxFileBytes) {
    return absl::InvalidArgumentError(absl::StrCat(keyed.name, ": the program has ",
                                                   request.program.size(),
                                                   " bytes; the limit is ", limits::kMaxFileBytes));
  }
  keyed.options = request.options;
  pjrt::CompileOptions& options = keyed.options;
  if (options.device_assignment.empty()) {
    SHARDRT_ASSIGN_OR_RETURN(
        std::vector<const pjrt::Device*> devices,
        DefaultDevices(static_cast<size_t>(std::max<int64_t>(
            1, options.num_replicas * options.num_partitions))));
    for (const pjrt::Device* d : devices) options.device_assignment.push_back(d->id);
  }
  // The request's fingerprint: everything of it that can change the computation.
  Sha256 request_hash;
  request_hash.Field(pjrt::EncodeCompileOptions(options)).Field(request.program);
  if (request.global_shapes.has_value()) {
    for (const auto* shapes : {&request.global_shapes->parameters, &request.global_shapes->results}) {
      std::string text;
      for (const ArrayShape& shape : *shapes) absl::StrAppend(&text, ShapeToString(shape), ";");
      request_hash.Field(text);
    }
  }
  keyed.key = request_hash.Finish();
  return keyed;
}

absl::StatusOr<bool> ComputationClient::IsCompiled(const CompileRequest& request) {
  SHARDRT_ASSIGN_OR_RETURN(KeyedRequest keyed, Fingerprint(request));
  return IsCompiled(keyed);
}

bool ComputationClient::IsCompiled(const KeyedRequest& keyed) {
  {
    MutexLock lock(cache_mu_);
    if (compile_cache_.contains(keyed.key)) return true;
  }
  return persistent_cache_ != nullptr &&
         persistent_cache_->Contains(persistent_cache_->Key(keyed.key));
}

absl::Status ComputationClient::Precompile(const CompileRequest& request) {
  if (persistent_cache_ == nullptr) return Compile(request).status();
  SHARDRT_ASSIGN_OR_RETURN(KeyedRequest keyed, Fingerprint(request));
  if (IsCompiled(keyed)) return absl::OkStatus();
  SHARDRT_ASSIGN_OR_RETURN(ComputationPtr computation, Compile(request, std::move(keyed)));
  EvictCompiled(*computation);
  return absl::OkStatus();
}

absl::StatusOr<ComputationPtr> ComputationClient::Compile(const CompileRequest& request) {
  SHARDRT_ASSIGN_OR_RETURN(KeyedRequest keyed, Fingerprint(request));
  return Compile(request, std::move(keyed));
}

absl::StatusOr<ComputationPtr> ComputationClient::Compile(const CompileRequest& request,
                                                          KeyedRequest keyed) {
  static Metric* const compile_time = GlobalMetrics().GetMetric(kCompileTime, MetricRepr::kTime);
  static Counter* const cached = CounterNamed(kCachedCompile);
  static Counter* const uncached = CounterNamed(kUncachedCompile);
  const std::string& name = keyed.name;
  pjrt::CompileOptions& options = keyed.options;
  const std::string& key = keyed.key;
  {
    MutexLock lock(cache_mu_);
    if (auto it = compile_cache_.find(key); it != compile_cache_.end()) {
      cached->Add(1);
      return it->second;
    }
  }
  TraceSpan span("Compile", "client");  // a persistent cache hit nests its load here
  span.AddArg("computation", name);
  std::string persistent_key;
  if (persistent_cache_ != nullptr) {
    persistent_key = persistent_cache_->Key(key);
    if (std::optional<ComputationPtr> loaded = LoadPersistent(name, persistent_key)) {
      MutexLock lock(cache_mu_);
      return compile_cache_.emplace(key, *loaded).first->second;
    }
  }
  ScopedTimer timer(compile_time);
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
  std::optional<cache::CompileCacheEntry> entry;
  if (persistent_cache_ != nullptr) {
    absl::StatusOr<std::string> bytes = executable->Serialize();
    if (bytes.ok()) {
      entry = EntryOf(persistent_key, name, *executable, globals);
      entry->set_executable(*std::move(bytes));
    } else {
      CounterNamed(kPersistentCacheError)->Add(1);
    }
  }
  SHARDRT_ASSIGN_OR_RETURN(ComputationPtr computation,
                           Computation::Create(name, std::move(executable), globals.parameters,
                                               globals.results));
  uncached->Add(1);
  if (entry.has_value()) persistent_cache_->Store(*entry);
  MutexLock lock(cache_mu_);
  auto [it, inserted] = compile_cache_.emplace(key, computation);
  return it->second;
}

bool ComputationClient::EvictCompiled(const Computation& computation) {
  MutexLock lock(cache_mu_);
  return absl::erase_if(compile_cache_, [&](const auto& entry) {
           return entry.second.get() == &computation;
         }) > 0;
}

std::optional<ComputationPtr> ComputationClient::LoadPersistent(const std::string& name,
                                                                const std::string& key) {
  static Metric* const load_time =
      GlobalMetrics().GetMetric(kPersistentCacheLoadTime, MetricRepr::kTime);
  static Counter* const hits = CounterNamed(kPersistentCacheHit);
  static Counter* const misses = CounterNamed(kPersistentCacheMiss);
  ScopedTimer timer(load_time);
  TraceSpan span("PersistentCacheLoad", "client");
  span.AddArg("computation", name);
  std::optional<cache::CompileCacheEntry> entry = persistent_cache_->Load(key);
  if (!entry.has_value()) {
    misses->Add(1);
    span.AddArg("result", "miss");
    return std::nullopt;
  }
  // The facts, checked as any outside input; an entry that does not hold together, or that the
  // plugin refuses, is discarded and the program compiled. One refusal is not damage: a program
  // calling a custom kernel (an FFI handler) this process has not registered, which the plugin
  // reports as NotFound. The entry stays for processes that register it, and the compile that
  // follows reports the missing handler as a fresh compile would.
  auto build = [&]() -> absl::StatusOr<ComputationPtr> {
    pjrt::ExecutableSignature sig;
    sig.num_replicas = entry->num_replicas();
    sig.num_partitions = entry->num_partitions();
    SHARDRT_ASSIGN_OR_RETURN(sig.parameters, FromProto(entry->parameters()));
    SHARDRT_ASSIGN_OR_RETURN(sig.outputs, FromProto(entry->outputs()));
    sig.parameter_shardings.assign(entry->parameter_shardings().begin(),
                                   entry->parameter_shardings().end());
    sig.output_shardings.assign(entry->output_shardings().begin(),
                                entry->output_shardings().end());
    if (sig.parameter_shardings.size() != sig.parameters.size() ||
        sig.output_shardings.size() != sig.outputs.size()) {
      return absl::DataLossError("entry: sharding and shape counts differ");
    }
    for (const cache::AliasProto& a : entry->aliases()) {
      sig.aliases.push_back({a.output_index(), a.parameter_index()});
    }
    for (int64_t id : entry->device_ids()) {
      SHARDRT_ASSIGN_OR_RETURN(const pjrt::Device* device, client_->DeviceById(id));
      sig.devices.push_back(device);
    }
    sig.collective_free = entry->collective_free();
    SHARDRT_ASSIGN_OR_RETURN(std::vector<ArrayShape> global_parameters,
                             FromProto(entry->global_parameters()));
    SHARDRT_ASSIGN_OR_RETURN(std::vector<ArrayShape> global_results,
                             FromProto(entry->global_results()));
    SHARDRT_ASSIGN_OR_RETURN(std::unique_ptr<pjrt::LoadedExecutable> executable,
                             pjrt::LoadedExecutable::Deserialize(client_, entry->executable(),
                                                                 std::move(sig),
                                                                 entry->executable_name()));
    return Computation::Create(name, std::move(executable), global_parameters, global_results);
  };
  absl::StatusOr<ComputationPtr> computation = build();
  if (!computation.ok()) {
    const bool unresolved = absl::IsNotFound(computation.status());
    if (!unresolved) persistent_cache_->Discard(key);
    misses->Add(1);
    span.AddArg("result", unresolved ? "unresolved" : "corrupt");
    return std::nullopt;
  }
  hits->Add(1);
  span.AddArg("result", "hit");
  return *computation;
}

}  // namespace shardrt
