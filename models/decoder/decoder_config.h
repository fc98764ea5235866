// DecoderConfig: the sizes of the demo decoder-only transformer, and the names, global shapes and
// shardings of every array its programs take and return.
//
// The model: token and position embeddings; n_layers blocks of (RMSNorm, causal multi-head
// attention, residual; RMSNorm, SiLU MLP, residual); a final RMSNorm and an output projection to
// vocab logits. Sharded Megatron style over num_partitions devices: attention heads and the MLP
// hidden dimension are split, everything else is replicated; the KV cache is split by heads.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "shardrt/base/element_type.h"
#include "shardrt/program/array_spec.h"

namespace shardrt::decoder {

struct DecoderConfig {
  int64_t vocab = 256;
  int64_t d_model = 128;
  int64_t n_heads = 8;
  int64_t mlp_hidden = 0;  // 0: 4 * d_model
  int64_t n_layers = 2;
  int64_t max_seq = 64;    // KV cache length: prompt + generated tokens must fit
  int64_t prompt_len = 8;  // prefill processes exactly this many tokens
  int64_t num_partitions = 1;
  float norm_eps = 1e-5f;

  int64_t head_dim() const { return n_heads > 0 ? d_model / n_heads : 0; }
  int64_t hidden() const { return mlp_hidden > 0 ? mlp_hidden : 4 * d_model; }
};

// Bounds on the model's memory, checked by ValidateConfig before anything is allocated.
// GenerateWeights makes every weight on the host at once; uploading gives each device its
// shard of a split array and a whole copy of a replicated one; the KV caches live on the
// devices. On the CPU plugin the devices' memory is the host's, so the host copy (at most
// kMaxModelWeightBytes) and the devices' share (at most kMaxModelDeviceBytes) together stay
// within a third of a 24 GiB machine, leaving the rest to the compiled programs, XLA's
// temporaries and other processes. One array is one allocation and, when replicated, one copy
// per device: kMaxModelArrayBytes keeps it a quarter of the weights' budget.
inline constexpr int64_t kMaxModelArrayBytes = int64_t{512} << 20;  // one weight or cache array
inline constexpr int64_t kMaxModelWeightBytes = int64_t{2} << 30;   // every weight, one copy
inline constexpr int64_t kMaxModelDeviceBytes = int64_t{6} << 30;   // all devices together

// What a config's arrays take, in bytes (f32 and s32 are 4 bytes an element). Every count
// saturates at INT64_MAX instead of overflowing, so any config can be measured.
struct ModelFootprint {
  // The largest weight or KV cache array: its name ("w1" stands for every layer's w1,
  // "k_cache" for every k and v cache), global shape and bytes, and whether it grows with
  // max_seq (pos_embed and the caches do).
  std::string largest_array;
  std::vector<int64_t> largest_dims;
  int64_t largest_array_bytes = 0;
  bool largest_grows_with_max_seq = false;
  // Every weight, one copy (what GenerateWeights allocates).
  int64_t weight_bytes = 0;
  // What the devices hold together: each split weight once, each replicated weight once per
  // device, and the KV caches (split by heads).
  int64_t device_bytes = 0;
};

// Measures `config` without allocating anything that grows with it. Meaningful for fields
// >= 1 (ValidateConfig checks that first); any value is safe. Thread-safe (pure).
ModelFootprint Footprint(const DecoderConfig& config);

// `bytes` for messages: "1000 bytes", "512 MiB", "6.01 GiB" (binary units; a whole number of a
// unit as it is, else three significant digits). Thread-safe (pure).
std::string BytesText(int64_t bytes);

// Checks sizes: all positive, d_model divisible by n_heads, n_heads and hidden() divisible by
// num_partitions, 1 <= prompt_len <= max_seq, then the memory bounds above (largest array,
// weights, devices). Error: InvalidArgument naming the field, or for a bound the array or
// total, its bytes and the limit. Thread-safe (pure).
[[nodiscard]] absl::Status ValidateConfig(const DecoderConfig& config);

// Checks that a prompt of config.prompt_len tokens followed by `num_tokens` generated tokens
// fits the KV cache: the last decode step writes position prompt_len + num_tokens - 2.
// Error: InvalidArgument.
[[nodiscard]] absl::Status ValidateGeneration(const DecoderConfig& config, int64_t num_tokens);

// Array specs, their shardings and shard shapes are the program layer's (array_spec.h).
using stablehlo::ArraySpec;
using stablehlo::ShardDims;
using stablehlo::ShardingOf;

// The weights in program order (the same in both programs):
//   embed [vocab, d_model], pos_embed [max_seq, d_model]                       replicated
//   per layer i, "layer<i>." +
//     attn_norm [d_model]                                                        replicated
//     wq, wk, wv [d_model, n_heads*head_dim]                                     split dim 1
//     wo [n_heads*head_dim, d_model]                                             split dim 0
//     mlp_norm [d_model]                                                         replicated
//     w1 [d_model, hidden]                                                       split dim 1
//     w2 [hidden, d_model]                                                       split dim 0
//   final_norm [d_model], w_out [d_model, vocab]                                 replicated
std::vector<ArraySpec> WeightSpecs(const DecoderConfig& config);

// The KV cache in program order: layer<i>.k_cache, layer<i>.v_cache for each layer, each
// [n_heads, max_seq, head_dim] split dim 0 (by heads).
std::vector<ArraySpec> CacheSpecs(const DecoderConfig& config);

}  // namespace shardrt::decoder
