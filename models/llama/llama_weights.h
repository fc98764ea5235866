// Loads a Llama model's weights from its GGUF file straight into sharded device arrays.
//
// Each weight of WeightSpecs(config) is placed with its sharding on the first `partitions`
// default devices. Every device's shard is dequantized (to f32) from the file on the client's
// pool, reading only the rows and columns that device holds, and uploaded; a replicated weight
// (the norms) is dequantized once and uploaded to each device. A shard leaves host memory as
// soon as its upload is done, so the host holds at most one shard per pool thread, never a
// full copy per device, nor all weights at once.
//
// Shards (rows are output features, GGUF's row order): token_embd and output rows by
// vocabulary; per layer (the layers' weights are stacked, layer after layer): wqkv the device's
// slices of attn_q, attn_k and attn_v rows, stacked; bqkv the same slices of their biases; wo
// attn_output rows; wgu the device's slices of ffn_gate and ffn_up rows, stacked; wdown
// ffn_down columns.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "llama/gguf.h"
#include "llama/llama_config.h"
#include "shardrt/client/computation_client.h"

namespace shardrt::llama {

// One piece of a shard: rows [row_begin, row_end) x columns [col_begin, col_end) of a tensor,
// each row followed by pad_cols zeros, then pad_rows rows of zeros (a device's share past the
// end of a width that does not split evenly; ModelSplit).
struct ShardPiece {
  const GgufTensor* tensor = nullptr;
  int64_t row_begin = 0, row_end = 0, col_begin = 0, col_end = 0;
  int64_t pad_cols = 0, pad_rows = 0;
};

// The pieces, stacked by rows, that make device `device`'s shard of weight `spec` (a spec of
// WeightSpecs(config, split)). Error: InvalidArgument for an unknown weight name or a missing
// tensor.
[[nodiscard]] absl::StatusOr<std::vector<ShardPiece>> ShardPieces(const GgufFile& file,
                                                                  const LlamaConfig& config,
                                                                  const ModelSplit& split,
                                                                  const ArraySpec& spec,
                                                                  int64_t device);

// Makes (copies or dequantizes) and uploads every weight, in WeightSpecs order. Errors:
// SplitOf's, the file's (a tensor that cannot be read: a range outside it, a block
// whose scale is not finite), the transfer's. Blocks until every upload
// has been handed to the plugin; the host buffers are freed as it goes.
[[nodiscard]] absl::StatusOr<std::vector<DataPtr>> LoadWeights(const GgufFile& file,
                                                               const LlamaConfig& config,
                                                               int64_t partitions,
                                                               ComputationClient& client);

}  // namespace shardrt::llama
