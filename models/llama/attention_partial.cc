#include "llama/attention_partial.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace shardrt::llama {
namespace {

// The score of "no key": exp(kMasked - m) is 0 for every real maximum m (as in the programs).
constexpr float kMasked = -1e30f;

// Query heads per pass over the keys and values (a group's accumulators stay in registers).
constexpr int64_t kHeadsPerPass = 4;

// 16 floats, one AVX-512 register (two AVX2 ones, four SSE ones in the baseline clone).
typedef float V16 __attribute__((vector_size(64)));
typedef float V8 __attribute__((vector_size(32)));
typedef float V4 __attribute__((vector_size(16)));

// The helpers pass 64-byte vectors between always-inline functions only; GCC's note that such
// vectors change the calling convention without AVX-512 does not concern them.
#pragma GCC diagnostic ignored "-Wpsabi"
#define SHARDRT_ALWAYS_INLINE static inline __attribute__((always_inline))

SHARDRT_ALWAYS_INLINE V16 Load16(const float* p) {
  V16 v;
  __builtin_memcpy(&v, p, sizeof(v));
  return v;
}

// The 16 lanes' sum, halves added pairwise.
SHARDRT_ALWAYS_INLINE float Sum16(V16 v) {
  const V8 h8 = __builtin_shufflevector(v, v, 0, 1, 2, 3, 4, 5, 6, 7) +
                __builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15);
  const V4 h4 = __builtin_shufflevector(h8, h8, 0, 1, 2, 3) +
                __builtin_shufflevector(h8, h8, 4, 5, 6, 7);
  return (h4[0] + h4[2]) + (h4[1] + h4[3]);
}

// q . k over hd values (a multiple of 16): two accumulators over alternate 16-column chunks,
// so that several dots are in flight at once, then summed pairwise.
SHARDRT_ALWAYS_INLINE float Dot16(const float* q, const float* k, int64_t hd) {
  V16 a0 = {}, a1 = {};
  int64_t d = 0;
  for (; d + 32 <= hd; d += 32) {
    a0 += Load16(q + d) * Load16(k + d);
    a1 += Load16(q + d + 16) * Load16(k + d + 16);
  }
  if (d < hd) a0 += Load16(q + d) * Load16(k + d);
  return Sum16(a0 + a1);
}

// Keys ahead of the one being read whose rows are prefetched.
constexpr int64_t kPrefetch = 8;

// Asks for the cache lines of a row of hd floats at p.
SHARDRT_ALWAYS_INLINE void Prefetch(const float* p, int64_t hd) {
  for (int64_t d = 0; d < hd; d += 16) __builtin_prefetch(p + d);
}

// o[i, d .. d + 16 W) = sum_j e[i, j] v_j[d .. d + 16 W) for N heads, the N x W accumulators in
// registers, the keys in order.
template <int N, int W>
SHARDRT_ALWAYS_INLINE void ValuesBlock(const float* scores, int64_t keys, const float* v0,
                                       int64_t stride, int64_t count, const float* self_v,
                                       int64_t d, int64_t hd, float* out) {
  V16 acc[N][W] = {};
  for (int64_t j = 0; j < keys; ++j) {
    const float* v = (j < count ? v0 + j * stride : self_v) + d;
    if (j + kPrefetch < count) Prefetch(v0 + (j + kPrefetch) * stride + d, 16 * W);
    V16 row[W];
    for (int w = 0; w < W; ++w) row[w] = Load16(v + 16 * w);
    for (int i = 0; i < N; ++i) {
      const float e = scores[i * keys + j];
      for (int w = 0; w < W; ++w) acc[i][w] += e * row[w];
    }
  }
  for (int i = 0; i < N; ++i) {
    for (int w = 0; w < W; ++w) {
      __builtin_memcpy(out + i * (hd + 2) + d + 16 * w, &acc[i][w], sizeof(V16));
    }
  }
}

