// ComputationClient's hot path: ExecuteReplicated and ExecuteComputation. Three steps, each
// reading only what Compile cached: check every argument against its parameter layout and build
// the devices x arguments buffer matrix; one PJRT launch for every device; wrap each output's
// per-device buffers into sharded data with its cached layout.
#include <atomic>
#include <optional>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "shardrt/base/status_macros.h"
#include "client/execution_limiter.h"
#include "shardrt/base/metrics.h"
#include "shardrt/base/trace.h"
#include "shardrt/client/computation_client.h"

namespace shardrt {
namespace {

// Cost of checking one argument and writing its column of the buffer matrix, measured with the
// loop inline (bench/execute_bench, shardrt-serial): 8 ns per argument at k = 100 on 1 device,
// 30 ns at k = 1000 (its objects no longer fit in cache), about 10 ns more per device.
constexpr double kArgumentCostNs = 30.0;
constexpr double kArgumentCostNsPerDevice = 10.0;

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

// Whether the call keeps donated parameter `p` (non_donatable_input_indices names it).
bool KeptForThisCall(const ExecuteReplicatedOptions& options, int64_t p) {
  for (int64_t n : options.non_donatable_input_indices) {
    if (n == p) return true;
  }
  return false;
}

std::string ArgumentMismatch(const Computation& c, size_t i, const DataLayout& expected,
                             const DataLayout& got) {
  return absl::StrCat(c.name(), ": argument ", i, " expected ", expected.ToString(), ", got ",
                      got.ToString());
}

}  // namespace

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

  BufferList matrix;
  {
    SHARDRT_TRACE_SPAN("ArgumentPlumbing", "client");
    SHARDRT_RETURN_IF_ERROR(BuildArgumentMatrix(computation, args, matrix));
    if (!computation.donated_parameters().empty()) {
      SHARDRT_RETURN_IF_ERROR(CheckDonatedOnce(computation, matrix, options));
    }
  }
  BufferList outputs;
  {
    SHARDRT_TRACE_SPAN("PjrtExecute", "client");
    SHARDRT_RETURN_IF_ERROR(Launch(computation, matrix, options, outputs));
  }
  // Donated arguments are spent.
  for (int64_t p : computation.donated_parameters()) {
    if (!KeptForThisCall(options, p)) args[p]->MarkDonated();
  }
  SHARDRT_TRACE_SPAN("OutputWrapping", "client");
  return WrapOutputs(computation, outputs);
}

// Checks every argument against its cached layout (one fingerprint compare) and fills column i
// of the devices x arguments matrix with its per-device buffers, in parallel over arguments.
absl::Status ComputationClient::BuildArgumentMatrix(const Computation& computation,
                                                    absl::Span<const DataPtr> args,
                                                    BufferList& matrix) {
  const size_t num_args = computation.num_parameters();
  const size_t num_devices = computation.num_devices();
  matrix.resize(num_devices * num_args);
  return ParallelFor(
      pool_, static_cast<int64_t>(num_args),
      ParallelCost{.per_item_ns =
                       kArgumentCostNs + kArgumentCostNsPerDevice * static_cast<double>(num_devices)},
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
      });
}

// A donated argument must not also be passed as another argument: the CPU plugin fails some
// devices' parts of such a launch and then never completes a later execution. Arguments are
// the same data when their first-device buffers are (a placeholder shares its source's).
absl::Status ComputationClient::CheckDonatedOnce(const Computation& computation,
                                                 const BufferList& matrix,
                                                 const ExecuteReplicatedOptions& options) {
  absl::flat_hash_map<PJRT_Buffer*, int64_t> donated;
  for (int64_t p : computation.donated_parameters()) {
    if (!KeptForThisCall(options, p)) donated.emplace(matrix[p], p);
  }
  if (donated.empty()) return absl::OkStatus();
  // Row 0 of the matrix: every argument's first-device buffer.
  for (size_t i = 0; i < computation.num_parameters(); ++i) {
    auto it = donated.find(matrix[i]);
    if (it != donated.end() && it->second != static_cast<int64_t>(i)) {
      return absl::InvalidArgumentError(absl::StrCat(
          computation.name(), ": argument ", it->second,
          " would be donated but is also argument ", i,
          "; pass another copy, or keep it (non_donatable_input_indices)"));
    }
  }
  return absl::OkStatus();
}

// One PJRT Execute for every device; `outputs` receives devices x outputs new buffer handles.
// Multi-device launches of a program that communicates take one limiter slot per device until
// every device has finished (a part waiting at a collective holds a plugin thread; the limiter
// keeps the parts in flight within the threads). A collective-free program's parts never wait
// on each other, so its launches need neither the slots nor the completion events that free
// them.
absl::Status ComputationClient::Launch(const Computation& computation,
                                       const BufferList& matrix,
                                       const ExecuteReplicatedOptions& options,
                                       BufferList& outputs) {
  const size_t num_args = computation.num_parameters();
  const size_t num_devices = computation.num_devices();
  const size_t num_outputs = computation.num_outputs();
  absl::InlinedVector<PJRT_Buffer* const*, 8> argument_lists(num_devices);
  outputs.assign(num_devices * num_outputs, nullptr);
  absl::InlinedVector<PJRT_Buffer**, 8> output_lists(num_devices);
  for (size_t d = 0; d < num_devices; ++d) {
    argument_lists[d] = matrix.data() + d * num_args;
    output_lists[d] = outputs.data() + d * num_outputs;
  }
  pjrt::ExecuteOptions exec_options;
  exec_options.non_donatable_input_indices = options.non_donatable_input_indices;
  const bool limited = limiter_->enabled() && num_devices > 1 &&
                       !computation.executable().signature().collective_free;
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
  return launched;
}

// Wraps each output's per-device buffers with its cached layout, on the calling thread. Not in
// parallel: the work is a few allocations per output, and objects allocated on pool threads but
// used and freed on the caller's cost more in cache misses and cross-thread frees than the split
// saves (bench/run: parallel wrapping was 2-10 % slower per call than inline at k = 100 and
// 1000 on every D measured).
absl::StatusOr<std::vector<DataPtr>> ComputationClient::WrapOutputs(
    const Computation& computation, const BufferList& outputs) {
  const size_t num_devices = computation.num_devices();
  const size_t num_outputs = computation.num_outputs();
  const PJRT_Api* api = client_->api();
  return Data::CreateUncheckedBatch(
      client_, computation.shared_output_layouts(), [&](size_t o, ShardBuffers& shards) {
        shards.buffers.reserve(num_devices);
        shards.handles.reserve(num_devices);
        for (size_t d = 0; d < num_devices; ++d) {
          PJRT_Buffer* b = outputs[d * num_outputs + o];
          shards.handles.push_back(b);
          shards.buffers.emplace_back(api, b);
        }
      });
}

}  // namespace shardrt
