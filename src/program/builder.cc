#include "shardrt/program/builder.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "shardrt/program/program_text.h"
#include "shardrt/sharding/geometry.h"
#include "shardrt/sharding/shape.h"
#include "shardrt/sharding/text.h"

namespace shardrt::stablehlo {

std::string I64Array(const std::vector<int64_t>& v) {
  return v.empty() ? "array<i64>" : absl::StrCat("array<i64: ", absl::StrJoin(v, ", "), ">");
}

std::string FloatText(double v) { return absl::StrFormat("%.9e", v); }

namespace {

bool IsFloat(ElementType type) {
  return type == ElementType::kF16 || type == ElementType::kF32 || type == ElementType::kF64 ||
         type == ElementType::kBF16;
}

}  // namespace

std::string Builder::NewName() { return absl::StrCat("%v", next_++); }

void Builder::Fail(absl::string_view op, absl::string_view message) {
  if (status_.ok()) {
    status_ = absl::InvalidArgumentError(absl::StrCat("stablehlo.", op, ": ", message));
  }
}

void Builder::AddError(const absl::Status& status) {
  if (status_.ok()) status_ = status;
}

std::string Builder::TypeText(const ArrayShape& shape) {
  absl::StatusOr<std::string> text = MlirTensorType(shape);
  if (text.ok()) return *std::move(text);
  if (status_.ok()) status_ = text.status();
  return "tensor<?>";
}

bool Builder::CheckDims(absl::string_view op, const ArrayShape& shape,
                        const std::vector<int64_t>& dims) {
  for (int64_t d : dims) {
    if (d < 0 || d >= static_cast<int64_t>(shape.dims.size())) {
      Fail(op, absl::StrCat("dimension ", d, " of ", ShapeToString(shape),
                            " does not exist (rank ", shape.dims.size(), ")"));
      return false;
    }
  }
  return true;
}

Value Builder::Parameter(int64_t index, ArrayShape shape) {
  return Value{absl::StrCat("%arg", index), std::move(shape)};
}

Value Builder::Op(absl::string_view op, const std::vector<Value>& operands,
                  absl::string_view attrs, ArrayShape result) {
  Value out{NewName(), std::move(result)};
  std::vector<std::string> refs, types;
  for (const Value& v : operands) {
    refs.push_back(v.ref);
    types.push_back(TypeText(v.shape));
  }
  absl::StrAppend(&body_, "    ", out.ref, " = \"stablehlo.", op, "\"(", absl::StrJoin(refs, ", "),
                  ")", attrs.empty() ? "" : absl::StrCat(" {", attrs, "}"), " : (",
                  absl::StrJoin(types, ", "), ") -> ", TypeText(out.shape), "\n");
  return out;
}

Value Builder::Splat(double v, ArrayShape t) {
  std::string literal;
  if (IsFloat(t.type)) {
    literal = FloatText(v);
  } else if (t.type == ElementType::kPred) {
    literal = v != 0 ? "true" : "false";
  } else {
    literal = absl::StrCat(int64_t(v));
  }
  const std::string type = TypeText(t);
  return Op("constant", {}, absl::StrCat("value = dense<", literal, "> : ", type), std::move(t));
}

Value Builder::NegInf() {
  ArrayShape t = F32({});
  const std::string type = TypeText(t);
  return Op("constant", {}, absl::StrCat("value = dense<0xFF800000> : ", type), std::move(t));
}

Value Builder::I32(int64_t v) { return Splat(double(v), stablehlo::I32({})); }

Value Builder::Constant(const std::vector<float>& values, std::vector<int64_t> dims) {
  absl::StatusOr<int64_t> count = NumElements(dims, "the constant");
  if (!count.ok()) {
    Fail("constant", count.status().message());
  } else if (*count != static_cast<int64_t>(values.size())) {
    Fail("constant", absl::StrCat(values.size(), " values for dims ", DimsToString(dims),
                                  ", which hold ", *count));
  }
  // Hex form: exact bits, compact.
  std::string hex = "0x";
  hex.reserve(2 + values.size() * 8);
  for (float f : values) {
    uint32_t bits;
    std::memcpy(&bits, &f, sizeof(bits));
    for (int byte = 0; byte < 4; ++byte) {  // little-endian bytes, as MLIR's hex splat reads them
      absl::StrAppend(&hex, absl::Hex((bits >> (8 * byte)) & 0xFF, absl::kZeroPad2));
    }
  }
  ArrayShape t = F32(std::move(dims));
  const std::string type = TypeText(t);
  return Op("constant", {}, absl::StrCat("value = dense<\"", hex, "\"> : ", type), std::move(t));
}

Value Builder::Binary(absl::string_view op, const Value& a, const Value& b) {
  return Op(op, {a, b}, "", a.shape);
}

Value Builder::Unary(absl::string_view op, const Value& a) { return Op(op, {a}, "", a.shape); }

Value Builder::Scale(const Value& a, double s) { return Mul(a, Splat(s, a.shape)); }

Value Builder::Convert(const Value& a, ElementType type) {
  return Op("convert", {a}, "", ArrayShape{type, a.shape.dims});
}

Value Builder::Broadcast(const Value& a, std::vector<int64_t> dims, std::vector<int64_t> map) {
  CheckDims("broadcast_in_dim", ArrayShape{a.shape.type, dims}, map);
  return Op("broadcast_in_dim", {a}, absl::StrCat("broadcast_dimensions = ", I64Array(map)),
            ArrayShape{a.shape.type, std::move(dims)});
}

Value Builder::Reshape(const Value& a, std::vector<int64_t> dims) {
  return Op("reshape", {a}, "", ArrayShape{a.shape.type, std::move(dims)});
}

Value Builder::Transpose(const Value& a, std::vector<int64_t> perm) {
  std::vector<int64_t> dims;
  if (CheckDims("transpose", a.shape, perm)) {
    for (int64_t p : perm) dims.push_back(a.shape.dims[p]);
  }
  return Op("transpose", {a}, absl::StrCat("permutation = ", I64Array(perm)),
            ArrayShape{a.shape.type, std::move(dims)});
}

Value Builder::Concatenate(const std::vector<Value>& parts, int64_t dim) {
  if (parts.empty()) {
    Fail("concatenate", "no operands");
    return Op("concatenate", {}, "", ArrayShape{});
  }
  ArrayShape t = parts[0].shape;
  bool ok = true;
  for (const Value& p : parts) ok = ok && CheckDims("concatenate", p.shape, {dim});
  if (ok) {
    t.dims[dim] = 0;
    for (const Value& p : parts) t.dims[dim] += p.shape.dims[dim];
  }
  return Op("concatenate", parts, absl::StrCat("dimension = ", dim, " : i64"), std::move(t));
}

Value Builder::Dot(const Value& a, const Value& b, std::vector<int64_t> batch_a,
                   std::vector<int64_t> batch_b, std::vector<int64_t> contract_a,
                   std::vector<int64_t> contract_b) {
  auto has = [](const std::vector<int64_t>& v, int64_t i) {
    return std::find(v.begin(), v.end(), i) != v.end();
  };
  std::vector<int64_t> dims;
  if (CheckDims("dot_general", a.shape, batch_a) && CheckDims("dot_general", a.shape, contract_a) &&
      CheckDims("dot_general", b.shape, batch_b) && CheckDims("dot_general", b.shape, contract_b)) {
    for (int64_t i : batch_a) dims.push_back(a.shape.dims[i]);
    for (int64_t i = 0; i < int64_t(a.shape.dims.size()); ++i) {
      if (!has(batch_a, i) && !has(contract_a, i)) dims.push_back(a.shape.dims[i]);
    }
    for (int64_t i = 0; i < int64_t(b.shape.dims.size()); ++i) {
      if (!has(batch_b, i) && !has(contract_b, i)) dims.push_back(b.shape.dims[i]);
    }
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
      ArrayShape{a.shape.type, std::move(dims)});
}

std::vector<Value> Builder::Reduce(const std::vector<Value>& inputs,
                                   const std::vector<Value>& inits,
                                   const std::vector<int64_t>& dims, const Combiner& combine) {
  std::vector<int64_t> kept;
  if (inputs.empty() || inputs.size() != inits.size()) {
    Fail("reduce", absl::StrCat(inputs.size(), " inputs and ", inits.size(),
                                " initial values; expected as many of each, at least one"));
  } else if (CheckDims("reduce", inputs[0].shape, dims)) {
    for (int64_t i = 0; i < int64_t(inputs[0].shape.dims.size()); ++i) {
      if (std::find(dims.begin(), dims.end(), i) == dims.end()) {
        kept.push_back(inputs[0].shape.dims[i]);
      }
    }
  }
  const std::string name = NewName();
  std::vector<Value> acc, elem, results;
  std::vector<std::string> operands, operand_types, args, result_types;
  for (const Value& v : inputs) {
    operands.push_back(v.ref);
    operand_types.push_back(TypeText(v.shape));
  }
  for (size_t i = 0; i < inits.size(); ++i) {
    operands.push_back(inits[i].ref);
    operand_types.push_back(TypeText(inits[i].shape));
    acc.push_back(Value{NewName(), inits[i].shape});
    results.push_back(Value{inits.size() == 1 ? name : absl::StrCat(name, "#", i),
                            ArrayShape{inits[i].shape.type, kept}});
    result_types.push_back(TypeText(results.back().shape));
  }
  for (const Value& init : inits) elem.push_back(Value{NewName(), init.shape});
  for (const std::vector<Value>* block : {&acc, &elem}) {
    for (const Value& v : *block) args.push_back(absl::StrCat(v.ref, ": ", TypeText(v.shape)));
  }
  absl::StrAppend(&body_, "    ", name, inits.size() == 1 ? "" : absl::StrCat(":", inits.size()),
                  " = \"stablehlo.reduce\"(", absl::StrJoin(operands, ", "), ") ({\n    ^bb0(",
                  absl::StrJoin(args, ", "), "):\n");
  std::vector<std::string> refs, types;
  for (const Value& v : combine(acc, elem)) {
    refs.push_back(v.ref);
    types.push_back(TypeText(v.shape));
  }
  absl::StrAppend(&body_, "    \"stablehlo.return\"(", absl::StrJoin(refs, ", "), ") : (",
                  absl::StrJoin(types, ", "), ") -> ()\n    }) {dimensions = ", I64Array(dims),
                  "} : (", absl::StrJoin(operand_types, ", "), ") -> (",
                  absl::StrJoin(result_types, ", "), ")\n");
  return results;
}

std::vector<Value> Builder::While(const std::vector<Value>& inits, const Region& cond,
                                  const Region& body) {
  const std::string name = NewName();
  const size_t n = inits.size();
  std::vector<std::string> operands, types;
  std::vector<Value> results;
  for (size_t i = 0; i < n; ++i) {
    operands.push_back(inits[i].ref);
    types.push_back(TypeText(inits[i].shape));
    results.push_back(Value{n == 1 ? name : absl::StrCat(name, "#", i), inits[i].shape});
  }
  const std::string type_list = absl::StrJoin(types, ", ");
  absl::StrAppend(&body_, "    ", name, n == 1 ? "" : absl::StrCat(":", n),
                  " = \"stablehlo.while\"(", absl::StrJoin(operands, ", "), ") ({\n");
  // Each region: a block of fresh arguments, the region's operations, and its return.
  auto region = [&](const Region& write) {
    std::vector<Value> args;
    std::vector<std::string> decls;
    for (const Value& init : inits) {
      args.push_back(Value{NewName(), init.shape});
      decls.push_back(absl::StrCat(args.back().ref, ": ", TypeText(init.shape)));
    }
    absl::StrAppend(&body_, "    ^bb0(", absl::StrJoin(decls, ", "), "):\n");
    std::vector<std::string> refs, returned;
    for (const Value& v : write(args)) {
      refs.push_back(v.ref);
      returned.push_back(TypeText(v.shape));
    }
    absl::StrAppend(&body_, "    \"stablehlo.return\"(", absl::StrJoin(refs, ", "), ") : (",
                    absl::StrJoin(returned, ", "), ") -> ()\n");
  };
  region(cond);
  absl::StrAppend(&body_, "    }, {\n");
  region(body);
  absl::StrAppend(&body_, "    }) : (", type_list, ") -> (", type_list, ")\n");
  return results;
}

Value Builder::Reduce(const Value& a, std::vector<int64_t> dims, absl::string_view combiner,
                      const Value& init) {
  return Reduce({a}, {init}, dims, [&](const std::vector<Value>& x, const std::vector<Value>& y) {
    return std::vector<Value>{Binary(combiner, x[0], y[0])};
  })[0];
}

// Reduces (value, index) pairs: keep the left pair if its value is greater, or equal with a
// lower index.
Builder::MaxAndIndex Builder::ArgMax(const Value& a, int64_t dim) {
  return ArgMax(a, Iota(stablehlo::I32(a.shape.dims), dim), dim);
}

Builder::MaxAndIndex Builder::ArgMax(const Value& a, const Value& iota, int64_t dim) {
  auto keep_greater = [&](const std::vector<Value>& x, const std::vector<Value>& y) {
    Value greater = Compare(x[0], y[0], "GT");
    Value tie = Binary("and", Compare(x[0], y[0], "EQ"), Compare(x[1], y[1], "LT"));
    Value take_x = Binary("or", greater, tie);
    return std::vector<Value>{Select(take_x, x[0], y[0]), Select(take_x, x[1], y[1])};
  };
  std::vector<Value> r = Reduce({a, iota}, {NegInf(), I32(0)}, {dim}, keep_greater);
  return MaxAndIndex{r[0], r[1]};
}

Value Builder::Iota(ArrayShape t, int64_t dim) {
  CheckDims("iota", t, {dim});
  return Op("iota", {}, absl::StrCat("iota_dimension = ", dim, " : i64"), std::move(t));
}

Value Builder::Compare(const Value& a, const Value& b, absl::string_view dir) {
  return Op("compare", {a, b},
            absl::StrCat("comparison_direction = #stablehlo<comparison_direction ", dir, ">"),
            ArrayShape{ElementType::kPred, a.shape.dims});
}

Value Builder::Select(const Value& pred, const Value& a, const Value& b) {
  return Op("select", {pred, a, b}, "", a.shape);
}

Value Builder::Slice(const Value& a, std::vector<int64_t> start, std::vector<int64_t> limit) {
  std::vector<int64_t> dims, strides(start.size(), 1);
  if (start.size() != limit.size() || start.size() != a.shape.dims.size()) {
    Fail("slice", absl::StrCat(start.size(), " starts and ", limit.size(), " limits for ",
                               ShapeToString(a.shape)));
  } else {
    for (size_t i = 0; i < start.size(); ++i) dims.push_back(limit[i] - start[i]);
  }
  return Op("slice", {a},
            absl::StrCat("start_indices = ", I64Array(start), ", limit_indices = ",
                         I64Array(limit), ", strides = ", I64Array(strides)),
            ArrayShape{a.shape.type, std::move(dims)});
}

Value Builder::DynamicSlice(const Value& a, const std::vector<Value>& starts,
                            std::vector<int64_t> sizes) {
  std::vector<Value> operands = {a};
  operands.insert(operands.end(), starts.begin(), starts.end());
  return Op("dynamic_slice", operands, absl::StrCat("slice_sizes = ", I64Array(sizes)),
            ArrayShape{a.shape.type, sizes});
}

Value Builder::DynamicUpdateSlice(const Value& a, const Value& update,
                                  const std::vector<Value>& starts) {
  std::vector<Value> operands = {a, update};
  operands.insert(operands.end(), starts.begin(), starts.end());
  return Op("dynamic_update_slice", operands, "", a.shape);
}

Value Builder::PadHigh(const Value& a, std::vector<int64_t> high) {
  std::vector<int64_t> zeros(high.size(), 0), dims = a.shape.dims;
  if (high.size() != dims.size()) {
    Fail("pad", absl::StrCat(high.size(), " paddings for ", ShapeToString(a.shape)));
  } else {
    for (size_t i = 0; i < dims.size(); ++i) dims[i] += high[i];
  }
  return Op("pad", {a, Splat(0.0, ArrayShape{a.shape.type, {}})},
            absl::StrCat("edge_padding_low = ", I64Array(zeros), ", edge_padding_high = ",
                         I64Array(high), ", interior_padding = ", I64Array(zeros)),
            ArrayShape{a.shape.type, std::move(dims)});
}

Value Builder::Gather(const Value& table, const Value& ids) {
  int64_t n = 0, width = 0;
  if (table.shape.dims.size() != 2 || ids.shape.dims.size() != 1) {
    Fail("gather", absl::StrCat("rows ", ShapeToString(ids.shape), " of ",
                                ShapeToString(table.shape), ": expected a vector of ids and a "
                                "rank-2 table"));
  } else {
    n = ids.shape.dims[0];
    width = table.shape.dims[1];
  }
  Value idx = Reshape(ids, {n, 1});
  return Op("gather", {table, idx},
            absl::StrCat("dimension_numbers = #stablehlo.gather<offset_dims = [1], "
                         "collapsed_slice_dims = [0], start_index_map = [0], "
                         "index_vector_dim = 1>, indices_are_sorted = false, slice_sizes = ",
                         I64Array({1, width})),
            ArrayShape{table.shape.type, {n, width}});
}

namespace {

bool IsIdentifier(absl::string_view name) {
  if (name.empty() || (name[0] >= '0' && name[0] <= '9')) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
  });
}

}  // namespace

