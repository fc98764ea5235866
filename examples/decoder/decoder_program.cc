#include "decoder/decoder_program.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "shardrt/base/status_macros.h"

namespace shardrt::decoder {
namespace {

// An SSA value of the program being written: its name and tensor type.
struct Type {
  std::vector<int64_t> dims;
  std::string elem = "f32";  // "f32", "i32" or "i1"
};
struct Value {
  std::string ref;
  Type type;
};

std::string TypeText(const Type& t) {
  std::string s = "tensor<";
  for (int64_t d : t.dims) absl::StrAppend(&s, d, "x");
  absl::StrAppend(&s, t.elem, ">");
  return s;
}

std::string TypeText(const ArraySpec& spec) {
  return TypeText(Type{spec.dims, spec.type == ElementType::kS32 ? "i32" : "f32"});
}

std::string I64Array(const std::vector<int64_t>& v) {
  return v.empty() ? "array<i64>" : absl::StrCat("array<i64: ", absl::StrJoin(v, ", "), ">");
}

std::string FloatText(double v) { return absl::StrFormat("%.9e", v); }

Type F32(std::vector<int64_t> dims) { return Type{std::move(dims), "f32"}; }

// Appends StableHLO operations (generic syntax, which every StableHLO version parses) to a
// function body, naming results %v0, %v1, ...
class Builder {
 public:
  explicit Builder(int64_t num_partitions) : num_partitions_(num_partitions) {}

  const std::string& body() const { return body_; }

  Value Op(absl::string_view op, const std::vector<Value>& operands, absl::string_view attrs,
           Type result) {
    Value out{NewName(), std::move(result)};
    std::vector<std::string> refs, types;
    for (const Value& v : operands) {
      refs.push_back(v.ref);
      types.push_back(TypeText(v.type));
    }
    absl::StrAppend(&body_, "    ", out.ref, " = \"stablehlo.", op, "\"(",
                    absl::StrJoin(refs, ", "), ")",
                    attrs.empty() ? "" : absl::StrCat(" {", attrs, "}"), " : (",
                    absl::StrJoin(types, ", "), ") -> ", TypeText(out.type), "\n");
    return out;
  }

  Value Splat(double v, Type t) {
    const std::string literal = t.elem == "f32" ? FloatText(v) : absl::StrCat(int64_t(v));
    return Op("constant", {}, absl::StrCat("value = dense<", literal, "> : ", TypeText(t)), t);
  }
  Value NegInf() {
    Type t = F32({});
    return Op("constant", {}, absl::StrCat("value = dense<0xFF800000> : ", TypeText(t)), t);
  }
  Value I32(int64_t v) { return Splat(double(v), Type{{}, "i32"}); }

  Value Binary(absl::string_view op, const Value& a, const Value& b) {
    return Op(op, {a, b}, "", a.type);
  }
  Value Add(const Value& a, const Value& b) { return Binary("add", a, b); }
  Value Mul(const Value& a, const Value& b) { return Binary("multiply", a, b); }
  Value Unary(absl::string_view op, const Value& a) { return Op(op, {a}, "", a.type); }

  // Scales every element by a constant.
  Value Scale(const Value& a, double s) { return Mul(a, Splat(s, a.type)); }

  // Broadcasts `a` to `dims`, operand dimension i becoming result dimension map[i].
  Value Broadcast(const Value& a, std::vector<int64_t> dims, std::vector<int64_t> map) {
    return Op("broadcast_in_dim", {a}, absl::StrCat("broadcast_dimensions = ", I64Array(map)),
              Type{std::move(dims), a.type.elem});
  }
  Value Reshape(const Value& a, std::vector<int64_t> dims) {
    return Op("reshape", {a}, "", Type{std::move(dims), a.type.elem});
  }
  Value Transpose(const Value& a, std::vector<int64_t> perm) {
    std::vector<int64_t> dims;
    for (int64_t p : perm) dims.push_back(a.type.dims[p]);
    return Op("transpose", {a}, absl::StrCat("permutation = ", I64Array(perm)),
              Type{std::move(dims), a.type.elem});
  }

