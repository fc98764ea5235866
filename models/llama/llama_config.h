// LlamaConfig: the sizes of a Llama-family model (read from its GGUF metadata) and how its
// programs are laid out over P devices (tensor parallelism).
//
// The architecture: token embedding; n_layers blocks of (RMSNorm, grouped-query attention with
// RoPE, residual; RMSNorm, SwiGLU MLP, residual); a final RMSNorm; logits from the token
// embedding (tied) or an output matrix. `llama` files (Llama 1-3, TinyLlama, Mistral,
// SmolLM...) and `qwen2` files (the same blocks with biases on q, k and v, and RoPE over the
// two halves of a head) are read; the metadata keys each needs and the defaults of the others
// are listed in README.md.
//
// Sharding over P devices (every weight is split, nothing is stored twice; see README.md). The
// layers' weights are stacked, one array per kind with the layer first, so that each program
// runs one loop over the layers:
//   token_embd [vocab, d]                   split by vocab rows (embedding lookup and logits)
//   wqkv       [layers, P * (q + 2 kv) / P, d] each device's slice of the q, k and v output rows
//   wo         [layers, d, q]               split by output rows
//   wgu        [layers, P * 2 ffn / P, d]   each device's slice of the gate and up rows
//   wdown      [layers, d, ffn]             split by input columns
//   norms      [layers, d], [d]             replicated
//   KV cache   [layers, P, cache/P, kv_heads, head_dim] split on dim 1: position p lives on
//              device p % P at slot p / P, so every device holds an equal share of the filled
//              positions and attention over them is split evenly (sequence-parallel attention).
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include <optional>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "llama/gguf.h"
#include "shardrt/llm/weight_format.h"
#include "shardrt/program/array_spec.h"

namespace shardrt::llama {

// How the programs take the weight matrices (kNative: their GGUF blocks, u8 arrays, multiplied
// by the quantized kernels; kF32: dequantized at load).
using llm::WeightFormat;

// The GGUF types of the matrices when they stay in their blocks: one type per stacked weight
// (all layers; q, k and v alike; gate and up alike).
struct NativeWeights {
  GgufType token_embd = GgufType::kF32;
  GgufType wqkv = GgufType::kF32;
  GgufType wo = GgufType::kF32;
  GgufType wgu = GgufType::kF32;
  GgufType wdown = GgufType::kF32;
  GgufType output = GgufType::kF32;  // untied output.weight (unused when tied)
  bool operator==(const NativeWeights&) const = default;
};

// The model family, from general.architecture: the prefix of its metadata keys.
enum class Architecture {
  kLlama,  // "llama"
  kQwen2,  // "qwen2": biases on q, k and v; RoPE over halves
};

// Which features of a head RoPE rotates together.
enum class RopeStyle {
  // (2i, 2i + 1): llama files, whose converter reorders the Q and K rows into this order.
  kInterleaved,
  // (i, i + head_dim / 2) (GPT-NeoX's order): qwen2 files, rows as the model was trained.
  kHalves,
};

struct LlamaConfig {
  int64_t vocab = 0;
  int64_t d_model = 0;
  int64_t n_layers = 0;
  int64_t n_heads = 0;
  int64_t n_kv_heads = 0;
  int64_t head_dim = 0;
  int64_t ffn = 0;
  int64_t context = 0;  // the longest sequence the model was trained for
  double rope_base = 10000.0;
  // Per-frequency divisors of RoPE's frequencies (rope_freqs.weight: Llama 3.1's long-context
  // scaling), head_dim / 2 of them; empty: none.
  std::vector<float> rope_freq_factors;
  double norm_eps = 1e-5;
  Architecture architecture = Architecture::kLlama;
  RopeStyle rope_style = RopeStyle::kInterleaved;
  bool qkv_bias = false;        // attn_q/k/v.bias added to the projections (qwen2)
  bool tied_embeddings = true;  // logits from token_embd (no output.weight)
  // Values per block of ffn_down's GGUF type (1 for F32, F16, BF16): a device's slice of the
  // feed-forward width is a whole number of them.
  int64_t ffn_block = 1;
  // Set: the matrices stay in these GGUF types (WeightFormat::kNative); unset: all f32.
  std::optional<NativeWeights> native;

