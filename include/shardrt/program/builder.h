// Builder: writes the body of a StableHLO function as MLIR text, one operation at a time, in the
// generic syntax every StableHLO version parses. The model emitters (models/decoder,
// models/llama) are written with it; WriteModule (array_spec.h) puts a body into a module.
//
// Values are SSA names (%v0, %v1, ...) with their ArrayShape; each method appends one
// operation (a few for composite helpers) and returns its result. Tensor types are written by
// MlirTensorType (program_text.h), shardings by the sharding layer's printer (PrintSharding).
// The emitters compute the shapes and the compiler checks the program; what the builder checks
// is what it needs to write text at all: every type must have an MLIR spelling and an element
// count that fits in int64, and every dimension index it reads must exist. The first such
// problem is kept in status() (later operations are still appended, their text unspecified),
// so an emitter writes straight through and checks once, at WriteModule.
//
// Thread safety: a Builder is used by one thread.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "shardrt/base/array_shape.h"
#include "shardrt/base/element_type.h"
#include "shardrt/base/export.h"
#include "shardrt/sharding/sharding.h"

namespace shardrt::stablehlo {

// An SSA value of the program being written: its name and its type.
struct SHARDRT_EXPORT Value {
  std::string ref;
  ArrayShape shape;
};

// "array<i64: 1, 2>" ("array<i64>" when empty). Pure.
[[nodiscard]] SHARDRT_EXPORT std::string I64Array(const std::vector<int64_t>& v);
// A float literal that reads back as the same f32 ("%.9e"). Pure.
[[nodiscard]] SHARDRT_EXPORT std::string FloatText(double v);
// Shorthands for the emitters' common types.
inline ArrayShape F32(std::vector<int64_t> dims) { return {ElementType::kF32, std::move(dims)}; }
inline ArrayShape I32(std::vector<int64_t> dims) { return {ElementType::kS32, std::move(dims)}; }

class SHARDRT_EXPORT Builder {
 public:
  Builder() = default;

  // The body written so far (operations, one per line).
  const std::string& body() const { return body_; }
  // OK, or the first problem met while writing (see above): InvalidArgument naming the
  // operation and the type or dimension.
  const absl::Status& status() const { return status_; }
  // Keeps `status`, when it is not OK, as status() unless a problem was kept before: for an
  // emitter's own failures while it writes (e.g. a sharding it could not make).
  void AddError(const absl::Status& status);

  // Parameter `index` of @main, of global type `shape` (`%arg<index>`; writes nothing).
  static Value Parameter(int64_t index, ArrayShape shape);

  // One operation "stablehlo.<op>" on `operands` with the attribute dictionary text `attrs`.
  Value Op(absl::string_view op, const std::vector<Value>& operands, absl::string_view attrs,
           ArrayShape result);

  // Constants: a splat of `v` of type `t` (a float literal for float types, the integer part
  // for integer types, true/false for pred); -inf f32[]; an s32[] value.
  Value Splat(double v, ArrayShape t);
  Value NegInf();
  Value I32(int64_t v);
  // A dense f32 constant of `dims` holding `values` (row-major). A count that differs from
  // the dims' is a status() error.
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
  Value Convert(const Value& a, ElementType type);

  // Broadcasts `a` to `dims`, operand dimension i becoming result dimension map[i].
  Value Broadcast(const Value& a, std::vector<int64_t> dims, std::vector<int64_t> map);
  Value Reshape(const Value& a, std::vector<int64_t> dims);
  Value Transpose(const Value& a, std::vector<int64_t> perm);
  Value Concatenate(const std::vector<Value>& parts, int64_t dim);

  // dot_general; result dims: batch, lhs free, rhs free; the element type of `a`.
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
  // Reduces `a` over `dims` with the binary op `combiner` ("add", "maximum") from `init`.
  Value Reduce(const Value& a, std::vector<int64_t> dims, absl::string_view combiner,
               const Value& init);
  // The largest elements of f32 `a` along dimension `dim` and their indices (s32), of a's
  // shape without `dim`; ties go to the lowest index.
  struct MaxAndIndex {
    Value max, index;
  };
  MaxAndIndex ArgMax(const Value& a, int64_t dim = 0);
  // The same over f32 `values` whose indices are the s32 `indices` (of the same dims): the
  // largest value along `dim` and its index, the lowest index among equal values.
  MaxAndIndex ArgMax(const Value& values, const Value& indices, int64_t dim = 0);

