// Per-call cost of running an SPMD program on sharded data, four ways, on the real plugin:
//
//   raw             the floor: one PJRT Execute on argument lists built once in advance;
//                   outputs awaited and destroyed.
//   shardrt         ComputationClient::ExecuteReplicated: sharded Data in, sharded Data out
//                   (the client's own pool, ParallelFor by its cost model); outputs awaited,
//                   then released together (Data::ReleaseAll; --shardrt-drop-each drops them
//                   one at a time instead).
//   shardrt-serial  the same with a one-thread pool, so every ParallelFor runs inline: what the
//                   pool buys.
//   prerefactor     the design ExecuteReplicated replaced (PyTorch/XLA before pytorch/xla#5737),
//                   rebuilt here: an input handler turns sharded arguments into a
//                   devices x arguments matrix of per-device data, one task per device converts
//                   them to buffer lists, a mutex + condition-variable counter waits for them;
//                   after Execute a serial loop on the caller wraps each device's outputs into
//                   per-device data, and an output handler gathers each output's shards into
//                   sharded data.
//
// The program is `x + 1` on each of k arguments, f32[8 * D, 128] split on dim 0 (one 4 KiB shard
// per device), k outputs with the same sharding. Every arm awaits the same thing: output 0's
// buffer on every device (on the CPU plugin all outputs of a device's launch become ready
// together), and destroys all outputs before the call counts as done. The peers
// (bench/peers/*.py) await output 0 too, for the same reason: awaiting all k outputs would add
// a per-output cost of the wait API (k x D ready events here, k Python calls in JAX) that says
// nothing about execution.
//
// In serve mode a `run` of a shardrt arm also returns the ExecuteReplicatedTime samples of its
// calls (the library's metric: ExecuteReplicated from entry to return, without the wait), to
// put next to PyTorch/XLA's metric of the same name.
//
// Two ways to run it:
//   build/bench/execute_bench [Google Benchmark flags]     every arm x D in {1,2,4,8} x
//                                                          k in {1,10,100,1000}
//   build/bench/execute_bench --serve --devices D          the line protocol bench/run drives:
//       setup K | run K ARM N | mix K N SEED ARM... | free K | info | threads | quit
//       (`run`: N calls of one arm; `mix`: N calls of each arm, interleaved call by call in an
//       order shuffled afresh for every call, seeded: the machine's drift falls on every arm
//       alike, which narrows the paired ratios' intervals; it also reports how many tasks the
//       shardrt arm's calls gave its pool: 0 when the cost model ran everything inline)
//   --raw-destroy-output-major                             raw frees outputs in [o][d] order
//   --shardrt-drop-each                                    shardrt drops outputs one by one
#include <benchmark/benchmark.h>

#include <cstring>
#include <filesystem>
#include <optional>
#include <random>
#include <thread>
#include <unordered_map>

#include "absl/strings/numbers.h"
#include "absl/strings/str_join.h"
#include "shardrt/base/metrics.h"
#include "shardrt/base/mutex.h"
#include "shardrt/base/status_macros.h"
#include "shardrt/base/thread_pool.h"
#include "bench_util.h"
#include "shardrt/client/computation.h"
#include "shardrt/pjrt/buffer.h"
#include "shardrt/pjrt/executable.h"

