#include "decoder/decoder_reference.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"
#include "shardrt/base/status_macros.h"

namespace shardrt::decoder {
namespace {

using Vec = std::vector<double>;

// A row-major matrix view of a weight.
struct Mat {
  const float* data;
  int64_t rows, cols;
};

// y[j] = sum_i x[i] * w[i][j].
Vec MatVec(const Vec& x, const Mat& w) {
  Vec y(w.cols, 0.0);
  for (int64_t i = 0; i < w.rows; ++i) {
    const float* row = w.data + i * w.cols;
    for (int64_t j = 0; j < w.cols; ++j) y[j] += x[i] * double(row[j]);
  }
  return y;
}

Vec RmsNorm(const Vec& x, const float* gain, double eps) {
  double ms = 0;
  for (double v : x) ms += v * v;
  const double inv = 1.0 / std::sqrt(ms / double(x.size()) + eps);
  Vec y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] * inv * double(gain[i]);
  return y;
}

class Reference {
 public:
  Reference(const DecoderConfig& c, const DecoderWeights& w) : c_(c), w_(w) {
    // cache_[layer][0 = k, 1 = v][position] = n_heads * head_dim values
    cache_.assign(c.n_layers, std::vector<std::vector<Vec>>(2, std::vector<Vec>(c.max_seq)));
  }

  // Runs `token` at `position` (all earlier positions already run); returns the logits.
  Vec Step(int32_t token, int64_t position) {
    const int64_t d = c_.d_model, h = c_.n_heads, hd = c_.head_dim();
    Vec x(d);
    for (int64_t i = 0; i < d; ++i) {
      x[i] = double(Get("embed")[token * d + i]) + double(Get("pos_embed")[position * d + i]);
    }
    for (int64_t layer = 0; layer < c_.n_layers; ++layer) {
      const std::string p = absl::StrCat("layer", layer, ".");
      Vec n = RmsNorm(x, Get(p + "attn_norm"), c_.norm_eps);
      Vec q = MatVec(n, M(p + "wq", d, h * hd));
      cache_[layer][0][position] = MatVec(n, M(p + "wk", d, h * hd));
      cache_[layer][1][position] = MatVec(n, M(p + "wv", d, h * hd));
      Vec o(h * hd, 0.0);
      for (int64_t head = 0; head < h; ++head) {
        const int64_t off = head * hd;
        Vec scores(position + 1);
        double max = -INFINITY;
        for (int64_t j = 0; j <= position; ++j) {
          double s = 0;
          for (int64_t e = 0; e < hd; ++e) s += q[off + e] * cache_[layer][0][j][off + e];
          scores[j] = s / std::sqrt(double(hd));
          max = std::max(max, scores[j]);
        }
        double sum = 0;
        for (double& s : scores) sum += (s = std::exp(s - max));
        for (int64_t j = 0; j <= position; ++j) {
          for (int64_t e = 0; e < hd; ++e) {
            o[off + e] += scores[j] / sum * cache_[layer][1][j][off + e];
          }
        }
      }
      Vec attn = MatVec(o, M(p + "wo", h * hd, d));
      for (int64_t i = 0; i < d; ++i) x[i] += attn[i];

      Vec u = MatVec(RmsNorm(x, Get(p + "mlp_norm"), c_.norm_eps), M(p + "w1", d, c_.hidden()));
      for (double& v : u) v = v / (1.0 + std::exp(-v));  // SiLU
      Vec mlp = MatVec(u, M(p + "w2", c_.hidden(), d));
      for (int64_t i = 0; i < d; ++i) x[i] += mlp[i];
    }
    return MatVec(RmsNorm(x, Get("final_norm"), c_.norm_eps), M("w_out", d, c_.vocab));
  }

 private:
  const float* Get(const std::string& name) const { return w_.Find(name)->values.data(); }
  Mat M(const std::string& name, int64_t rows, int64_t cols) const {
    return Mat{Get(name), rows, cols};
  }

  const DecoderConfig& c_;
  const DecoderWeights& w_;
  std::vector<std::vector<std::vector<Vec>>> cache_;
};

int32_t ArgMax(const Vec& v) {
  size_t best = 0;
  for (size_t i = 1; i < v.size(); ++i) {
    if (v[i] > v[best]) best = i;
  }
  return int32_t(best);
}

absl::Status CheckWeights(const DecoderConfig& config, const DecoderWeights& weights) {
  for (const ArraySpec& spec : WeightSpecs(config)) {
    const WeightArray* a = weights.Find(spec.name);
    if (a == nullptr) return absl::InvalidArgumentError(absl::StrCat("no weight ", spec.name));
    SHARDRT_ASSIGN_OR_RETURN(const int64_t count, spec.num_elements());
    if (a->spec.dims != spec.dims || int64_t(a->values.size()) != count) {
      return absl::InvalidArgumentError(
          absl::StrCat("weight ", spec.name, " does not have the config's shape"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ReferenceResult> RunReference(const DecoderConfig& config,
                                             const DecoderWeights& weights,
                                             absl::Span<const int32_t> prompt, int64_t num_tokens) {
  SHARDRT_RETURN_IF_ERROR(ValidateConfig(config));
  SHARDRT_RETURN_IF_ERROR(ValidateGeneration(config, num_tokens));
  SHARDRT_RETURN_IF_ERROR(CheckWeights(config, weights));
  if (int64_t(prompt.size()) != config.prompt_len) {
    return absl::InvalidArgumentError(absl::StrCat("the prompt has ", prompt.size(),
                                                   " tokens, the config says ", config.prompt_len));
  }
  for (int32_t t : prompt) {
    if (t < 0 || t >= config.vocab) {
      return absl::InvalidArgumentError(
          absl::StrCat("prompt token ", t, " is not in [0, ", config.vocab, ")"));
    }
  }
  Reference model(config, weights);
  Vec logits;
  for (int64_t pos = 0; pos < config.prompt_len; ++pos) logits = model.Step(prompt[pos], pos);
  ReferenceResult result;
  for (int64_t i = 0; i < num_tokens; ++i) {
    if (i > 0) logits = model.Step(result.tokens.back(), config.prompt_len + i - 1);
    result.tokens.push_back(ArgMax(logits));
    result.logits.emplace_back(logits.begin(), logits.end());
  }
  return result;
}

}  // namespace shardrt::decoder
