// Tracing: spans recorded per thread and written as Chrome trace-event JSON, which Perfetto
// (ui.perfetto.dev) and chrome://tracing open.
//
// A TraceRecorder collects events between Start and Stop. Code anywhere in the runtime marks a
// region with a scoped span:
//
//   SHARDRT_TRACE_SPAN("PjrtExecute", "client");      // or: TraceSpan span("PjrtExecute", "client");
//
// which records one complete event ("ph":"X": name, category, start, duration, thread) into the
// recorder that is current when the span opens. When no recorder is current, a span costs one
// relaxed atomic load and records nothing.
//
// The current recorder is a process-wide pointer, null unless some recorder is between Start and
// Stop; with GlobalMetrics() it is the only process-wide state in shardrt (deep code such as
// transfers has no recorder to be handed). At most one recorder is current at a time.
//
// Events:
//   - complete spans (TraceSpan, AddSpan): "X" events on the thread that recorded them, nested
//     by time on that thread;
//   - async spans (AddAsyncSpan): a "b"/"e" pair with an id, for intervals no thread spends
//     waiting (e.g. an execution queued behind the device lock); viewers draw them on their own
//     tracks, where they may overlap;
//   - counters (AddCounter): "C" events, drawn as a value over time.
// Threads are numbered 1, 2, ... in the order they first record (the "tid" of their events) and
// named through SetTraceThreadName; the JSON carries "M" metadata events with those names.
// Timestamps are microseconds since the recorder was created.
//
// Thread-safety: everything here is thread-safe. A span that opened while a recorder was current
// keeps that recorder's storage alive, so stopping or destroying a recorder while spans are open
// on other threads is safe (those late events land in storage nobody reads).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

#include "shardrt/base/export.h"

namespace shardrt {

// One recorded event, as written to JSON.
struct SHARDRT_EXPORT TraceEvent {
  enum class Phase : char {
    kComplete = 'X',
    kAsyncBegin = 'b',
    kAsyncEnd = 'e',
    kCounter = 'C',
  };
  Phase phase = Phase::kComplete;
  std::string name;
  std::string category;
  int64_t start_ns = 0;     // MetricsNowNs() clock
  int64_t duration_ns = 0;  // kComplete only
  int tid = 0;              // TraceThreadId() of the recording thread
  uint64_t id = 0;          // async spans only
  double value = 0.0;       // counters only
  std::vector<std::pair<std::string, std::string>> args;  // "args" (string values)
};

struct SHARDRT_EXPORT TraceOptions {
  // Events kept; later ones are dropped and counted (dropped_events()). Bounds memory on long
  // runs (an event takes on the order of 100 bytes).
  int64_t max_events = 1 << 20;
};

class SHARDRT_EXPORT TraceRecorder {
 public:
  TraceRecorder() : TraceRecorder(TraceOptions{}) {}
  explicit TraceRecorder(TraceOptions options);
  // Stops the recorder if it is current.
  ~TraceRecorder();

  TraceRecorder(const TraceRecorder&) = delete;
  TraceRecorder& operator=(const TraceRecorder&) = delete;

  // Makes this the current recorder: spans opened from now on record here. Events recorded
  // earlier are kept (Start / Stop may alternate). Error: FailedPrecondition when another
  // recorder is current. Starting the current recorder again is a no-op.
  [[nodiscard]] absl::Status Start();
  // Stops recording: no recorder is current afterwards (when this one was). Spans already open
  // still record their event when they close.
  void Stop();
  // True between Start and Stop.
  bool recording() const;

