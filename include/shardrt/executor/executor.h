// Executor: asynchronous execution on top of ComputationClient.
//
// Schedule(computation, arguments) returns the outputs at once, as placeholders; the execution
// itself runs later on the client's pool and Assigns its results into them. A caller can thus
// prepare step n+1 (even pass step n's placeholders to it) while step n runs, as PyTorch/XLA's
// graph executor does.
//
// Order. Executions are ordered by a device lock per device: each execution takes a ticket on
// every device of its computation when it is scheduled (one total order over all producer
// threads), and dispatches (calls ExecuteReplicated) only when (a) every argument placeholder is
// filled and (b) every earlier execution on any of its devices has finished dispatching and
// assigned its outputs. So executions on the same (or overlapping) device sets call PJRT
// Execute one at a time in Schedule order, which also keeps programs with collectives from
// interleaving differently on different devices; executions on disjoint devices dispatch
// concurrently. The lock is released once ExecuteReplicated has returned and the outputs are
// assigned; the device work itself continues asynchronously (PJRT orders later uses of the
// buffers). Waiting for the lock never blocks a thread: an execution waits in its device queues
// and is handed to the pool when it reaches their front.
//
// Metrics and traces. DeviceLockWait gets one sample per execution: the time from when its
// arguments were all ready (or it was scheduled, if later) until it held the lock. With tracing
// on (base/trace.h), each execution records async spans "InputWait" and "DeviceLockWait", a
// span "Execution" on the pool thread around "ExecuteReplicated" (client spans inside) and
// "AssignOutputs", "Schedule" / "BackpressureWait" spans on the producer, and an
// "ExecutionsInFlight" counter.
//
// Errors. An execution that fails (bad or donated argument, plugin error at dispatch) fails all
// its placeholders with that error: reading them or passing them to later executions returns
// it. An execution with a failed argument fails its outputs with that argument's error,
// unchanged, so a long chain carries the root cause and not a growing prefix. Later executions
// that do not use failed data run normally. Each failure is also kept for the next WaitForAll /
// Synchronize, so an error nobody reads is not lost. Errors the device reports after dispatch
// (when the program runs) surface through the output buffers (e.g. when downloading them) and
// through Synchronize.
//
// Backpressure. At most `max_in_flight` executions may be scheduled and not yet dispatched;
// Schedule blocks until one finishes dispatching, TrySchedule fails instead. A call made on a
// thread of the client's pool never blocks (it may run over the bound): blocking there could
// wait for the very thread it is on. Executions waiting for a placeholder count as in flight:
// a producer that would fill such a placeholder itself must not block on the bound first (use
// TrySchedule, or a bound larger than what it schedules before filling it).
//
// Thread-safety: Schedule, TrySchedule, WaitForAll, Synchronize and stats may be called from any
// number of threads. Destruction must not race with any other call.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "shardrt/base/export.h"
#include "shardrt/client/computation_client.h"

namespace shardrt {

struct SHARDRT_EXPORT ExecutorOptions {
  // Executions scheduled and not yet dispatched, at most (values below 1 mean 1). Schedule
  // blocks beyond it.
  int64_t max_in_flight = 16;
  // Watch each execution's outputs until the devices have computed them, so Synchronize can
  // wait for device completion and report device errors. Costs a PJRT ready-event per device
  // per execution.
  bool track_device_completion = true;
};

struct SHARDRT_EXPORT ScheduleOptions {
  ExecuteReplicatedOptions execute;  // passed to ExecuteReplicated
};

// Counts since the executor was created.
struct SHARDRT_EXPORT ExecutorStats {
  int64_t scheduled = 0;   // executions accepted by Schedule / TrySchedule
  int64_t dispatched = 0;  // executions done dispatching, successfully or not
  int64_t failed = 0;      // of those, the ones whose outputs were failed
  int64_t in_flight = 0;   // scheduled and not yet done dispatching
  int64_t device_pending = 0;  // dispatched, device completion not yet seen
};

class SHARDRT_EXPORT Executor {
 public:
  // `client` is borrowed and must outlive the executor; executions run on client->pool().
  explicit Executor(ComputationClient* client, ExecutorOptions options = {});
  // Waits for every scheduled execution to dispatch and (when tracked) complete on device.
  // Executions still waiting for placeholders that nothing in this executor will fill, once
  // nothing else can run, are cancelled: their outputs fail with Cancelled.
  ~Executor();

  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;

  // Schedules `computation` on `arguments` (ready data or placeholders, e.g. outputs of earlier
  // Schedule calls) and returns its outputs as placeholders, one per output, without waiting for
  // the arguments or the device lock. Blocks while max_in_flight executions are in flight.
  // Errors (nothing is scheduled): InvalidArgument for a null computation, a wrong argument
  // count or a null argument. All other errors arrive through the placeholders.
  [[nodiscard]] absl::StatusOr<std::vector<DataPtr>> Schedule(ComputationPtr computation,
                                                              std::vector<DataPtr> arguments,
                                                              const ScheduleOptions& options = {});
  // As Schedule, but ResourceExhausted instead of blocking when max_in_flight executions are
  // in flight.
  [[nodiscard]] absl::StatusOr<std::vector<DataPtr>> TrySchedule(
      ComputationPtr computation, std::vector<DataPtr> arguments,
      const ScheduleOptions& options = {});

  // Blocks until every execution scheduled before the call has dispatched (its ExecuteReplicated
  // returned and its outputs were assigned or failed). Returns the first execution error since
  // the previous WaitForAll / Synchronize returned (and forgets it), else OK. Waits for as long
  // as those executions wait for their arguments.
  [[nodiscard]] absl::Status WaitForAll();
  // WaitForAll, then also waits until the devices have computed those executions' outputs
  // (when track_device_completion is on); device errors are reported like dispatch errors.
  [[nodiscard]] absl::Status Synchronize();

  // Counts since creation (a consistent snapshot).
  ExecutorStats stats() const;
  // The client executions run on (borrowed).
  ComputationClient* client() const { return client_; }

 private:
  struct Execution;
  using ExecutionPtr = std::shared_ptr<Execution>;
  // State shared with pool tasks and PJRT callbacks.
  struct Core;

  absl::StatusOr<std::vector<DataPtr>> ScheduleImpl(ComputationPtr computation,
                                                    std::vector<DataPtr> arguments,
                                                    const ScheduleOptions& options, bool block);

  ComputationClient* const client_;
  const ExecutorOptions options_;
  std::shared_ptr<Core> core_;
};

}  // namespace shardrt