// The partials of N query heads that share a key/value head (q: N rows of hd floats, hd a
// multiple of 16) over `count` keys and values (rows of hd at stride `stride` from k0 and v0)
// and, when `self_k` is set, the token's own key and value: for head i, o (hd values), m and l
// at out + i * (hd + 2). Each key and value row is read once for the N heads: the scores first
// (scores: N rows of count + 1), then exp(score - m) in place, then o over the values, 64
// columns at a time with the heads' accumulators in registers (ValuesBlock). Every sum runs in
// an order fixed by the row alone.
template <int N>
SHARDRT_ALWAYS_INLINE void HeadsPartial(const float* q, int64_t hd, float scale, const float* k0,
                                        const float* v0, int64_t stride, int64_t count,
                                        const float* self_k, const float* self_v, float* out,
                                        float* scores) {
  const int64_t keys = count + (self_k != nullptr ? 1 : 0);
  for (int64_t j = 0; j < keys; ++j) {
    const float* k = j < count ? k0 + j * stride : self_k;
    // The rows are strided (the other heads' keys sit between): ask for one kPrefetch ahead.
    if (j + kPrefetch < count) Prefetch(k0 + (j + kPrefetch) * stride, hd);
    for (int i = 0; i < N; ++i) scores[i * keys + j] = Dot16(q + i * hd, k, hd) * scale;
  }
  for (int i = 0; i < N; ++i) {
    float* e = scores + i * keys;
    float m = kMasked;
    for (int64_t j = 0; j < keys; ++j) m = std::max(m, e[j]);
    float l = 0;
    for (int64_t j = 0; j < keys; ++j) l += e[j] = std::exp(e[j] - m);
    out[i * (hd + 2) + hd] = m;
    out[i * (hd + 2) + hd + 1] = l;
  }
  // Columns in blocks of W vectors (W = 4: a 64-value row read whole in one pass).
  constexpr int W = 4;
  int64_t d = 0;
  for (; d + 16 * W <= hd; d += 16 * W) {
    ValuesBlock<N, W>(scores, keys, v0, stride, count, self_v, d, hd, out);
  }
  for (; d < hd; d += 16) ValuesBlock<N, 1>(scores, keys, v0, stride, count, self_v, d, hd, out);
}

// HeadsPartial for n (1 to kHeadsPerPass) heads, hd a multiple of 16; compiled for AVX-512, AVX2
// and the baseline, picked at load.
__attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
void HeadsPartialN(int64_t n, const float* q, int64_t hd, float scale, const float* k0,
                   const float* v0, int64_t stride, int64_t count, const float* self_k,
                   const float* self_v, float* out, float* scores) {
  switch (n) {
    case 1: return HeadsPartial<1>(q, hd, scale, k0, v0, stride, count, self_k, self_v, out, scores);
    case 2: return HeadsPartial<2>(q, hd, scale, k0, v0, stride, count, self_k, self_v, out, scores);
    case 3: return HeadsPartial<3>(q, hd, scale, k0, v0, stride, count, self_k, self_v, out, scores);
    default:
      return HeadsPartial<4>(q, hd, scale, k0, v0, stride, count, self_k, self_v, out, scores);
  }
}

// One query head's partial for any hd, summed one value at a time (the same softmax as
// HeadsPartial, in another order): the path for head dims that are not multiples of 16.
void HeadPartialAnyDim(const float* q, int64_t hd, float scale, const float* k0, const float* v0,
                       int64_t stride, int64_t count, const float* self_k, const float* self_v,
                       float* out, float* scores) {
  const int64_t keys = count + (self_k != nullptr ? 1 : 0);
  float m = kMasked;
  for (int64_t j = 0; j < keys; ++j) {
    const float* k = j < count ? k0 + j * stride : self_k;
    float dot = 0;
    for (int64_t d = 0; d < hd; ++d) dot += q[d] * k[d];
    m = std::max(m, scores[j] = dot * scale);
  }
  float l = 0;
  for (int64_t j = 0; j < keys; ++j) l += scores[j] = std::exp(scores[j] - m);
  for (int64_t d = 0; d < hd; ++d) out[d] = 0.0f;
  for (int64_t j = 0; j < keys; ++j) {
    const float* v = j < count ? v0 + j * stride : self_v;
    for (int64_t d = 0; d < hd; ++d) out[d] += scores[j] * v[d];
  }
  out[hd] = m;
  out[hd + 1] = l;
}

}  // namespace

void AttentionHeadsPartial(const float* q, int64_t n, int64_t hd, float scale, const float* k0,
                           const float* v0, int64_t stride, int64_t count, const float* self_k,
                           const float* self_v, float* out, std::vector<float>& scores) {
  const int64_t step = hd % 16 == 0 ? kHeadsPerPass : 1;
  if (int64_t(scores.size()) < step * (count + 1)) scores.resize(size_t(step * (count + 1)));
  for (int64_t i = 0; i < n; i += step) {
    const float* qi = q + i * hd;
    float* oi = out + i * (hd + 2);
    if (hd % 16 == 0) {
      HeadsPartialN(std::min(kHeadsPerPass, n - i), qi, hd, scale, k0, v0, stride, count, self_k,
                    self_v, oi, scores.data());
    } else {
      HeadPartialAnyDim(qi, hd, scale, k0, v0, stride, count, self_k, self_v, oi, scores.data());
    }
  }
}

}  // namespace shardrt::llama