namespace shardrt::bench {
namespace {

// ------------------------------------------------------------------------------------------
// The pre-refactor design, faithful in structure (types, allocations, tasks, waits) to
// PyTorch/XLA's ShardingUtil::InputHandler / PjRtComputationClient::ExecuteReplicated /
// ShardingUtil::OutputHandler before pytorch/xla#5737. Two simplifications favour it: the
// output sharding specs are extracted once (the graph executor recomputed them per call), and
// devices are matched by id instead of parsing device strings.
namespace prerefactor {

class OldData {
 public:
  virtual ~OldData() = default;
};
using OldDataPtr = std::shared_ptr<OldData>;

// One device's buffer (PjRtData): a device and a shared buffer.
class DeviceData : public OldData {
 public:
  DeviceData(const pjrt::Device* device, std::shared_ptr<PJRT_Buffer> buffer)
      : device(device), buffer(std::move(buffer)) {}
  const pjrt::Device* device;
  std::shared_ptr<PJRT_Buffer> buffer;
};

// Sharded data (PjRtShardedData): global shape, sharding and one DeviceData per device.
class ShardedData : public OldData {
 public:
  ShardedData(ArrayShape shape, Sharding sharding, std::vector<OldDataPtr> shards)
      : shape(std::move(shape)), sharding(std::move(sharding)), shards(std::move(shards)) {}
  ArrayShape shape;
  Sharding sharding;
  std::vector<OldDataPtr> shards;
};

// What the graph executor knew about each output.
struct OutputSpec {
  ArrayShape shape;
  Sharding sharding;
};

// A mutex + condition-variable completion counter (util::MultiWait).
class MultiWait {
 public:
  explicit MultiWait(size_t count) : count_(count) {}
  void Done() ABSL_LOCKS_EXCLUDED(mu_) {
    MutexLock lock(mu_);
    if (--count_ == 0) cv_.NotifyAll();
  }
  void Wait() ABSL_LOCKS_EXCLUDED(mu_) {
    MutexLock lock(mu_);
    while (count_ != 0) cv_.Wait(lock);
  }

 private:
  Mutex mu_;
  CondVar cv_;
  size_t count_ ABSL_GUARDED_BY(mu_);
};

// Deletes a PJRT buffer when the last DeviceData holding it goes.
struct BufferDeleter {
  const PJRT_Api* api;
  void operator()(PJRT_Buffer* b) const { pjrt::Buffer(api, b).Reset(); }
};

class Runtime {
 public:
  Runtime(ThreadPool* pool, const PJRT_Api* api) : pool_(pool), api_(api) {}

  // ShardingUtil::InputHandler: sharded arguments -> [device][argument] shards, one task per
  // device.
  std::vector<std::vector<OldDataPtr>> InputHandler(
      const std::vector<OldDataPtr>& arguments,
      const std::vector<const pjrt::Device*>& devices) const {
    std::vector<std::vector<OldDataPtr>> by_device(devices.size(),
                                                   std::vector<OldDataPtr>(arguments.size()));
    std::unordered_map<int64_t, size_t> device_index;
    for (size_t i = 0; i < devices.size(); ++i) device_index[devices[i]->id] = i;
    MultiWait wait(devices.size());
    for (size_t i = 0; i < devices.size(); ++i) {
      pool_->Schedule([&, i] {
        for (size_t a = 0; a < arguments.size(); ++a) {
          auto* sharded = dynamic_cast<ShardedData*>(arguments[a].get());
          const OldDataPtr& shard = sharded->shards[i];
          auto* device_data = dynamic_cast<DeviceData*>(shard.get());
          by_device[device_index.at(device_data->device->id)][a] = shard;
        }
        wait.Done();
      });
    }
    wait.Wait();
    return by_device;
  }

