#include "llama/llama_program.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "llama/decode_attention.h"
#include "llama/quant_matmul.h"
#include "llama/quant_ffi.h"
#include "shardrt/base/status_macros.h"
#include "shardrt/program/array_spec.h"
#include "shardrt/program/builder.h"

namespace shardrt::llama {
namespace {

using stablehlo::Builder;
using stablehlo::F32;
using stablehlo::I32;
using stablehlo::Value;

ArraySpec S32(std::string name, std::vector<int64_t> dims) {
  return ArraySpec{std::move(name), ElementType::kS32, std::move(dims), -1};
}

// Writes the per-device model code. With one partition there is no SPMD at all: no sharding
// custom calls, no collectives, partition id 0.
// The score of a masked-out key: exp(kMasked - m) is 0 for every real maximum m.
constexpr double kMasked = -1e30;

class Emitter {
 public:
  // `order`: how the quantized products order their sums (native weights).
  // `partitions` >= 1 (CheckShape).
  Emitter(const LlamaConfig& c, int64_t partitions, MatmulOrder order = MatmulOrder::kFastest)
      : c_(c), p_(partitions), split_(*SplitOf(c, partitions)), order_(order) {
    pid_ = p_ == 1 ? b_.I32(0) : b_.PartitionId();
  }

  Builder& b() { return b_; }
  const Value& pid() const { return pid_; }
  const ModelSplit& split() const { return split_; }

  // The device's part of parameter `index` (spec) as a value of local shape.
  Value Enter(int64_t index, const ArraySpec& spec) {
    Value global = Builder::Parameter(index, spec.shape());
    if (p_ == 1) return global;
    return b_.FullToShard(global, Placement(spec));
  }
  // The device's `local` as the global result `spec`.
  Value Leave(const Value& local, const ArraySpec& spec) {
    if (p_ == 1) return local;
    return b_.ShardToFull(local, Placement(spec), spec.shape());
  }

  void SetWeight(const std::string& name, Value v) { w_.emplace(name, std::move(v)); }
  const Value& W(const std::string& name) const { return w_.at(name); }

  // One layer's weights, sliced out of the stacked [layers, ...] weights; with native weights
  // the matrices are the stacked arrays themselves (the kernel reads layer `index` in place).
  struct Layer {
    Value attn_norm, wqkv, wo, ffn_norm, wgu, wdown;
    Value index;
    Value bqkv;  // [q + 2 kv] / P, with qkv_bias only
  };
  // Layer `index` (s32[]) of the stacked weights: one dynamic slice of each.
  Layer LayerAt(const Value& index) {
    auto at = [&](const std::string& name) {
      const Value& w = W(name);
      std::vector<Value> starts(w.shape.dims.size(), b_.I32(0));
      starts[0] = index;
      std::vector<int64_t> sizes = w.shape.dims;
      sizes[0] = 1;
      return b_.Reshape(b_.DynamicSlice(w, starts, sizes),
                        std::vector<int64_t>(sizes.begin() + 1, sizes.end()));
    };
    auto matrix = [&](const std::string& name) { return c_.native ? W(name) : at(name); };
    return Layer{at("attn_norm"), matrix("wqkv"), matrix("wo"), at("ffn_norm"),
                 matrix("wgu"),   matrix("wdown"), index,
                 c_.qkv_bias ? at("bqkv") : Value{}};
  }

  // A loop over the layers: `body` gets the layer index (s32[]) and the carried values and
  // returns their next values. Returns the carried values after the last layer.
  using LayerBody = std::function<std::vector<Value>(const Value&, const std::vector<Value>&)>;
  std::vector<Value> ForLayers(const std::vector<Value>& carried, const LayerBody& body) {
    std::vector<Value> inits = {b_.I32(0)};
    inits.insert(inits.end(), carried.begin(), carried.end());
    std::vector<Value> out = b_.While(
        inits,
        [&](const std::vector<Value>& v) {
          return std::vector<Value>{b_.Compare(v[0], b_.I32(c_.n_layers), "LT")};
        },
        [&](const std::vector<Value>& v) {
          std::vector<Value> next = {b_.Add(v[0], b_.I32(1))};
          std::vector<Value> rest = body(v[0], std::vector<Value>(v.begin() + 1, v.end()));
          next.insert(next.end(), rest.begin(), rest.end());
          return next;
        });
    return std::vector<Value>(out.begin() + 1, out.end());
  }

  Value AllReduce(const Value& v) { return p_ == 1 ? v : b_.AllReduce(v, p_); }
  Value AllGather(const Value& v, int64_t dim) { return p_ == 1 ? v : b_.AllGather(v, dim, p_); }

  // x [s, d] * gain / sqrt(mean(x^2) + eps). It ends in a division on purpose: the compiler
  // fuses a matrix-vector product with the slice of the stacked weight it reads and with cheap
  // producers of its vector, which it would then recompute for every row of the matrix; an
  // expensive last operation (a division) is computed once instead.
  Value RmsNorm(const Value& x, const Value& gain) {
    const int64_t s = x.shape.dims[0], d = x.shape.dims[1];
    Value sum = b_.Reduce(b_.Mul(x, x), {1}, "add", b_.Splat(0.0, F32({})));
    Value ms = b_.Div(sum, b_.Splat(double(d), F32({s})));
    Value root = b_.Unary("sqrt", b_.Add(ms, b_.Splat(c_.norm_eps, F32({s}))));
    Value scaled = b_.Mul(x, b_.Broadcast(gain, {s, d}, {1}));
    return b_.Div(scaled, b_.Broadcast(root, {s, d}, {0}));
  }

