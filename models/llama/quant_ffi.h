// The quantized matrix kernels (quant_matmul.h) as XLA FFI handlers, so that the model's
// StableHLO programs call them as custom calls on weights that stay in their GGUF blocks:
//
//   y = stablehlo.custom_call @shardrt_quant_matmul(x, w, layer)
//         {api_version = 4 : i32,
//          backend_config = {type = T : i32, partitions = P : i32, order = O : i32}}
//     x f32[..., k]; w u8[n, row_bytes] or u8[layers, n, row_bytes] (stacked, the layer's
//     matrix is used in place, never sliced out); layer s32[]; y f32[..., n]: y = x . W^T.
//     O: a MatmulOrder (quant_matmul.h), 0 fastest, 1 per row (each row of y the same bits
//     whatever the other rows of x are).
//
//   y = stablehlo.custom_call @shardrt_quant_gather(w, ids)
//         {api_version = 4 : i32, backend_config = {type = T : i32}}
//     w u8[n, row_bytes]; ids s32[s]; y f32[s, k]: the rows ids[i] of W decoded (zeros for an id
//     outside [0, n)): the embedding lookup.
//
// T is the GGUF type number; P the devices the program runs on (how many threads a call may
// take, ffi_parallel.h). Every operand's shape is checked against T before any byte is
// read (an error names the target, the operand, expected vs got).
//
// Threads: a product splits the rows of W into chunks over the plugin's intra-op pool, at most
// cores / P threads (ffi_parallel.h: the caller never waits for a task that has not started,
// so 8 devices on 2 cores cannot deadlock). Products under ~64K multiply-adds run on the caller. The path
// (generic, AVX2, AVX-512) is BestIsa().
#pragma once

#include "absl/status/status.h"
#include "shardrt/runtime/runtime.h"

namespace shardrt::llama {

inline constexpr char kQuantMatmulTarget[] = "shardrt_quant_matmul";
inline constexpr char kQuantGatherTarget[] = "shardrt_quant_gather";

// Registers the model's kernels with `runtime`'s plugin: both handlers here and the decode
// attention (decode_attention.h), each through Runtime::RegisterFfiHandler (registered, then
// proven by a probe compile). Errors: Runtime::RegisterFfiHandler's (e.g. a plugin without the
// FFI extension: Unimplemented). Registration is process-wide; calling it again (another
// runtime of the same plugin) is harmless. Thread-safe.
[[nodiscard]] absl::Status RegisterModelKernels(const Runtime& runtime);

}  // namespace shardrt::llama