  // PjRtComputationClient::ExecuteReplicated before the refactor: [device][argument] data in,
  // [device][output] data out.
  std::vector<std::vector<OldDataPtr>> ExecuteReplicated(
      const Computation& computation, const std::vector<std::vector<OldDataPtr>>& arguments,
      const std::vector<const pjrt::Device*>& devices) const {
    const size_t num_devices = devices.size();
    const size_t num_outputs = computation.num_outputs();
    std::vector<std::vector<PJRT_Buffer*>> argument_handles(num_devices);
    {
      MultiWait wait(num_devices);
      for (size_t d = 0; d < num_devices; ++d) {
        pool_->Schedule([&, d] {
          std::vector<PJRT_Buffer*> buffers;
          buffers.reserve(arguments[d].size());
          for (const OldDataPtr& argument : arguments[d]) {
            auto* data = dynamic_cast<DeviceData*>(argument.get());
            if (data->device != devices[d]) std::abort();  // XLA_CHECK_EQ on the device
            buffers.push_back(data->buffer.get());
          }
          argument_handles[d] = std::move(buffers);
          wait.Done();
        });
      }
      wait.Wait();
    }
    std::vector<PJRT_Buffer* const*> lists(num_devices);
    std::vector<std::vector<PJRT_Buffer*>> results(num_devices,
                                                   std::vector<PJRT_Buffer*>(num_outputs));
    std::vector<PJRT_Buffer**> output_lists(num_devices);
    for (size_t d = 0; d < num_devices; ++d) {
      lists[d] = argument_handles[d].data();
      output_lists[d] = results[d].data();
    }
    CheckOk(computation.executable().ExecuteRaw(lists.data(), num_devices,
                                                argument_handles[0].size(), output_lists.data(),
                                                {}, nullptr),
            "prerefactor execute");
    // Output wrapping: a serial loop on the caller, as in PjRtComputationClient of
    // Aug-Nov 2023 (only the argument side used per-device tasks). An earlier version of this
    // arm ran one pool task per device here, which the old code never did, and so charged it a
    // schedule and a mutex/condition-variable wait that made shardrt look better.
    std::vector<std::vector<OldDataPtr>> data_handles;
    data_handles.reserve(num_devices);
    for (size_t d = 0; d < num_devices; ++d) {
      std::vector<OldDataPtr> datas;
      datas.reserve(num_outputs);
      for (PJRT_Buffer* b : results[d]) {
        datas.push_back(std::make_shared<DeviceData>(
            devices[d], std::shared_ptr<PJRT_Buffer>(b, BufferDeleter{api_})));
      }
      data_handles.push_back(std::move(datas));
    }
    return data_handles;
  }

  // ShardingUtil::OutputHandler: [device][output] -> one sharded data per output.
  std::vector<OldDataPtr> OutputHandler(const std::vector<std::vector<OldDataPtr>>& results,
                                        const std::vector<OutputSpec>& specs) const {
    std::vector<OldDataPtr> outputs;
    outputs.reserve(specs.size());
    for (size_t o = 0; o < specs.size(); ++o) {
      std::vector<OldDataPtr> shards;
      shards.reserve(results.size());
      for (size_t d = 0; d < results.size(); ++d) shards.push_back(results[d][o]);
      outputs.push_back(
          std::make_shared<ShardedData>(specs[o].shape, specs[o].sharding, std::move(shards)));
    }
    return outputs;
  }