  // dot_general; result dims: batch, lhs free, rhs free.
  Value Dot(const Value& a, const Value& b, std::vector<int64_t> batch_a,
            std::vector<int64_t> batch_b, std::vector<int64_t> contract_a,
            std::vector<int64_t> contract_b) {
    auto has = [](const std::vector<int64_t>& v, int64_t i) {
      return std::find(v.begin(), v.end(), i) != v.end();
    };
    std::vector<int64_t> dims;
    for (int64_t i : batch_a) dims.push_back(a.type.dims[i]);
    for (int64_t i = 0; i < int64_t(a.type.dims.size()); ++i) {
      if (!has(batch_a, i) && !has(contract_a, i)) dims.push_back(a.type.dims[i]);
    }
    for (int64_t i = 0; i < int64_t(b.type.dims.size()); ++i) {
      if (!has(batch_b, i) && !has(contract_b, i)) dims.push_back(b.type.dims[i]);
    }
    std::vector<std::string> fields;
    if (!batch_a.empty()) {
      fields.push_back(
          absl::StrCat("lhs_batching_dimensions = [", absl::StrJoin(batch_a, ", "), "]"));
      fields.push_back(
          absl::StrCat("rhs_batching_dimensions = [", absl::StrJoin(batch_b, ", "), "]"));
    }
    fields.push_back(
        absl::StrCat("lhs_contracting_dimensions = [", absl::StrJoin(contract_a, ", "), "]"));
    fields.push_back(
        absl::StrCat("rhs_contracting_dimensions = [", absl::StrJoin(contract_b, ", "), "]"));
    return Op(
        "dot_general", {a, b},
        absl::StrCat("dot_dimension_numbers = #stablehlo.dot<", absl::StrJoin(fields, ", "), ">"),
        F32(std::move(dims)));
  }

  // x [m, k] @ w [k, n].
  Value MatMul(const Value& x, const Value& w) { return Dot(x, w, {}, {}, {1}, {0}); }

  // A stablehlo.reduce of `inputs` (same dims) over `dims`, starting from the scalars `inits`.
  // `combine` writes the body: it gets the accumulated values and the element values (scalars)
  // and returns the combined ones.
  using Combiner =
      std::function<std::vector<Value>(const std::vector<Value>&, const std::vector<Value>&)>;
  std::vector<Value> Reduce(const std::vector<Value>& inputs, const std::vector<Value>& inits,
                            const std::vector<int64_t>& dims, const Combiner& combine) {
    std::vector<int64_t> kept;
    for (int64_t i = 0; i < int64_t(inputs[0].type.dims.size()); ++i) {
      if (std::find(dims.begin(), dims.end(), i) == dims.end()) {
        kept.push_back(inputs[0].type.dims[i]);
      }
    }
    const std::string name = NewName();
    std::vector<Value> acc, elem, results;
    std::vector<std::string> operands, operand_types, args, result_types;
    for (const Value& v : inputs) {
      operands.push_back(v.ref);
      operand_types.push_back(TypeText(v.type));
    }
    for (size_t i = 0; i < inits.size(); ++i) {
      operands.push_back(inits[i].ref);
      operand_types.push_back(TypeText(inits[i].type));
      acc.push_back(Value{NewName(), inits[i].type});
      results.push_back(Value{inits.size() == 1 ? name : absl::StrCat(name, "#", i),
                              Type{kept, inits[i].type.elem}});
      result_types.push_back(TypeText(results.back().type));
    }
    for (const Value& init : inits) elem.push_back(Value{NewName(), init.type});
    for (const std::vector<Value>* block : {&acc, &elem}) {
      for (const Value& v : *block) args.push_back(absl::StrCat(v.ref, ": ", TypeText(v.type)));
    }
    absl::StrAppend(&body_, "    ", name, inits.size() == 1 ? "" : absl::StrCat(":", inits.size()),
                    " = \"stablehlo.reduce\"(", absl::StrJoin(operands, ", "), ") ({\n    ^bb0(",
                    absl::StrJoin(args, ", "), "):\n");
    std::vector<std::string> refs, types;
    for (const Value& v : combine(acc, elem)) {
      refs.push_back(v.ref);
      types.push_back(TypeText(v.type));
    }
    absl::StrAppend(&body_, "    \"stablehlo.return\"(", absl::StrJoin(refs, ", "), ") : (",
                    absl::StrJoin(types, ", "), ") -> ()\n    }) {dimensions = ", I64Array(dims),
                    "} : (", absl::StrJoin(operand_types, ", "), ") -> (",
                    absl::StrJoin(result_types, ", "), ")\n");
    return results;
  }

