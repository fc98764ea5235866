#include "shardrt/base/metrics.h"

#include "shardrt/base/json_writer.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <chrono>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace shardrt {
namespace {

std::string FormatBytes(double value) {
  static constexpr std::array<const char*, 6> kSuffixes = {"B", "KB", "MB", "GB", "TB", "PB"};
  size_t suffix = 0;
  while (suffix + 1 < kSuffixes.size() && value >= 1024.0) {
    value /= 1024.0;
    ++suffix;
  }
  return absl::StrFormat("%.2f%s", value, kSuffixes[suffix]);
}

// PyTorch/XLA's duration layout: d, h, m, s (2 digits), ms (3 digits), us (7 wide, 3 decimals),
// zero-filled, leading zero parts left out, the us part always printed. Whole parts are
// truncated (PyTorch/XLA rounds them, printing 2.6 s as "03s600ms...").
std::string FormatTime(double ns) {
  if (!std::isfinite(ns)) return absl::StrCat(ns, "ns");
  if (ns < 0) return absl::StrCat("-", FormatTime(-ns));
  if (ns >= 9e18) return absl::StrFormat("%.3es", ns / 1e9);  // beyond int64 nanoseconds
  struct Part {
    const char* suffix;
    int64_t ns;
    int width;
  };
  static constexpr Part kParts[] = {{"d", 86'400'000'000'000, 2}, {"h", 3'600'000'000'000, 2},
                                    {"m", 60'000'000'000, 2},     {"s", 1'000'000'000, 2},
                                    {"ms", 1'000'000, 3}};
  int64_t rest = std::llround(ns);
  std::string out;
  for (const Part& part : kParts) {
    const int64_t whole = rest / part.ns;
    if (whole > 0 || !out.empty()) {
      absl::StrAppendFormat(&out, "%0*d%s", part.width, whole, part.suffix);
    }
    rest -= whole * part.ns;
  }
  absl::StrAppendFormat(&out, "%07.3fus", static_cast<double>(rest) / 1000.0);
  return out;
}

// Whole numbers below 2^53 in plain digits, others in the shortest text that reads back as the
// same double; null for NaN and infinities.
std::string JsonNumber(double value) {
  if (!std::isfinite(value)) return "null";
  if (value == std::trunc(value) && std::fabs(value) < 9007199254740992.0) {
    return absl::StrFormat("%.0f", value);
  }
  char buffer[32];
  auto [end, ec] = std::to_chars(buffer, buffer + sizeof(buffer), value);
  if (ec != std::errc()) return "null";
  return std::string(buffer, end);
}


absl::string_view ReprName(MetricRepr repr) {
  switch (repr) {
    case MetricRepr::kNumber: return "number";
    case MetricRepr::kBytes: return "bytes";
    case MetricRepr::kTime: return "time";
  }
  return "number";
}

// "1", "5", "99", "99.9": a fraction as a percentage, as the report labels it.
std::string PercentLabel(double fraction) { return absl::StrFormat("%g", fraction * 100.0); }

std::vector<double> ValidPercentiles(std::vector<double> fractions) {
  fractions.erase(std::remove_if(fractions.begin(), fractions.end(),
                                 [](double f) { return !(f > 0.0 && f < 1.0); }),
                  fractions.end());
  std::sort(fractions.begin(), fractions.end());
  return fractions;
}

}  // namespace

int64_t MetricsNowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::string FormatMetricValue(MetricRepr repr, double value) {
  switch (repr) {
    case MetricRepr::kBytes: return FormatBytes(value);
    case MetricRepr::kTime: return FormatTime(value);
    case MetricRepr::kNumber: break;
  }
  return absl::StrFormat("%.2f", value);
}

