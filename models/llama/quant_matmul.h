// Matrix kernels on weights kept in their GGUF block formats: y = x . W^T with x in f32 and W
// (rows = output features, each row a whole number of blocks, as GGUF stores it) decoded block
// by block as it is read, never dequantized as a whole. The decoded values are exactly those
// of quants.h, so a result differs from the f32 product of the dequantized matrix only by the
// order of the sums.
//
// Each kernel exists once per instruction set (KernelIsa): the same source compiled for the
// baseline (generic: SSE2 on x86-64), AVX2 + FMA + F16C and AVX-512 (F, BW, VL, DQ); BestIsa()
// picks the best the CPU runs. The functions here run on the calling thread only; the FFI
// handlers (quant_ffi.h) split rows over the plugin's threads.
//
// Thread safety: every function is pure apart from writing its outputs; any may run on several
// threads at once with disjoint outputs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "llama/gguf.h"

namespace shardrt::llama {

enum class KernelIsa { kGeneric, kAvx2, kAvx512 };

// "generic", "avx2", "avx512".
absl::string_view IsaName(KernelIsa isa);

// The paths this CPU runs, generic first, best last.
std::vector<KernelIsa> SupportedIsas();

// The best path this CPU runs (the last of SupportedIsas()).
KernelIsa BestIsa();

// A matrix in a GGUF block format, borrowed: `rows` rows of `cols` values, row r at
// data + r * row_bytes.
struct QuantMatrix {
  GgufType type = GgufType::kF32;
  const std::byte* data = nullptr;
  int64_t rows = 0;
  int64_t cols = 0;
  int64_t row_bytes = 0;
};

// Checks that `w` describes a matrix the kernels take: a type with a layout, rows >= 0,
// cols >= 1 a multiple of the type's block, row_bytes the bytes of `cols` values of the type.
// Error: InvalidArgument naming what differs (expected vs got).
[[nodiscard]] absl::Status CheckQuantMatrix(const QuantMatrix& w);

// Weight rows decoded together (a panel) when x has many rows.
inline constexpr int64_t kMatmulPanelRows = 32;

// Rows of x from which a product with MatmulOrder::kFastest takes the panel path.
inline constexpr int64_t kMatmulPanelFromRows = 8;

// Floats of scratch QuantMatmulRows needs: a panel of decoded rows, and the same transposed.
inline int64_t MatmulScratchFloats(const QuantMatrix& w) { return 2 * kMatmulPanelRows * w.cols; }

// How a product orders its sums.
enum class MatmulOrder {
  kFastest,  // the fastest path for the rows of x (their count changes the order of the sums)
  // Each row of y sums in one order whatever the other rows of x are: a row's result has the
  // same bits at any s (what a batch of sequences needs for each to match its solo run).
  kPerRow,
};

// The rows of W a caller splitting [0, w.rows) between threads should cut at multiples of:
// kMatmulPanelRows where the product takes the panel path (a range that is not whole panels
// computes a whole panel's width for its last one), else 1.
inline int64_t MatmulRowGranule(int64_t s, MatmulOrder order) {
  return order == MatmulOrder::kFastest && s >= kMatmulPanelFromRows ? kMatmulPanelRows : 1;
}

// y[i * ldy + r] = sum_c x[i * w.cols + c] * W[r, c] for i in [0, s) and r in [row_begin,
// row_end), with the path `isa` (one of SupportedIsas()). x is s rows of w.cols floats;
// `scratch` holds MatmulScratchFloats(w) floats. Checks nothing: the caller has checked `w`
// (CheckQuantMatrix) and the ranges.
void QuantMatmulRows(KernelIsa isa, const QuantMatrix& w, const float* x, int64_t s, float* y,
                     int64_t ldy, int64_t row_begin, int64_t row_end, float* scratch,
                     MatmulOrder order = MatmulOrder::kFastest);

// y[i, :] = row ids[i] of W decoded (w.cols floats), zeros for an id outside [0, w.rows), for
// i in [0, s). Checks nothing but the ids.
void QuantGatherRows(KernelIsa isa, const QuantMatrix& w, const int32_t* ids, int64_t s,
                     float* y);

}  // namespace shardrt::llama
