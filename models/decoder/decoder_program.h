// The StableHLO emitter of the demo decoder: a DecoderConfig becomes the MLIR text of two SPMD
// programs (GSPMD style: `mhlo.sharding` on every parameter and result, module attributes
// mhlo.num_partitions = config.num_partitions, mhlo.num_replicas = 1). Every tensor is f32
// except token ids and positions (s32). With L = n_layers and C = 2L cache arrays
// (CacheSpecs: layer0.k_cache, layer0.v_cache, layer1.k_cache, ...), W = WeightSpecs:
//
//   prefill(tokens s32[prompt_len], W...)
//     -> (caches[C] f32[n_heads, max_seq, head_dim], next_token s32[], logits f32[vocab])
//        Runs the prompt at positions 0..prompt_len-1; the caches hold its keys and values at
//        those positions and zeros after; logits are those of the last prompt position and
//        next_token is their argmax.
//
//   decode_step(caches[C], token s32[], position s32[], W...)
//     -> (caches[C], next_token s32[], logits f32[vocab])
//        Runs one token at `position` (0 <= position < max_seq, caches filled below it): writes
//        its key and value at `position`, attends to positions <= position. Parameter i < C is
//        aliased to output i (`tf.aliasing_output`): the caches are donated every step.
//
// next_token is the greedy choice, computed in the program: the lowest index among the maximal
// logits. Shardings: weights per WeightSpecs, caches split by heads, everything else replicated;
// GSPMD inserts the all-reduces after wo and w2.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "decoder/decoder_config.h"
#include "shardrt/program/program_text.h"

namespace shardrt::decoder {

struct DecoderProgram {
  std::string name;  // "prefill" or "decode_step"
  std::string mlir;  // StableHLO text, compile with num_partitions = config.num_partitions
  std::vector<ArraySpec> parameters;  // global shapes and shardings, in order
  std::vector<ArraySpec> outputs;
  // (parameter index, output index) pairs of donated parameters.
  std::vector<std::pair<int64_t, int64_t>> aliases;
  // The global shapes of @main's parameters and results as written: a CompileRequest's
  // global_shapes, so the text need not be read back for them.
  ProgramSignature signature;
};

// Error: InvalidArgument from ValidateConfig, or WriteModule's.
[[nodiscard]] absl::StatusOr<DecoderProgram> EmitPrefill(const DecoderConfig& config);
[[nodiscard]] absl::StatusOr<DecoderProgram> EmitDecodeStep(const DecoderConfig& config);

}  // namespace shardrt::decoder
