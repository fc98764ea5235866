// One decode step's attention as a kernel (an XLA FFI handler, registered with the quantized
// kernels by RegisterModelKernels in quant_ffi.h): each of a batch's B tokens (one per cache
// row) against this device's cached keys and values of its row, read in place from the
// stacked caches, and against its own key and value, as one online softmax. It replaces a
// loop of XLA operations per block of positions (slices of the caches copied into the layout
// XLA's dot wants, masks, reductions, merges).
//
//   partial = stablehlo.custom_call @shardrt_decode_attention(
//                 q, k, v, k_cache, v_cache, layer, positions, pid)
//               {api_version = 4 : i32, backend_config = {partitions = P : i32}}
//     q f32[B, heads, hd] and k, v f32[B, kv, hd]: the tokens' (rotated) queries, keys and
//     values; k_cache, v_cache f32[layers, 1, R, slots, kv, hd] (R >= B rows): this device's
//     caches, position p of row r at slot (p - pid) / P of device p % P; token b is row b's;
//     layer, pid: s32[]; positions s32[B]: token b's position.
//     partial f32[kv, B, g, hd + 2] (g = heads / kv): per token and query head, the
//     exp-weighted sum of values o (hd values), the maximum score m and the sum of
//     exp(score - m) l, over the keys of its row at positions before its position that this
//     device holds, plus its own key when position % P == pid. A device with no such key gives
//     m = -1e30, l = 0, o = 0 (its share vanishes when the devices' partials combine). Scores
//     are q . k / sqrt(hd). A position of -1 is an idle row: o = 0, m = 0, l = 1. Each token's
//     result depends on its own row only (the same bits at any B).
//
// Shapes are checked against each other (an error names the operand). Thread use: the tokens'
// kv heads split over the plugin's intra-op pool when the positions are many (quant_ffi.h's
// scheme).
#pragma once

#include "xla/ffi/api/c_api.h"

namespace shardrt::llama {


inline constexpr char kDecodeAttentionTarget[] = "shardrt_decode_attention";

// The handler of kDecodeAttentionTarget (static storage; never null).
XLA_FFI_Handler* DecodeAttentionHandler();

}  // namespace shardrt::llama
