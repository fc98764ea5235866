// SmolLM2-135M's sizes as a LlamaConfig, for tests of what the sizes make (specs, splits,
// programs) without the model file.
#pragma once

#include <cstdint>

#include "llama/llama_config.h"

namespace shardrt::llama {

// SmolLM2-135M's sizes with `layers` layers: 9 heads of 64, 3 key/value heads, width 576,
// feed-forward 1536 in 32-value blocks, vocabulary 49152, context 8192; f32 weights, tied.
inline LlamaConfig SmolSizes(int64_t layers) {
  LlamaConfig c;
  c.vocab = 49152;
  c.d_model = 576;
  c.n_layers = layers;
  c.n_heads = 9;
  c.n_kv_heads = 3;
  c.head_dim = 64;
  c.ffn = 1536;
  c.context = 8192;
  c.rope_base = 100000;
  c.ffn_block = 32;
  return c;
}

}  // namespace shardrt::llama
