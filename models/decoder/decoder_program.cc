#include "decoder/decoder_program.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "shardrt/base/status_macros.h"
#include "shardrt/program/array_spec.h"
#include "shardrt/program/builder.h"

namespace shardrt::decoder {
namespace {

using stablehlo::Builder;
using stablehlo::F32;
using stablehlo::I32;
using stablehlo::ModuleSpec;
using stablehlo::Value;

// Asks GSPMD to split `a` along `dim` (a no-op program text when there is one partition). A
// split the sharding layer refuses is the builder's error.
Value SplitAlong(Builder& b, int64_t num_partitions, const Value& a, int dim) {
  if (num_partitions == 1) return a;
  absl::StatusOr<Sharding> sharding =
      ShardingOf(ArraySpec{"split value", a.shape.type, a.shape.dims, dim}, num_partitions);
  if (!sharding.ok()) {
    b.AddError(sharding.status());
    return a;
  }
  return b.ShardingConstraint(a, *sharding);
}

// The model written with a Builder; `w` maps weight names to the function's parameters.
class Model {
 public:
  Model(const DecoderConfig& config, Builder& b, std::map<std::string, Value> weights)
      : c_(config), b_(b), w_(std::move(weights)) {}

  const Value& W(const std::string& name) const { return w_.at(name); }

  // x [t, d] * rsqrt(mean(x^2) + eps) * gain.
  Value RmsNorm(const Value& x, const Value& gain) {
    const int64_t t = x.shape.dims[0], d = x.shape.dims[1];
    Value ms = b_.Scale(b_.Reduce(b_.Mul(x, x), {1}, "add", b_.Splat(0.0, F32({}))), 1.0 / d);
    Value inv = b_.Unary("rsqrt", b_.Add(ms, b_.Splat(c_.norm_eps, F32({t}))));
    Value y = b_.Mul(x, b_.Broadcast(inv, {t, d}, {0}));
    return b_.Mul(y, b_.Broadcast(gain, {t, d}, {1}));
  }

  // [t, n_heads * head_dim] -> [n_heads, t, head_dim], split by heads.
  Value ToHeads(const Value& x) {
    const int64_t t = x.shape.dims[0];
    Value r = b_.Reshape(x, {t, c_.n_heads, c_.head_dim()});
    return SplitAlong(b_, c_.num_partitions, b_.Transpose(r, {1, 0, 2}), 0);
  }
  Value FromHeads(const Value& x) {
    const int64_t t = x.shape.dims[1];
    return b_.Reshape(b_.Transpose(x, {1, 0, 2}), {t, c_.n_heads * c_.head_dim()});
  }

  // Softmax attention of q [h, t, hd] over k, v [h, s, hd]; `allowed` [t, s] (i1) marks the
  // key positions each query may see.
  Value Attention(const Value& q, const Value& k, const Value& v, const Value& allowed) {
    const int64_t h = q.shape.dims[0], t = q.shape.dims[1], s = k.shape.dims[1];
    Value scores = b_.Dot(q, k, {0}, {0}, {2}, {2});  // [h, t, s]
    Value mask = b_.Broadcast(allowed, {h, t, s}, {1, 2});
    scores = b_.Select(mask, scores, b_.Splat(-1e30, F32({h, t, s})));
    Value max = b_.Reduce(scores, {2}, "maximum", b_.NegInf());
    Value e = b_.Unary("exponential",
                       b_.Binary("subtract", scores, b_.Broadcast(max, {h, t, s}, {0, 1})));
    Value sum = b_.Reduce(e, {2}, "add", b_.Splat(0.0, F32({})));
    Value p = b_.Binary("divide", e, b_.Broadcast(sum, {h, t, s}, {0, 1}));
    return b_.Dot(p, v, {0}, {0}, {2}, {1});  // [h, t, hd]
  }

