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
#include "llama/quant_matmul_kernels.inc"
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
#define SHARDRT_WIDEN_U8(bytes, out)                                         \
  do {                                                                       \
    __m128i v;                                                               \
    __builtin_memcpy(&v, &(bytes), 16);                                      \
    const __m512i wide = _mm512_cvtepu8_epi32(v);                            \
    __builtin_memcpy(&(out), &wide, 64);                                     \
  } while (0)
#define SHARDRT_HALF_TO_FLOAT(h) _cvtsh_ss(h)
#include "llama/quant_matmul_kernels.inc"
#undef SHARDRT_HALF_TO_FLOAT
#undef SHARDRT_WIDEN_U8
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
                     int64_t ldy, int64_t row_begin, int64_t row_end, float* scratch) {
  switch (isa) {
#if defined(__x86_64__)
    case KernelIsa::kAvx512:
      return avx512::MatmulRows(w, x, s, y, ldy, row_begin, row_end, scratch);
    case KernelIsa::kAvx2:
      return avx2::MatmulRows(w, x, s, y, ldy, row_begin, row_end, scratch);
#endif
    default:
      return generic::MatmulRows(w, x, s, y, ldy, row_begin, row_end, scratch);
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
