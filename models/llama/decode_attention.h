// One decode step's attention as a kernel (an XLA FFI handler, registered with the quantized
// kernels by RegisterModelKernels in quant_ffi.h): a token's query against this device's
// cached keys and values, read in place from the stacked caches, and against its own key and
// value, as one online softmax. It replaces a loop of XLA operations per block of positions
// (slices of the caches copied into the layout XLA's dot wants, masks, reductions, merges).
//
//   partial = stablehlo.custom_call @shardrt_decode_attention(
//                 q, k, v, k_cache, v_cache, layer, position, pid)
//               {api_version = 4 : i32, backend_config = {partitions = P : i32}}
//     q f32[1, heads, hd] and k, v f32[1, kv, hd]: the token's (rotated) query, key and value;
//     k_cache, v_cache f32[layers, 1, slots, kv, hd]: this device's caches, position p at slot
//     (p - pid) / P of device p % P; layer, position (the token's), pid: s32[].
//     partial f32[kv, 1, g, hd + 2] (g = heads / kv): per query head, the exp-weighted sum of
//     values o (hd values), the maximum score m and the sum of exp(score - m) l, over the keys
//     at positions before `position` that this device holds, plus the token's own key when
//     position % P == pid. A device with no such key gives m = -1e30, l = 0, o = 0 (its share
//     vanishes when the devices' partials combine). Scores are q . k / sqrt(hd).
//
// Shapes are checked against each other (an error names the operand). Thread use: the kv
// heads split over the plugin's intra-op pool when the positions are many (quant_ffi.h's
// scheme).
#pragma once

#include "xla/ffi/api/c_api.h"

namespace shardrt::llama {

inline constexpr char kDecodeAttentionTarget[] = "shardrt_decode_attention";

// The handler of kDecodeAttentionTarget (static storage; never null).
XLA_FFI_Handler* DecodeAttentionHandler();

}  // namespace shardrt::llama
