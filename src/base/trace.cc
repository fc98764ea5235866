#include "shardrt/base/trace.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "shardrt/base/json_writer.h"
#include "shardrt/base/metrics.h"
#include "shardrt/base/mutex.h"

namespace shardrt {

// shardrt::Mutex (a std::mutex) rather than absl::Mutex throughout: a prebuilt Abseil is
// invisible to ThreadSanitizer.
struct TraceRecorder::Storage {
  Storage(int64_t origin, int64_t max) : origin_ns(origin), max_events(max) {}

  void Add(TraceEvent event) ABSL_LOCKS_EXCLUDED(mu) {
    MutexLock lock(mu);
    if (static_cast<int64_t>(events.size()) >= max_events) {
      ++dropped;
      return;
    }
    events.push_back(std::move(event));
  }

  const int64_t origin_ns;
  const int64_t max_events;
  mutable Mutex mu;
  std::vector<TraceEvent> events ABSL_GUARDED_BY(mu);
  int64_t dropped ABSL_GUARDED_BY(mu) = 0;
};

namespace {

// Process-wide tracing state. Allocated once and never destroyed, so spans closing during static
// destruction still find it.
struct TraceGlobals {
  Mutex mu;
  TraceRecorder* current ABSL_GUARDED_BY(mu) = nullptr;
  std::shared_ptr<TraceRecorder::Storage> current_storage ABSL_GUARDED_BY(mu);
  std::map<int, std::string> thread_names ABSL_GUARDED_BY(mu);
};

TraceGlobals& Globals() {
  static TraceGlobals* const globals = new TraceGlobals();
  return *globals;
}

std::atomic<bool> g_enabled{false};
std::atomic<int> g_next_tid{1};
thread_local int t_tid = 0;
thread_local bool t_named = false;

std::shared_ptr<TraceRecorder::Storage> CurrentStorage() {
  TraceGlobals& g = Globals();
  MutexLock lock(g.mu);
  return g.current_storage;
}

void AppendJsonString(std::string* out, absl::string_view s) { out->append(JsonString(s)); }

// Microseconds with nanosecond resolution, as the format's "ts" and "dur" expect.
std::string Micros(int64_t ns) { return absl::StrFormat("%.3f", static_cast<double>(ns) / 1e3); }

std::string JsonNumber(double v) {
  if (!std::isfinite(v)) return "0";  // JSON has no NaN / Inf
  return absl::StrFormat("%.17g", v);
}

void AddAsyncSpanTo(TraceRecorder::Storage& storage, absl::string_view name,
                    absl::string_view category, uint64_t id, int64_t start_ns, int64_t end_ns,
                    std::vector<std::pair<std::string, std::string>> args) {
  TraceEvent begin;
  begin.phase = TraceEvent::Phase::kAsyncBegin;
  begin.name = std::string(name);
  begin.category = std::string(category);
  begin.start_ns = start_ns;
  begin.tid = TraceThreadId();
  begin.id = id;
  begin.args = std::move(args);
  TraceEvent end = begin;
  end.phase = TraceEvent::Phase::kAsyncEnd;
  end.start_ns = std::max(end_ns, start_ns);
  end.args.clear();
  MutexLock lock(storage.mu);
  if (static_cast<int64_t>(storage.events.size()) + 2 > storage.max_events) {
    storage.dropped += 2;
    return;
  }
  storage.events.push_back(std::move(begin));
  storage.events.push_back(std::move(end));
}

void AddCounterTo(TraceRecorder::Storage& storage, absl::string_view name,
                  absl::string_view category, int64_t timestamp_ns, double value) {
  TraceEvent e;
  e.phase = TraceEvent::Phase::kCounter;
  e.name = std::string(name);
  e.category = std::string(category);
  e.start_ns = timestamp_ns;
  e.tid = TraceThreadId();
  e.value = value;
  storage.Add(std::move(e));
}

}  // namespace

TraceRecorder::TraceRecorder(TraceOptions options)
    : storage_(std::make_shared<Storage>(MetricsNowNs(), std::max<int64_t>(options.max_events, 0))) {}

TraceRecorder::~TraceRecorder() { Stop(); }

absl::Status TraceRecorder::Start() {
  TraceGlobals& g = Globals();
  MutexLock lock(g.mu);
  if (g.current == this) return absl::OkStatus();
  if (g.current != nullptr) {
    return absl::FailedPreconditionError("another trace recorder is already recording");
  }
  g.current = this;
  g.current_storage = storage_;
  g_enabled.store(true, std::memory_order_release);
  return absl::OkStatus();
}

void TraceRecorder::Stop() {
  TraceGlobals& g = Globals();
  MutexLock lock(g.mu);
  if (g.current != this) return;
  g_enabled.store(false, std::memory_order_release);
  g.current = nullptr;
  g.current_storage.reset();
}

bool TraceRecorder::recording() const {
  TraceGlobals& g = Globals();
  MutexLock lock(g.mu);
  return g.current == this;
}

void TraceRecorder::AddSpan(absl::string_view name, absl::string_view category, int64_t start_ns,
                            int64_t end_ns, std::vector<std::pair<std::string, std::string>> args) {
  TraceEvent e;
  e.phase = TraceEvent::Phase::kComplete;
  e.name = std::string(name);
  e.category = std::string(category);
  e.start_ns = start_ns;
  e.duration_ns = std::max<int64_t>(end_ns - start_ns, 0);
  e.tid = TraceThreadId();
  e.args = std::move(args);
  storage_->Add(std::move(e));
}

void TraceRecorder::AddAsyncSpan(absl::string_view name, absl::string_view category, uint64_t id,
                                 int64_t start_ns, int64_t end_ns,
                                 std::vector<std::pair<std::string, std::string>> args) {
  AddAsyncSpanTo(*storage_, name, category, id, start_ns, end_ns, std::move(args));
}

void TraceRecorder::AddCounter(absl::string_view name, absl::string_view category,
                               int64_t timestamp_ns, double value) {
  AddCounterTo(*storage_, name, category, timestamp_ns, value);
}

std::vector<TraceEvent> TraceRecorder::Events() const {
  MutexLock lock(storage_->mu);
  return storage_->events;
}

int64_t TraceRecorder::num_events() const {
  MutexLock lock(storage_->mu);
  return static_cast<int64_t>(storage_->events.size());
}

int64_t TraceRecorder::dropped_events() const {
  MutexLock lock(storage_->mu);
  return storage_->dropped;
}

void TraceRecorder::Clear() {
  MutexLock lock(storage_->mu);
  storage_->events.clear();
  storage_->dropped = 0;
}

std::string TraceRecorder::ToJson() const {
  std::vector<TraceEvent> events;
  int64_t dropped = 0;
  {
    MutexLock lock(storage_->mu);
    events = storage_->events;
    dropped = storage_->dropped;
  }
  std::set<int> tids;
  for (const TraceEvent& e : events) tids.insert(e.tid);
  std::map<int, std::string> names;
  {
    TraceGlobals& g = Globals();
    MutexLock lock(g.mu);
    names = g.thread_names;
  }
  const std::string pid = absl::StrCat(static_cast<int64_t>(getpid()));
  const int64_t origin = storage_->origin_ns;

  std::string out = "{\"traceEvents\":[\n";
  absl::StrAppend(&out, "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":", pid,
                  ",\"tid\":0,\"args\":{\"name\":\"shardrt\"}}");
  for (int tid : tids) {
    auto it = names.find(tid);
    std::string name = it != names.end() ? it->second : absl::StrCat("thread ", tid);
    absl::StrAppend(&out, ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":", pid,
                    ",\"tid\":", tid, ",\"args\":{\"name\":");
    AppendJsonString(&out, name);
    absl::StrAppend(&out, "}}");
    // Keeps viewers' thread order stable: numbered as first recorded.
    absl::StrAppend(&out, ",\n{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":", pid,
                    ",\"tid\":", tid, ",\"args\":{\"sort_index\":", tid, "}}");
  }
  for (const TraceEvent& e : events) {
    out.append(",\n{\"name\":");
    AppendJsonString(&out, e.name);
    out.append(",\"cat\":");
    AppendJsonString(&out, e.category.empty() ? "shardrt" : e.category);
    absl::StrAppend(&out, ",\"ph\":\"", std::string(1, static_cast<char>(e.phase)),
                    "\",\"ts\":", Micros(e.start_ns - origin));
    if (e.phase == TraceEvent::Phase::kComplete) {
      absl::StrAppend(&out, ",\"dur\":", Micros(e.duration_ns));
    }
    if (e.phase == TraceEvent::Phase::kAsyncBegin || e.phase == TraceEvent::Phase::kAsyncEnd) {
      absl::StrAppend(&out, ",\"id\":\"0x", absl::Hex(e.id), "\"");
    }
    absl::StrAppend(&out, ",\"pid\":", pid, ",\"tid\":", e.tid);
    if (e.phase == TraceEvent::Phase::kCounter) {
      absl::StrAppend(&out, ",\"args\":{\"value\":", JsonNumber(e.value), "}");
    } else if (!e.args.empty()) {
      out.append(",\"args\":{");
      for (size_t i = 0; i < e.args.size(); ++i) {
        if (i > 0) out.push_back(',');
        AppendJsonString(&out, e.args[i].first);
        out.push_back(':');
        AppendJsonString(&out, e.args[i].second);
      }
      out.push_back('}');
    }
    out.push_back('}');
  }
  absl::StrAppend(&out, "\n],\"displayTimeUnit\":\"ms\",\"otherData\":{\"dropped_events\":",
                  dropped, "}}\n");
  return out;
}

absl::Status TraceRecorder::WriteJson(const std::string& path) const {
  const std::string json = ToJson();
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) {
    return absl::UnavailableError(
        absl::StrCat("cannot write trace file ", path, ": ", std::strerror(errno)));
  }
  const size_t written = std::fwrite(json.data(), 1, json.size(), f);
  const bool write_failed = written != json.size();
  const int write_errno = errno;
  if (std::fclose(f) != 0 || write_failed) {
    return absl::UnavailableError(absl::StrCat("cannot write trace file ", path, ": ",
                                               std::strerror(write_failed ? write_errno : errno)));
  }
  return absl::OkStatus();
}