MetricStats ComputeMetricStats(const MetricSnapshot& snapshot,
                               absl::Span<const double> fractions) {
  MetricStats stats;
  stats.total_samples = snapshot.total_samples;
  stats.accumulator = snapshot.accumulator;
  const std::vector<MetricSample>& samples = snapshot.samples;
  if (samples.empty()) return stats;

  const int64_t window_ns = samples.back().timestamp_ns - samples.front().timestamp_ns;
  if (window_ns > 0) {
    double retained_sum = 0.0;
    for (const MetricSample& sample : samples) retained_sum += sample.value;
    const double window_s = static_cast<double>(window_ns) / 1e9;
    stats.value_rate = retained_sum / window_s;
    stats.rate = static_cast<double>(samples.size()) / window_s;
  }
  std::vector<double> values;
  values.reserve(samples.size());
  for (const MetricSample& sample : samples) values.push_back(sample.value);
  std::sort(values.begin(), values.end());
  for (const double fraction : fractions) {
    // The epsilon keeps e.g. 0.57 * 100 = 56.999... at index 57.
    const double position = std::floor(fraction * static_cast<double>(values.size()) + 1e-9);
    const size_t index = std::min(values.size() - 1, static_cast<size_t>(std::max(0.0, position)));
    stats.percentiles.emplace_back(fraction, values[index]);
  }
  return stats;
}

// ---------------------------------------------------------------------------------------------
// Metric

static_assert(alignof(Metric) == 64, "a Metric starts a cache line (its lock and totals)");

Metric::Metric(std::string name, MetricRepr repr, int64_t max_samples)
    : name_(std::move(name)),
      repr_(repr),
      ring_size_(std::max<int64_t>(1, max_samples)),
      ring_(std::make_unique<MetricSample[]>(static_cast<size_t>(ring_size_))) {}

void Metric::AddSample(double value) { AddSample(MetricsNowNs(), value); }

void Metric::AddSample(int64_t timestamp_ns, double value) {
  MutexLock lock(mu_);
  ring_[static_cast<size_t>(next_slot_)] = {timestamp_ns, value};
  if (++next_slot_ == ring_size_) next_slot_ = 0;
  ++count_;
  accumulator_ += value;
}

MetricSnapshot Metric::Snapshot() const {
  MetricSnapshot snapshot;
  MutexLock lock(mu_);
  snapshot.total_samples = count_;
  snapshot.accumulator = accumulator_;
  const MetricSample* begin = ring_.get();
  const MetricSample* end = begin + ring_size_;
  if (count_ <= ring_size_) {
    snapshot.samples.assign(begin, begin + count_);
  } else {
    const MetricSample* oldest = begin + next_slot_;  // the slot the next sample overwrites
    snapshot.samples.reserve(static_cast<size_t>(ring_size_));
    snapshot.samples.insert(snapshot.samples.end(), oldest, end);
    snapshot.samples.insert(snapshot.samples.end(), begin, oldest);
  }
  return snapshot;
}

int64_t Metric::TotalSamples() const {
  MutexLock lock(mu_);
  return count_;
}

double Metric::Accumulator() const {
  MutexLock lock(mu_);
  return accumulator_;
}

void Metric::Clear() {
  MutexLock lock(mu_);
  count_ = 0;
  accumulator_ = 0.0;
  next_slot_ = 0;
  std::fill(ring_.get(), ring_.get() + ring_size_, MetricSample{});
}

// ---------------------------------------------------------------------------------------------
// MetricsRegistry

MetricsRegistry::MetricsRegistry(MetricsOptions options)
    : max_samples_(std::max<int64_t>(1, options.max_samples)),
      percentiles_(ValidPercentiles(std::move(options.percentiles))) {}

Metric* MetricsRegistry::GetMetric(absl::string_view name, MetricRepr repr) {
  MutexLock lock(mu_);
  std::unique_ptr<Metric>& slot = metrics_[std::string(name)];
  if (slot == nullptr) slot = std::make_unique<Metric>(std::string(name), repr, max_samples_);
  return slot.get();
}

Counter* MetricsRegistry::GetCounter(absl::string_view name) {
  MutexLock lock(mu_);
  std::unique_ptr<Counter>& slot = counters_[std::string(name)];
  if (slot == nullptr) slot = std::make_unique<Counter>(std::string(name));
  return slot.get();
}

int64_t MetricsRegistry::CounterValue(absl::string_view name) const {
  MutexLock lock(mu_);
  auto it = counters_.find(std::string(name));
  return it == counters_.end() ? 0 : it->second->Value();
}

std::optional<MetricSnapshot> MetricsRegistry::MetricData(absl::string_view name) const {
  MutexLock lock(mu_);
  auto it = metrics_.find(std::string(name));
  if (it == metrics_.end()) return std::nullopt;
  return it->second->Snapshot();
}