  // x [s, k] times the rows of w [n, k] -> [s, n] (w holds output features as rows). With
  // native weights w is weight `type`'s blocks, u8 [n, row bytes] or stacked [layers, n, row
  // bytes] with `index` the layer, multiplied by the quantized kernel (quant_ffi.h).
  Value Linear(const Value& x, const Value& w, GgufType type, const Value& index) {
    if (!c_.native) return b_.Dot(x, w, {}, {}, {1}, {1});
    const int64_t n = w.shape.dims[w.shape.dims.size() - 2];
    return b_.CustomCall(kQuantMatmulTarget, {x, w, index}, F32({x.shape.dims[0], n}),
                         {{"type", int32_t(type)},
                          {"partitions", int32_t(p_)},
                          {"order", int32_t(order_)}},
                         Manual());
  }
  // The GGUF type of a native matrix (unused with f32 weights).
  GgufType TypeOf(GgufType NativeWeights::*field) const {
    return c_.native ? (*c_.native).*field : GgufType::kF32;
  }

  // Rows of the vocabulary-split embedding for tokens [s]: each device looks up the tokens in
  // its rows (zeros for the others), and the sum over devices is the embedding.
  Value Embed(const Value& tokens) {
    const int64_t s = tokens.shape.dims[0], rows = split_.vocab;
    Value first = b_.Mul(pid_, b_.I32(rows));
    Value local = b_.Sub(tokens, b_.Broadcast(first, {s}, {}));
    Value in = b_.Binary("and", b_.Compare(local, b_.Splat(0, I32({s})), "GE"),
                         b_.Compare(local, b_.Splat(double(rows), I32({s})), "LT"));
    Value idx = b_.Select(in, local, b_.Splat(0, I32({s})));
    Value found = c_.native ? b_.CustomCall(kQuantGatherTarget, {W("token_embd"), idx},
                                            F32({s, c_.d_model}),
                                            {{"type", int32_t(c_.native->token_embd)}}, Manual())
                            : b_.Gather(W("token_embd"), idx);
    Value mask = b_.Broadcast(in, {s, c_.d_model}, {0});
    return AllReduce(b_.Select(mask, found, b_.Splat(0.0, F32({s, c_.d_model}))));
  }

  // RoPE on x [s, heads, hd] at positions pos s32[s]: feature i of each pair turns by
  // pos * base^(-2i/hd) (divided by rope_freq_factors[i] when the model has them). The pairs are
  // (2i, 2i+1) for RopeStyle::kInterleaved (GGUF's llama files store Q and K rows in that
  // order) and (i, i + hd/2) for kHalves.
  Value Rope(const Value& x, const Value& pos) {
    const int64_t s = x.shape.dims[0], h = x.shape.dims[1], hd = x.shape.dims[2], half = hd / 2;
    std::vector<float> inv_freq(half);
    for (int64_t i = 0; i < half; ++i) {
      const float exponent = float(2 * i) / float(hd);
      inv_freq[i] = 1.0f / std::pow(float(c_.rope_base), exponent);
      if (!c_.rope_freq_factors.empty()) inv_freq[i] /= c_.rope_freq_factors[size_t(i)];
    }
    Value freq = b_.Constant(inv_freq, {half});
    Value angle = b_.Mul(b_.Broadcast(b_.Convert(pos, ElementType::kF32), {s, half}, {0}),
                         b_.Broadcast(freq, {s, half}, {1}));
    Value cos = b_.Broadcast(b_.Unary("cosine", angle), {s, h, half}, {0, 2});
    Value sin = b_.Broadcast(b_.Unary("sine", angle), {s, h, half}, {0, 2});
    // [s, h, half, 2] with the pair's members on the last dimension, or [s, h, 2, half].
    const bool interleaved = c_.rope_style == RopeStyle::kInterleaved;
    const int64_t pair_dim = interleaved ? 3 : 2;
    const std::vector<int64_t> paired =
        interleaved ? std::vector<int64_t>{s, h, half, 2} : std::vector<int64_t>{s, h, 2, half};
    std::vector<int64_t> one = paired;
    one[size_t(pair_dim)] = 1;
    Value pairs = b_.Reshape(x, paired);
    auto member = [&](int64_t m) {
      std::vector<int64_t> begin(4, 0), end = paired;
      begin[size_t(pair_dim)] = m;
      end[size_t(pair_dim)] = m + 1;
      return b_.Reshape(b_.Slice(pairs, begin, end), {s, h, half});
    };
    Value x0 = member(0), x1 = member(1);
    Value r0 = b_.Sub(b_.Mul(x0, cos), b_.Mul(x1, sin));
    Value r1 = b_.Add(b_.Mul(x0, sin), b_.Mul(x1, cos));
    Value out = b_.Concatenate({b_.Reshape(r0, one), b_.Reshape(r1, one)}, pair_dim);
    return b_.Reshape(out, {s, h, hd});
  }

