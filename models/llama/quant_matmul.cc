#include "llama/quant_matmul.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "absl/strings/str_cat.h"
#include "llama/quants.h"

// The kernels pass 64-byte vectors between always-inline helpers only; GCC's note that such
// vectors change the calling convention without AVX-512 does not concern them. GCC 12's own
// _mm512_cvtepu8_epi32 passes an undefined vector as the merge source of an unmasked widening,
// which it then reports as maybe uninitialized.
#pragma GCC diagnostic ignored "-Wpsabi"
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace shardrt::llama {

// The kernels' body (quant_matmul_kernels.inc) once per instruction set, each in its own
// namespace and target region so that no code is shared between the paths.
namespace generic {
#include "llama/quant_matmul_kernels.inc"
}  // namespace generic

#if defined(__x86_64__)
// GCC takes `#pragma GCC target`, Clang (the fuzz build) an attribute applied to every function
// of the region.
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma,f16c"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
#endif
namespace avx2 {
#define SHARDRT_WIDEN_U8(bytes, out)                                         \
  do {                                                                       \
    __m128i v;                                                               \
    __builtin_memcpy(&v, &(bytes), 16);                                      \
    const __m256i lo = _mm256_cvtepu8_epi32(v);                              \
    const __m256i hi = _mm256_cvtepu8_epi32(_mm_srli_si128(v, 8));           \
    __builtin_memcpy(&(out), &lo, 32);                                       \
    __builtin_memcpy(reinterpret_cast<char*>(&(out)) + 32, &hi, 32);         \
  } while (0)
#define SHARDRT_HALF_TO_FLOAT(h) _cvtsh_ss(h)
#define SHARDRT_HALF16_TO_FLOAT(p, out)                                                   \
  do {                                                                                    \
    _mm256_storeu_ps((out), _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));      \
    _mm256_storeu_ps((out) + 8,                                                           \
                     _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>((p) + 16)))); \
  } while (0)
#include "llama/quant_matmul_kernels.inc"
#undef SHARDRT_HALF16_TO_FLOAT
#undef SHARDRT_HALF_TO_FLOAT
#undef SHARDRT_WIDEN_U8
}  // namespace avx2
#if defined(__clang__)
#pragma clang attribute pop
#pragma clang attribute push(                                                    \
    __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c"))), \
    apply_to = function)
#else
#pragma GCC pop_options
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c")
#endif
namespace avx512 {

// Hand-written AVX-512 loops for the types of most weights (Q4_1, Q8_0) with few rows of x,
// where decoding is the cost: the same values as the generic decoders (see there), fewer
// instructions. Q4_1: a block's 16 possible values d * q + m are one vector (a table), and
// each weight's nibble picks its value with a permute (which reads the low 4 bits of each
// lane), so no nibble is masked or converted. Q8_0: each int8 widened and converted, times d.
template <GgufType T, int n>
struct FastDots {
  static constexpr bool kHave = false;
  static void Run(const uint8_t*, int64_t, const float*, int64_t, float*) {}
};

static inline __attribute__((always_inline)) float HalfAt(const uint8_t* p) {
  uint16_t h;
  __builtin_memcpy(&h, p, 2);
  return _cvtsh_ss(h);
}

template <int n>
struct FastDots<GgufType::kQ4_1, n> {
  static constexpr bool kHave = true;
  static inline __attribute__((always_inline)) void Run(const uint8_t* row, int64_t blocks,
                                                        const float* x, int64_t k, float* out) {
    const __m512 iota = _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    __m512 acc[n][2];
    for (int i = 0; i < n; ++i) acc[i][0] = acc[i][1] = _mm512_setzero_ps();
    for (int64_t b = 0; b < blocks; ++b) {
      const uint8_t* blk = row + b * 20;
      const __m512 table =
          _mm512_fmadd_ps(_mm512_set1_ps(HalfAt(blk)), iota, _mm512_set1_ps(HalfAt(blk + 2)));
      const __m512i wide =
          _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 4)));
      const __m512 low = _mm512_permutexvar_ps(wide, table);
      const __m512 high = _mm512_permutexvar_ps(_mm512_srli_epi32(wide, 4), table);
      for (int i = 0; i < n; ++i) {
        const float* xb = x + i * k + b * 32;
        acc[i][0] = _mm512_fmadd_ps(low, _mm512_loadu_ps(xb), acc[i][0]);
        acc[i][1] = _mm512_fmadd_ps(high, _mm512_loadu_ps(xb + 16), acc[i][1]);
      }
    }
    for (int i = 0; i < n; ++i) out[i] = _mm512_reduce_add_ps(_mm512_add_ps(acc[i][0], acc[i][1]));
  }
};