  // Reduces f32 `a` over `dims` with the binary op `combiner` ("add", "maximum") from `init`.
  Value Reduce(const Value& a, std::vector<int64_t> dims, absl::string_view combiner,
               const Value& init) {
    return Reduce({a}, {init}, dims, [&](const std::vector<Value>& x, const std::vector<Value>& y) {
      return std::vector<Value>{Binary(combiner, x[0], y[0])};
    })[0];
  }

  // The index of the largest element of f32[n] `a` as s32[]; ties go to the lowest index.
  // Reduces (value, index) pairs: keep the left pair if its value is greater, or equal with a
  // lower index.
  Value ArgMax(const Value& a) {
    Value iota = Iota(Type{a.type.dims, "i32"}, 0);
    auto keep_greater = [&](const std::vector<Value>& x, const std::vector<Value>& y) {
      Value greater = Compare(x[0], y[0], "GT");
      Value tie = Binary("and", Compare(x[0], y[0], "EQ"), Compare(x[1], y[1], "LT"));
      Value take_x = Binary("or", greater, tie);
      return std::vector<Value>{Select(take_x, x[0], y[0]), Select(take_x, x[1], y[1])};
    };
    return Reduce({a, iota}, {NegInf(), I32(0)}, {0}, keep_greater)[1];
  }

  Value Iota(Type t, int64_t dim) {
    return Op("iota", {}, absl::StrCat("iota_dimension = ", dim, " : i64"), std::move(t));
  }
  Value Compare(const Value& a, const Value& b, absl::string_view dir) {
    return Op("compare", {a, b},
              absl::StrCat("comparison_direction = #stablehlo<comparison_direction ", dir, ">"),
              Type{a.type.dims, "i1"});
  }
  Value Select(const Value& pred, const Value& a, const Value& b) {
    return Op("select", {pred, a, b}, "", a.type);
  }

  Value Slice(const Value& a, std::vector<int64_t> start, std::vector<int64_t> limit) {
    std::vector<int64_t> dims, strides(start.size(), 1);
    for (size_t i = 0; i < start.size(); ++i) dims.push_back(limit[i] - start[i]);
    return Op("slice", {a},
              absl::StrCat("start_indices = ", I64Array(start), ", limit_indices = ",
                           I64Array(limit), ", strides = ", I64Array(strides)),
              Type{std::move(dims), a.type.elem});
  }
  Value DynamicSlice(const Value& a, const std::vector<Value>& starts, std::vector<int64_t> sizes) {
    std::vector<Value> operands = {a};
    operands.insert(operands.end(), starts.begin(), starts.end());
    return Op("dynamic_slice", operands, absl::StrCat("slice_sizes = ", I64Array(sizes)),
              Type{sizes, a.type.elem});
  }
  Value DynamicUpdateSlice(const Value& a, const Value& update, const std::vector<Value>& starts) {
    std::vector<Value> operands = {a, update};
    operands.insert(operands.end(), starts.begin(), starts.end());
    return Op("dynamic_update_slice", operands, "", a.type);
  }
  // Pads f32 `a` with zeros at the high end of each dimension.
  Value PadHigh(const Value& a, std::vector<int64_t> high) {
    std::vector<int64_t> zeros(high.size(), 0), dims = a.type.dims;
    for (size_t i = 0; i < dims.size(); ++i) dims[i] += high[i];
    return Op("pad", {a, Splat(0.0, F32({}))},
              absl::StrCat("edge_padding_low = ", I64Array(zeros), ", edge_padding_high = ",
                           I64Array(high), ", interior_padding = ", I64Array(zeros)),
              F32(std::move(dims)));
  }
  // Rows `ids` (s32[n]) of `table` [rows, width] -> [n, width].
  Value Gather(const Value& table, const Value& ids) {
    const int64_t n = ids.type.dims[0], width = table.type.dims[1];
    Value idx = Reshape(ids, {n, 1});
    return Op("gather", {table, idx},
              absl::StrCat("dimension_numbers = #stablehlo.gather<offset_dims = [1], "
                           "collapsed_slice_dims = [0], start_index_map = [0], "
                           "index_vector_dim = 1>, indices_are_sorted = false, slice_sizes = ",
                           I64Array({1, width})),
              F32({n, width}));
  }

  // Asks GSPMD to split `a` along `dim` (a no-op program text when there is one partition).
  Value SplitAlong(const Value& a, int dim) {
    if (num_partitions_ == 1) return a;
    ArraySpec spec{"", ElementType::kF32, a.type.dims, dim};
    return Op("custom_call", {a},
              absl::StrCat("call_target_name = \"Sharding\", mhlo.sharding = \"",
                           ShardingText(spec, num_partitions_), "\""),
              a.type);
  }