Value Builder::CustomCall(absl::string_view target, const std::vector<Value>& operands,
                          ArrayShape result,
                          const std::vector<std::pair<std::string, int32_t>>& attributes,
                          const std::optional<Sharding>& sharding) {
  if (!IsIdentifier(target)) {
    Fail("custom_call", absl::StrCat("target '", target, "': expected an identifier"));
  }
  std::vector<std::string> config;
  for (const auto& [name, value] : attributes) {
    if (!IsIdentifier(name)) {
      Fail("custom_call", absl::StrCat("attribute '", name, "': expected an identifier"));
    }
    config.push_back(absl::StrCat(name, " = ", value, " : i32"));
  }
  // Row-major layouts for every operand and the result, stated: a kernel reads and writes its
  // buffers row-major, while XLA would otherwise pick whatever layout suits the neighbours (a
  // result feeding an all-gather along its last dimension comes out column-major).
  auto row_major = [](const ArrayShape& shape) {
    std::vector<int64_t> minor_to_major;
    for (int64_t d = int64_t(shape.dims.size()) - 1; d >= 0; --d) minor_to_major.push_back(d);
    return absl::StrCat("dense<", minor_to_major.empty() ? "" : absl::StrCat("[", absl::StrJoin(minor_to_major, ", "), "]"),
                        "> : tensor<", minor_to_major.size(), "xindex>");
  };
  std::vector<std::string> operand_layouts;
  for (const Value& v : operands) operand_layouts.push_back(row_major(v.shape));
  std::string attrs = absl::StrCat(
      "call_target_name = \"", target, "\", api_version = 4 : i32, operand_layouts = [",
      absl::StrJoin(operand_layouts, ", "), "], result_layouts = [", row_major(result), "]");
  if (!config.empty()) {
    absl::StrAppend(&attrs, ", backend_config = {", absl::StrJoin(config, ", "), "}");
  }
  if (sharding.has_value()) {
    absl::StrAppend(&attrs, ", mhlo.sharding = \"", PrintSharding(*sharding), "\"");
  }
  return Op("custom_call", operands, attrs, std::move(result));
}

