// LlamaConfig: the sizes of a Llama-architecture model (read from its GGUF metadata) and how its
// programs are laid out over P devices (tensor parallelism).
//
// The architecture: token embedding; n_layers blocks of (RMSNorm, grouped-query attention with
// RoPE, residual; RMSNorm, SwiGLU MLP, residual); a final RMSNorm; logits from the token
// embedding (tied) or an output matrix.
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
  double norm_eps = 1e-5;
  bool tied_embeddings = true;  // logits from token_embd (no output.weight)
  // Set: the matrices stay in these GGUF types (WeightFormat::kNative); unset: all f32.
  std::optional<NativeWeights> native;

  int64_t q_dim() const { return n_heads * head_dim; }
  int64_t kv_dim() const { return n_kv_heads * head_dim; }

  // Reads llama.* metadata and checks the tensors the programs use are there with the expected
  // shapes; with kNative also their types (NativeWeightsOf). Errors: InvalidArgument naming
  // the key or tensor, expected vs got; NotFound for a missing key.
  [[nodiscard]] static absl::StatusOr<LlamaConfig> FromGguf(const GgufFile& file,
                                                           WeightFormat format);

};

// The GGUF types of `config`'s matrices in `file`. Error: InvalidArgument naming two tensors
// of one stacked weight whose types differ (such a file loads with WeightFormat::kF32).
[[nodiscard]] absl::StatusOr<NativeWeights> NativeWeightsOf(const GgufFile& file,
                                                            const LlamaConfig& config);

// Checks that `config` splits over `partitions` devices: q_dim, kv_dim, ffn and vocab divisible
// by P, the ffn slice a multiple of ffn_down's block with native weights (32 values, 256 for
// K-quants), else of 32 (an f32 load of a K-quant file whose slice cuts a block is refused by
// Dequantize), and partitions >= 1. Error: InvalidArgument
// naming the size that does not divide.
[[nodiscard]] absl::Status CheckPartitions(const LlamaConfig& config, int64_t partitions);

using stablehlo::ArraySpec;

// The weights in program order: token_embd; attn_norm, wqkv, wo, ffn_norm, wgu, wdown (each
// stacked over the layers, layer first); output_norm. With config.native the matrices are u8
// arrays of their rows' bytes ([..., rows, row bytes], split as the f32 ones: the devices'
// slices of rows, and wdown's slice of columns as whole blocks); the norms stay f32.
std::vector<ArraySpec> WeightSpecs(const LlamaConfig& config);

// The two KV cache arrays (k_cache, v_cache) of `rows` sequences of `cache_len` positions (a
// multiple of P): [layers, P, rows, cache_len / P, kv heads, head dim], split over dimension
// 1 (each device holds [layers, 1, rows, slots, kv, hd]: position p of row r at device p % P,
// slot p / P).
std::vector<ArraySpec> CacheSpecs(const LlamaConfig& config, int64_t partitions, int64_t rows,
                                  int64_t cache_len);

}  // namespace shardrt::llama
