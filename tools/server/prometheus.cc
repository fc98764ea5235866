#include "server/prometheus.h"

#include <algorithm>
#include <cctype>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace shardrt::server {
namespace {

std::string Number(double v) {
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  if (std::isnan(v)) return "NaN";
  if (v == std::floor(v) && std::abs(v) < 1e15) return absl::StrFormat("%.0f", v);
  return absl::StrFormat("%.9g", v);
}

}  // namespace

Histogram::Histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::Observe(double value) {
  const size_t bucket =
      size_t(std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin());
  MutexLock lock(mu_);
  ++counts_[bucket];
  ++count_;
  sum_ += value;
}

Histogram::Snapshot Histogram::snapshot() const {
  MutexLock lock(mu_);
  Snapshot s{bounds_, {}, count_, sum_};
  int64_t running = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) s.cumulative.push_back(running += counts_[i]);
  return s;
}

void PrometheusText::Family(absl::string_view name, absl::string_view type, absl::string_view help) {
  absl::StrAppend(&text_, "# HELP ", name, " ", help, "\n# TYPE ", name, " ", type, "\n");
}

void PrometheusText::Sample(absl::string_view name, absl::string_view labels, double value) {
  absl::StrAppend(&text_, name, labels.empty() ? "" : "{", labels, labels.empty() ? "" : "}",
                  " ", Number(value), "\n");
}

void PrometheusText::Histogram(absl::string_view name, absl::string_view help,
                               const Histogram::Snapshot& h) {
  Family(name, "histogram", help);
  const std::string bucket = absl::StrCat(name, "_bucket");
  for (size_t i = 0; i < h.bounds.size(); ++i) {
    Sample(bucket, absl::StrCat("le=\"", Number(h.bounds[i]), "\""), double(h.cumulative[i]));
  }
  Sample(bucket, "le=\"+Inf\"", double(h.count));
  Sample(absl::StrCat(name, "_sum"), "", h.sum);
  Sample(absl::StrCat(name, "_count"), "", double(h.count));
}

std::string MetricName(absl::string_view name) {
  std::string out;
  for (size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    if (std::isupper(static_cast<unsigned char>(c))) {
      if (i > 0 && !out.empty() && out.back() != '_') out += '_';
      out += char(std::tolower(static_cast<unsigned char>(c)));
    } else if (std::isalnum(static_cast<unsigned char>(c))) {
      out += c;
    } else if (!out.empty() && out.back() != '_') {
      out += '_';
    }
  }
  return out;
}

}  // namespace shardrt::server
