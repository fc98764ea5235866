#include "shardrt/executor/executor.h"

#include <algorithm>
#include <cassert>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "shardrt/base/metrics.h"
#include "shardrt/base/mutex.h"
#include "shardrt/base/trace.h"

namespace shardrt {

// One scheduled execution. The guarded fields are guarded by its executor's Core::mu, which
// `mu` refers to; the rest are written by Schedule before the execution is visible to others
// (or under mu), then used by its one pool task.
struct Executor::Execution {
  explicit Execution(Mutex& core_mu) : mu(core_mu) {}

  Mutex& mu;  // the Core's
  uint64_t id = 0;
  ComputationPtr computation;
  std::vector<DataPtr> arguments;
  std::vector<DataPtr> outputs;  // the placeholders handed to the caller
  ExecuteReplicatedOptions options;
  // The device queues this execution holds a ticket in (Core::queues' values; stable).
  std::vector<std::deque<ExecutionPtr>*> queues;
  int64_t schedule_ns = 0;
  // Arguments not yet filled, plus 1 while Schedule registers.
  int pending_inputs ABSL_GUARDED_BY(mu) = 0;
  bool dispatched ABSL_GUARDED_BY(mu) = false;     // handed to the pool
  bool cancelled ABSL_GUARDED_BY(mu) = false;      // the executor gave up waiting for arguments
  bool device_failed ABSL_GUARDED_BY(mu) = false;  // a device error was already counted
  // Ready events outstanding, plus 1 until it is released.
  int device_pending ABSL_GUARDED_BY(mu) = 1;
  int64_t ready_ns ABSL_GUARDED_BY(mu) = 0;  // when the arguments were all filled
  int64_t lock_ns ABSL_GUARDED_BY(mu) = 0;   // when it got the device lock
};

// shardrt::Mutex (a std::mutex) rather than absl::Mutex: a prebuilt Abseil is invisible to
// ThreadSanitizer.
struct Executor::Core : std::enable_shared_from_this<Executor::Core> {
  ComputationClient* client = nullptr;
  ThreadPool* pool = nullptr;
  int64_t max_in_flight = 1;
  bool track_device = true;
  Metric* lock_wait = nullptr;

  Mutex mu;
  CondVar cv;
  // Per device, the executions that have not finished dispatching, in ticket order. The front
  // of every queue an execution is in holds that device's lock. (The executions' `queues`
  // point to these deques, which mu guards as well.)
  std::map<const pjrt::Device*, std::deque<ExecutionPtr>> queues ABSL_GUARDED_BY(mu);
  uint64_t next_id ABSL_GUARDED_BY(mu) = 0;
  std::set<uint64_t> undispatched ABSL_GUARDED_BY(mu);  // ids not yet done dispatching
  // Ids not yet done dispatching or not yet device-complete.
  std::set<uint64_t> live ABSL_GUARDED_BY(mu);
  int64_t in_flight ABSL_GUARDED_BY(mu) = 0;  // == undispatched.size()
  int64_t running ABSL_GUARDED_BY(mu) = 0;    // handed to the pool, not yet released
  int64_t scheduled ABSL_GUARDED_BY(mu) = 0;
  int64_t dispatched ABSL_GUARDED_BY(mu) = 0;
  int64_t failed ABSL_GUARDED_BY(mu) = 0;
  // The first failure since the last WaitForAll / Synchronize.
  absl::Status first_error ABSL_GUARDED_BY(mu);

  // Every execution's `mu` is this mu under another name, which the analysis cannot see:
  // called with mu held, tells it that `e`'s fields may be used (debug builds check that the
  // two are one).
  void AssertHeld(const Execution& e) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu)
      ABSL_ASSERT_EXCLUSIVE_LOCK(e.mu) {
    assert(&e.mu == &mu);
  }