  struct Qkv {
    Value q, k, v;  // [s, heads, hd], [s, kv, hd], [s, kv, hd]; q and k rotated
  };
  // The normalized x projected to queries, keys and values: each device computes its slice of
  // the q, k and v features, one all-gather gives every device all of them.
  Qkv Project(const Value& x, const Layer& w, const Value& pos) {
    const int64_t s = x.shape.dims[0], cq = split_.q, ckv = split_.kv;
    const int64_t width = cq + 2 * ckv;
    Value h = RmsNorm(x, w.attn_norm);
    Value qkv = Linear(h, w.wqkv, TypeOf(&NativeWeights::wqkv), w.index);
    if (c_.qkv_bias) qkv = b_.Add(qkv, b_.Broadcast(w.bqkv, {s, width}, {1}));
    Value all = b_.Reshape(AllGather(qkv, 1), {s, p_, width});
    // The devices' shares of one of q, k, v, in order, less the padding at the end.
    auto part = [&](int64_t begin, int64_t size, int64_t heads) {
      Value slice = b_.Slice(all, {0, 0, begin}, {s, p_, begin + size});
      return b_.Reshape(Unpad(b_.Reshape(slice, {s, p_ * size}), heads * c_.head_dim),
                        {s, heads, c_.head_dim});
    };
    return Qkv{Rope(part(0, cq, c_.n_heads), pos), Rope(part(cq, ckv, c_.n_kv_heads), pos),
               part(cq + ckv, ckv, c_.n_kv_heads)};
  }

  // One device's share of a causal attention, before the devices combine: per query and head,
  // the maximum score m, the sum l of exp(score - m) and the exp-weighted values o.
  struct Partial {
    Value o;     // [kv, s, g, hd]
    Value m, l;  // [kv, s, g]
  };
  // q [s, heads, hd] at positions qpos s32[s] against keys and values [t, kv, hd] held in this
  // device's cache slots first_slot .. first_slot + t - 1, i.e. at positions
  // pid + P * (first_slot + j); keys after a query's position are masked out.
  Partial LocalAttention(const Value& q, const Value& qpos, const Value& keys,
                         const Value& values, const Value& first_slot, const Value& pid) {
    const int64_t s = q.shape.dims[0], kv = c_.n_kv_heads, g = c_.n_heads / kv,
                  hd = c_.head_dim, t = keys.shape.dims[0];
    Value q4 = b_.Reshape(q, {s, kv, g, hd});
    Value scores = b_.Dot(q4, keys, {1}, {1}, {3}, {2});  // [kv, s, g, t]
    scores = b_.Scale(scores, 1.0 / std::sqrt(double(hd)));
    Value slots = b_.Add(b_.Iota(I32({t}), 0), b_.Broadcast(first_slot, {t}, {}));
    Value kpos = b_.Add(b_.Mul(slots, b_.Splat(double(p_), I32({t}))), b_.Broadcast(pid, {t}, {}));
    Value allowed = b_.Compare(b_.Broadcast(kpos, {s, t}, {1}), b_.Broadcast(qpos, {s, t}, {0}),
                               "LE");
    const std::vector<int64_t> full = {kv, s, g, t};
    scores = b_.Select(b_.Broadcast(allowed, full, {1, 3}), scores, b_.Splat(kMasked, F32(full)));
    Value m = b_.Reduce(scores, {3}, "maximum", b_.NegInf());  // [kv, s, g]
    Value e = b_.Unary("exponential", b_.Sub(scores, b_.Broadcast(m, full, {0, 1, 2})));
    Value l = b_.Reduce(e, {3}, "add", b_.Splat(0.0, F32({})));
    Value o = b_.Dot(e, values, {0}, {1}, {3}, {0});  // [kv, s, g, hd]
    return Partial{o, m, l};
  }

  // Two partials over disjoint keys merged into the partial over all of them (what one softmax
  // over both would give).
  Partial Merge(const Partial& a, const Partial& b) {
    const std::vector<int64_t> dims = a.o.shape.dims;
    Value m = b_.Binary("maximum", a.m, b.m);
    Value sa = b_.Unary("exponential", b_.Sub(a.m, m));
    Value sb = b_.Unary("exponential", b_.Sub(b.m, m));
    Value l = b_.Add(b_.Mul(a.l, sa), b_.Mul(b.l, sb));
    Value o = b_.Add(b_.Mul(a.o, b_.Broadcast(sa, dims, {0, 1, 2})),
                     b_.Mul(b.o, b_.Broadcast(sb, dims, {0, 1, 2})));
    return Partial{o, m, l};
  }

  // The attention output [s, heads * hd] from every device's partial: one all-gather brings
  // every device's (o, m, l), which combine exactly as one softmax over all positions.
  Value Combine(const Partial& part) {
    const int64_t kv = c_.n_kv_heads, s = part.m.shape.dims[1], g = c_.n_heads / kv;
    if (p_ == 1) return Normalize(part.o, part.l);
    Value packed = b_.Concatenate({part.o, b_.Reshape(part.m, {kv, s, g, 1}),
                                   b_.Reshape(part.l, {kv, s, g, 1})},
                                  3);
    return CombinePacked(packed);
  }

  // Combine of partials packed as [kv, s, g, hd + 2] (o, then m, then l), the form the decode
  // attention kernel writes.
  Value CombinePacked(const Value& packed) {
    const int64_t kv = c_.n_kv_heads, s = packed.shape.dims[1], g = c_.n_heads / kv,
                  hd = c_.head_dim;
    if (p_ == 1) {
      auto field = [&](int64_t begin, int64_t size) {
        return b_.Slice(packed, {0, 0, 0, begin}, {kv, s, g, begin + size});
      };
      return Normalize(field(0, hd), b_.Reshape(field(hd + 1, 1), {kv, s, g}));
    }
    Value all = b_.AllGather(b_.Reshape(packed, {1, kv, s, g, hd + 2}), 0, p_);
    auto field = [&](int64_t begin, int64_t size) {
      return b_.Slice(all, {0, 0, 0, 0, begin}, {p_, kv, s, g, begin + size});
    };
    const std::vector<int64_t> each = {p_, kv, s, g};
    Value ms = b_.Reshape(field(hd, 1), each);
    Value ls = b_.Reshape(field(hd + 1, 1), each);
    Value m = b_.Reduce(ms, {0}, "maximum", b_.NegInf());
    Value scale = b_.Unary("exponential", b_.Sub(ms, b_.Broadcast(m, each, {1, 2, 3})));
    Value l = b_.Reduce(b_.Mul(ls, scale), {0}, "add", b_.Splat(0.0, F32({})));
    Value os = b_.Mul(field(0, hd), b_.Broadcast(scale, {p_, kv, s, g, hd}, {0, 1, 2, 3}));
    return Normalize(b_.Reduce(os, {0}, "add", b_.Splat(0.0, F32({}))), l);
  }