 private:
  ThreadPool* pool_;
  const PJRT_Api* api_;
};

}  // namespace prerefactor

// ------------------------------------------------------------------------------------------

// --raw-destroy-output-major: the raw arm destroys its outputs output by output (each output's
// buffer on every device), the order in which destroying sharded outputs frees them, instead
// of the device-major order the plugin returned them in. Shows what that order costs.
bool raw_destroy_output_major = false;
// --shardrt-drop-each: the shardrt arms drop their outputs one at a time (each output's buffers
// on every device, output after output) instead of releasing them together with
// Data::ReleaseAll, which frees them device by device as raw does.
bool shardrt_drop_each = false;

enum class Arm { kRaw, kShardrt, kSerial, kPrerefactor };
constexpr Arm kArms[] = {Arm::kRaw, Arm::kShardrt, Arm::kSerial, Arm::kPrerefactor};

const char* ArmName(Arm arm) {
  switch (arm) {
    case Arm::kRaw: return "raw";
    case Arm::kShardrt: return "shardrt";
    case Arm::kSerial: return "shardrt-serial";
    case Arm::kPrerefactor: return "prerefactor";
  }
  return "?";
}

std::optional<Arm> ArmByName(const std::string& name) {
  for (Arm a : kArms) {
    if (name == ArmName(a)) return a;
  }
  return std::nullopt;
}

// Everything per device count: the PJRT client and the three runtimes over it.
struct Runtimes {
  int devices = 0;
  std::shared_ptr<pjrt::Client> client;
  ComputationClient* shardrt = nullptr;  // the runtime's (its pool: one thread per core)
  std::unique_ptr<ThreadPool> serial_pool;            // one thread: ParallelFor runs inline
  std::unique_ptr<ComputationClient> shardrt_serial;
  std::unique_ptr<ThreadPool> old_pool;               // one thread per core, like the old pool
  std::unique_ptr<prerefactor::Runtime> old;
};

Runtimes& RuntimesFor(int devices) {
  static auto* all = new std::map<int, std::unique_ptr<Runtimes>>();
  auto& r = (*all)[devices];
  if (r != nullptr) return *r;
  r = std::make_unique<Runtimes>();
  r->devices = devices;
  auto runtime = RuntimeFor(devices);
  CheckOk(runtime.status(), "runtime");
  r->client = (*runtime)->pjrt_client();
  r->shardrt = &(*runtime)->client();
  r->serial_pool = std::make_unique<ThreadPool>(1);
  // The serial arm: the same client settings, but a one-thread pool (all plumbing inline).
  auto serial = ComputationClient::Create(
      r->client, {.pool = r->serial_pool.get(),
                  .max_device_parts_in_flight = (*runtime)->plugin_threads()});
  CheckOk(serial.status(), "ComputationClient (serial)");
  r->shardrt_serial = std::move(*serial);
  r->old_pool = std::make_unique<ThreadPool>(
      std::max(1, static_cast<int>(std::thread::hardware_concurrency())));
  r->old = std::make_unique<prerefactor::Runtime>(r->old_pool.get(), r->client->api());
  return *r;
}

// One (D, k) case: the compiled program, its uploaded arguments and each arm's prepared state.
class Case {
 public:
  static absl::StatusOr<std::unique_ptr<Case>> Create(Runtimes& rt, int k) {
    std::unique_ptr<Case> c(new Case(rt, k));
    SHARDRT_RETURN_IF_ERROR(c->Init());
    return c;
  }

  double compile_seconds() const { return compile_seconds_; }
  // Tasks the shardrt arm's pool has been given so far (ParallelFor's helper blocks).
  int64_t ShardrtPoolTasks() const {
    const ThreadPool* pool = rt_.shardrt->pool();
    return pool == nullptr ? 0 : pool->tasks_scheduled();
  }

  // One call of `arm`: execute, await, destroy the outputs.
  void Run(Arm arm) {
    switch (arm) {
      case Arm::kRaw: RunRaw(); break;
      case Arm::kShardrt: RunShardrt(*rt_.shardrt); break;
      case Arm::kSerial: RunShardrt(*rt_.shardrt_serial); break;
      case Arm::kPrerefactor: RunPrerefactor(); break;
    }
  }

  // Runs every arm once and checks output values (output i = input i + 1 = i + 1).
  absl::Status Verify() {
    // shardrt (and its serial twin): every output, downloaded whole.
    for (ComputationClient* cc : {rt_.shardrt, rt_.shardrt_serial.get()}) {
      SHARDRT_ASSIGN_OR_RETURN(std::vector<DataPtr> out, cc->ExecuteReplicated(*comp_, args_));
      SHARDRT_ASSIGN_OR_RETURN(std::vector<HostArray> host, cc->TransferFromDevice(out));
      for (int i = 0; i < k_; ++i) {
        const size_t n = host[i].data.size() / sizeof(float);
        if (n != static_cast<size_t>(kRows * rt_.devices * kCols)) {
          return absl::InternalError("wrong output size");
        }
        for (size_t j : {size_t{0}, n - 1}) {
          float v;
          std::memcpy(&v, host[i].data.data() + j * sizeof(float), sizeof(float));
          if (v != static_cast<float>(i + 1)) {
            return absl::InternalError(absl::StrCat("shardrt output ", i, " is ", v));
          }
        }
      }
    }
    // raw: the last output on every device.
    const PJRT_Api* api = rt_.client->api();
    SHARDRT_RETURN_IF_ERROR(comp_->executable().ExecuteRaw(
        raw_lists_.data(), rt_.devices, k_, raw_out_lists_.data(), {}, nullptr));
    std::vector<pjrt::Buffer> owned;
    for (PJRT_Buffer* b : raw_outputs_) owned.emplace_back(api, b);
    for (int d = 0; d < rt_.devices; ++d) {
      SHARDRT_RETURN_IF_ERROR(CheckShard(owned[d * k_ + k_ - 1].handle(), k_));
    }
    owned.clear();
    // prerefactor: the last output's shards.
    auto by_device = rt_.old->InputHandler(old_args_, comp_->devices());
    auto outputs = rt_.old->OutputHandler(
        rt_.old->ExecuteReplicated(*comp_, by_device, comp_->devices()), old_specs_);
    auto* last = dynamic_cast<prerefactor::ShardedData*>(outputs.back().get());
    for (const auto& shard : last->shards) {
      SHARDRT_RETURN_IF_ERROR(
          CheckShard(dynamic_cast<prerefactor::DeviceData*>(shard.get())->buffer.get(), k_));
    }
    return absl::OkStatus();
  }