  // The MLP half of a layer, with its residual: x + w2(silu(w1(norm(x)))).
  Value Mlp(const Value& x, const std::string& p) {
    Value h = RmsNorm(x, W(p + "mlp_norm"));
    Value u = SplitAlong(b_, c_.num_partitions, b_.MatMul(h, W(p + "w1")), 1);
    Value act = b_.Mul(u, b_.Unary("logistic", u));
    return b_.Add(x, b_.MatMul(act, W(p + "w2")));
  }

  // Queries (already scaled by 1/sqrt(head_dim)), keys and values of x's positions, by head.
  struct Qkv {
    Value q, k, v;
  };
  Qkv Project(const Value& x, const std::string& p) {
    Value h = RmsNorm(x, W(p + "attn_norm"));
    Value q = ToHeads(b_.MatMul(h, W(p + "wq")));
    return Qkv{b_.Scale(q, 1.0 / std::sqrt(double(c_.head_dim()))),
               ToHeads(b_.MatMul(h, W(p + "wk"))), ToHeads(b_.MatMul(h, W(p + "wv")))};
  }

  // x + wo(attention output) for attention output o [h, t, hd].
  Value AttentionResidual(const Value& x, const Value& o, const std::string& p) {
    return b_.Add(x, b_.MatMul(FromHeads(o), W(p + "wo")));
  }

  // Logits of the single row x [1, d], reshaped to [vocab].
  Value Logits(const Value& x) {
    Value h = RmsNorm(x, W("final_norm"));
    return b_.Reshape(b_.MatMul(h, W("w_out")), {c_.vocab});
  }