  // o [kv, s, g, hd] / l [kv, s, g] as [s, heads * hd].
  Value Normalize(const Value& o, const Value& l) {
    const int64_t s = o.shape.dims[1];
    Value out = b_.Div(o, b_.Broadcast(l, o.shape.dims, {0, 1, 2}));
    return b_.Reshape(b_.Transpose(out, {1, 0, 2, 3}), {s, c_.q_dim()});
  }

  // Causal attention of q [s, heads, hd] at positions qpos s32[s] over this device's keys and
  // values [t, kv, hd] (positions pid + P * j), combined over the devices. Returns
  // [s, heads * hd].
  Value Attention(const Value& q, const Value& qpos, const Value& keys, const Value& values) {
    return Combine(LocalAttention(q, qpos, keys, values, b_.I32(0), pid_));
  }

  // The attention of a batch's B tokens (qkv: q [B, heads, hd], k and v [B, kv, hd]), token b
  // at positions[b] in row b of this device's caches [layers, 1, R, slots, kv, hd]: over the
  // positions of its row before it, held in layer `layer` (s32[]) of the caches, and over its
  // own key and value, which only the device that will hold the position counts. A position of
  // -1 is an idle row: its result is finite and meaningless. The cached positions are a loop
  // over blocks of `block_slots` slots that runs only as far as the block holding the largest
  // position, each block merged into the running partial (online softmax); the tokens' own
  // keys and values are merged last, then the devices combine. Returns [B, heads * hd]. The
  // caches are only read: the caller writes the tokens' keys and values after all layers. With
  // native weights the whole of it is the decode attention kernel (decode_attention.h),
  // reading the caches in place.
  Value CachedAttention(const Qkv& qkv, const Value& positions, const Value& k_cache,
                        const Value& v_cache, const Value& layer, int64_t block_slots) {
    const int64_t kv = c_.n_kv_heads, g = c_.n_heads / kv, hd = c_.head_dim,
                  batch = qkv.q.shape.dims[0];
    if (c_.native) {
      Value packed = b_.CustomCall(
          kDecodeAttentionTarget, {qkv.q, qkv.k, qkv.v, k_cache, v_cache, layer, positions, pid_},
          F32({kv, batch, g, hd + 2}), {{"partitions", int32_t(p_)}}, Manual());
      return CombinePacked(packed);
    }
    const double scale = 1.0 / std::sqrt(double(hd));
    Value q4 = b_.Reshape(qkv.q, {batch, kv, g, hd});
    Value most = b_.Reduce(positions, {0}, "maximum", b_.I32(-1));
    Value blocks = b_.Add(b_.Binary("divide", most, b_.I32(block_slots * p_)), b_.I32(1));
    Value before = b_.Sub(positions, b_.Splat(1, I32({batch})));
    const std::vector<int64_t> part = {batch, kv, g};
    const std::vector<Value> inits = {b_.I32(0), b_.Splat(kMasked, F32(part)),
                                      b_.Splat(0.0, F32(part)),
                                      b_.Splat(0.0, F32({batch, kv, g, hd}))};
    std::vector<Value> out = b_.While(
        inits,
        [&](const std::vector<Value>& v) {
          return std::vector<Value>{b_.Compare(v[0], blocks, "LT")};
        },
        [&](const std::vector<Value>& v) {
          Value first = b_.Mul(v[0], b_.I32(block_slots));
          const Value zero = b_.I32(0);
          auto block = [&](const Value& cache) {
            Value slab = b_.DynamicSlice(cache, {layer, zero, zero, first, zero, zero},
                                         {1, 1, batch, block_slots, kv, hd});
            return b_.Reshape(slab, {batch, block_slots, kv, hd});
          };
          const int64_t t = block_slots;
          const std::vector<int64_t> full = {batch, kv, g, t};
          Value scores = b_.Scale(b_.Dot(q4, block(k_cache), {0, 1}, {0, 2}, {3}, {3}), scale);
          Value slots = b_.Add(b_.Iota(I32({t}), 0), b_.Broadcast(first, {t}, {}));
          Value kpos = b_.Add(b_.Mul(slots, b_.Splat(double(p_), I32({t}))),
                              b_.Broadcast(pid_, {t}, {}));
          Value allowed = b_.Compare(b_.Broadcast(kpos, {batch, t}, {1}),
                                     b_.Broadcast(before, {batch, t}, {0}), "LE");
          scores = b_.Select(b_.Broadcast(allowed, full, {0, 3}), scores,
                             b_.Splat(kMasked, F32(full)));
          Value m = b_.Reduce(scores, {3}, "maximum", b_.NegInf());
          Value e = b_.Unary("exponential", b_.Sub(scores, b_.Broadcast(m, full, {0, 1, 2})));
          Value l = b_.Reduce(e, {3}, "add", b_.Splat(0.0, F32({})));
          Value o = b_.Dot(e, block(v_cache), {0, 1}, {0, 2}, {3}, {1});  // [B, kv, g, hd]
          Partial merged = Merge(Partial{v[3], v[1], v[2]}, Partial{o, m, l});
          return std::vector<Value>{b_.Add(v[0], b_.I32(1)), merged.m, merged.l, merged.o};
        });
    // Each token's own key: a real score on the device that will hold its position, masked on
    // the others.
    const std::vector<int64_t> full = {batch, kv, g, hd};
    Value own_k = b_.Broadcast(qkv.k, full, {0, 1, 3});
    Value score = b_.Scale(b_.Reduce(b_.Mul(q4, own_k), {3}, "add", b_.Splat(0.0, F32({}))),
                           scale);
    Value owner = b_.Compare(b_.Binary("remainder", positions, b_.Splat(double(p_), I32({batch}))),
                             b_.Broadcast(pid_, {batch}, {}), "EQ");
    Value self_m = b_.Select(b_.Broadcast(owner, part, {0}), score, b_.Splat(kMasked, F32(part)));
    Partial self{b_.Broadcast(qkv.v, full, {0, 1, 3}), self_m, b_.Splat(1.0, F32(part))};
    Partial all = Merge(Partial{out[3], out[1], out[2]}, self);
    // As Combine's [kv, B, g, ...].
    return Combine(Partial{b_.Transpose(all.o, {1, 0, 2, 3}), b_.Transpose(all.m, {1, 0, 2}),
                           b_.Transpose(all.l, {1, 0, 2})});
  }