 private:
  std::string NewName() { return absl::StrCat("%v", next_++); }

  int64_t num_partitions_;
  int64_t next_ = 0;
  std::string body_;
};

// The model written with a Builder; `w` maps weight names to the function's parameters.
class Model {
 public:
  Model(const DecoderConfig& config, Builder& b, std::map<std::string, Value> weights)
      : c_(config), b_(b), w_(std::move(weights)) {}

  const Value& W(const std::string& name) const { return w_.at(name); }

  // x [t, d] * rsqrt(mean(x^2) + eps) * gain.
  Value RmsNorm(const Value& x, const Value& gain) {
    const int64_t t = x.type.dims[0], d = x.type.dims[1];
    Value ms = b_.Scale(b_.Reduce(b_.Mul(x, x), {1}, "add", b_.Splat(0.0, F32({}))), 1.0 / d);
    Value inv = b_.Unary("rsqrt", b_.Add(ms, b_.Splat(c_.norm_eps, F32({t}))));
    Value y = b_.Mul(x, b_.Broadcast(inv, {t, d}, {0}));
    return b_.Mul(y, b_.Broadcast(gain, {t, d}, {1}));
  }

  // [t, n_heads * head_dim] -> [n_heads, t, head_dim], split by heads.
  Value ToHeads(const Value& x) {
    const int64_t t = x.type.dims[0];
    Value r = b_.Reshape(x, {t, c_.n_heads, c_.head_dim()});
    return b_.SplitAlong(b_.Transpose(r, {1, 0, 2}), 0);
  }
  Value FromHeads(const Value& x) {
    const int64_t t = x.type.dims[1];
    return b_.Reshape(b_.Transpose(x, {1, 0, 2}), {t, c_.n_heads * c_.head_dim()});
  }

