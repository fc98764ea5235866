// Sampling: how a generated token is chosen from a step's logits.
//
// Temperature 0 is greedy: the most likely token (the lowest id on ties), chosen on the
// devices, so no logits travel to the host. Above 0, the host samples from
// softmax(logits / temperature) restricted to the top_k most likely tokens (0: all) and,
// within those, to the smallest set whose probability reaches top_p (nucleus sampling), with a
// generator seeded by `seed`: the same request on the same model gives the same tokens.
#pragma once

#include <cstdint>
#include <random>
#include <span>

#include "absl/status/status.h"

#include "shardrt/base/export.h"

namespace shardrt::llm {

struct SHARDRT_EXPORT SamplingOptions {
  double temperature = 0.0;  // 0: greedy; else in (0, 100]
  double top_p = 1.0;        // in (0, 1]
  int64_t top_k = 0;         // 0: no limit; else >= 1
  uint64_t seed = 0;
};

// Whether `options` are in range. Error: InvalidArgument naming the option, its value and the
// range. Thread-safe (pure).
[[nodiscard]] SHARDRT_EXPORT absl::Status ValidateSampling(const SamplingOptions& options);

// Draws tokens from logits as `options` say (see above). Not thread-safe: one per generation.
class SHARDRT_EXPORT Sampler {
 public:
  // `options` must be valid (ValidateSampling) with temperature > 0.
  explicit Sampler(const SamplingOptions& options) : options_(options), rng_(options.seed) {}

  // The next token: an index into `logits` (which must not be empty).
  int32_t Sample(std::span<const float> logits);

 private:
  SamplingOptions options_;
  std::mt19937_64 rng_;
};

}  // namespace shardrt::llm