 private:
  Case(Runtimes& rt, int k) : rt_(rt), k_(k) {}

  absl::Status Init() {
    const int64_t t0 = NowNs();
    CompileRequest request;
    request.name = absl::StrCat("add_one_", k_);
    request.program = AddOneProgram(rt_.devices, k_);
    request.options.num_partitions = rt_.devices;
    SHARDRT_ASSIGN_OR_RETURN(comp_, rt_.shardrt->Compile(request));
    compile_seconds_ = static_cast<double>(NowNs() - t0) * 1e-9;

    // Argument i holds the value i everywhere.
    const int64_t elements = kRows * rt_.devices * kCols;
    std::vector<std::vector<float>> host(k_);
    std::vector<HostArrayView> views;
    std::vector<std::shared_ptr<const DataLayout>> layouts;
    for (int i = 0; i < k_; ++i) {
      host[i].assign(elements, static_cast<float>(i));
      views.push_back(HostArrayView{ElementType::kF32,
                                    {kRows * rt_.devices, kCols},
                                    std::as_bytes(std::span<const float>(host[i]))});
      layouts.push_back(comp_->parameter_layout(i));
    }
    SHARDRT_ASSIGN_OR_RETURN(args_, rt_.shardrt->TransferToDevice(views, layouts));

    // raw: the argument matrix and output rows, built once.
    const size_t d_count = rt_.devices;
    raw_matrix_.resize(d_count * k_);
    for (int i = 0; i < k_; ++i) {
      for (size_t d = 0; d < d_count; ++d) {
        raw_matrix_[d * k_ + i] = args_[i]->buffers()->handles[d];
      }
    }
    raw_outputs_.assign(d_count * comp_->num_outputs(), nullptr);
    for (size_t d = 0; d < d_count; ++d) {
      raw_lists_.push_back(raw_matrix_.data() + d * k_);
      raw_out_lists_.push_back(raw_outputs_.data() + d * comp_->num_outputs());
    }

    // prerefactor: the same buffers as per-device data inside sharded data (not owned: the
    // shardrt Data keep them alive).
    for (int i = 0; i < k_; ++i) {
      std::vector<prerefactor::OldDataPtr> shards;
      for (size_t d = 0; d < d_count; ++d) {
        shards.push_back(std::make_shared<prerefactor::DeviceData>(
            comp_->devices()[d],
            std::shared_ptr<PJRT_Buffer>(args_[i]->buffers()->handles[d], [](PJRT_Buffer*) {})));
      }
      old_args_.push_back(std::make_shared<prerefactor::ShardedData>(
          args_[i]->shape(), args_[i]->sharding(), std::move(shards)));
    }
    for (size_t o = 0; o < comp_->num_outputs(); ++o) {
      old_specs_.push_back({comp_->output_layout(o)->global, comp_->output_layout(o)->sharding});
    }
    return absl::OkStatus();
  }

