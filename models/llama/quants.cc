#include "llama/quants.h"

#include <bit>
#include <cstring>
#include <string>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "shardrt/base/status_macros.h"

namespace shardrt::llama {
namespace {

// "GGUF file PATH: " followed by the pieces: the prefix of every error of a file.
template <typename... Pieces>
absl::Status Invalid(absl::string_view path, const Pieces&... pieces) {
  return absl::InvalidArgumentError(absl::StrCat("GGUF file ", path, ": ", pieces...));
}

// "[576, 49152]"
std::string DimsText(absl::Span<const int64_t> dims) {
  return absl::StrCat("[", absl::StrJoin(dims, ", "), "]");
}

inline uint16_t Load16(const std::byte* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}

// Whether `tensor` describes data of `file`: a type with a layout, 1 to kGgufMaxDims dims of
// at least 1 whose element count fits in int64, whole blocks per row, and `bytes` matching and
// lying inside the file. (The tensor may be a caller's copy.)
bool IsTensorOf(const GgufFile& file, const GgufTensor& tensor, const BlockLayout& layout) {
  const size_t size = file.bytes().size();
  bool valid =
      layout.block_elements != 0 && !tensor.dims.empty() && tensor.dims.size() <= kGgufMaxDims;
  int64_t elements = 1;
  for (const int64_t dim : tensor.dims) {
    valid = valid && dim >= 1 && !__builtin_mul_overflow(elements, dim, &elements);
  }
  return valid && tensor.dims[0] % layout.block_elements == 0 &&
         TensorBytes(layout, elements) == static_cast<int64_t>(tensor.bytes) &&
         tensor.offset <= size && tensor.bytes <= size - tensor.offset;
}

// Dequantize's checks of the tensor, the ranges and `out`; `what` begins each message.
absl::Status CheckRequest(const GgufFile& file, const GgufTensor& tensor,
                          const BlockLayout& layout, absl::string_view what, int64_t row_begin,
                          int64_t row_end, int64_t col_begin, int64_t col_end, size_t out_size) {
  const absl::string_view path = file.path();
  if (!IsTensorOf(file, tensor, layout)) {
    return Invalid(path, what, ": not a tensor of this file (",
                   GgufTypeName(static_cast<uint32_t>(tensor.type)), " dims ",
                   DimsText(tensor.dims), ", ", tensor.bytes, " bytes at offset ", tensor.offset,
                   ")");
  }
  const int64_t rows = tensor.num_rows();
  const int64_t cols = tensor.row_length();
  if (row_begin < 0 || row_begin > row_end || row_end > rows) {
    return Invalid(path, what, ": rows [", row_begin, ", ", row_end,
                   "): expected a range within [0, ", rows, ")");
  }
  if (col_begin < 0 || col_begin > col_end || col_end > cols) {
    return Invalid(path, what, ": columns [", col_begin, ", ", col_end,
                   "): expected a range within [0, ", cols, ")");
  }
  if (col_begin % layout.block_elements != 0 || col_end % layout.block_elements != 0) {
    return Invalid(path, what, ": columns [", col_begin, ", ", col_end, ") of a ",
                   GgufTypeName(static_cast<uint32_t>(tensor.type)),
                   " tensor: expected multiples of the block size ", layout.block_elements);
  }
  const int64_t width = col_end - col_begin;
  const int64_t count = (row_end - row_begin) * width;  // at most the element count
  if (static_cast<int64_t>(out_size) != count) {
    return Invalid(path, what, ": output of ", out_size, " floats, expected ", count, " (",
                   row_end - row_begin, " rows x ", width, " columns)");
  }
  return absl::OkStatus();
}

}  // namespace

BlockLayout LayoutOf(GgufType type) {
  switch (type) {
    case GgufType::kF32: return {1, 4};
    case GgufType::kF16: return {1, 2};
    case GgufType::kBF16: return {1, 2};
    case GgufType::kQ4_0: return {kQuantBlock, 2 + kQuantBlock / 2};
    case GgufType::kQ4_1: return {kQuantBlock, 2 + 2 + kQuantBlock / 2};
    case GgufType::kQ8_0: return {kQuantBlock, 2 + kQuantBlock};
  }
  return {};
}

int64_t TensorBytes(const BlockLayout& layout, int64_t elements) {
  int64_t bytes;
  if (__builtin_mul_overflow(elements / layout.block_elements, layout.block_bytes, &bytes)) {
    return -1;
  }
  return bytes;
}

// ---------------------------------------------------------------------------------------------
// Every value is computed in f32 from the f16 scales converted exactly, as NumPy does: d * q
// (Q8_0, Q4_0) and (d * q) + m (Q4_1). The product of a scale (an f16 value: 11 significant
// bits, magnitude 2^-24 to 65504) and a quant (an integer of at most 8 bits) is always exact in
// f32, neither rounded, nor subnormal, nor overflowing; so Q8_0 and Q4_0 values round never,
// and Q4_1 values once, in the sum, whether or not the compiler fuses it into an FMA.

float HalfToFloat(uint16_t half) {
  const uint32_t sign = static_cast<uint32_t>(half & 0x8000u) << 16;
  const uint32_t exponent = (half >> 10) & 0x1fu;
  uint32_t mantissa = half & 0x3ffu;
  uint32_t bits;
  if (exponent == 0x1f) {
    bits = sign | 0x7f800000u | (mantissa << 13);
  } else if (exponent != 0) {
    bits = sign | ((exponent + (127 - 15)) << 23) | (mantissa << 13);
  } else if (mantissa == 0) {
    bits = sign;
  } else {
    // mantissa * 2^-24: shift the leading one up to bit 10, the implicit bit of a normal value.
    const int shift = std::countl_zero(mantissa) - 21;
    mantissa <<= shift;
    bits = sign | (static_cast<uint32_t>(127 - 15 + 1 - shift) << 23) | ((mantissa & 0x3ffu) << 13);
  }
  return std::bit_cast<float>(bits);
}

void DequantizeF32(const std::byte* row, int64_t begin, int64_t end, float* out) {
  std::memcpy(out, row + begin * 4, (end - begin) * 4);
}

void DequantizeF16(const std::byte* row, int64_t begin, int64_t end, float* out) {
  for (int64_t c = begin; c < end; ++c) *out++ = HalfToFloat(Load16(row + c * 2));
}

void DequantizeBF16(const std::byte* row, int64_t begin, int64_t end, float* out) {
  for (int64_t c = begin; c < end; ++c) {
    *out++ = std::bit_cast<float>(uint32_t{Load16(row + c * 2)} << 16);
  }
}

void DequantizeQ8_0(const std::byte* row, int64_t block_begin, int64_t block_end, float* out) {
  for (int64_t b = block_begin; b < block_end; ++b, out += kQuantBlock) {
    const std::byte* block = row + b * 34;
    const float d = HalfToFloat(Load16(block));
    const int8_t* q = reinterpret_cast<const int8_t*>(block + 2);
    for (int k = 0; k < kQuantBlock; ++k) out[k] = static_cast<float>(q[k]) * d;
  }
}

void DequantizeQ4_0(const std::byte* row, int64_t block_begin, int64_t block_end, float* out) {
  for (int64_t b = block_begin; b < block_end; ++b, out += kQuantBlock) {
    const std::byte* block = row + b * 18;
    const float d = HalfToFloat(Load16(block));
    const uint8_t* q = reinterpret_cast<const uint8_t*>(block + 2);
    for (int k = 0; k < kQuantBlock / 2; ++k) {
      out[k] = d * static_cast<float>((q[k] & 0x0f) - 8);
      out[k + kQuantBlock / 2] = d * static_cast<float>((q[k] >> 4) - 8);
    }
  }
}

// Whether or not the compiler fuses d * q + m into one FMA (GCC does by default where the
// target has one) makes no difference: d * q is exact in f32, so only the sum rounds.
void DequantizeQ4_1(const std::byte* row, int64_t block_begin, int64_t block_end, float* out) {
  for (int64_t b = block_begin; b < block_end; ++b, out += kQuantBlock) {
    const std::byte* block = row + b * 20;
    const float d = HalfToFloat(Load16(block));
    const float m = HalfToFloat(Load16(block + 2));
    const uint8_t* q = reinterpret_cast<const uint8_t*>(block + 4);
    for (int k = 0; k < kQuantBlock / 2; ++k) {
      out[k] = d * static_cast<float>(q[k] & 0x0f) + m;
      out[k + kQuantBlock / 2] = d * static_cast<float>(q[k] >> 4) + m;
    }
  }
}

void DequantizeRow(GgufType type, const std::byte* row, int64_t col_begin, int64_t col_end,
                   float* out) {
  switch (type) {
    case GgufType::kF32: DequantizeF32(row, col_begin, col_end, out); break;
    case GgufType::kF16: DequantizeF16(row, col_begin, col_end, out); break;
    case GgufType::kBF16: DequantizeBF16(row, col_begin, col_end, out); break;
    case GgufType::kQ4_0:
      DequantizeQ4_0(row, col_begin / kQuantBlock, col_end / kQuantBlock, out);
      break;
    case GgufType::kQ4_1:
      DequantizeQ4_1(row, col_begin / kQuantBlock, col_end / kQuantBlock, out);
      break;
    case GgufType::kQ8_0:
      DequantizeQ8_0(row, col_begin / kQuantBlock, col_end / kQuantBlock, out);
      break;
  }
}

absl::Status Dequantize(const GgufFile& file, const GgufTensor& tensor, int64_t row_begin,
                        int64_t row_end, int64_t col_begin, int64_t col_end,
                        absl::Span<float> out) {
  const std::string what =
      absl::StrCat("Dequantize of tensor '", absl::CHexEscape(tensor.name), "'");
  const BlockLayout layout = LayoutOf(tensor.type);
  SHARDRT_RETURN_IF_ERROR(CheckRequest(file, tensor, layout, what, row_begin, row_end,
                                       col_begin, col_end, out.size()));
  const int64_t width = col_end - col_begin;
  if (width == 0 || row_begin == row_end) return absl::OkStatus();  // (`out` may hold no pointer)
  const int64_t row_bytes = tensor.row_length() / layout.block_elements * layout.block_bytes;
  const std::byte* data = file.bytes().data() + tensor.offset;
  for (int64_t r = row_begin; r < row_end; ++r) {
    DequantizeRow(tensor.type, data + r * row_bytes, col_begin, col_end,
                  out.data() + (r - row_begin) * width);
  }
  return absl::OkStatus();
}

}  // namespace shardrt::llama
