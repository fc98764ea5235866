// One query's attention over a row of cached keys and values, as a partial softmax that the
// devices combine: the arithmetic of the decode attention kernel (decode_attention.h), apart
// from its operands' shapes and threads. Each key and value row is read once for a group of
// query heads that share it; the sums are vectorized (AVX-512, AVX2 or the baseline, picked at
// load) in an order fixed by the operands alone, so a token's result does not depend on the
// batch it runs in.
#pragma once

#include <cstdint>
#include <vector>

namespace shardrt::llama {

// One token's partials for `n` (>= 1) query heads that share one key/value head: q holds n
// rows of hd floats; the keys and values are `count` rows of hd floats at stride `stride`
// (floats) from k0 and v0, then, when self_k is not null, the token's own key and value
// (self_k, self_v). Writes, for head i, o (hd values: the exp-weighted sum of values),
// m (the maximum score) and l (the sum of exp(score - m)) at out + i * (hd + 2); scores are
// q . k * scale. With no key at all: o = 0, m = -1e30, l = 0. `scores` is scratch (resized as
// needed). Each key and value row is read once for the group; every sum runs in an order fixed
// by the operands alone. Checks nothing. Thread safety: pure apart from its outputs.
void AttentionHeadsPartial(const float* q, int64_t n, int64_t hd, float scale, const float* k0,
                           const float* v0, int64_t stride, int64_t count, const float* self_k,
                           const float* self_v, float* out, std::vector<float>& scores);

}  // namespace shardrt::llama