  // Records a complete span on the calling thread: [start_ns, end_ns) on MetricsNowNs' clock.
  // Works whether or not the recorder is current.
  void AddSpan(absl::string_view name, absl::string_view category, int64_t start_ns,
               int64_t end_ns, std::vector<std::pair<std::string, std::string>> args = {});
  // Records an async span [start_ns, end_ns) identified by (category, name, id).
  void AddAsyncSpan(absl::string_view name, absl::string_view category, uint64_t id,
                    int64_t start_ns, int64_t end_ns,
                    std::vector<std::pair<std::string, std::string>> args = {});
  // Records the value of counter `name` at `timestamp_ns`.
  void AddCounter(absl::string_view name, absl::string_view category, int64_t timestamp_ns,
                  double value);

  // A copy of the events recorded so far, in recording order (async spans as two events).
  [[nodiscard]] std::vector<TraceEvent> Events() const;
  int64_t num_events() const;
  int64_t dropped_events() const;
  // Forgets every event.
  void Clear();

  // The Chrome trace-event JSON object:
  //   {"traceEvents":[{"name":"process_name","ph":"M",...}, {"name":"thread_name","ph":"M",...},
  //    {"name":"PjrtExecute","cat":"client","ph":"X","ts":12.345,"dur":6.789,"pid":P,"tid":3},
  //    ...], "displayTimeUnit":"ms", "otherData":{"dropped_events":0}}
  [[nodiscard]] std::string ToJson() const;
  // Writes ToJson() to `path`. Error: the file system's, naming the path.
  [[nodiscard]] absl::Status WriteJson(const std::string& path) const;

  struct Storage;  // shared with open spans

 private:
  std::shared_ptr<Storage> storage_;
};

// The current recorder, or null when tracing is off.
SHARDRT_EXPORT TraceRecorder* CurrentTraceRecorder();
// True when a recorder is current (one relaxed atomic load).
SHARDRT_EXPORT bool TracingEnabled();

// Record into the current recorder, if any: as TraceRecorder::AddAsyncSpan / AddCounter, and
// safe against a concurrent Stop (unlike calling them on CurrentTraceRecorder()).
SHARDRT_EXPORT void TraceAsyncSpan(absl::string_view name, absl::string_view category, uint64_t id,
                                   int64_t start_ns, int64_t end_ns,
                                   std::vector<std::pair<std::string, std::string>> args = {});
SHARDRT_EXPORT void TraceCounter(absl::string_view name, absl::string_view category,
                                 int64_t timestamp_ns, double value);

// The calling thread's number in traces (1, 2, ... in order of first use in the process).
SHARDRT_EXPORT int TraceThreadId();
// Names the calling thread in traces written from now on (default: "thread <id>").
SHARDRT_EXPORT void SetTraceThreadName(absl::string_view name);
// True when SetTraceThreadName was called on this thread.
SHARDRT_EXPORT bool TraceThreadNamed();

// A scoped complete span on the calling thread, recorded into the recorder current at
// construction (if any) when it is destroyed. Not thread-safe itself (one owner).
class SHARDRT_EXPORT TraceSpan {
 public:
  // `name` and `category` are copied only when tracing is on.
  TraceSpan(absl::string_view name, absl::string_view category);
  ~TraceSpan();

  TraceSpan(const TraceSpan&) = delete;
  TraceSpan& operator=(const TraceSpan&) = delete;

  // True when this span will record (tracing was on when it opened).
  bool active() const { return storage_ != nullptr; }
  // Adds a string argument shown with the span. No-op when not active.
  void AddArg(absl::string_view key, absl::string_view value);

 private:
  std::shared_ptr<TraceRecorder::Storage> storage_;
  std::unique_ptr<TraceEvent> event_;  // allocated only when active
};

}  // namespace shardrt

#define SHARDRT_TRACE_CONCAT_INNER(a, b) a##b
#define SHARDRT_TRACE_CONCAT(a, b) SHARDRT_TRACE_CONCAT_INNER(a, b)
// Opens a TraceSpan named `name` in `category` until the end of the enclosing scope.
#define SHARDRT_TRACE_SPAN(name, category) \
  ::shardrt::TraceSpan SHARDRT_TRACE_CONCAT(shardrt_trace_span_, __LINE__)(name, category)
