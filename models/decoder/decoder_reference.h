// An independent host implementation of the demo decoder (plain loops, double accumulation),
// used to check what the emitted programs compute. It runs the prompt one position at a time
// through its own KV cache, so it shares no code path with the programs' batched prefill.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "decoder/decoder_config.h"
#include "decoder/decoder_weights.h"

namespace shardrt::decoder {

struct ReferenceResult {
  // Greedy tokens: tokens[0] follows the prompt, tokens[i] follows tokens[i - 1].
  std::vector<int32_t> tokens;
  // logits[i] (vocab values) are the ones tokens[i] is the argmax of (lowest index on ties).
  std::vector<std::vector<float>> logits;
};

// Generates `num_tokens` tokens after `prompt` (config.prompt_len ids in [0, vocab)).
// Errors: InvalidArgument for a bad config, prompt, token count (ValidateGeneration) or weights
// that do not match WeightSpecs(config).
[[nodiscard]] absl::StatusOr<ReferenceResult> RunReference(const DecoderConfig& config,
                                                           const DecoderWeights& weights,
                                                           absl::Span<const int32_t> prompt,
                                                           int64_t num_tokens);

}  // namespace shardrt::decoder