Value Builder::ShardingConstraint(const Value& a, const Sharding& sharding) {
  return Op("custom_call", {a},
            absl::StrCat("call_target_name = \"Sharding\", mhlo.sharding = \"",
                         PrintSharding(sharding), "\""),
            a.shape);
}

Value Builder::FullToShard(const Value& a, const Sharding& sharding) {
  ArrayShape local = a.shape;
  absl::StatusOr<ShardGeometry> geometry =
      ShardGeometry::Create(a.shape.dims, sharding, sharding.num_devices().value_or(1));
  if (!geometry.ok()) {
    Fail("custom_call @SPMDFullToShardShape",
         absl::StrCat(ShapeToString(a.shape), " with sharding ", PrintSharding(sharding), ": ",
                      geometry.status().message()));
  } else {
    local.dims = geometry->shard_shape();
  }
  Value constrained = ShardingConstraint(a, sharding);
  return Op("custom_call", {constrained},
            "call_target_name = \"SPMDFullToShardShape\", mhlo.sharding = \"{manual}\"",
            std::move(local));
}

Value Builder::ShardToFull(const Value& a, const Sharding& sharding, ArrayShape global) {
  Value manual = ShardingConstraint(a, Sharding::Manual());
  return Op("custom_call", {manual},
            absl::StrCat("call_target_name = \"SPMDShardToFullShape\", mhlo.sharding = \"",
                         PrintSharding(sharding), "\""),
            std::move(global));
}

