#include "llama/quants.h"

#include <bit>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

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
// What a request writes: f32 values (Dequantize) or the blocks' bytes (CopyBlocks).
enum class Output { kFloats, kBytes };

absl::Status CheckRequest(const GgufFile& file, const GgufTensor& tensor,
                          const BlockLayout& layout, absl::string_view what, int64_t row_begin,
                          int64_t row_end, int64_t col_begin, int64_t col_end, size_t out_size,
                          Output output = Output::kFloats) {
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
  int64_t count = (row_end - row_begin) * width;  // at most the element count
  if (output == Output::kBytes) count = count / layout.block_elements * layout.block_bytes;
  if (static_cast<int64_t>(out_size) != count) {
    return Invalid(path, what, ": output of ", out_size,
                   output == Output::kBytes ? " bytes" : " floats", ", expected ", count, " (",
                   row_end - row_begin, " rows x ", width, " columns)");
  }
  return absl::OkStatus();
}

}  // namespace


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

namespace {

// The fifth bits of a Q5 block: bit i of the little-endian u32 at `p` belongs to value i.
inline uint32_t Load32(const std::byte* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// The 4-bit and fifth-bit quants of a Q5_0 / Q5_1 block (values 0..31) into q[32].
inline void Q5Quants(const std::byte* qh_bytes, const uint8_t* qs, int* q) {
  const uint32_t qh = Load32(qh_bytes);
  for (int k = 0; k < kQuantBlock / 2; ++k) {
    q[k] = (qs[k] & 0x0f) | int((qh >> k) & 1) << 4;
    q[k + kQuantBlock / 2] = (qs[k] >> 4) | int((qh >> (k + kQuantBlock / 2)) & 1) << 4;
  }
}

}  // namespace

void DequantizeQ5_0(const std::byte* row, int64_t block_begin, int64_t block_end, float* out) {
  for (int64_t b = block_begin; b < block_end; ++b, out += kQuantBlock) {
    const std::byte* block = row + b * 22;
    const float d = HalfToFloat(Load16(block));
    int q[kQuantBlock];
    Q5Quants(block + 2, reinterpret_cast<const uint8_t*>(block + 6), q);
    for (int k = 0; k < kQuantBlock; ++k) out[k] = d * static_cast<float>(q[k] - 16);
  }
}

void DequantizeQ5_1(const std::byte* row, int64_t block_begin, int64_t block_end, float* out) {
  for (int64_t b = block_begin; b < block_end; ++b, out += kQuantBlock) {
    const std::byte* block = row + b * 24;
    const float d = HalfToFloat(Load16(block));
    const float m = HalfToFloat(Load16(block + 2));
    int q[kQuantBlock];
    Q5Quants(block + 4, reinterpret_cast<const uint8_t*>(block + 8), q);
    for (int k = 0; k < kQuantBlock; ++k) out[k] = d * static_cast<float>(q[k]) + m;
  }
}

void Q4KScaleMin(const uint8_t* scales, int j, int* scale, int* min) {
  if (j < 4) {
    *scale = scales[j] & 0x3f;
    *min = scales[j + 4] & 0x3f;
  } else {
    *scale = (scales[j + 4] & 0x0f) | ((scales[j - 4] >> 2) & 0x30);
    *min = (scales[j + 4] >> 4) | ((scales[j] >> 2) & 0x30);
  }
}

// Q4_K: d and dmin (f16), 12 bytes of 6-bit scales and minimums for 8 sub-blocks of 32, then
// 128 bytes of quants: 32 bytes per pair of sub-blocks, low nibbles the first, high the second.
// A value is (d * scale) * q - (dmin * min): both products exact in f32, the difference
// rounded once.
void DequantizeQ4_K(const std::byte* row, int64_t block_begin, int64_t block_end, float* out) {
  for (int64_t b = block_begin; b < block_end; ++b, out += kSuperBlock) {
    const std::byte* block = row + b * 144;
    const float d = HalfToFloat(Load16(block));
    const float dmin = HalfToFloat(Load16(block + 2));
    const uint8_t* scales = reinterpret_cast<const uint8_t*>(block + 4);
    const uint8_t* qs = reinterpret_cast<const uint8_t*>(block + 16);
    for (int j = 0; j < 8; ++j) {
      int sc, mn;
      Q4KScaleMin(scales, j, &sc, &mn);
      const float ds = d * static_cast<float>(sc), dm = dmin * static_cast<float>(mn);
      const uint8_t* q = qs + (j / 2) * 32;
      const int shift = (j % 2) * 4;
      for (int k = 0; k < 32; ++k) {
        out[j * 32 + k] = ds * static_cast<float>((q[k] >> shift) & 0x0f) - dm;
      }
    }
  }
}

// Q6_K: 128 bytes of low nibbles, 64 bytes of high 2-bit pairs, 16 int8 scales (one per 16
// values), d (f16). Value i (h = i / 128, r = i % 128): low nibble of ql[64 h + r % 64] shifted
// by 4 (r / 64), high bits of qh[32 h + r % 32] shifted by 2 (r / 32); q - 32 times
// (d * scale[i / 16]), that product exact, the second rounded once.
void DequantizeQ6_K(const std::byte* row, int64_t block_begin, int64_t block_end, float* out) {
  for (int64_t b = block_begin; b < block_end; ++b, out += kSuperBlock) {
    const std::byte* block = row + b * 210;
    const uint8_t* ql = reinterpret_cast<const uint8_t*>(block);
    const uint8_t* qh = ql + 128;
    const int8_t* scales = reinterpret_cast<const int8_t*>(block + 192);
    const float d = HalfToFloat(Load16(block + 208));
    for (int i = 0; i < kSuperBlock; ++i) {
      const int h = i / 128, r = i % 128;
      const int low = (ql[64 * h + r % 64] >> (4 * (r / 64))) & 0x0f;
      const int high = (qh[32 * h + r % 32] >> (2 * (r / 32))) & 0x03;
      const float ds = d * static_cast<float>(scales[i / 16]);
      out[i] = ds * static_cast<float>((low | high << 4) - 32);
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
    case GgufType::kQ5_0:
      DequantizeQ5_0(row, col_begin / kQuantBlock, col_end / kQuantBlock, out);
      break;
    case GgufType::kQ5_1:
      DequantizeQ5_1(row, col_begin / kQuantBlock, col_end / kQuantBlock, out);
      break;
    case GgufType::kQ8_0:
      DequantizeQ8_0(row, col_begin / kQuantBlock, col_end / kQuantBlock, out);
      break;
    case GgufType::kQ4_K:
      DequantizeQ4_K(row, col_begin / kSuperBlock, col_end / kSuperBlock, out);
      break;
    case GgufType::kQ6_K:
      DequantizeQ6_K(row, col_begin / kSuperBlock, col_end / kSuperBlock, out);
      break;
  }
}

namespace {

// Byte offsets of the f16 scales (and minimums) in a block of `type`; empty for F32/F16/BF16.
std::vector<int> ScaleOffsets(GgufType type) {
  switch (type) {
    case GgufType::kQ4_0:
    case GgufType::kQ5_0:
    case GgufType::kQ8_0: return {0};
    case GgufType::kQ4_1:
    case GgufType::kQ5_1:
    case GgufType::kQ4_K: return {0, 2};
    case GgufType::kQ6_K: return {208};
    default: return {};
  }
}

// Every scale of blocks [col_begin, col_end) / E of rows [row_begin, row_end) must be finite.
absl::Status CheckScales(const GgufFile& file, const GgufTensor& tensor,
                         const BlockLayout& layout, int64_t row_begin, int64_t row_end,
                         int64_t col_begin, int64_t col_end) {
  const std::vector<int> offsets = ScaleOffsets(tensor.type);
  if (offsets.empty()) return absl::OkStatus();
  const int64_t blocks_per_row = tensor.row_length() / layout.block_elements;
  const std::byte* data = file.bytes().data() + tensor.offset;
  for (int64_t r = row_begin; r < row_end; ++r) {
    for (int64_t b = col_begin / layout.block_elements; b < col_end / layout.block_elements;
         ++b) {
      const std::byte* block = data + (r * blocks_per_row + b) * layout.block_bytes;
      for (int offset : offsets) {
        const uint16_t half = Load16(block + offset);
        if (((half >> 10) & 0x1f) == 0x1f) {
          return Invalid(file.path(), "tensor '", absl::CHexEscape(tensor.name), "': row ", r,
                         ", block ", b, ": its ", offset == 2 ? "minimum" : "scale",
                         " is not finite (f16 0x", absl::Hex(half, absl::kZeroPad4), ")");
        }
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckFiniteValues(const GgufFile& file, const GgufTensor& tensor, int64_t row_begin,
                              int64_t row_end, int64_t col_begin, int64_t col_end) {
  const BlockLayout layout = LayoutOf(tensor.type);
  SHARDRT_RETURN_IF_ERROR(CheckRequest(file, tensor, layout,
                                       absl::StrCat("CheckFiniteValues of tensor '",
                                                    absl::CHexEscape(tensor.name), "'"),
                                       row_begin, row_end, col_begin, col_end,
                                       size_t((row_end - row_begin) * (col_end - col_begin))));
  const std::byte* data = file.bytes().data() + tensor.offset;
  const int64_t n = tensor.row_length();
  // The first value for which `bad(row, column)` holds, as an error.
  auto scan = [&](const auto& bad) -> absl::Status {
    for (int64_t r = row_begin; r < row_end; ++r) {
      for (int64_t c = col_begin; c < col_end; ++c) {
        if (bad(r * n + c)) {
          return Invalid(file.path(), "tensor '", absl::CHexEscape(tensor.name), "': row ", r,
                         ", column ", c, ": the value is not finite (NaN or infinity)");
        }
      }
    }
    return absl::OkStatus();
  };
  switch (tensor.type) {
    case GgufType::kF32:
      return scan([&](int64_t i) {
        float v;
        std::memcpy(&v, data + i * 4, 4);
        return !std::isfinite(v);
      });
    case GgufType::kF16:  // exponent all ones
      return scan([&](int64_t i) { return (Load16(data + i * 2) & 0x7C00) == 0x7C00; });
    case GgufType::kBF16:
      return scan([&](int64_t i) { return (Load16(data + i * 2) & 0x7F80) == 0x7F80; });
    default: return absl::OkStatus();
  }
}

absl::Status CopyBlocks(const GgufFile& file, const GgufTensor& tensor, int64_t row_begin,
                        int64_t row_end, int64_t col_begin, int64_t col_end,
                        absl::Span<std::byte> out) {
  const std::string what =
      absl::StrCat("CopyBlocks of tensor '", absl::CHexEscape(tensor.name), "'");
  const BlockLayout layout = LayoutOf(tensor.type);
  SHARDRT_RETURN_IF_ERROR(CheckRequest(file, tensor, layout, what, row_begin, row_end,
                                       col_begin, col_end, out.size(), Output::kBytes));
  SHARDRT_RETURN_IF_ERROR(
      CheckScales(file, tensor, layout, row_begin, row_end, col_begin, col_end));
  const int64_t width = (col_end - col_begin) / layout.block_elements * layout.block_bytes;
  if (width == 0 || row_begin == row_end) return absl::OkStatus();
  const int64_t row_bytes = tensor.row_length() / layout.block_elements * layout.block_bytes;
  const std::byte* data = file.bytes().data() + tensor.offset +
                          col_begin / layout.block_elements * layout.block_bytes;
  for (int64_t r = row_begin; r < row_end; ++r) {
    std::memcpy(out.data() + (r - row_begin) * width, data + r * row_bytes, size_t(width));
  }
  return absl::OkStatus();
}

absl::Status Dequantize(const GgufFile& file, const GgufTensor& tensor, int64_t row_begin,
                        int64_t row_end, int64_t col_begin, int64_t col_end,
                        absl::Span<float> out) {
  const std::string what =
      absl::StrCat("Dequantize of tensor '", absl::CHexEscape(tensor.name), "'");
  const BlockLayout layout = LayoutOf(tensor.type);
  SHARDRT_RETURN_IF_ERROR(CheckRequest(file, tensor, layout, what, row_begin, row_end,
                                       col_begin, col_end, out.size()));
  SHARDRT_RETURN_IF_ERROR(
      CheckScales(file, tensor, layout, row_begin, row_end, col_begin, col_end));
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
