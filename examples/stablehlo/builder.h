// Builder: writes the body of a StableHLO function as MLIR text, one operation at a time, in the
// generic syntax every StableHLO version parses. The model emitters (examples/decoder,
// examples/llama) are written with it.
//
// Values are SSA names (%v0, %v1, ...) with their tensor type; each method appends one
// operation (a few for composite helpers) and returns its result. Nothing is checked here: the
// emitters compute the shapes, and the compiler rejects a malformed program.
//
// Thread safety: a Builder is used by one thread.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace shardrt::stablehlo {

// A tensor type: dims and element type ("f32", "i32", "ui32", "i1").
struct Type {
  std::vector<int64_t> dims;
  std::string elem = "f32";
};

// An SSA value of the program being written: its name and tensor type.
struct Value {
  std::string ref;
  Type type;
};

// "tensor<2x3xf32>".
std::string TypeText(const Type& t);
// "array<i64: 1, 2>" ("array<i64>" when empty).
std::string I64Array(const std::vector<int64_t>& v);
// A float literal that reads back as the same f32 ("%.9e").
std::string FloatText(double v);
inline Type F32(std::vector<int64_t> dims) { return Type{std::move(dims), "f32"}; }
inline Type I32(std::vector<int64_t> dims) { return Type{std::move(dims), "i32"}; }

class Builder {
 public:
  Builder() = default;

  // The body written so far (operations, one per line).
  const std::string& body() const { return body_; }

  // One operation "stablehlo.<op>" on `operands` with the attribute dictionary text `attrs`.
  Value Op(absl::string_view op, const std::vector<Value>& operands, absl::string_view attrs,
           Type result);

  // Constants: a splat of `v` of type `t`; -inf f32[]; an s32[] value.
  Value Splat(double v, Type t);
  Value NegInf();
  Value I32(int64_t v);
  // A dense f32 constant of `dims` holding `values` (row-major).
  Value Constant(const std::vector<float>& values, std::vector<int64_t> dims);

  Value Binary(absl::string_view op, const Value& a, const Value& b);
  Value Add(const Value& a, const Value& b) { return Binary("add", a, b); }
  Value Sub(const Value& a, const Value& b) { return Binary("subtract", a, b); }
  Value Mul(const Value& a, const Value& b) { return Binary("multiply", a, b); }
  Value Div(const Value& a, const Value& b) { return Binary("divide", a, b); }
  Value Unary(absl::string_view op, const Value& a);
  // Scales every element by a constant.
  Value Scale(const Value& a, double s);
  // Element type conversion.
  Value Convert(const Value& a, absl::string_view elem);

  // Broadcasts `a` to `dims`, operand dimension i becoming result dimension map[i].
  Value Broadcast(const Value& a, std::vector<int64_t> dims, std::vector<int64_t> map);
  Value Reshape(const Value& a, std::vector<int64_t> dims);
  Value Transpose(const Value& a, std::vector<int64_t> perm);
  Value Concatenate(const std::vector<Value>& parts, int64_t dim);

  // dot_general; result dims: batch, lhs free, rhs free.
  Value Dot(const Value& a, const Value& b, std::vector<int64_t> batch_a,
            std::vector<int64_t> batch_b, std::vector<int64_t> contract_a,
            std::vector<int64_t> contract_b);
  // x [m, k] @ w [k, n].
  Value MatMul(const Value& x, const Value& w) { return Dot(x, w, {}, {}, {1}, {0}); }

  // A stablehlo.reduce of `inputs` (same dims) over `dims`, starting from the scalars `inits`.
  // `combine` writes the body: it gets the accumulated values and the element values (scalars)
  // and returns the combined ones.
  using Combiner =
      std::function<std::vector<Value>(const std::vector<Value>&, const std::vector<Value>&)>;
  std::vector<Value> Reduce(const std::vector<Value>& inputs, const std::vector<Value>& inits,
                            const std::vector<int64_t>& dims, const Combiner& combine);
  // Reduces f32 `a` over `dims` with the binary op `combiner` ("add", "maximum") from `init`.
  Value Reduce(const Value& a, std::vector<int64_t> dims, absl::string_view combiner,
               const Value& init);
  // The largest element of f32[n] `a` and its index (s32[]); ties go to the lowest index.
  struct MaxAndIndex {
    Value max, index;
  };
  MaxAndIndex ArgMax(const Value& a);
  // The same over f32[n] `values` whose indices are the s32[n] `indices`: the largest value
  // and its index, the lowest index among equal values.
  MaxAndIndex ArgMax(const Value& values, const Value& indices);

  // A stablehlo.while carrying `inits`. `cond` writes the condition region: it gets the carried
  // values and returns one i1 scalar; `body` writes the loop body: it gets them and returns
  // their next values, of the same types. Returns the values after the last iteration. Both
  // regions may also read values defined before the loop.
  using Region = std::function<std::vector<Value>(const std::vector<Value>&)>;
  std::vector<Value> While(const std::vector<Value>& inits, const Region& cond,
                           const Region& body);

  Value Iota(Type t, int64_t dim);
  Value Compare(const Value& a, const Value& b, absl::string_view dir);
  Value Select(const Value& pred, const Value& a, const Value& b);
  Value Slice(const Value& a, std::vector<int64_t> start, std::vector<int64_t> limit);
  Value DynamicSlice(const Value& a, const std::vector<Value>& starts, std::vector<int64_t> sizes);
  Value DynamicUpdateSlice(const Value& a, const Value& update, const std::vector<Value>& starts);
  // Pads f32 `a` with zeros at the high end of each dimension.
  Value PadHigh(const Value& a, std::vector<int64_t> high);
  // Rows `ids` (s32[n]) of `table` [rows, width] -> [n, width].
  Value Gather(const Value& table, const Value& ids);

  // SPMD. A sharding constraint (custom_call @Sharding) with XLA sharding text.
  Value ShardingConstraint(const Value& a, absl::string_view sharding);
  // Enters manual (per-device) code: `a` with global type and sharding `sharding` becomes the
  // device's shard of type `local`. Leaves it: the device's `a` becomes the global value of
  // type `global` with sharding `sharding`.
  Value FullToShard(const Value& a, absl::string_view sharding, Type local);
  Value ShardToFull(const Value& a, absl::string_view sharding, Type global);
  // In manual code over `num_partitions` devices (one group of all of them): the device's
  // index as s32[]; the sum (or max, for `combiner` "maximum") of `a` over every device; the
  // devices' `a` concatenated along `dim` in device order. Each collective gets its own channel.
  Value PartitionId();
  Value AllReduce(const Value& a, int64_t num_partitions, absl::string_view combiner = "add");
  Value AllGather(const Value& a, int64_t dim, int64_t num_partitions);

 private:
  std::string NewName();
  std::string Groups(int64_t num_partitions) const;

  int64_t next_ = 0;
  int64_t next_channel_ = 1;
  std::string body_;
};

}  // namespace shardrt::stablehlo