Value Builder::PartitionId() {
  Value id = Op("partition_id", {}, "", ArrayShape{ElementType::kU32, {}});
  return Convert(id, ElementType::kS32);
}

std::string Builder::Groups(int64_t num_partitions) const {
  std::vector<int64_t> ids(num_partitions);
  for (int64_t i = 0; i < num_partitions; ++i) ids[i] = i;
  return absl::StrCat("replica_groups = dense<[[", absl::StrJoin(ids, ", "),
                      "]]> : tensor<1x", num_partitions, "xi64>, channel_handle = "
                      "#stablehlo.channel_handle<handle = ", next_channel_,
                      ", type = 1>, use_global_device_ids");
}

Value Builder::AllReduce(const Value& a, int64_t num_partitions, absl::string_view combiner) {
  if (num_partitions < 1) Fail("all_reduce", absl::StrCat(num_partitions, " partitions"));
  Value out{NewName(), a.shape};
  const std::string scalar = TypeText(ArrayShape{a.shape.type, {}});
  const std::string type = TypeText(a.shape);
  const std::string x = NewName(), y = NewName(), r = NewName();
  absl::StrAppend(&body_, "    ", out.ref, " = \"stablehlo.all_reduce\"(", a.ref, ") ({\n",
                  "    ^bb0(", x, ": ", scalar, ", ", y, ": ", scalar, "):\n",
                  "    ", r, " = \"stablehlo.", combiner, "\"(", x, ", ", y, ") : (",
                  scalar, ", ", scalar, ") -> ", scalar, "\n",
                  "    \"stablehlo.return\"(", r, ") : (", scalar, ") -> ()\n",
                  "    }) {", Groups(std::max<int64_t>(num_partitions, 0)), "} : (", type,
                  ") -> ", type, "\n");
  ++next_channel_;
  return out;
}

Value Builder::AllGather(const Value& a, int64_t dim, int64_t num_partitions) {
  ArrayShape t = a.shape;
  if (num_partitions < 1) {
    Fail("all_gather", absl::StrCat(num_partitions, " partitions"));
  } else if (CheckDims("all_gather", a.shape, {dim}) &&
             !CheckedMul(t.dims[dim], num_partitions, &t.dims[dim])) {
    Fail("all_gather", absl::StrCat(ShapeToString(a.shape), " gathered over ", num_partitions,
                                    " partitions overflows int64"));
  }
  Value out = Op("all_gather", {a},
                 absl::StrCat("all_gather_dim = ", dim, " : i64, ",
                              Groups(std::max<int64_t>(num_partitions, 0))),
                 std::move(t));
  ++next_channel_;
  return out;
}

}  // namespace shardrt::stablehlo