  void RecordErrorLocked(const absl::Status& status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    if (first_error.ok()) first_error = status;
  }
  absl::Status TakeErrorLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    return std::exchange(first_error, absl::OkStatus());
  }

  // When `e` has its arguments and is at the front of all its queues, takes the lock for it and
  // appends it to `launch`.
  void MaybeDispatchLocked(const ExecutionPtr& e, std::vector<ExecutionPtr>* launch)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    AssertHeld(*e);
    if (e->dispatched || e->pending_inputs > 0) return;
    for (const std::deque<ExecutionPtr>* q : e->queues) {
      if (q->front() != e) return;
    }
    e->dispatched = true;
    e->lock_ns = MetricsNowNs();
    lock_wait->AddSample(static_cast<double>(e->lock_ns - e->ready_ns));
    ++running;
    launch->push_back(e);
  }

  // Runs each execution on the pool.
  void Launch(std::vector<ExecutionPtr> launch) ABSL_LOCKS_EXCLUDED(mu) {
    for (ExecutionPtr& e : launch) {
      pool->Schedule([core = shared_from_this(), e = std::move(e)] { core->Run(e); });
    }
  }

  // One argument of `e` was filled (or failed), or Schedule finished registering.
  void InputReady(const ExecutionPtr& e) ABSL_LOCKS_EXCLUDED(mu) {
    std::vector<ExecutionPtr> launch;
    {
      MutexLock lock(mu);
      AssertHeld(*e);
      if (e->pending_inputs == 0) return;  // cancelled meanwhile
      if (--e->pending_inputs > 0) return;
      e->ready_ns = std::max(MetricsNowNs(), e->schedule_ns);
      MaybeDispatchLocked(e, &launch);
    }
    Launch(std::move(launch));
  }

  void Run(const ExecutionPtr& e) ABSL_LOCKS_EXCLUDED(mu);
  void WatchDevices(const ExecutionPtr& e, const Data& output) ABSL_LOCKS_EXCLUDED(mu);
  void DeviceDone(const ExecutionPtr& e, const absl::Status& status) ABSL_LOCKS_EXCLUDED(mu);
  void Release(const ExecutionPtr& e, const absl::Status& status) ABSL_LOCKS_EXCLUDED(mu);
};

void Executor::Core::Run(const ExecutionPtr& e) {
  bool cancelled;
  int64_t ready_ns, lock_ns;
  {
    MutexLock lock(mu);
    AssertHeld(*e);
    cancelled = e->cancelled;
    ready_ns = e->ready_ns;
    lock_ns = e->lock_ns;
  }
  const Computation& computation = *e->computation;
  // Closed before Release below: once released, a waiter may stop the trace recorder.
  std::optional<TraceSpan> execution_span;
  execution_span.emplace("Execution", "executor");
  TraceSpan& span = *execution_span;
  if (span.active()) {
    if (!TraceThreadNamed()) {
      SetTraceThreadName(absl::StrCat("shardrt pool ", pool->CurrentThreadId()));
    }
    span.AddArg("computation", computation.name());
    span.AddArg("execution", absl::StrCat(e->id));
    TraceAsyncSpan("InputWait", "executor", e->id, e->schedule_ns, ready_ns,
                   {{"computation", computation.name()}});
    TraceAsyncSpan("DeviceLockWait", "executor", e->id, ready_ns, lock_ns,
                   {{"computation", computation.name()}});
  }

  absl::Status status;
  std::vector<DataPtr> results;
  if (cancelled) {
    status = absl::CancelledError(absl::StrCat(
        "execution of ", computation.name(),
        " cancelled: the executor was destroyed while it waited for its arguments"));
  } else {
    // A failed argument fails this execution with the argument's own error, unchanged.
    for (const DataPtr& arg : e->arguments) {
      if (arg->state() == Data::State::kFailed) {
        status = arg->Usable();
        break;
      }
    }
    if (status.ok()) {
      absl::StatusOr<std::vector<DataPtr>> out =
          client->ExecuteReplicated(computation, e->arguments, e->options);
      if (out.ok()) {
        results = std::move(*out);
      } else {
        status = out.status();
      }
    }
  }
  e->arguments.clear();

  if (status.ok()) {
    // Watch the devices before the outputs are published: once assigned, a later execution
    // may take an output at once on another thread and donate its buffers, after which they
    // can no longer be asked for a ready event.
    if (track_device && !results.empty()) WatchDevices(e, *results[0]);
    SHARDRT_TRACE_SPAN("AssignOutputs", "executor");
    for (size_t i = 0; i < e->outputs.size(); ++i) {
      absl::Status assigned = e->outputs[i]->Assign(results[i]);
      if (!assigned.ok()) {
        e->outputs[i]->Fail(assigned);
        if (status.ok()) status = assigned;
      }
    }
  } else {
    for (const DataPtr& out : e->outputs) out->Fail(status);
  }
  e->outputs.clear();
  execution_span.reset();
  Release(e, status);
}