  // A stablehlo.while carrying `inits`. `cond` writes the condition region: it gets the carried
  // values and returns one i1 scalar; `body` writes the loop body: it gets them and returns
  // their next values, of the same types. Returns the values after the last iteration. Both
  // regions may also read values defined before the loop.
  using Region = std::function<std::vector<Value>(const std::vector<Value>&)>;
  std::vector<Value> While(const std::vector<Value>& inits, const Region& cond,
                           const Region& body);

  Value Iota(ArrayShape t, int64_t dim);
  Value Compare(const Value& a, const Value& b, absl::string_view dir);
  Value Select(const Value& pred, const Value& a, const Value& b);
  Value Slice(const Value& a, std::vector<int64_t> start, std::vector<int64_t> limit);
  Value DynamicSlice(const Value& a, const std::vector<Value>& starts, std::vector<int64_t> sizes);
  Value DynamicUpdateSlice(const Value& a, const Value& update, const std::vector<Value>& starts);
  // Pads `a` with zeros at the high end of each dimension.
  Value PadHigh(const Value& a, std::vector<int64_t> high);
  // Rows `ids` (s32[n]) of `table` [rows, width] -> [n, width].
  Value Gather(const Value& table, const Value& ids);

  // A typed XLA FFI custom call (api_version 4) to `target`, a kernel registered with
  // Runtime::RegisterFfiHandler: `operands` in, one array of type `result` out, `attributes`
  // passed as i32 values in its backend_config dictionary (names are identifiers); every
  // operand and the result are laid out row-major (stated in the call, so that XLA does not
  // pick another layout around it). In manual
  // SPMD code pass Sharding::Manual() as `sharding`, so that each device runs it on its own
  // shard. A target or attribute name that is not an identifier is a status() error.
  Value CustomCall(absl::string_view target, const std::vector<Value>& operands,
                   ArrayShape result,
                   const std::vector<std::pair<std::string, int32_t>>& attributes = {},
                   const std::optional<Sharding>& sharding = std::nullopt);

  // SPMD. A sharding constraint (custom_call @Sharding) on `a`.
  Value ShardingConstraint(const Value& a, const Sharding& sharding);
  // Enters manual (per-device) code: `a` (global) placed with `sharding` becomes the device's
  // shard, of the padded shard shape the sharding layer computes (ShardGeometry). A sharding
  // that does not fit `a` is a status() error.
  Value FullToShard(const Value& a, const Sharding& sharding);
  // Leaves it: the device's `a` becomes the global value of type `global` placed with
  // `sharding`.
  Value ShardToFull(const Value& a, const Sharding& sharding, ArrayShape global);
  // In manual code over `num_partitions` devices (one group of all of them): the device's
  // index as s32[]; the sum (or max, for `combiner` "maximum") of `a` over every device; the
  // devices' `a` concatenated along `dim` in device order. Each collective gets its own channel.
  Value PartitionId();
  Value AllReduce(const Value& a, int64_t num_partitions, absl::string_view combiner = "add");
  Value AllGather(const Value& a, int64_t dim, int64_t num_partitions);

 private:
  std::string NewName();
  std::string Groups(int64_t num_partitions) const;
  // The tensor type text of `shape`; a shape MlirTensorType refuses sets status_.
  std::string TypeText(const ArrayShape& shape);
  // Keeps the first problem: "stablehlo.<op>: <message>".
  void Fail(absl::string_view op, absl::string_view message);
  // True when every entry of `dims` is a dimension of `shape`; else Fail.
  bool CheckDims(absl::string_view op, const ArrayShape& shape, const std::vector<int64_t>& dims);

  int64_t next_ = 0;
  int64_t next_channel_ = 1;
  std::string body_;
  absl::Status status_;
};

}  // namespace shardrt::stablehlo
