#include "shardrt/llm/sampling.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "absl/strings/str_cat.h"

namespace shardrt::llm {

absl::Status ValidateSampling(const SamplingOptions& options) {
  // Written so that NaN fails every check.
  if (!(options.temperature >= 0 && options.temperature <= 100)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "sampling: temperature ", options.temperature, ": expected a value in [0, 100]"));
  }
  if (!(options.top_p > 0 && options.top_p <= 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("sampling: top-p ", options.top_p, ": expected a value in (0, 1]"));
  }
  if (options.top_k < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("sampling: top-k ", options.top_k, ": expected 0 (no limit) or more"));
  }
  return absl::OkStatus();
}

int32_t Sampler::Sample(std::span<const float> logits) {
  std::vector<int32_t> order(logits.size());
  std::iota(order.begin(), order.end(), 0);
  // The candidates in order of likelihood (ties: the lower id first); only the top k sorted.
  auto more_likely = [&](int32_t a, int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  };
  size_t keep = order.size();
  if (options_.top_k > 0 && size_t(options_.top_k) < keep) keep = size_t(options_.top_k);
  std::partial_sort(order.begin(), order.begin() + std::ptrdiff_t(keep), order.end(),
                    more_likely);
  order.resize(keep);
  const double top = logits[order[0]];
  std::vector<double> p(order.size());
  double total = 0;
  for (size_t i = 0; i < order.size(); ++i) {
    p[i] = std::exp((double(logits[order[i]]) - top) / options_.temperature);
    total += p[i];
  }
  size_t nucleus = 0;
  double mass = 0;
  while (nucleus < order.size() && mass < options_.top_p * total) mass += p[nucleus++];
  nucleus = std::max<size_t>(nucleus, 1);
  double u = std::uniform_real_distribution<double>(0.0, mass)(rng_);
  for (size_t i = 0; i < nucleus; ++i) {
    if (u < p[i]) return order[i];
    u -= p[i];
  }
  return order[nucleus - 1];
}

}  // namespace shardrt::llm