  // x + attention output projected by wo (each device its slice of the outputs, all-gathered).
  Value AttentionResidual(const Value& x, const Value& attn, const Layer& w) {
    Value out = AllGather(Linear(attn, w.wo, TypeOf(&NativeWeights::wo), w.index), 1);
    return b_.Add(x, Unpad(out, c_.d_model));
  }

  // The first `width` columns of x [s, n] (x itself when n = width): the devices' shares of a
  // width, gathered, less the padding of the last shares.
  Value Unpad(const Value& x, int64_t width) {
    const int64_t s = x.shape.dims[0], n = x.shape.dims[1];
    return n == width ? x : b_.Slice(x, {0, 0}, {s, width});
  }

  // x + down(silu(gate(h)) * up(h)), h = the normalized x: each device computes its slice of
  // the hidden features and a partial down projection; one all-reduce sums them. silu(g) u is
  // written g u / (1 + exp(-g)), ending in a division for the reason RmsNorm gives.
  Value Mlp(const Value& x, const Layer& w) {
    const int64_t s = x.shape.dims[0], f = split_.ffn;
    Value h = RmsNorm(x, w.ffn_norm);
    Value gu = Linear(h, w.wgu, TypeOf(&NativeWeights::wgu), w.index);
    Value gate = b_.Slice(gu, {0, 0}, {s, f});
    Value up = b_.Slice(gu, {0, f}, {s, 2 * f});
    Value denom = b_.Add(b_.Splat(1.0, F32({s, f})), b_.Unary("exponential", b_.Unary("negate", gate)));
    Value act = b_.Div(b_.Mul(gate, up), denom);
    Value down = Linear(act, w.wdown, TypeOf(&NativeWeights::wdown), w.index);
    return b_.Add(x, AllReduce(down));
  }

  struct Head {
    Value next_tokens;  // s32[s] on every device
    Value logits;       // f32[s, vocab / P], this device's columns of the vocabulary
  };
  // The logits of x [s, d] and each row's greedy token: each device scores its vocabulary rows
  // (of token_embd, or of output when untied; padding rows masked) and proposes its best per
  // row; one all-gather of the proposals, and every device picks the same.
  Head Logits(const Value& x) {
    const int64_t rows = split_.vocab, s = x.shape.dims[0];
    Value h = RmsNorm(x, W("output_norm"));
    Value scores = c_.tied_embeddings
                       ? Linear(h, W("token_embd"), TypeOf(&NativeWeights::token_embd), b_.I32(0))
                       : Linear(h, W("output"), TypeOf(&NativeWeights::output), b_.I32(0));
    // A row with a logit that is not finite (weights or activations that overflowed) proposes
    // token -1 with an infinite maximum, so that every device picks -1 for it: the host reports
    // the step's error instead of a token chosen among NaNs.
    const Value inf = b_.Unary("negate", b_.NegInf());
    Value finite =
        b_.Compare(b_.Unary("abs", scores), b_.Broadcast(inf, {s, rows}, {}), "LT");
    Value flags = b_.Select(finite, b_.Splat(0.0, F32({s, rows})), b_.Splat(1.0, F32({s, rows})));
    Value bad = b_.Compare(b_.Reduce(flags, {1}, "maximum", b_.Splat(0.0, F32({}))),
                           b_.Splat(0.0, F32({s})), "GT");
    if (split_.padded_vocab() != c_.vocab) {
      Value ids = b_.Add(b_.Iota(I32({s, rows}), 1),
                         b_.Broadcast(b_.Mul(pid_, b_.I32(rows)), {s, rows}, {}));
      Value real = b_.Compare(ids, b_.Splat(double(c_.vocab), I32({s, rows})), "LT");
      scores = b_.Select(real, scores, b_.Splat(kMasked, F32({s, rows})));
    }
    Builder::MaxAndIndex best = b_.ArgMax(scores, 1);
    Value index = b_.Add(best.index, b_.Broadcast(b_.Mul(pid_, b_.I32(rows)), {s}, {}));
    index = b_.Select(bad, b_.Splat(-1, I32({s})), index);
    if (p_ == 1) return Head{index, scores};
    Value max = b_.Select(bad, b_.Broadcast(inf, {s}, {}), best.max);
    Value maxes = b_.AllGather(b_.Reshape(max, {1, s}), 0, p_);
    Value indices = b_.AllGather(b_.Reshape(index, {1, s}), 0, p_);
    return Head{b_.ArgMax(maxes, indices, 0).index, scores};
  }

