// The StableHLO emitter of a Llama model: a LlamaConfig becomes the MLIR text of two SPMD
// programs for P devices, written per device (manual SPMD: every parameter enters per-device
// code through @SPMDFullToShardShape and every result leaves through @SPMDShardToFullShape) with
// explicit collectives, so the communication is exactly what is written here:
//
//   prefill(tokens s32[S], length s32[], W...)
//       -> (k_cache, v_cache, next_token s32[], logits f32[vocab])
//     Runs the prompt tokens[0, length) at positions 0..length-1 (tokens past `length` are
//     padding: computed, never attended to by real positions, overwritten by decoding). The
//     caches hold the keys and values of positions 0..S-1 and zeros after; logits are those of
//     position length-1, next_token their argmax (lowest id on ties).
//
//   decode(k_cache, v_cache, token s32[], position s32[], W...)
//       -> (k_cache, v_cache, next_token, logits)
//     Runs one token at `position`: attends to positions 0..position, then writes its key and
//     value there. The caches are donated: parameters 0 and 1 alias outputs 0 and 1.
//
// W = WeightSpecs(config) (the layers' weights stacked, layer first); caches =
// CacheSpecs(config, P, cache_len), position p at device p % P, slot p / P. Each program is one
// loop (stablehlo.while) over the layers that slices the layer's weights out of the stacked
// ones, so its size and compile time do not grow with the layers. A decode step's attention is
// a loop over blocks of `block` positions (block / P slots per device) that stops after the
// block holding `position`: a step costs what the filled positions cost, not the whole cache,
// and one compiled decode program serves every position. The cached positions before the
// token are read in the layer loop, the token's own key and value join the softmax directly,
// and every layer's new key and value are written into the caches once, after the loop (a
// cache written inside the loop that also reads it would be copied every layer).
//
// Per layer and step the devices exchange: one all-gather of the q/k/v projections, one
// all-gather of each device's partial attention (max, sum, weighted values, merged block by
// block and then across devices exactly as in a single softmax), one all-gather of the output
// projection and one all-reduce of the MLP. Plus one all-reduce for the embedding lookup and
// one all-gather of the argmax candidates.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "llama/llama_config.h"
#include "shardrt/program/program_text.h"

namespace shardrt::llama {

// The programs' parameter and output positions (the weights, in WeightSpecs order, follow the
// parameters listed here).
struct PrefillParameter {
  static constexpr size_t kTokens = 0;
  static constexpr size_t kLength = 1;
  static constexpr size_t kFirstWeight = 2;
};
struct DecodeParameter {
  static constexpr size_t kKeyCache = 0;
  static constexpr size_t kValueCache = 1;
  static constexpr size_t kToken = 2;
  static constexpr size_t kPosition = 3;
  static constexpr size_t kFirstWeight = 4;
};
struct ProgramOutput {  // of both programs
  static constexpr size_t kKeyCache = 0;
  static constexpr size_t kValueCache = 1;
  static constexpr size_t kNextToken = 2;
  static constexpr size_t kLogits = 3;
};

struct LlamaProgram {
  std::string name;  // e.g. "prefill_64" or "decode_2048" (the cache length)
  std::string mlir;  // compile with num_partitions = partitions
  std::vector<ArraySpec> parameters;
  std::vector<ArraySpec> outputs;
  std::vector<std::pair<int64_t, int64_t>> aliases;  // (parameter, output) donated pairs
  // The global shapes of @main's parameters and results as written: a CompileRequest's
  // global_shapes, so the text need not be read back for them.
  ProgramSignature signature;
};

// Program sizes. cache_len: positions the caches hold (a multiple of partitions, at most the
// model's context). tokens: the prefill's padded prompt length S (a multiple of partitions,
// at most cache_len). block: positions per iteration of the decode step's attention loop (a
// multiple of partitions that divides cache_len).
struct ProgramShape {
  int64_t partitions = 1;
  int64_t cache_len = 0;
  int64_t tokens = 0;
  int64_t block = 0;
};

// Errors: InvalidArgument from CheckPartitions, sizes out of range (naming them), or
// WriteModule's.
[[nodiscard]] absl::StatusOr<LlamaProgram> EmitPrefill(const LlamaConfig& config,
                                                       const ProgramShape& shape);
[[nodiscard]] absl::StatusOr<LlamaProgram> EmitDecode(const LlamaConfig& config,
                                                      const ProgramShape& shape);

// `n` rounded up to granule times a power of two or three times one (granule x 1, 2, 3, 4, 6,
// 8, 12, ...: padding wastes at most a third of a prompt's work), capped at `cap` (which the
// result never exceeds when n <= cap): the buckets prompt lengths are compiled for.
int64_t Bucket(int64_t n, int64_t granule, int64_t cap);

}  // namespace shardrt::llama
