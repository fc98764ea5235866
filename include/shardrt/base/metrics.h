// Metrics: named sample series (Metric) and counters (Counter) kept in a registry, reported as
// PyTorch/XLA's text metrics report or as JSON.
//
// A Metric keeps the last `max_samples` samples (a ring buffer: the newest overwrite the oldest)
// plus the count and sum of every sample ever added. A Counter is one atomic integer. Both are
// created on first lookup and never destroyed while their registry lives, so callers look them
// up once and cache the pointer (a function-local static or a member):
//
//   static Metric* const compile_time = GlobalMetrics().GetMetric(kCompileTime, MetricRepr::kTime);
//   ScopedTimer timer(compile_time);
//   static Counter* const cached = GlobalMetrics().GetCounter(kCachedCompile);
//   cached->Add();
//
// GlobalMetrics() is the one process-wide object in shardrt: metrics are a diagnostic side
// channel that every layer writes to. Tests may build private registries instead.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "shardrt/base/export.h"
#include "shardrt/base/mutex.h"

namespace shardrt {

// How a metric's values are printed in the text report.
enum class MetricRepr {
  kNumber,  // "%.2f", e.g. "12.50"
  kBytes,   // powers of 1024 with two decimals, e.g. "1.50MB"
  kTime,    // values in nanoseconds, printed as a duration, e.g. "02s123ms456.789us"
};

// Metric and counter names used by the runtime.
inline constexpr absl::string_view kCompileTime = "CompileTime";
inline constexpr absl::string_view kExecuteReplicatedTime = "ExecuteReplicatedTime";
inline constexpr absl::string_view kExecuteTime = "ExecuteTime";
inline constexpr absl::string_view kTransferToDeviceTime = "TransferToDeviceTime";
inline constexpr absl::string_view kTransferFromDeviceTime = "TransferFromDeviceTime";
inline constexpr absl::string_view kInboundData = "InboundData";
inline constexpr absl::string_view kOutboundData = "OutboundData";
inline constexpr absl::string_view kDeviceLockWait = "DeviceLockWait";
inline constexpr absl::string_view kCachedCompile = "CachedCompile";
inline constexpr absl::string_view kUncachedCompile = "UncachedCompile";
inline constexpr absl::string_view kReplicateShardedData = "ReplicateShardedData";
inline constexpr absl::string_view kReshardData = "ReshardData";
inline constexpr absl::string_view kExecutableIntrospection = "ExecutableIntrospection";
// PJRT handles (buffers, events, executables, clients) whose destruction the plugin refused.
inline constexpr absl::string_view kPjrtDestroyError = "PjrtDestroyError";

// Nanoseconds on the monotonic clock (arbitrary epoch): the timestamps of samples.
[[nodiscard]] SHARDRT_EXPORT int64_t MetricsNowNs();

// Prints `value` as the text report does for `repr`. Thread-safe, pure.
[[nodiscard]] SHARDRT_EXPORT std::string FormatMetricValue(MetricRepr repr, double value);

struct SHARDRT_EXPORT MetricSample {
  int64_t timestamp_ns = 0;  // MetricsNowNs() when added, unless given
  double value = 0.0;
};

// A consistent copy of a metric's state.
struct SHARDRT_EXPORT MetricSnapshot {
  int64_t total_samples = 0;          // every sample ever added (since the last Clear)
  double accumulator = 0.0;           // the sum of every sample ever added
  std::vector<MetricSample> samples;  // the retained ones, oldest first
};

// What the reports print for one metric.
struct SHARDRT_EXPORT MetricStats {
  int64_t total_samples = 0;
  double accumulator = 0.0;
  // Sum of the retained values / retained samples, per second of the window they span (newest
  // minus oldest timestamp). Absent when the window spans no time (fewer than two timestamps).
  std::optional<double> value_rate;
  std::optional<double> rate;
  // (fraction, value): the retained values sorted, element floor(fraction * n) for each fraction
  // (n = retained samples).
  // Empty when nothing is retained.
  std::vector<std::pair<double, double>> percentiles;
};

// Derives the report statistics from a snapshot. Fractions must lie in (0, 1). Pure.
[[nodiscard]] SHARDRT_EXPORT MetricStats ComputeMetricStats(const MetricSnapshot& snapshot,
                                                            absl::Span<const double> fractions);

// A named series of samples. Thread-safe: AddSample takes a short lock (no allocation) and
// writes two cache lines: the one holding the lock and totals, and the ring slot. Aligned to a
// cache line by its alignas(64) member (name_), so the lock line is never shared.
class SHARDRT_EXPORT Metric {
 public:
  // `max_samples` (at least 1) is the ring size.
  Metric(std::string name, MetricRepr repr, int64_t max_samples);