template <int n>
struct FastDots<GgufType::kQ8_0, n> {
  static constexpr bool kHave = true;
  static inline __attribute__((always_inline)) void Run(const uint8_t* row, int64_t blocks,
                                                        const float* x, int64_t k, float* out) {
    __m512 acc[n][2];
    for (int i = 0; i < n; ++i) acc[i][0] = acc[i][1] = _mm512_setzero_ps();
    for (int64_t b = 0; b < blocks; ++b) {
      const uint8_t* blk = row + b * 34;
      const __m512 d = _mm512_set1_ps(HalfAt(blk));
      __m512 w[2];
      for (int h = 0; h < 2; ++h) {
        const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 2 + 16 * h));
        w[h] = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q)), d);
      }
      for (int i = 0; i < n; ++i) {
        const float* xb = x + i * k + b * 32;
        acc[i][0] = _mm512_fmadd_ps(w[0], _mm512_loadu_ps(xb), acc[i][0]);
        acc[i][1] = _mm512_fmadd_ps(w[1], _mm512_loadu_ps(xb + 16), acc[i][1]);
      }
    }
    for (int i = 0; i < n; ++i) out[i] = _mm512_reduce_add_ps(_mm512_add_ps(acc[i][0], acc[i][1]));
  }
};

// dst[j * ldd + i] = src[i * ld + j] for i, j < 16: 16 rows in registers, unpacked in pairs,
// shuffled in fours, then their 128-bit lanes exchanged twice.
static inline __attribute__((always_inline)) void Transpose16(const float* src, int64_t ld,
                                                              float* dst, int64_t ldd) {
  __m512 r[16], t[16];
  for (int i = 0; i < 16; ++i) r[i] = _mm512_loadu_ps(src + i * ld);
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
  }
  // r[4 q + j], lane L: column 4 L + j of rows 4 q .. 4 q + 3.
  for (int q = 0; q < 16; q += 4) {
    r[q] = _mm512_shuffle_ps(t[q], t[q + 2], 0x44);
    r[q + 1] = _mm512_shuffle_ps(t[q], t[q + 2], 0xee);
    r[q + 2] = _mm512_shuffle_ps(t[q + 1], t[q + 3], 0x44);
    r[q + 3] = _mm512_shuffle_ps(t[q + 1], t[q + 3], 0xee);
  }
  for (int j = 0; j < 4; ++j) {
    const __m512 a0 = _mm512_shuffle_f32x4(r[j], r[4 + j], 0x44);
    const __m512 a1 = _mm512_shuffle_f32x4(r[j], r[4 + j], 0xee);
    const __m512 b0 = _mm512_shuffle_f32x4(r[8 + j], r[12 + j], 0x44);
    const __m512 b1 = _mm512_shuffle_f32x4(r[8 + j], r[12 + j], 0xee);
    _mm512_storeu_ps(dst + j * ldd, _mm512_shuffle_f32x4(a0, b0, 0x88));
    _mm512_storeu_ps(dst + (4 + j) * ldd, _mm512_shuffle_f32x4(a0, b0, 0xdd));
    _mm512_storeu_ps(dst + (8 + j) * ldd, _mm512_shuffle_f32x4(a1, b1, 0x88));
    _mm512_storeu_ps(dst + (12 + j) * ldd, _mm512_shuffle_f32x4(a1, b1, 0xdd));
  }
}

