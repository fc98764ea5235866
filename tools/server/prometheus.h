// Prometheus' text exposition format (version 0.0.4) for shardrt serve's /metrics: counters,
// gauges and histograms written as "# HELP", "# TYPE" and sample lines.
//
// Thread safety: Histogram is thread-safe; PrometheusText is not shared.
#pragma once

#include <cstdint>
#include <string>
#include "absl/strings/string_view.h"
#include <vector>

#include "shardrt/base/mutex.h"

namespace shardrt::server {

// Observations counted into fixed buckets (upper bounds, ascending), with their count and sum.
class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void Observe(double value);
  struct Snapshot {
    std::vector<double> bounds;
    std::vector<int64_t> cumulative;  // per bound, observations <= it
    int64_t count = 0;
    double sum = 0;
  };
  Snapshot snapshot() const;

 private:
  const std::vector<double> bounds_;
  mutable Mutex mu_;
  std::vector<int64_t> counts_ ABSL_GUARDED_BY(mu_);  // per bucket, the last one +Inf
  int64_t count_ ABSL_GUARDED_BY(mu_) = 0;
  double sum_ ABSL_GUARDED_BY(mu_) = 0;
};

// Builds a /metrics page.
class PrometheusText {
 public:
  // A metric family: its HELP and TYPE lines ("counter", "gauge", "histogram", "summary").
  void Family(absl::string_view name, absl::string_view type, absl::string_view help);
  // One sample line: name{labels} value (labels: already formatted, e.g. code="200"; may be
  // empty).
  void Sample(absl::string_view name, absl::string_view labels, double value);
  void Histogram(absl::string_view name, absl::string_view help, const Histogram::Snapshot& h);
  const std::string& text() const { return text_; }

 private:
  std::string text_;
};

// `name` as a Prometheus metric name: CamelCase to snake_case, other characters to '_'.
std::string MetricName(absl::string_view name);

}  // namespace shardrt::server