 private:
  // The custom calls' sharding: manual in SPMD code, none on one device.
  std::optional<Sharding> Manual() const {
    return p_ == 1 ? std::nullopt : std::optional<Sharding>(Sharding::Manual());
  }
  // The sharding of `spec` over the devices; one that cannot be made is the builder's error.
  Sharding Placement(const ArraySpec& spec) {
    absl::StatusOr<Sharding> sharding = stablehlo::ShardingOf(spec, p_);
    b_.AddError(sharding.status());
    return sharding.ok() ? *std::move(sharding) : Sharding::Replicated();
  }

  const LlamaConfig& c_;
  const int64_t p_;
  const ModelSplit split_;
  const MatmulOrder order_;
  Builder b_;
  Value pid_;
  std::map<std::string, Value> w_;
};

using stablehlo::ModuleSpec;

// The chunk and decode programs return the caches, `s` greedy tokens and their
// vocabulary-split logits.
std::vector<ArraySpec> Outputs(const std::vector<ArraySpec>& caches, int64_t s, int64_t vocab) {
  std::vector<ArraySpec> outputs = caches;
  outputs.push_back(S32("next_tokens", {s}));
  outputs.push_back(ArraySpec{"logits", ElementType::kF32, {s, vocab}, 1});
  return outputs;
}

// The program `name`: the module around the builder's body, returning `results`.
// Errors: WriteModule's.
absl::StatusOr<LlamaProgram> Assemble(std::string name, int64_t partitions, ModuleSpec sig,
                                      const Builder& b, const std::vector<Value>& results) {
  SHARDRT_ASSIGN_OR_RETURN(
      stablehlo::WrittenModule module,
      stablehlo::WriteModule(absl::StrCat("llama_", name), partitions, sig, b, results));
  LlamaProgram program;
  program.mlir = std::move(module.text);
  program.signature = std::move(module.signature);
  program.name = std::move(name);
  program.parameters = std::move(sig.parameters);
  program.outputs = std::move(sig.outputs);
  program.aliases = std::move(sig.aliases);
  return program;
}

absl::Status CheckShape(const LlamaConfig& c, const ProgramShape& shape, int64_t size,
                        const char* what) {
  SHARDRT_RETURN_IF_ERROR(SplitOf(c, shape.partitions).status());
  const int64_t p = shape.partitions;
  if (shape.cache_len < p || shape.cache_len % p != 0 || shape.cache_len > c.context) {
    return absl::InvalidArgumentError(
        absl::StrCat("cache length ", shape.cache_len, ": expected a multiple of ", p,
                     " devices within the model's context of ", c.context));
  }
  if (shape.rows < 1 || shape.batch < 1 || shape.batch > shape.rows) {
    return absl::InvalidArgumentError(absl::StrCat("batch of ", shape.batch, " over ",
                                                   shape.rows,
                                                   " cache rows: expected 1 <= batch <= rows"));
  }
  if (size < p || size % p != 0 || size > shape.cache_len) {
    return absl::InvalidArgumentError(absl::StrCat(what, " ", size, ": expected a multiple of ",
                                                   p, " devices within the cache length ",
                                                   shape.cache_len));
  }
  return absl::OkStatus();
}

// Declares the weights as parameters from index `first` and enters them.
void EnterWeights(Emitter& e, const LlamaConfig& c, ModuleSpec& sig) {
  for (const ArraySpec& spec : WeightSpecs(c, e.split())) {
    const int64_t index = int64_t(sig.parameters.size());
    sig.parameters.push_back(spec);
    e.SetWeight(spec.name, e.Enter(index, spec));
  }
}

}  // namespace

int64_t Bucket(int64_t n, int64_t granule, int64_t cap) {
  // granule x 1, 2, 3, 4, 6, 8, 12, ...: a power of two, or three times one.
  int64_t power = 1;
  while (true) {
    for (const int64_t multiple : {power, power * 3 / 2}) {
      const int64_t b = granule * std::max<int64_t>(multiple, 1);
      if (multiple >= 1 && (b >= n || b >= cap)) return b > cap ? cap : b;
    }
    power *= 2;
  }
}

absl::StatusOr<LlamaProgram> EmitEmptyCaches(const LlamaConfig& c, const ProgramShape& shape) {
  SHARDRT_RETURN_IF_ERROR(CheckShape(c, shape, shape.partitions, "devices"));
  const int64_t p = shape.partitions;
  const std::vector<ArraySpec> caches = CacheSpecs(c, p, shape.rows, shape.cache_len);
  ModuleSpec sig;
  sig.outputs = caches;
  Emitter e(c, p);
  Builder& b = e.b();
  const std::vector<int64_t> local = {c.n_layers, 1, shape.rows, shape.cache_len / p,
                                      c.n_kv_heads, c.head_dim};
  std::vector<Value> results = {e.Leave(b.Splat(0.0, F32(local)), caches[0]),
                                e.Leave(b.Splat(0.0, F32(local)), caches[1])};
  return Assemble(absl::StrCat("caches_", shape.rows, "x", shape.cache_len), p, std::move(sig),
                  b, results);
}

absl::StatusOr<LlamaProgram> EmitPrefillChunk(const LlamaConfig& c, const ProgramShape& shape) {
  SHARDRT_RETURN_IF_ERROR(CheckShape(c, shape, shape.tokens, "prompt chunk"));
  SHARDRT_RETURN_IF_ERROR(CheckShape(c, shape, shape.block, "attention block"));
  const int64_t p = shape.partitions, s = shape.tokens, kv = c.n_kv_heads, hd = c.head_dim;
  const int64_t block_slots = shape.block / p;
  const std::vector<ArraySpec> caches = CacheSpecs(c, p, shape.rows, shape.cache_len);
  ModuleSpec sig;
  sig.parameters = caches;
  for (const char* name : {"start", "length", "row"}) sig.parameters.push_back(S32(name, {}));
  sig.parameters.insert(sig.parameters.begin() + ChunkParameter::kTokens, S32("tokens", {s}));
  sig.outputs = Outputs(caches, 1, SplitOf(c, p)->padded_vocab());
  sig.aliases = {{0, 0}, {1, 1}};

  Emitter e(c, p);
  Builder& b = e.b();
  Value k_cache = e.Enter(ChunkParameter::kKeyCache, caches[0]);
  Value v_cache = e.Enter(ChunkParameter::kValueCache, caches[1]);
  Value tokens = e.Enter(ChunkParameter::kTokens, sig.parameters[ChunkParameter::kTokens]);
  Value start = e.Enter(ChunkParameter::kStart, sig.parameters[ChunkParameter::kStart]);
  Value length = e.Enter(ChunkParameter::kLength, sig.parameters[ChunkParameter::kLength]);
  Value row = e.Enter(ChunkParameter::kRow, sig.parameters[ChunkParameter::kRow]);
  EnterWeights(e, c, sig);

  Value pos = b.Add(b.Iota(I32({s}), 0), b.Broadcast(start, {s}, {}));
  Value first_slot = b.Binary("divide", start, b.I32(p));
  // Cached blocks holding positions before the chunk; their queries all see every one of them.
  Value blocks = b.Binary("divide", b.Add(start, b.I32(shape.block - 1)), b.I32(shape.block));
  Value before = b.Broadcast(b.Sub(start, b.I32(1)), {s}, {});
  Value x = e.Embed(tokens);
  const Value zero = b.I32(0);
  const ArrayShape column = F32({c.n_layers, s / p, kv, hd});
  std::vector<Value> state = e.ForLayers(
      {x, b.Splat(0.0, column), b.Splat(0.0, column)},
      [&](const Value& i, const std::vector<Value>& v) {
        const Emitter::Layer w = e.LayerAt(i);
        Emitter::Qkv qkv = e.Project(v[0], w, pos);
        // This device's positions start + pid + P j of the chunk: [s / P, kv, hd].
        auto mine = [&](const Value& a) {
          Value r = b.Reshape(a, {s / p, p, kv, hd});
          Value d = b.DynamicSlice(r, {zero, e.pid(), zero, zero}, {s / p, 1, kv, hd});
          return b.Reshape(d, {s / p, kv, hd});
        };
        Value keys = mine(qkv.k), values = mine(qkv.v);
        Emitter::Partial own = e.LocalAttention(qkv.q, pos, keys, values, first_slot, e.pid());
        const std::vector<int64_t> part = {kv, s, c.n_heads / kv};
        std::vector<int64_t> o_dims = part;
        o_dims.push_back(hd);
        const std::vector<Value> inits = {b.I32(0), b.Splat(kMasked, F32(part)),
                                          b.Splat(0.0, F32(part)), b.Splat(0.0, F32(o_dims))};
        std::vector<Value> cached = b.While(
            inits,
            [&](const std::vector<Value>& l) {
              return std::vector<Value>{b.Compare(l[0], blocks, "LT")};
            },
            [&](const std::vector<Value>& l) {
              Value first = b.Mul(l[0], b.I32(block_slots));
              auto slab = [&](const Value& cache) {
                Value d = b.DynamicSlice(cache, {i, zero, row, first, zero, zero},
                                         {1, 1, 1, block_slots, kv, hd});
                return b.Reshape(d, {block_slots, kv, hd});
              };
              Emitter::Partial part =
                  e.LocalAttention(qkv.q, before, slab(k_cache), slab(v_cache), first, e.pid());
              Emitter::Partial merged = e.Merge(Emitter::Partial{l[3], l[1], l[2]}, part);
              return std::vector<Value>{b.Add(l[0], b.I32(1)), merged.m, merged.l, merged.o};
            });
        Value attention =
            e.Combine(e.Merge(Emitter::Partial{cached[3], cached[1], cached[2]}, own));
        Value x = e.Mlp(e.AttentionResidual(v[0], attention, w), w);
        auto collect = [&](const Value& all, const Value& kv_rows) {
          return b.DynamicUpdateSlice(all, b.Reshape(kv_rows, {1, s / p, kv, hd}),
                                      {i, zero, zero, zero});
        };
        return std::vector<Value>{x, collect(v[1], keys), collect(v[2], values)};
      });
  // The chunk's keys and values, written once after the layers (the loop only read the caches).
  auto write = [&](const Value& cache, const Value& column) {
    return b.DynamicUpdateSlice(cache, b.Reshape(column, {c.n_layers, 1, 1, s / p, kv, hd}),
                                {zero, zero, row, first_slot, zero, zero});
  };
  k_cache = write(k_cache, state[1]);
  v_cache = write(v_cache, state[2]);
  Value last = b.DynamicSlice(state[0], {b.Sub(length, b.I32(1)), zero}, {1, c.d_model});
  Emitter::Head head = e.Logits(last);
  std::vector<Value> results = {e.Leave(k_cache, caches[0]), e.Leave(v_cache, caches[1]),
                                e.Leave(head.next_tokens, sig.outputs[ProgramOutput::kNextTokens]),
                                e.Leave(head.logits, sig.outputs[ProgramOutput::kLogits])};
  return Assemble(absl::StrCat("chunk_", s, "_", shape.rows, "x", shape.cache_len), p,
                  std::move(sig), b, results);
}

absl::StatusOr<LlamaProgram> EmitDecode(const LlamaConfig& c, const ProgramShape& shape) {
  SHARDRT_RETURN_IF_ERROR(CheckShape(c, shape, shape.block, "attention block"));
  const int64_t p = shape.partitions, block = shape.block, batch = shape.batch,
                kv = c.n_kv_heads, hd = c.head_dim;
  if (shape.cache_len % block != 0) {
    return absl::InvalidArgumentError(absl::StrCat("attention block ", block,
                                                   ": expected a divisor of the cache length ",
                                                   shape.cache_len));
  }
  const std::vector<ArraySpec> caches = CacheSpecs(c, p, shape.rows, shape.cache_len);
  ModuleSpec sig;
  sig.parameters = caches;
  sig.parameters.push_back(S32("tokens", {batch}));
  sig.parameters.push_back(S32("positions", {batch}));
  sig.outputs = Outputs(caches, batch, SplitOf(c, p)->padded_vocab());
  sig.aliases = {{0, 0}, {1, 1}};

  // Each token's products sum in the order they have alone: a sequence's tokens do not depend
  // on the batch it runs in.
  Emitter e(c, p, MatmulOrder::kPerRow);
  Builder& b = e.b();
  Value k_cache = e.Enter(DecodeParameter::kKeyCache, caches[0]);
  Value v_cache = e.Enter(DecodeParameter::kValueCache, caches[1]);
  Value tokens = e.Enter(DecodeParameter::kTokens, sig.parameters[DecodeParameter::kTokens]);
  Value positions =
      e.Enter(DecodeParameter::kPositions, sig.parameters[DecodeParameter::kPositions]);
  EnterWeights(e, c, sig);

  Value x = e.Embed(tokens);
  const Value zero = b.I32(0);
  // The layers only read the caches; each layer's keys and values for the tokens are collected
  // and written after the loop, once per cache (a cache written inside the loop, where the
  // attention also reads it, would be copied every layer).
  const ArrayShape column = F32({c.n_layers, batch, kv, hd});
  std::vector<Value> state = e.ForLayers(
      {x, b.Splat(0.0, column), b.Splat(0.0, column)},
      [&](const Value& i, const std::vector<Value>& v) {
        const Emitter::Layer w = e.LayerAt(i);
        Emitter::Qkv qkv = e.Project(v[0], w, positions);
        Value attention = e.CachedAttention(qkv, positions, k_cache, v_cache, i, block / p);
        Value x = e.Mlp(e.AttentionResidual(v[0], attention, w), w);
        auto collect = [&](const Value& all, const Value& kv_rows) {
          return b.DynamicUpdateSlice(all, b.Reshape(kv_rows, {1, batch, kv, hd}),
                                      {i, zero, zero, zero});
        };
        return std::vector<Value>{x, collect(v[1], qkv.k), collect(v[2], qkv.v)};
      });
  // Token b's key and value go to row b, device position % P, slot position / P: every device
  // rewrites that slot in every layer, the others (and every device for an idle row, position
  // -1) with what it held.
  const std::vector<int64_t> one = {c.n_layers, 1, 1, 1, kv, hd};
  auto write = [&](Value cache, const Value& column) {
    for (int64_t r = 0; r < batch; ++r) {
      Value position = b.Reshape(b.Slice(positions, {r}, {r + 1}), {});
      Value slot = b.Binary("divide", position, b.I32(p));
      Value mine = b.Compare(b.Binary("remainder", position, b.I32(p)), e.pid(), "EQ");
      const std::vector<Value> at = {zero, zero, b.I32(r), slot, zero, zero};
      Value held = b.DynamicSlice(cache, at, one);
      Value fresh = b.Reshape(b.Slice(column, {0, r, 0, 0}, {c.n_layers, r + 1, kv, hd}), one);
      cache = b.DynamicUpdateSlice(cache, b.Select(b.Broadcast(mine, one, {}), fresh, held), at);
    }
    return cache;
  };
  k_cache = write(k_cache, state[1]);
  v_cache = write(v_cache, state[2]);
  Emitter::Head head = e.Logits(state[0]);
  std::vector<Value> results = {e.Leave(k_cache, caches[0]), e.Leave(v_cache, caches[1]),
                                e.Leave(head.next_tokens, sig.outputs[ProgramOutput::kNextTokens]),
                                e.Leave(head.logits, sig.outputs[ProgramOutput::kLogits])};
  return Assemble(absl::StrCat("decode_", batch, "_", shape.rows, "x", shape.cache_len), p,
                  std::move(sig), b, results);
}

}  // namespace shardrt::llama