  Metric(const Metric&) = delete;
  Metric& operator=(const Metric&) = delete;

  const std::string& name() const { return name_; }
  MetricRepr repr() const { return repr_; }

  // Adds a sample stamped with MetricsNowNs().
  void AddSample(double value) ABSL_LOCKS_EXCLUDED(mu_);
  // Adds a sample with an explicit timestamp (nanoseconds on the MetricsNowNs clock).
  void AddSample(int64_t timestamp_ns, double value) ABSL_LOCKS_EXCLUDED(mu_);

  [[nodiscard]] MetricSnapshot Snapshot() const ABSL_LOCKS_EXCLUDED(mu_);
  int64_t TotalSamples() const ABSL_LOCKS_EXCLUDED(mu_);
  double Accumulator() const ABSL_LOCKS_EXCLUDED(mu_);

  // Forgets every sample and zeroes the totals.
  void Clear() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  // What every AddSample writes, in one cache line (a sample on a hot path such as a small
  // transfer then costs the line and its ring slot). shardrt::Mutex (a std::mutex) rather than
  // absl::Mutex: a prebuilt Abseil is invisible to ThreadSanitizer.
  mutable Mutex mu_;
  int64_t count_ ABSL_GUARDED_BY(mu_) = 0;
  double accumulator_ ABSL_GUARDED_BY(mu_) = 0.0;
  int64_t next_slot_ ABSL_GUARDED_BY(mu_) = 0;  // the ring slot the next sample goes to
  // Fixed at construction (read-only, shared between cores).
  alignas(64) const std::string name_;
  const MetricRepr repr_;
  const int64_t ring_size_;
  // The ring. The pointer is fixed, the slots are guarded by mu_: GUARDED_BY, so that every
  // use of the pointer needs mu_ (Clang takes no PT_GUARDED_BY on a unique_ptr<T[]>).
  const std::unique_ptr<MetricSample[]> ring_ ABSL_GUARDED_BY(mu_);
};

// A named integer. Thread-safe and lock-free; Add is a relaxed atomic add.
class SHARDRT_EXPORT Counter {
 public:
  explicit Counter(std::string name) : name_(std::move(name)) {}

  Counter(const Counter&) = delete;
  Counter& operator=(const Counter&) = delete;

  const std::string& name() const { return name_; }
  // Adds `delta` (may be negative); returns the value before.
  int64_t Add(int64_t delta = 1) { return value_.fetch_add(delta, std::memory_order_relaxed); }
  int64_t Value() const { return value_.load(std::memory_order_relaxed); }
  void Reset() { value_.store(0, std::memory_order_relaxed); }

 private:
  const std::string name_;
  std::atomic<int64_t> value_{0};
};

// Configuration of a registry.
struct SHARDRT_EXPORT MetricsOptions {
  // Samples each metric retains (PyTorch/XLA's XLA_METRICS_SAMPLES). Values below 1 mean 1.
  int64_t max_samples = 1024;
  // Percentiles reported, as fractions in (0, 1) (XLA_METRICS_PERCENTILES). Others are dropped;
  // the rest are sorted.
  std::vector<double> percentiles = {0.01, 0.05, 0.1, 0.2, 0.5, 0.8, 0.9, 0.95, 0.99};
};

// Owns metrics and counters by name. Thread-safe. Metrics and counters live as long as the
// registry; their pointers stay valid across Reset.
class SHARDRT_EXPORT MetricsRegistry {
 public:
  MetricsRegistry() : MetricsRegistry(MetricsOptions{}) {}
  explicit MetricsRegistry(MetricsOptions options);