  int64_t q_dim() const { return n_heads * head_dim; }
  int64_t kv_dim() const { return n_kv_heads * head_dim; }

  // Reads the <architecture>.* metadata (defaults as README.md lists them) and checks the
  // tensors the programs use are there with the expected shapes; with kNative also their types
  // (NativeWeightsOf). Errors: InvalidArgument naming the key or tensor, expected vs got, or an
  // architecture or feature that is not supported and what is; NotFound for a missing key
  // that has no default.
  [[nodiscard]] static absl::StatusOr<LlamaConfig> FromGguf(const GgufFile& file,
                                                           WeightFormat format);

  bool operator==(const LlamaConfig&) const = default;
};

// The GGUF types of `config`'s matrices in `file`. Error: InvalidArgument naming two tensors
// of one stacked weight whose types differ (such a file loads with WeightFormat::kF32).
[[nodiscard]] absl::StatusOr<NativeWeights> NativeWeightsOf(const GgufFile& file,
                                                            const LlamaConfig& config);

// Each device's share of the widths the programs split over P devices. A width that does not
// divide evenly is rounded up: every device holds `share` rows (or columns), the first ones of
// the width in device order, and the rows past the width are padding (zeros: a zero query,
// key, value or feed-forward feature, or output row, adds exactly nothing; padded vocabulary
// rows' logits are masked). The feed-forward share is also a whole number of ffn_down's
// blocks, so that native weights split at block boundaries.
struct ModelSplit {
  int64_t partitions = 1;
  int64_t q = 0;      // query features (heads x head dim)
  int64_t kv = 0;     // key (and value) features
  int64_t d = 0;      // output rows of wo (the embedding width)
  int64_t ffn = 0;    // feed-forward features (gate, up rows; down columns)
  int64_t vocab = 0;  // vocabulary rows of token_embd and output; the logits' columns
  // The width the devices' shares of `vocab` make (the logits' width): partitions * vocab.
  int64_t padded_vocab() const { return partitions * vocab; }
};

// `config`'s split over `partitions` devices. Error: InvalidArgument for partitions < 1.
[[nodiscard]] absl::StatusOr<ModelSplit> SplitOf(const LlamaConfig& config, int64_t partitions);

// The rows [begin, end) of a width `size` that device `device` holds when each holds `share`
// (a share past the width is empty: begin = end = size).
struct RowRange {
  int64_t begin = 0, end = 0;
};
inline RowRange ShareOf(int64_t size, int64_t share, int64_t device) {
  return RowRange{std::min(size, device * share), std::min(size, (device + 1) * share)};
}

using stablehlo::ArraySpec;

// The weights in program order: token_embd; attn_norm, wqkv, bqkv (with qkv_bias), wo,
// ffn_norm, wgu, wdown (each stacked over the layers, layer first); output_norm; output (when
// untied, split by vocabulary rows as token_embd). bqkv [layers, q + 2 kv] holds each device's
// slices of the q, k and v biases as wqkv holds their rows. With config.native the matrices are u8
// arrays of their rows' bytes ([..., rows, row bytes], split as the f32 ones: the devices'
// slices of rows, and wdown's slice of columns as whole blocks); the norms stay f32. The split
// dimensions are P x the devices' shares (ModelSplit), padding included.
std::vector<ArraySpec> WeightSpecs(const LlamaConfig& config, const ModelSplit& split);

// The two KV cache arrays (k_cache, v_cache) of `rows` sequences of `cache_len` positions (a
// multiple of P): [layers, P, rows, cache_len / P, kv heads, head dim], split over dimension
// 1 (each device holds [layers, 1, rows, slots, kv, hd]: position p of row r at device p % P,
// slot p / P).
std::vector<ArraySpec> CacheSpecs(const LlamaConfig& config, int64_t partitions, int64_t rows,
                                  int64_t cache_len);

}  // namespace shardrt::llama