#define SHARDRT_FAST_DOTS FastDots
#define SHARDRT_TRANSPOSE16 Transpose16
#define SHARDRT_MICRO_ROWS 8
#define SHARDRT_FUSED_GROUP 8
#define SHARDRT_WIDEN_U8(bytes, out)                                         \
  do {                                                                       \
    __m128i v;                                                               \
    __builtin_memcpy(&v, &(bytes), 16);                                      \
    const __m512i wide = _mm512_cvtepu8_epi32(v);                            \
    __builtin_memcpy(&(out), &wide, 64);                                     \
  } while (0)
#define SHARDRT_HALF_TO_FLOAT(h) _cvtsh_ss(h)
#define SHARDRT_HALF16_TO_FLOAT(p, out) \
  _mm512_storeu_ps((out), _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))))
#include "llama/quant_matmul_kernels.inc"
#undef SHARDRT_HALF16_TO_FLOAT
#undef SHARDRT_HALF_TO_FLOAT
#undef SHARDRT_WIDEN_U8
#undef SHARDRT_FAST_DOTS
#undef SHARDRT_TRANSPOSE16
#undef SHARDRT_MICRO_ROWS
#undef SHARDRT_FUSED_GROUP
}  // namespace avx512
#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
#endif

absl::string_view IsaName(KernelIsa isa) {
  switch (isa) {
    case KernelIsa::kGeneric: return "generic";
    case KernelIsa::kAvx2: return "avx2";
    case KernelIsa::kAvx512: return "avx512";
  }
  return "unknown";
}

std::vector<KernelIsa> SupportedIsas() {
  std::vector<KernelIsa> isas = {KernelIsa::kGeneric};
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    isas.push_back(KernelIsa::kAvx2);
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq")) {
      isas.push_back(KernelIsa::kAvx512);
    }
  }
#endif
  return isas;
}

KernelIsa BestIsa() {
  static const KernelIsa best = SupportedIsas().back();
  return best;
}

absl::Status CheckQuantMatrix(const QuantMatrix& w) {
  const BlockLayout layout = LayoutOf(w.type);
  const std::string type = GgufTypeName(static_cast<uint32_t>(w.type));
  if (layout.block_elements == 0) {
    return absl::InvalidArgumentError(absl::StrCat("quantized matrix: type ", type,
                                                   " has no kernel"));
  }
  if (w.rows < 0 || w.cols < 1 || w.cols % layout.block_elements != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("quantized matrix: ", w.rows, " rows of ", w.cols, " ", type,
                     " values: expected rows >= 0 and a positive multiple of ",
                     layout.block_elements, " columns"));
  }
  const int64_t bytes = w.cols / layout.block_elements * layout.block_bytes;
  if (w.row_bytes != bytes) {
    return absl::InvalidArgumentError(absl::StrCat("quantized matrix: rows of ", w.cols, " ",
                                                   type, " values take ", bytes,
                                                   " bytes, got ", w.row_bytes));
  }
  return absl::OkStatus();
}

void QuantMatmulRows(KernelIsa isa, const QuantMatrix& w, const float* x, int64_t s, float* y,
                     int64_t ldy, int64_t row_begin, int64_t row_end, float* scratch,
                     MatmulOrder order) {
  const bool per_row = order == MatmulOrder::kPerRow;
  switch (isa) {
#if defined(__x86_64__)
    case KernelIsa::kAvx512:
      return avx512::MatmulRows(w, x, s, y, ldy, row_begin, row_end, scratch, per_row);
    case KernelIsa::kAvx2:
      return avx2::MatmulRows(w, x, s, y, ldy, row_begin, row_end, scratch, per_row);
#endif
    default:
      return generic::MatmulRows(w, x, s, y, ldy, row_begin, row_end, scratch, per_row);
  }
}

void QuantGatherRows(KernelIsa isa, const QuantMatrix& w, const int32_t* ids, int64_t s,
                     float* y) {
  switch (isa) {
#if defined(__x86_64__)
    case KernelIsa::kAvx512: return avx512::GatherRows(w, ids, s, y);
    case KernelIsa::kAvx2: return avx2::GatherRows(w, ids, s, y);
#endif
    default: return generic::GatherRows(w, ids, s, y);
  }
}

}  // namespace shardrt::llama