  absl::Status CheckShard(PJRT_Buffer* b, int k) const {
    std::vector<float> host(kRows * kCols);
    pjrt::Buffer view(rt_.client->api(), b);
    auto done = view.ToHost(host.data(), host.size() * sizeof(float));
    view.Release();
    SHARDRT_RETURN_IF_ERROR(done.status());
    SHARDRT_RETURN_IF_ERROR(done->Await());
    if (host.front() != static_cast<float>(k) || host.back() != static_cast<float>(k)) {
      return absl::InternalError(absl::StrCat("output ", k - 1, " is ", host.front()));
    }
    return absl::OkStatus();
  }

  // Awaits the buffer's ready event without taking ownership.
  void AwaitBuffer(PJRT_Buffer* b) const {
    pjrt::Buffer view(rt_.client->api(), b);
    auto event = view.ReadyEvent();
    view.Release();
    CheckOk(event.status(), "ready event");
    CheckOk(event->Await(), "await");
  }

  void RunRaw() {
    const PJRT_Api* api = rt_.client->api();
    CheckOk(comp_->executable().ExecuteRaw(raw_lists_.data(), rt_.devices, k_,
                                           raw_out_lists_.data(), {}, nullptr),
            "raw execute");
    for (int d = 0; d < rt_.devices; ++d) AwaitBuffer(raw_out_lists_[d][0]);
    if (raw_destroy_output_major) {  // the order in which sharded outputs die: [o][d]
      const size_t n = comp_->num_outputs();
      for (size_t o = 0; o < n; ++o) {
        for (int d = 0; d < rt_.devices; ++d) pjrt::Buffer(api, raw_outputs_[d * n + o]).Reset();
      }
    } else {  // the plugin's order: [d][o]
      for (PJRT_Buffer* b : raw_outputs_) pjrt::Buffer(api, b).Reset();
    }
  }

  void RunShardrt(ComputationClient& cc) {
    auto out = cc.ExecuteReplicated(*comp_, args_);
    CheckOk(out.status(), "ExecuteReplicated");
    const ShardBuffers* first = (*out)[0]->buffers();
    for (const pjrt::Buffer& b : first->buffers) CheckOk(b.ReadyEvent()->Await(), "await");
    if (!shardrt_drop_each) Data::ReleaseAll(*out);
  }

  void RunPrerefactor() {
    const auto& devices = comp_->devices();
    auto outputs = rt_.old->OutputHandler(
        rt_.old->ExecuteReplicated(*comp_, rt_.old->InputHandler(old_args_, devices), devices),
        old_specs_);
    auto* first = static_cast<prerefactor::ShardedData*>(outputs[0].get());
    for (const auto& shard : first->shards) {
      AwaitBuffer(static_cast<prerefactor::DeviceData*>(shard.get())->buffer.get());
    }
  }