void Executor::Core::WatchDevices(const ExecutionPtr& e, const Data& output) {
  // Every output of one execution is computed by the same per-device program run; output 0's
  // buffers say when each device is done (or failed).
  const ShardBuffers* buffers = output.buffers();
  if (buffers == nullptr) return;
  {
    MutexLock lock(mu);
    AssertHeld(*e);
    e->device_pending += static_cast<int>(buffers->buffers.size());
  }
  for (const pjrt::Buffer& buffer : buffers->buffers) {
    absl::StatusOr<pjrt::Event> event = buffer.ReadyEvent();
    if (!event.ok()) {
      DeviceDone(e, event.status());
      continue;
    }
    absl::Status registered = event->OnReady(
        [core = shared_from_this(), e](absl::Status status) { core->DeviceDone(e, status); });
    if (!registered.ok()) DeviceDone(e, registered);
  }
}

void Executor::Core::DeviceDone(const ExecutionPtr& e, const absl::Status& status) {
  {
    MutexLock lock(mu);
    AssertHeld(*e);
    if (!status.ok() && !e->device_failed) {
      e->device_failed = true;
      ++failed;
      RecordErrorLocked(status);
    }
    if (--e->device_pending > 0) return;
    live.erase(e->id);
  }
  cv.NotifyAll();
}

void Executor::Core::Release(const ExecutionPtr& e, const absl::Status& status) {
  std::vector<ExecutionPtr> launch;
  int64_t now_in_flight;
  {
    MutexLock lock(mu);
    AssertHeld(*e);
    std::vector<ExecutionPtr> next;
    for (std::deque<ExecutionPtr>* q : e->queues) {
      q->pop_front();  // e was at the front of each: it held the lock
      if (!q->empty()) next.push_back(q->front());
    }
    undispatched.erase(e->id);
    now_in_flight = --in_flight;
    --running;
    ++dispatched;
    if (!status.ok()) {
      ++failed;
      RecordErrorLocked(status);
    }
    if (--e->device_pending == 0) live.erase(e->id);
    for (const ExecutionPtr& n : next) MaybeDispatchLocked(n, &launch);
  }
  cv.NotifyAll();
  TraceCounter("ExecutionsInFlight", "executor", MetricsNowNs(),
               static_cast<double>(now_in_flight));
  Launch(std::move(launch));
}

Executor::Executor(ComputationClient* client, ExecutorOptions options)
    : client_(client), options_(options), core_(std::make_shared<Core>()) {
  core_->client = client;
  core_->pool = client->pool();
  core_->max_in_flight = std::max<int64_t>(options.max_in_flight, 1);
  core_->track_device = options.track_device_completion;
  core_->lock_wait = GlobalMetrics().GetMetric(kDeviceLockWait, MetricRepr::kTime);
}

Executor::~Executor() {
  Core& core = *core_;
  MutexLock lock(core.mu);
  while (true) {
    // Once nothing runs, every execution left waits (directly or behind one in its queues) for
    // a placeholder this executor will never fill.
    while (core.running != 0) core.cv.Wait(lock);
    if (core.undispatched.empty()) break;
    std::vector<ExecutionPtr> launch;
    const int64_t now = MetricsNowNs();
    for (auto& [device, queue] : core.queues) {
      for (const ExecutionPtr& e : queue) {
        core.AssertHeld(*e);
        if (e->pending_inputs > 0) {
          e->cancelled = true;
          e->pending_inputs = 0;
          e->ready_ns = std::max(now, e->schedule_ns);
        }
      }
    }
    for (auto& [device, queue] : core.queues) {
      if (!queue.empty()) core.MaybeDispatchLocked(queue.front(), &launch);
    }
    lock.Unlock();
    core.Launch(std::move(launch));
    lock.Lock();
  }
  while (!core.live.empty()) core.cv.Wait(lock);
}

absl::StatusOr<std::vector<DataPtr>> Executor::Schedule(ComputationPtr computation,
                                                        std::vector<DataPtr> arguments,
                                                        const ScheduleOptions& options) {
  return ScheduleImpl(std::move(computation), std::move(arguments), options, /*block=*/true);
}

absl::StatusOr<std::vector<DataPtr>> Executor::TrySchedule(ComputationPtr computation,
                                                           std::vector<DataPtr> arguments,
                                                           const ScheduleOptions& options) {
  return ScheduleImpl(std::move(computation), std::move(arguments), options, /*block=*/false);
}