  // Softmax attention of q [h, t, hd] over k, v [h, s, hd]; `allowed` [t, s] (i1) marks the
  // key positions each query may see.
  Value Attention(const Value& q, const Value& k, const Value& v, const Value& allowed) {
    const int64_t h = q.type.dims[0], t = q.type.dims[1], s = k.type.dims[1];
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
    Value u = b_.SplitAlong(b_.MatMul(h, W(p + "w1")), 1);
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

// Function parameters and results, and the module around a body.
struct Signature {
  std::vector<ArraySpec> parameters, outputs;
  std::vector<std::pair<int64_t, int64_t>> aliases;
};

std::string Module(const DecoderConfig& c, absl::string_view name, const Signature& sig,
                   const std::string& body, const std::vector<Value>& results) {
  const int64_t p = c.num_partitions;
  std::vector<std::string> params, outs, result_refs, result_types;
  for (size_t i = 0; i < sig.parameters.size(); ++i) {
    const ArraySpec& spec = sig.parameters[i];
    std::string attrs = absl::StrCat("mhlo.sharding = \"", ShardingText(spec, p), "\"");
    for (const auto& [param, out] : sig.aliases) {
      if (param == int64_t(i)) absl::StrAppend(&attrs, ", tf.aliasing_output = ", out, " : i32");
    }
    params.push_back(absl::StrCat("%arg", i, ": ", TypeText(spec), " {", attrs, "}"));
  }
  for (size_t i = 0; i < sig.outputs.size(); ++i) {
    outs.push_back(absl::StrCat(TypeText(sig.outputs[i]), " {mhlo.sharding = \"",
                                ShardingText(sig.outputs[i], p), "\"}"));
    result_refs.push_back(results[i].ref);
    result_types.push_back(TypeText(results[i].type));
  }
  return absl::StrCat("module @decoder_", name, " attributes {mhlo.num_partitions = ", p,
                      " : i32, mhlo.num_replicas = 1 : i32} {\n",
                      "  func.func public @main(\n      ", absl::StrJoin(params, ",\n      "),
                      ")\n      -> (", absl::StrJoin(outs, ",\n          "), ") {\n", body,
                      "    func.return ", absl::StrJoin(result_refs, ", "), " : ",
                      absl::StrJoin(result_types, ", "), "\n  }\n}\n");
}

ArraySpec S32(std::string name, std::vector<int64_t> dims) {
  return ArraySpec{std::move(name), ElementType::kS32, std::move(dims), -1};
}

// Declares parameters `specs` starting at index `first`; weights go into `weights` by name.
std::vector<Value> Params(const std::vector<ArraySpec>& specs, int64_t first) {
  std::vector<Value> values;
  for (size_t i = 0; i < specs.size(); ++i) {
    values.push_back(
        Value{absl::StrCat("%arg", first + int64_t(i)),
              Type{specs[i].dims, specs[i].type == ElementType::kS32 ? "i32" : "f32"}});
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
  Signature sig;
  sig.parameters.push_back(S32("tokens", {c.prompt_len}));
  sig.parameters.insert(sig.parameters.end(), weights.begin(), weights.end());
  sig.outputs = caches;
  sig.outputs.push_back(S32("next_token", {}));
  sig.outputs.push_back(ArraySpec{"logits", ElementType::kF32, {c.vocab}, -1});

  Builder b(c.num_partitions);
  const Value tokens = Params({sig.parameters[0]}, 0)[0];
  Model m(c, b, ByName(weights, Params(weights, 1)));
  const int64_t t = c.prompt_len, d = c.d_model;

  Value x = b.Add(b.Gather(m.W("embed"), tokens), b.Slice(m.W("pos_embed"), {0, 0}, {t, d}));
  // Causal mask: query i sees keys j <= i.
  Value causal = b.Compare(b.Iota(Type{{t, t}, "i32"}, 0), b.Iota(Type{{t, t}, "i32"}, 1), "GE");
  std::vector<Value> results;
  for (int64_t i = 0; i < c.n_layers; ++i) {
    const std::string p = absl::StrCat("layer", i, ".");
    Model::Qkv qkv = m.Project(x, p);
    x = m.AttentionResidual(x, m.Attention(qkv.q, qkv.k, qkv.v, causal), p);
    x = m.Mlp(x, p);
    for (const Value& kv : {qkv.k, qkv.v}) {
      results.push_back(b.SplitAlong(b.PadHigh(kv, {0, c.max_seq - t, 0}), 0));
    }
  }
  Value logits = m.Logits(b.Slice(x, {t - 1, 0}, {t, d}));
  results.push_back(b.ArgMax(logits));
  results.push_back(logits);

  DecoderProgram program;
  program.name = "prefill";
  program.mlir = Module(c, "prefill", sig, b.body(), results);
  program.parameters = std::move(sig.parameters);
  program.outputs = std::move(sig.outputs);
  return program;
}

absl::StatusOr<DecoderProgram> EmitDecodeStep(const DecoderConfig& c) {
  SHARDRT_RETURN_IF_ERROR(ValidateConfig(c));
  const std::vector<ArraySpec> weights = WeightSpecs(c), caches = CacheSpecs(c);
  const int64_t num_caches = int64_t(caches.size());
  Signature sig;
  sig.parameters = caches;
  sig.parameters.push_back(S32("token", {}));
  sig.parameters.push_back(S32("position", {}));
  sig.parameters.insert(sig.parameters.end(), weights.begin(), weights.end());
  sig.outputs = caches;
  sig.outputs.push_back(S32("next_token", {}));
  sig.outputs.push_back(ArraySpec{"logits", ElementType::kF32, {c.vocab}, -1});
  for (int64_t i = 0; i < num_caches; ++i) sig.aliases.emplace_back(i, i);

  Builder b(c.num_partitions);
  const std::vector<Value> cache_in = Params(caches, 0);
  const Value token = Params({sig.parameters[num_caches]}, num_caches)[0];
  const Value position = Params({sig.parameters[num_caches + 1]}, num_caches + 1)[0];
  Model m(c, b, ByName(weights, Params(weights, num_caches + 2)));
  const int64_t d = c.d_model, s = c.max_seq;

  const Value zero = b.I32(0);
  Value x = b.Add(b.DynamicSlice(m.W("embed"), {token, zero}, {1, d}),
                  b.DynamicSlice(m.W("pos_embed"), {position, zero}, {1, d}));
  // The query at `position` sees keys at positions <= position.
  Value seen = b.Compare(b.Iota(Type{{1, s}, "i32"}, 1), b.Broadcast(position, {1, s}, {}), "LE");
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
  results.push_back(b.ArgMax(logits));
  results.push_back(logits);

  DecoderProgram program;
  program.name = "decode_step";
  program.mlir = Module(c, "decode_step", sig, b.body(), results);
  program.parameters = std::move(sig.parameters);
  program.outputs = std::move(sig.outputs);
  program.aliases = std::move(sig.aliases);
  return program;
}

}  // namespace shardrt::decoder
