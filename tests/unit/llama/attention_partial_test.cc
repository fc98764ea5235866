// The attention partials of the decode kernel (attention_partial.h) against a double-precision
// softmax written out here: both paths (head dims that are multiples of 16, in groups of up to
// 4 query heads, and any other head dim), with and without the token's own key, no keys at all,
// and strided rows as the caches hold them.
#include "llama/attention_partial.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace shardrt::llama {
namespace {

struct Case {
  int64_t n, hd, count, stride_rows;
  bool self;
};

TEST(AttentionHeadsPartialTest, MatchesADoublePrecisionSoftmax) {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const Case cases[] = {{3, 64, 1200, 3, true}, {3, 64, 37, 3, false}, {4, 128, 50, 2, true},
                        {5, 32, 20, 1, true},   {1, 64, 0, 3, true},   {2, 24, 33, 4, true},
                        {3, 8, 9, 2, false},    {3, 64, 0, 3, false}};
  for (const Case& c : cases) {
    SCOPED_TRACE(testing::Message() << "n " << c.n << ", hd " << c.hd << ", keys " << c.count
                                    << (c.self ? " + own" : ""));
    const int64_t stride = c.stride_rows * c.hd;
    std::vector<float> q(size_t(c.n * c.hd)), k(size_t(std::max<int64_t>(1, c.count) * stride)),
        v(k.size()), self_k(size_t(c.hd)), self_v(size_t(c.hd));
    for (auto* a : {&q, &k, &v, &self_k, &self_v}) {
      for (float& x : *a) x = normal(rng);
    }
    const float scale = 1.0f / std::sqrt(float(c.hd));
    std::vector<float> out(size_t(c.n * (c.hd + 2)), 123.0f), scores;
    AttentionHeadsPartial(q.data(), c.n, c.hd, scale, k.data(), v.data(), stride, c.count,
                          c.self ? self_k.data() : nullptr, c.self ? self_v.data() : nullptr,
                          out.data(), scores);
    for (int64_t i = 0; i < c.n; ++i) {
      std::vector<const float*> keys, values;
      for (int64_t j = 0; j < c.count; ++j) {
        keys.push_back(k.data() + j * stride);
        values.push_back(v.data() + j * stride);
      }
      if (c.self) keys.push_back(self_k.data()), values.push_back(self_v.data());
      std::vector<double> s;
      double m = -1e30;
      for (const float* key : keys) {
        double dot = 0;
        for (int64_t d = 0; d < c.hd; ++d) dot += double(q[i * c.hd + d]) * key[d];
        s.push_back(dot * scale);
        m = std::max(m, s.back());
      }
      double l = 0;
      std::vector<double> o(size_t(c.hd), 0.0);
      for (size_t j = 0; j < keys.size(); ++j) {
        const double e = std::exp(s[j] - m);
        l += e;
        for (int64_t d = 0; d < c.hd; ++d) o[d] += e * values[j][d];
      }
      const float* got = out.data() + i * (c.hd + 2);
      EXPECT_NEAR(got[c.hd], m, 1e-5 * std::max(1.0, std::abs(m))) << "m of head " << i;
      EXPECT_NEAR(got[c.hd + 1], l, 1e-5 * std::max(1.0, l)) << "l of head " << i;
      for (int64_t d = 0; d < c.hd; ++d) {
        // o's terms are exp-weighted values of about unit size: l bounds their magnitude.
        ASSERT_NEAR(got[d], o[d], 1e-5 * std::max(1.0, l)) << "o[" << d << "] of head " << i;
      }
    }
  }
}

}  // namespace
}  // namespace shardrt::llama