  Runtimes& rt_;
  const int k_;
  double compile_seconds_ = 0;
  ComputationPtr comp_;
  std::vector<DataPtr> args_;
  std::vector<PJRT_Buffer*> raw_matrix_;
  std::vector<PJRT_Buffer* const*> raw_lists_;
  std::vector<PJRT_Buffer*> raw_outputs_;
  std::vector<PJRT_Buffer**> raw_out_lists_;
  std::vector<prerefactor::OldDataPtr> old_args_;
  std::vector<prerefactor::OutputSpec> old_specs_;
};

// Cases are built on first use and kept (Google Benchmark mode) or freed on request (serve).
std::map<std::pair<int, int>, std::unique_ptr<Case>>& Cases() {
  static auto* cases = new std::map<std::pair<int, int>, std::unique_ptr<Case>>();
  return *cases;
}

absl::StatusOr<Case*> GetCase(int devices, int k) {
  auto& slot = Cases()[{devices, k}];
  if (slot == nullptr) {
    SHARDRT_ASSIGN_OR_RETURN(slot, Case::Create(RuntimesFor(devices), k));
    SHARDRT_RETURN_IF_ERROR(slot->Verify());
  }
  return slot.get();
}

void BM_Execute(benchmark::State& state, Arm arm, int devices, int k) {
  auto c = GetCase(devices, k);
  if (!c.ok()) {
    state.SkipWithError(c.status().ToString().c_str());
    return;
  }
  for (int i = 0; i < 10; ++i) (*c)->Run(arm);  // warm-up
  for (auto _ : state) (*c)->Run(arm);
  // Seconds per (argument x device), printed with an SI prefix (e.g. 1.2u).
  state.counters["per_arg_device"] = benchmark::Counter(
      static_cast<double>(k) * devices,
      benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}

// --serve: the driver's line protocol.
absl::Status Serve(int devices, const std::vector<std::string>& w, std::string& fields) {
  auto int_at = [&](size_t i) -> absl::StatusOr<int> {
    int v = 0;
    if (i >= w.size() || !absl::SimpleAtoi(w[i], &v) || v < 1) {
      return absl::InvalidArgumentError(absl::StrCat("bad request: ", absl::StrJoin(w, " ")));
    }
    return v;
  };
  if (w[0] == "info") {
    Runtimes& rt = RuntimesFor(devices);
    absl::StrAppend(&fields, ",\"platform\":", JsonString(rt.client->platform_name()),
                    ",\"platform_version\":", JsonString(rt.client->platform_version()),
                    ",\"devices\":", devices,
                    ",\"cores\":", std::thread::hardware_concurrency());
    return absl::OkStatus();
  }
  if (w[0] == "threads") {  // OS threads of this process now (the plugin's pool included)
    int threads = 0;
    for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/proc/self/task")) {
      ++threads;
    }
    absl::StrAppend(&fields, ",\"threads\":", threads);
    return absl::OkStatus();
  }
  if (w[0] == "setup") {
    SHARDRT_ASSIGN_OR_RETURN(int k, int_at(1));
    SHARDRT_ASSIGN_OR_RETURN(Case * c, GetCase(devices, k));
    absl::StrAppend(&fields, ",\"compile_s\":", c->compile_seconds());
    return absl::OkStatus();
  }
  if (w[0] == "free") {
    SHARDRT_ASSIGN_OR_RETURN(int k, int_at(1));
    Cases().erase(std::make_pair(devices, k));
    return absl::OkStatus();
  }
  if (w[0] == "run") {
    SHARDRT_ASSIGN_OR_RETURN(int k, int_at(1));
    std::optional<Arm> arm = w.size() > 2 ? ArmByName(w[2]) : std::nullopt;
    if (!arm) return absl::InvalidArgumentError("unknown arm");
    SHARDRT_ASSIGN_OR_RETURN(int n, int_at(3));
    SHARDRT_ASSIGN_OR_RETURN(Case * c, GetCase(devices, k));
    static Metric* const execute_replicated =
        GlobalMetrics().GetMetric(kExecuteReplicatedTime, MetricRepr::kTime);
    execute_replicated->Clear();
    std::vector<int64_t> samples(n);
    for (int i = 0; i < n; ++i) {
      const int64_t t0 = NowNs();
      c->Run(*arm);
      samples[i] = NowNs() - t0;
    }
    absl::StrAppend(&fields, ",\"samples_ns\":", JsonIntList(samples));
    if (*arm == Arm::kShardrt || *arm == Arm::kSerial) {  // the last 1024 calls' metric samples
      std::vector<int64_t> metric;
      for (const MetricSample& m : execute_replicated->Snapshot().samples) {
        metric.push_back(static_cast<int64_t>(m.value));
      }
      absl::StrAppend(&fields, ",\"execute_replicated_ns\":", JsonIntList(metric));
    }
    return absl::OkStatus();
  }
  if (w[0] == "mix") {
    SHARDRT_ASSIGN_OR_RETURN(int k, int_at(1));
    SHARDRT_ASSIGN_OR_RETURN(int n, int_at(2));
    SHARDRT_ASSIGN_OR_RETURN(int seed, int_at(3));
    std::vector<Arm> arms;
    for (size_t i = 4; i < w.size(); ++i) {
      std::optional<Arm> arm = ArmByName(w[i]);
      if (!arm) return absl::InvalidArgumentError(absl::StrCat("unknown arm: ", w[i]));
      arms.push_back(*arm);
    }
    if (arms.empty()) return absl::InvalidArgumentError("mix needs at least one arm");
    SHARDRT_ASSIGN_OR_RETURN(Case * c, GetCase(devices, k));
    std::mt19937 rng(static_cast<uint32_t>(seed));
    std::vector<size_t> order(arms.size());
    std::vector<std::vector<int64_t>> samples(arms.size(), std::vector<int64_t>(n));
    std::vector<int64_t> metric;  // the shardrt arm's ExecuteReplicatedTime samples
    metric.reserve(n);
    int64_t pool_tasks = 0;  // pool tasks during the shardrt arm's calls: 0 = all inline
    static Metric* const execute_replicated =
        GlobalMetrics().GetMetric(kExecuteReplicatedTime, MetricRepr::kTime);
    for (int i = 0; i < n; ++i) {
      for (size_t a = 0; a < order.size(); ++a) order[a] = a;
      std::shuffle(order.begin(), order.end(), rng);
      for (size_t a : order) {
        // Both shardrt arms record the metric; each reads its running sum around its own call
        // (untimed, no allocation), and the shardrt arm keeps the difference.
        const bool records = arms[a] == Arm::kShardrt || arms[a] == Arm::kSerial;
        const double before = records ? execute_replicated->Accumulator() : 0.0;
        const int64_t tasks_before = c->ShardrtPoolTasks();
        const int64_t t0 = NowNs();
        c->Run(arms[a]);
        samples[a][i] = NowNs() - t0;
        const double after = records ? execute_replicated->Accumulator() : 0.0;
        if (arms[a] == Arm::kShardrt) {
          metric.push_back(static_cast<int64_t>(after - before));
          pool_tasks += c->ShardrtPoolTasks() - tasks_before;
        }
      }
    }
    absl::StrAppend(&fields, ",\"mixed\":{");
    for (size_t a = 0; a < arms.size(); ++a) {
      absl::StrAppend(&fields, a ? "," : "", JsonString(ArmName(arms[a])), ":",
                      JsonIntList(samples[a]));
    }
    absl::StrAppend(&fields, "},\"execute_replicated_ns\":", JsonIntList(metric),
                    ",\"shardrt_pool_tasks\":", pool_tasks);
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown command: ", w[0]));
}

}  // namespace
}  // namespace shardrt::bench

int main(int argc, char** argv) {
  using namespace shardrt::bench;
  bool serve = false;
  int devices = 8;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--serve") == 0) serve = true;
    if (std::strcmp(argv[i], "--devices") == 0 && i + 1 < argc) devices = std::atoi(argv[++i]);
    if (std::strcmp(argv[i], "--raw-destroy-output-major") == 0) raw_destroy_output_major = true;
    if (std::strcmp(argv[i], "--shardrt-drop-each") == 0) shardrt_drop_each = true;
  }
  if (serve) {
    return ServeLoop([&](const std::vector<std::string>& w, std::string& fields) {
      return Serve(devices, w, fields);
    });
  }
  for (int d : {1, 2, 4, 8}) {
    for (int k : {1, 10, 100, 1000}) {
      for (Arm arm : kArms) {
        benchmark::RegisterBenchmark(
            absl::StrCat("Execute/", ArmName(arm), "/devices:", d, "/args:", k).c_str(),
            [arm, d, k](benchmark::State& s) { BM_Execute(s, arm, d, k); })
            ->Unit(benchmark::kMicrosecond)
            ->UseRealTime();
      }
    }
  }
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