absl::StatusOr<std::vector<DataPtr>> Executor::ScheduleImpl(ComputationPtr computation,
                                                            std::vector<DataPtr> arguments,
                                                            const ScheduleOptions& options,
                                                            bool block) {
  if (computation == nullptr) return absl::InvalidArgumentError("Schedule: computation is null");
  if (arguments.size() != computation->num_parameters()) {
    return absl::InvalidArgumentError(absl::StrCat("Schedule: ", computation->name(), " got ",
                                                   arguments.size(), " arguments, expected ",
                                                   computation->num_parameters()));
  }
  for (size_t i = 0; i < arguments.size(); ++i) {
    if (arguments[i] == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("Schedule: ", computation->name(), ": argument ", i, " is null"));
    }
  }
  SHARDRT_TRACE_SPAN("Schedule", "executor");
  Core& core = *core_;
  auto e = std::make_shared<Execution>(core.mu);
  e->computation = computation;
  e->options = options.execute;
  e->outputs.reserve(computation->num_outputs());
  for (size_t i = 0; i < computation->num_outputs(); ++i) {
    e->outputs.push_back(client_->CreateDataPlaceholder(computation->output_layout(i)));
  }
  // The arguments to wait for; any that fills meanwhile is reported at once by OnReady.
  std::vector<size_t> pending;
  for (size_t i = 0; i < arguments.size(); ++i) {
    if (arguments[i]->state() == Data::State::kPending) pending.push_back(i);
  }
  e->arguments = std::move(arguments);
  std::vector<const pjrt::Device*> devices = computation->devices();
  std::sort(devices.begin(), devices.end());
  devices.erase(std::unique(devices.begin(), devices.end()), devices.end());

  int64_t now_in_flight;
  {
    MutexLock lock(core.mu);
    if (core.in_flight >= core.max_in_flight) {
      if (!block) {
        return absl::ResourceExhaustedError(absl::StrCat(
            "Schedule: ", core.in_flight, " executions in flight (max_in_flight ",
            core.max_in_flight, ")"));
      }
      // A pool thread must not wait: the execution it waits for may need this very thread.
      if (core.pool->CurrentThreadId() < 0) {
        SHARDRT_TRACE_SPAN("BackpressureWait", "executor");
        while (core.in_flight >= core.max_in_flight) core.cv.Wait(lock);
      }
    }
    core.AssertHeld(*e);
    e->pending_inputs = static_cast<int>(pending.size()) + 1;
    e->id = core.next_id++;
    e->schedule_ns = MetricsNowNs();
    for (const pjrt::Device* d : devices) {
      std::deque<ExecutionPtr>& q = core.queues[d];
      q.push_back(e);
      e->queues.push_back(&q);
    }
    core.undispatched.insert(e->id);
    core.live.insert(e->id);
    now_in_flight = ++core.in_flight;
    ++core.scheduled;
  }
  TraceCounter("ExecutionsInFlight", "executor", MetricsNowNs(),
               static_cast<double>(now_in_flight));
  std::vector<DataPtr> outputs = e->outputs;
  for (size_t i : pending) {
    e->arguments[i]->OnReady(
        [core = core_, e](absl::Status) { core->InputReady(e); });
  }
  core.InputReady(e);  // drops Schedule's own count
  return outputs;
}

absl::Status Executor::WaitForAll() {
  Core& core = *core_;
  MutexLock lock(core.mu);
  const uint64_t target = core.next_id;
  while (!core.undispatched.empty() && *core.undispatched.begin() < target) core.cv.Wait(lock);
  return core.TakeErrorLocked();
}

absl::Status Executor::Synchronize() {
  Core& core = *core_;
  MutexLock lock(core.mu);
  const uint64_t target = core.next_id;
  while (!core.live.empty() && *core.live.begin() < target) core.cv.Wait(lock);
  return core.TakeErrorLocked();
}

ExecutorStats Executor::stats() const {
  Core& core = *core_;
  MutexLock lock(core.mu);
  ExecutorStats s;
  s.scheduled = core.scheduled;
  s.dispatched = core.dispatched;
  s.failed = core.failed;
  s.in_flight = core.in_flight;
  s.device_pending = static_cast<int64_t>(core.live.size() - core.undispatched.size());
  return s;
}

}  // namespace shardrt