std::vector<std::string> MetricsRegistry::MetricNames() const {
  MutexLock lock(mu_);
  std::vector<std::string> names;
  for (const auto& [name, metric] : metrics_) {
    if (metric->TotalSamples() > 0) names.push_back(name);
  }
  return names;
}

std::vector<std::string> MetricsRegistry::CounterNames() const {
  MutexLock lock(mu_);
  std::vector<std::string> names;
  for (const auto& [name, counter] : counters_) {
    if (counter->Value() != 0) names.push_back(name);
  }
  return names;
}

std::string MetricsRegistry::TextReport() const {
  MutexLock lock(mu_);
  std::string out;
  for (const auto& [name, metric] : metrics_) {
    const MetricSnapshot snapshot = metric->Snapshot();
    if (snapshot.total_samples == 0) continue;
    const MetricStats stats = ComputeMetricStats(snapshot, percentiles_);
    const MetricRepr repr = metric->repr();
    absl::StrAppend(&out, "Metric: ", name, "\n");
    absl::StrAppend(&out, "  TotalSamples: ", stats.total_samples, "\n");
    absl::StrAppend(&out, "  Accumulator: ", FormatMetricValue(repr, stats.accumulator), "\n");
    if (stats.value_rate.has_value()) {
      absl::StrAppend(&out, "  ValueRate: ", FormatMetricValue(repr, *stats.value_rate),
                      " / second\n");
      absl::StrAppendFormat(&out, "  Rate: %g / second\n", *stats.rate);
    }
    absl::StrAppend(&out, "  Percentiles: ");
    for (size_t i = 0; i < stats.percentiles.size(); ++i) {
      const auto& [fraction, value] = stats.percentiles[i];
      absl::StrAppend(&out, i > 0 ? "; " : "", PercentLabel(fraction), "%=",
                      FormatMetricValue(repr, value));
    }
    absl::StrAppend(&out, "\n");
  }
  for (const auto& [name, counter] : counters_) {
    const int64_t value = counter->Value();
    if (value == 0) continue;
    absl::StrAppend(&out, "Counter: ", name, "\n  Value: ", value, "\n");
  }
  return out;
}

std::string MetricsRegistry::JsonReport() const {
  MutexLock lock(mu_);
  std::string out = "{\"metrics\": {";
  bool first = true;
  for (const auto& [name, metric] : metrics_) {
    const MetricSnapshot snapshot = metric->Snapshot();
    if (snapshot.total_samples == 0) continue;
    const MetricStats stats = ComputeMetricStats(snapshot, percentiles_);
    absl::StrAppend(&out, first ? "" : ", ", JsonString(name), ": {\"repr\": ",
                    JsonString(ReprName(metric->repr())),
                    ", \"total_samples\": ", stats.total_samples,
                    ", \"accumulator\": ", JsonNumber(stats.accumulator),
                    ", \"value_rate\": ",
                    stats.value_rate ? JsonNumber(*stats.value_rate) : "null",
                    ", \"rate\": ", stats.rate ? JsonNumber(*stats.rate) : "null",
                    ", \"percentiles\": {");
    for (size_t i = 0; i < stats.percentiles.size(); ++i) {
      const auto& [fraction, value] = stats.percentiles[i];
      absl::StrAppend(&out, i > 0 ? ", " : "", JsonString(PercentLabel(fraction)), ": ",
                      JsonNumber(value));
    }
    absl::StrAppend(&out, "}}");
    first = false;
  }
  absl::StrAppend(&out, "}, \"counters\": {");
  first = true;
  for (const auto& [name, counter] : counters_) {
    const int64_t value = counter->Value();
    if (value == 0) continue;
    absl::StrAppend(&out, first ? "" : ", ", JsonString(name), ": ", value);
    first = false;
  }
  absl::StrAppend(&out, "}}");
  return out;
}

void MetricsRegistry::Reset() {
  MutexLock lock(mu_);
  for (auto& [name, metric] : metrics_) metric->Clear();
  for (auto& [name, counter] : counters_) counter->Reset();
}

MetricsRegistry& GlobalMetrics() {
  static MetricsRegistry* const registry = new MetricsRegistry();
  return *registry;
}

ScopedTimer::~ScopedTimer() {
  if (metric_ == nullptr) return;
  const int64_t now = MetricsNowNs();
  metric_->AddSample(now, static_cast<double>(now - start_ns_));
}

}  // namespace shardrt