 private:
  const DecoderConfig& c_;
  Builder& b_;
  std::map<std::string, Value> w_;
};

// The module `decoder_<name>` around the builder's body, returning `results`, as `program`.
// Errors: WriteModule's.
absl::Status Assemble(const DecoderConfig& c, absl::string_view name, ModuleSpec sig,
                      const Builder& b, const std::vector<Value>& results,
                      DecoderProgram& program) {
  SHARDRT_ASSIGN_OR_RETURN(
      stablehlo::WrittenModule module,
      stablehlo::WriteModule(absl::StrCat("decoder_", name), c.num_partitions, sig, b, results));
  program.name = std::string(name);
  program.mlir = std::move(module.text);
  program.signature = std::move(module.signature);
  program.parameters = std::move(sig.parameters);
  program.outputs = std::move(sig.outputs);
  program.aliases = std::move(sig.aliases);
  return absl::OkStatus();
}

ArraySpec S32(std::string name, std::vector<int64_t> dims) {
  return ArraySpec{std::move(name), ElementType::kS32, std::move(dims), -1};
}

// Declares parameters `specs` starting at index `first`; weights go into `weights` by name.
std::vector<Value> Params(const std::vector<ArraySpec>& specs, int64_t first) {
  std::vector<Value> values;
  for (size_t i = 0; i < specs.size(); ++i) {
    values.push_back(Builder::Parameter(first + int64_t(i), specs[i].shape()));
  }
  return values;
}

std::map<std::string, Value> ByName(const std::vector<ArraySpec>& specs,
                                    const std::vector<Value>& values) {
  std::map<std::string, Value> m;
  for (size_t i = 0; i < specs.size(); ++i) m.emplace(specs[i].name, values[i]);
  return m;
}

}  // namespace

absl::StatusOr<DecoderProgram> EmitPrefill(const DecoderConfig& c) {
  SHARDRT_RETURN_IF_ERROR(ValidateConfig(c));
  const std::vector<ArraySpec> weights = WeightSpecs(c), caches = CacheSpecs(c);
  ModuleSpec sig;
  sig.parameters.push_back(S32("tokens", {c.prompt_len}));
  sig.parameters.insert(sig.parameters.end(), weights.begin(), weights.end());
  sig.outputs = caches;
  sig.outputs.push_back(S32("next_token", {}));
  sig.outputs.push_back(ArraySpec{"logits", ElementType::kF32, {c.vocab}, -1});

  Builder b;
  const Value tokens = Params({sig.parameters[0]}, 0)[0];
  Model m(c, b, ByName(weights, Params(weights, 1)));
  const int64_t t = c.prompt_len, d = c.d_model;

  Value x = b.Add(b.Gather(m.W("embed"), tokens), b.Slice(m.W("pos_embed"), {0, 0}, {t, d}));
  // Causal mask: query i sees keys j <= i.
  Value causal = b.Compare(b.Iota(I32({t, t}), 0), b.Iota(I32({t, t}), 1), "GE");
  std::vector<Value> results;
  for (int64_t i = 0; i < c.n_layers; ++i) {
    const std::string p = absl::StrCat("layer", i, ".");
    Model::Qkv qkv = m.Project(x, p);
    x = m.AttentionResidual(x, m.Attention(qkv.q, qkv.k, qkv.v, causal), p);
    x = m.Mlp(x, p);
    for (const Value& kv : {qkv.k, qkv.v}) {
      results.push_back(SplitAlong(b, c.num_partitions, b.PadHigh(kv, {0, c.max_seq - t, 0}), 0));
    }
  }
  Value logits = m.Logits(b.Slice(x, {t - 1, 0}, {t, d}));
  results.push_back(b.ArgMax(logits).index);
  results.push_back(logits);

  DecoderProgram program;
  SHARDRT_RETURN_IF_ERROR(Assemble(c, "prefill", std::move(sig), b, results, program));
  return program;
}

absl::StatusOr<DecoderProgram> EmitDecodeStep(const DecoderConfig& c) {
  SHARDRT_RETURN_IF_ERROR(ValidateConfig(c));
  const std::vector<ArraySpec> weights = WeightSpecs(c), caches = CacheSpecs(c);
  const int64_t num_caches = int64_t(caches.size());
  ModuleSpec sig;
  sig.parameters = caches;
  sig.parameters.push_back(S32("token", {}));
  sig.parameters.push_back(S32("position", {}));
  sig.parameters.insert(sig.parameters.end(), weights.begin(), weights.end());
  sig.outputs = caches;
  sig.outputs.push_back(S32("next_token", {}));
  sig.outputs.push_back(ArraySpec{"logits", ElementType::kF32, {c.vocab}, -1});
  for (int64_t i = 0; i < num_caches; ++i) sig.aliases.emplace_back(i, i);

  Builder b;
  const std::vector<Value> cache_in = Params(caches, 0);
  const Value token = Params({sig.parameters[num_caches]}, num_caches)[0];
  const Value position = Params({sig.parameters[num_caches + 1]}, num_caches + 1)[0];
  Model m(c, b, ByName(weights, Params(weights, num_caches + 2)));
  const int64_t d = c.d_model, s = c.max_seq;

  const Value zero = b.I32(0);
  Value x = b.Add(b.DynamicSlice(m.W("embed"), {token, zero}, {1, d}),
                  b.DynamicSlice(m.W("pos_embed"), {position, zero}, {1, d}));
  // The query at `position` sees keys at positions <= position.
  Value seen = b.Compare(b.Iota(I32({1, s}), 1), b.Broadcast(position, {1, s}, {}), "LE");
  std::vector<Value> results;
  for (int64_t i = 0; i < c.n_layers; ++i) {
    const std::string p = absl::StrCat("layer", i, ".");
    Model::Qkv qkv = m.Project(x, p);
    Value k = b.DynamicUpdateSlice(cache_in[2 * i], qkv.k, {zero, position, zero});
    Value v = b.DynamicUpdateSlice(cache_in[2 * i + 1], qkv.v, {zero, position, zero});
    x = m.AttentionResidual(x, m.Attention(qkv.q, k, v, seen), p);
    x = m.Mlp(x, p);
    results.push_back(k);
    results.push_back(v);
  }
  Value logits = m.Logits(x);
  results.push_back(b.ArgMax(logits).index);
  results.push_back(logits);

  DecoderProgram program;
  SHARDRT_RETURN_IF_ERROR(Assemble(c, "decode_step", std::move(sig), b, results, program));
  return program;
}

}  // namespace shardrt::decoder
