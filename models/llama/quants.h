// The storage formats of the GGUF tensor types that GgufFile accepts (F32, F16, BF16, Q4_0,
// Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q6_K) and their dequantization to f32, bit-identical to the
// gguf Python package (gguf/quants.py).
//
// A tensor's values run in blocks along its rows (dims[0]): F32, F16 and BF16 store one value
// per block; Q4_0, Q4_1, Q5_0, Q5_1 and Q8_0 store 32 values per block, each block an f16 scale
// (Q4_1 and Q5_1 also an f16 minimum) and the quants; Q4_K and Q6_K store 256 values per
// super-block with per-sub-block scales. A row is a whole number of blocks.
//
// Every function here is pure (no state), so any of them may be called from several threads at
// once.
#pragma once

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "llama/gguf.h"

namespace shardrt::llama {

// Elements per block of Q4_0, Q4_1, Q5_0, Q5_1 and Q8_0, and per super-block of the K-quants
// (Q4_K, Q6_K).
inline constexpr int64_t kQuantBlock = 32;
inline constexpr int64_t kSuperBlock = 256;

// How a tensor type is stored: `block_elements` values in `block_bytes` bytes.
struct BlockLayout {
  int64_t block_elements = 0;  // 0: a type that cannot be dequantized
  int64_t block_bytes = 0;
};

// The layout of tensor type `type`; {0, 0} for any value that is not one of GgufType's (a
// GgufType may hold any uint32 read from a file). A constant expression for a constant type
// (the kernels size their blocks with it).
constexpr BlockLayout LayoutOf(GgufType type) {
  switch (type) {
    case GgufType::kF32: return {1, 4};
    case GgufType::kF16: return {1, 2};
    case GgufType::kBF16: return {1, 2};
    case GgufType::kQ4_0: return {kQuantBlock, 2 + kQuantBlock / 2};
    case GgufType::kQ4_1: return {kQuantBlock, 2 + 2 + kQuantBlock / 2};
    case GgufType::kQ5_0: return {kQuantBlock, 2 + 4 + kQuantBlock / 2};
    case GgufType::kQ5_1: return {kQuantBlock, 2 + 2 + 4 + kQuantBlock / 2};
    case GgufType::kQ8_0: return {kQuantBlock, 2 + kQuantBlock};
    case GgufType::kQ4_K: return {kSuperBlock, 2 + 2 + 12 + kSuperBlock / 2};
    case GgufType::kQ6_K: return {kSuperBlock, kSuperBlock / 2 + kSuperBlock / 4 + 16 + 2};
  }
  return {};
}

// Bytes of `elements` values stored as `layout` (a layout with block_elements >= 1, and
// `elements` >= 0 a multiple of it), or -1 if that exceeds int64.
int64_t TensorBytes(const BlockLayout& layout, int64_t elements);

// An IEEE half (binary16) to f32, exactly: subnormals are normalized, infinities kept, and a
// NaN keeps its sign and payload, quiet bit included (as NumPy's float16 -> float32 cast).
float HalfToFloat(uint16_t half);

// The per-type routines below decode the values of one row. `row` points at the row's first
// byte; they check nothing: the caller guarantees that the bytes read lie in the row and that
// `out` has room for the values written. Values [begin, end) of an F32, F16 or BF16 row into
// out[0, end - begin):
void DequantizeF32(const std::byte* row, int64_t begin, int64_t end, float* out);
void DequantizeF16(const std::byte* row, int64_t begin, int64_t end, float* out);
void DequantizeBF16(const std::byte* row, int64_t begin, int64_t end, float* out);

// Blocks [block_begin, block_end) of a Q8_0, Q4_0 or Q4_1 row, 32 values each, into
// out[0, 32 * (block_end - block_begin)). Q8_0 and Q4_0 values are d * q, exact in f32;
// Q4_1 values (d * q) + m, rounded once, in the sum (with or without a fused multiply-add).
void DequantizeQ8_0(const std::byte* row, int64_t block_begin, int64_t block_end, float* out);
void DequantizeQ4_0(const std::byte* row, int64_t block_begin, int64_t block_end, float* out);
void DequantizeQ4_1(const std::byte* row, int64_t block_begin, int64_t block_end, float* out);
// Q5_0 values d * (q - 16), Q5_1 values (d * q) + m, q the 5-bit quant (its fifth bit from the
// block's qh word).
void DequantizeQ5_0(const std::byte* row, int64_t block_begin, int64_t block_end, float* out);
void DequantizeQ5_1(const std::byte* row, int64_t block_begin, int64_t block_end, float* out);
// Super-blocks [block_begin, block_end) of a Q4_K or Q6_K row, 256 values each (layouts in
// quants.cc), into out[0, 256 * (block_end - block_begin)).
void DequantizeQ4_K(const std::byte* row, int64_t block_begin, int64_t block_end, float* out);
void DequantizeQ6_K(const std::byte* row, int64_t block_begin, int64_t block_end, float* out);
// The 6-bit scale and minimum of sub-block j (0..7) from a Q4_K block's 12 scale bytes.
void Q4KScaleMin(const uint8_t* scales, int j, int* scale, int* min);

// Columns [col_begin, col_end) of one row of type `type` into out[0, col_end - col_begin),
// through the routine of the type. Preconditions as above, plus: `type` has a layout and both
// column bounds are multiples of its block_elements. Checks nothing.
void DequantizeRow(GgufType type, const std::byte* row, int64_t col_begin, int64_t col_end,
                   float* out);

// Dequantizes rows [row_begin, row_end) x columns [col_begin, col_end) of `tensor` (a tensor of
// `file`; rows and columns as in gguf.h) into `out`, row-major, (row_end - row_begin) *
// (col_end - col_begin) floats, read straight from the file's mapping. For quantized types
// col_begin and col_end must be multiples of the block size. The values are bit-identical
// to the gguf Python package's dequantization. Errors: InvalidArgument naming the file and the
// tensor for a range outside the tensor, a column bound not on a block boundary, an `out` of
// the wrong size, a `tensor` whose type, dims, offset and bytes do not describe data inside
// `file`, or a block in the range whose scale or minimum is not finite (naming row and block).
// (NaN and infinite F32/F16/BF16 values are converted as they are: CheckFiniteValues.)
// Borrows `file` and `out` for the call only; safe to call from several threads at once
// on the same file (each with its own `out`).
[[nodiscard]] absl::Status Dequantize(const GgufFile& file, const GgufTensor& tensor,
                                      int64_t row_begin, int64_t row_end, int64_t col_begin,
                                      int64_t col_end, absl::Span<float> out);

// Checks that every value of rows [row_begin, row_end) x columns [col_begin, col_end) of an
// F32, F16 or BF16 tensor is finite (a model's weights: one NaN makes every later activation
// NaN); other types pass (their scales are Dequantize's and CopyBlocks' to check). Errors:
// InvalidArgument naming the file, the tensor, and the row and column of the first value that
// is not, and Dequantize's range errors. Thread-safe (reads the file).
[[nodiscard]] absl::Status CheckFiniteValues(const GgufFile& file, const GgufTensor& tensor,
                                             int64_t row_begin, int64_t row_end,
                                             int64_t col_begin, int64_t col_end);

// The blocks of rows [row_begin, row_end) x columns [col_begin, col_end) of `tensor` as they are
// stored (their bytes, row after row: (row_end - row_begin) * (col_end - col_begin) / E * B
// bytes for E values in B bytes a block) into `out`: a weight kept in its GGUF format. Errors
// and thread safety as Dequantize's.
[[nodiscard]] absl::Status CopyBlocks(const GgufFile& file, const GgufTensor& tensor,
                                      int64_t row_begin, int64_t row_end, int64_t col_begin,
                                      int64_t col_end, absl::Span<std::byte> out);

}  // namespace shardrt::llama
