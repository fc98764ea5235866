// The StableHLO emitter of a Llama model: a LlamaConfig becomes the MLIR text of SPMD programs
// for P devices, written per device (manual SPMD: every parameter enters per-device code
// through @SPMDFullToShardShape and every result leaves through @SPMDShardToFullShape) with
// explicit collectives, so the communication is exactly what is written here. The programs
// share one pair of caches of R rows (sequences), CacheSpecs(config, P, R, cache_len):
//
//   caches() -> (k_cache, v_cache)
//     Zeros: R empty rows.
//
//   chunk(k_cache, v_cache, tokens s32[C], start s32[], length s32[], row s32[], W...)
//       -> (k_cache, v_cache, next_tokens s32[1], logits f32[1, V])
//     Runs a prompt's chunk tokens[0, length) at positions start..start+length-1 of row `row`
//     (start a multiple of P; tokens past `length` are padding: computed, never attended to by
//     real positions, overwritten later). Its queries attend to the row's cached positions
//     before `start` and causally to the chunk; the chunk's keys and values are written into
//     the row at positions start..start+C-1 (start + C <= cache_len: the caller checks). The
//     logits are those of position start+length-1, next_tokens their argmax (lowest id on
//     ties). A prompt is a sequence of chunks, so its activations never exceed one chunk's.
//
//   decode(k_cache, v_cache, tokens s32[B], positions s32[B], W...)
//       -> (k_cache, v_cache, next_tokens s32[B], logits f32[B, V])
//     Runs B tokens, token b in row b (B <= R) at positions[b]: it attends to its row's
//     positions before it and to itself, then its key and value are written there. A position
//     of -1 is an idle row: nothing is written, its outputs are meaningless. Each token's
//     result has the same bits at any B (the products sum per row, MatmulOrder::kPerRow).
//
// A row whose logits are not all finite gets next token -1 (the caller reports the step's
// error: StepToken).
// V is the vocabulary padded to P equal shares (ModelSplit::padded_vocab(): the vocabulary
// itself when P divides it); the padding columns' logits are masked (-1e30) and never chosen.
// The caches are donated by chunk and decode (parameters 0 and 1 alias outputs 0 and 1).
// W = WeightSpecs(config) (the layers' weights stacked, layer first). Each program is one
// loop (stablehlo.while) over the layers that slices the layer's weights out of the stacked
// ones, so its size and compile time do not grow with the layers. Attention to cached
// positions is a loop over blocks of `block` positions (block / P slots per device) that stops
// after the block holding the last position needed: a step costs what the filled positions
// cost, not the whole cache, and one compiled program serves every position. Each layer's new
// keys and values are written into the caches once, after the loop (a cache written inside
// the loop that also reads it would be copied every layer).
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
struct ChunkParameter {
  static constexpr size_t kKeyCache = 0;
  static constexpr size_t kValueCache = 1;
  static constexpr size_t kTokens = 2;
  static constexpr size_t kStart = 3;
  static constexpr size_t kLength = 4;
  static constexpr size_t kRow = 5;
  static constexpr size_t kFirstWeight = 6;
};
struct DecodeParameter {
  static constexpr size_t kKeyCache = 0;
  static constexpr size_t kValueCache = 1;
  static constexpr size_t kTokens = 2;
  static constexpr size_t kPositions = 3;
  static constexpr size_t kFirstWeight = 4;
};
struct ProgramOutput {  // of chunk and decode (caches() returns the first two)
  static constexpr size_t kKeyCache = 0;
  static constexpr size_t kValueCache = 1;
  static constexpr size_t kNextTokens = 2;
  static constexpr size_t kLogits = 3;
};

struct LlamaProgram {
  std::string name;  // e.g. "chunk_256_8x2048" or "decode_4_8x2048" (size, rows x cache length)
  std::string mlir;  // compile with num_partitions = partitions
  std::vector<ArraySpec> parameters;
  std::vector<ArraySpec> outputs;
  std::vector<std::pair<int64_t, int64_t>> aliases;  // (parameter, output) donated pairs
  // The global shapes of @main's parameters and results as written: a CompileRequest's
  // global_shapes, so the text need not be read back for them.
  ProgramSignature signature;
};

// Program sizes. cache_len: positions each cache row holds (a multiple of partitions, at most
// the model's context). rows: cache rows R. tokens: a chunk's C (a multiple of partitions, at
// most cache_len). block: positions per iteration of the attention loops (a multiple of
// partitions that divides cache_len). batch: decode's B (1 <= B <= rows).
struct ProgramShape {
  int64_t partitions = 1;
  int64_t cache_len = 0;
  int64_t rows = 1;
  int64_t tokens = 0;
  int64_t block = 0;
  int64_t batch = 1;
};

// Errors: InvalidArgument from CheckPartitions, sizes out of range (naming them), or
// WriteModule's.
[[nodiscard]] absl::StatusOr<LlamaProgram> EmitEmptyCaches(const LlamaConfig& config,
                                                           const ProgramShape& shape);
[[nodiscard]] absl::StatusOr<LlamaProgram> EmitPrefillChunk(const LlamaConfig& config,
                                                            const ProgramShape& shape);
[[nodiscard]] absl::StatusOr<LlamaProgram> EmitDecode(const LlamaConfig& config,
                                                      const ProgramShape& shape);

// `n` rounded up to granule times a power of two or three times one (granule x 1, 2, 3, 4, 6,
// 8, 12, ...: padding wastes at most a third of a prompt's work), capped at `cap` (which the
// result never exceeds when n <= cap): the buckets prompt lengths are compiled for.
int64_t Bucket(int64_t n, int64_t granule, int64_t cap);

}  // namespace shardrt::llama
