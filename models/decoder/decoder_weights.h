// Deterministic weights for the demo decoder, generated from a seed (nothing is downloaded).
//
// Every array has its own splitmix64 stream, started from the seed and the array's name, so an
// array's values depend only on (seed, name, shape) and never on the number of devices or on the
// order arrays are generated in. Each draw takes the top 24 bits of a splitmix64 output as a
// uniform float u in [-1, 1) (exact in f32), then scales it:
//   embed           u
//   pos_embed       0.1 * u
//   *_norm gains    1 + 0.1 * u
//   matrices        u / sqrt(fan_in)   (fan_in = dims[0])
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "decoder/decoder_config.h"

namespace shardrt::decoder {

// One host array: row-major f32 values of spec.dims.
struct WeightArray {
  ArraySpec spec;
  std::vector<float> values;
};

struct DecoderWeights {
  uint64_t seed = 0;
  std::vector<WeightArray> arrays;  // in WeightSpecs order (the programs' parameter order)

  // The array called `name`, or null.
  const WeightArray* Find(absl::string_view name) const;
};

// Generates every weight of `config`. Error: InvalidArgument from ValidateConfig.
[[nodiscard]] absl::StatusOr<DecoderWeights> GenerateWeights(const DecoderConfig& config,
                                                             uint64_t seed);

// config.prompt_len token ids in [0, vocab), from the seed's "prompt" stream.
std::vector<int32_t> GeneratePrompt(const DecoderConfig& config, uint64_t seed);

// The part of `values` (row-major, global shape spec.dims) that partition `partition` of
// `num_partitions` holds under spec's sharding: along split_dim, the indices
// [partition * n / P, (partition + 1) * n / P); the whole array when replicated.
std::vector<float> ExtractShard(absl::Span<const float> values, const ArraySpec& spec,
                                int64_t partition, int64_t num_partitions);

}  // namespace shardrt::decoder