TraceRecorder* CurrentTraceRecorder() {
  if (!g_enabled.load(std::memory_order_relaxed)) return nullptr;
  TraceGlobals& g = Globals();
  MutexLock lock(g.mu);
  return g.current;
}

bool TracingEnabled() { return g_enabled.load(std::memory_order_relaxed); }

void TraceAsyncSpan(absl::string_view name, absl::string_view category, uint64_t id,
                    int64_t start_ns, int64_t end_ns,
                    std::vector<std::pair<std::string, std::string>> args) {
  if (!g_enabled.load(std::memory_order_relaxed)) return;
  std::shared_ptr<TraceRecorder::Storage> storage = CurrentStorage();
  if (storage != nullptr) {
    AddAsyncSpanTo(*storage, name, category, id, start_ns, end_ns, std::move(args));
  }
}

void TraceCounter(absl::string_view name, absl::string_view category, int64_t timestamp_ns,
                  double value) {
  if (!g_enabled.load(std::memory_order_relaxed)) return;
  std::shared_ptr<TraceRecorder::Storage> storage = CurrentStorage();
  if (storage != nullptr) AddCounterTo(*storage, name, category, timestamp_ns, value);
}

int TraceThreadId() {
  if (t_tid == 0) t_tid = g_next_tid.fetch_add(1, std::memory_order_relaxed);
  return t_tid;
}

void SetTraceThreadName(absl::string_view name) {
  const int tid = TraceThreadId();
  TraceGlobals& g = Globals();
  MutexLock lock(g.mu);
  g.thread_names[tid] = std::string(name);
  t_named = true;
}

bool TraceThreadNamed() { return t_named; }

TraceSpan::TraceSpan(absl::string_view name, absl::string_view category) {
  if (!g_enabled.load(std::memory_order_relaxed)) return;
  storage_ = CurrentStorage();
  if (storage_ == nullptr) return;  // stopped in between
  event_ = std::make_unique<TraceEvent>();
  event_->name = std::string(name);
  event_->category = std::string(category);
  event_->tid = TraceThreadId();
  event_->start_ns = MetricsNowNs();
}

TraceSpan::~TraceSpan() {
  if (storage_ == nullptr) return;
  event_->duration_ns = MetricsNowNs() - event_->start_ns;
  storage_->Add(std::move(*event_));
}

void TraceSpan::AddArg(absl::string_view key, absl::string_view value) {
  if (event_ == nullptr) return;
  event_->args.emplace_back(std::string(key), std::string(value));
}

}  // namespace shardrt