  MetricsRegistry(const MetricsRegistry&) = delete;
  MetricsRegistry& operator=(const MetricsRegistry&) = delete;

  // The metric called `name`, created on first use with `repr`. A later call with another
  // repr returns the existing metric unchanged. Never null. Takes the registry lock: cache it.
  Metric* GetMetric(absl::string_view name, MetricRepr repr) ABSL_LOCKS_EXCLUDED(mu_);
  // The counter called `name`, created at zero on first use. Never null. Cache it.
  Counter* GetCounter(absl::string_view name) ABSL_LOCKS_EXCLUDED(mu_);

  // The counter's value; 0 when there is no such counter.
  int64_t CounterValue(absl::string_view name) const ABSL_LOCKS_EXCLUDED(mu_);
  // The metric's state; nullopt when there is no such metric.
  std::optional<MetricSnapshot> MetricData(absl::string_view name) const
      ABSL_LOCKS_EXCLUDED(mu_);
  // Names of the metrics with at least one sample / the counters with a non-zero value, sorted.
  std::vector<std::string> MetricNames() const ABSL_LOCKS_EXCLUDED(mu_);
  std::vector<std::string> CounterNames() const ABSL_LOCKS_EXCLUDED(mu_);

  // PyTorch/XLA's report: metrics with samples, then counters with a non-zero value, each group
  // sorted by name:
  //   Metric: CompileTime
  //     TotalSamples: 2
  //     Accumulator: 03s000ms000.000us
  //     ValueRate: 02s000ms000.000us / second      (only when the window spans time)
  //     Rate: 2 / second                           (idem)
  //     Percentiles: 1%=01s000ms000.000us; 5%=...; 99%=02s000ms000.000us
  //   Counter: CachedCompile
  //     Value: 3
  // Every line ends with '\n'; empty when there is nothing to report.
  [[nodiscard]] std::string TextReport() const ABSL_LOCKS_EXCLUDED(mu_);
  // The same content as one JSON object, raw numbers (times in ns, sizes in bytes):
  //   {"metrics": {"CompileTime": {"repr": "time", "total_samples": 2, "accumulator": 3e9,
  //    "value_rate": 2e9, "rate": 2, "percentiles": {"1": 1e9, ..., "99": 2e9}}},
  //    "counters": {"CachedCompile": 3}}
  // value_rate and rate are null when the window spans no time.
  [[nodiscard]] std::string JsonReport() const ABSL_LOCKS_EXCLUDED(mu_);

  // Clears every metric and zeroes every counter (for tests and between benchmark runs).
  void Reset() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  const int64_t max_samples_;
  const std::vector<double> percentiles_;
  mutable Mutex mu_;
  std::map<std::string, std::unique_ptr<Metric>> metrics_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::unique_ptr<Counter>> counters_ ABSL_GUARDED_BY(mu_);
};

// The process-wide registry the runtime reports to. Created on first use, never destroyed (so
// it is usable during static destruction). Thread-safe.
SHARDRT_EXPORT MetricsRegistry& GlobalMetrics();

// Adds the time from construction to destruction, in ns, to a metric. Does nothing when the
// metric is null. Not thread-safe itself (one owner), the metric is.
class SHARDRT_EXPORT ScopedTimer {
 public:
  explicit ScopedTimer(Metric* metric) : metric_(metric), start_ns_(MetricsNowNs()) {}
  ~ScopedTimer();

  ScopedTimer(const ScopedTimer&) = delete;
  ScopedTimer& operator=(const ScopedTimer&) = delete;

 private:
  Metric* const metric_;
  const int64_t start_ns_;
};

}  // namespace shardrt
