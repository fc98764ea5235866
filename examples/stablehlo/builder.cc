#include "stablehlo/builder.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace shardrt::stablehlo {

std::string TypeText(const Type& t) {
  std::string s = "tensor<";
  for (int64_t d : t.dims) absl::StrAppend(&s, d, "x");
  absl::StrAppend(&s, t.elem, ">");
  return s;
}

std::string I64Array(const std::vector<int64_t>& v) {
  return v.empty() ? "array<i64>" : absl::StrCat("array<i64: ", absl::StrJoin(v, ", "), ">");
}

std::string FloatText(double v) { return absl::StrFormat("%.9e", v); }

std::string Builder::NewName() { return absl::StrCat("%v", next_++); }

Value Builder::Op(absl::string_view op, const std::vector<Value>& operands,
                  absl::string_view attrs, Type result) {
  Value out{NewName(), std::move(result)};
  std::vector<std::string> refs, types;
  for (const Value& v : operands) {
    refs.push_back(v.ref);
    types.push_back(TypeText(v.type));
  }
  absl::StrAppend(&body_, "    ", out.ref, " = \"stablehlo.", op, "\"(", absl::StrJoin(refs, ", "),
                  ")", attrs.empty() ? "" : absl::StrCat(" {", attrs, "}"), " : (",
                  absl::StrJoin(types, ", "), ") -> ", TypeText(out.type), "\n");
  return out;
}

Value Builder::Splat(double v, Type t) {
  const std::string literal = t.elem == "f32" ? FloatText(v) : absl::StrCat(int64_t(v));
  return Op("constant", {}, absl::StrCat("value = dense<", literal, "> : ", TypeText(t)), t);
}

Value Builder::NegInf() {
  Type t = F32({});
  return Op("constant", {}, absl::StrCat("value = dense<0xFF800000> : ", TypeText(t)), t);
}

Value Builder::I32(int64_t v) { return Splat(double(v), Type{{}, "i32"}); }

Value Builder::Constant(const std::vector<float>& values, std::vector<int64_t> dims) {
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
  Type t = F32(std::move(dims));
  return Op("constant", {}, absl::StrCat("value = dense<\"", hex, "\"> : ", TypeText(t)), t);
}

Value Builder::Binary(absl::string_view op, const Value& a, const Value& b) {
  return Op(op, {a, b}, "", a.type);
}

Value Builder::Unary(absl::string_view op, const Value& a) { return Op(op, {a}, "", a.type); }

Value Builder::Scale(const Value& a, double s) { return Mul(a, Splat(s, a.type)); }

Value Builder::Convert(const Value& a, absl::string_view elem) {
  return Op("convert", {a}, "", Type{a.type.dims, std::string(elem)});
}

Value Builder::Broadcast(const Value& a, std::vector<int64_t> dims, std::vector<int64_t> map) {
  return Op("broadcast_in_dim", {a}, absl::StrCat("broadcast_dimensions = ", I64Array(map)),
            Type{std::move(dims), a.type.elem});
}

Value Builder::Reshape(const Value& a, std::vector<int64_t> dims) {
  return Op("reshape", {a}, "", Type{std::move(dims), a.type.elem});
}

Value Builder::Transpose(const Value& a, std::vector<int64_t> perm) {
  std::vector<int64_t> dims;
  for (int64_t p : perm) dims.push_back(a.type.dims[p]);
  return Op("transpose", {a}, absl::StrCat("permutation = ", I64Array(perm)),
            Type{std::move(dims), a.type.elem});
}

Value Builder::Concatenate(const std::vector<Value>& parts, int64_t dim) {
  Type t = parts[0].type;
  t.dims[dim] = 0;
  for (const Value& p : parts) t.dims[dim] += p.type.dims[dim];
  return Op("concatenate", parts, absl::StrCat("dimension = ", dim, " : i64"), std::move(t));
}

Value Builder::Dot(const Value& a, const Value& b, std::vector<int64_t> batch_a,
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

std::vector<Value> Builder::Reduce(const std::vector<Value>& inputs,
                                   const std::vector<Value>& inits,
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

std::vector<Value> Builder::While(const std::vector<Value>& inits, const Region& cond,
                                  const Region& body) {
  const std::string name = NewName();
  const size_t n = inits.size();
  std::vector<std::string> operands, types;
  std::vector<Value> results;
  for (size_t i = 0; i < n; ++i) {
    operands.push_back(inits[i].ref);
    types.push_back(TypeText(inits[i].type));
    results.push_back(Value{n == 1 ? name : absl::StrCat(name, "#", i), inits[i].type});
  }
  const std::string type_list = absl::StrJoin(types, ", ");
  absl::StrAppend(&body_, "    ", name, n == 1 ? "" : absl::StrCat(":", n),
                  " = \"stablehlo.while\"(", absl::StrJoin(operands, ", "), ") ({\n");
  // Each region: a block of fresh arguments, the region's operations, and its return.
  auto region = [&](const Region& write) {
    std::vector<Value> args;
    std::vector<std::string> decls;
    for (const Value& init : inits) {
      args.push_back(Value{NewName(), init.type});
      decls.push_back(absl::StrCat(args.back().ref, ": ", TypeText(init.type)));
    }
    absl::StrAppend(&body_, "    ^bb0(", absl::StrJoin(decls, ", "), "):\n");
    std::vector<std::string> refs, returned;
    for (const Value& v : write(args)) {
      refs.push_back(v.ref);
      returned.push_back(TypeText(v.type));
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
Builder::MaxAndIndex Builder::ArgMax(const Value& a) {
  return ArgMax(a, Iota(Type{a.type.dims, "i32"}, 0));
}

Builder::MaxAndIndex Builder::ArgMax(const Value& a, const Value& iota) {
  auto keep_greater = [&](const std::vector<Value>& x, const std::vector<Value>& y) {
    Value greater = Compare(x[0], y[0], "GT");
    Value tie = Binary("and", Compare(x[0], y[0], "EQ"), Compare(x[1], y[1], "LT"));
    Value take_x = Binary("or", greater, tie);
    return std::vector<Value>{Select(take_x, x[0], y[0]), Select(take_x, x[1], y[1])};
  };
  std::vector<Value> r = Reduce({a, iota}, {NegInf(), I32(0)}, {0}, keep_greater);
  return MaxAndIndex{r[0], r[1]};
}

Value Builder::Iota(Type t, int64_t dim) {
  return Op("iota", {}, absl::StrCat("iota_dimension = ", dim, " : i64"), std::move(t));
}

Value Builder::Compare(const Value& a, const Value& b, absl::string_view dir) {
  return Op("compare", {a, b},
            absl::StrCat("comparison_direction = #stablehlo<comparison_direction ", dir, ">"),
            Type{a.type.dims, "i1"});
}

Value Builder::Select(const Value& pred, const Value& a, const Value& b) {
  return Op("select", {pred, a, b}, "", a.type);
}

Value Builder::Slice(const Value& a, std::vector<int64_t> start, std::vector<int64_t> limit) {
  std::vector<int64_t> dims, strides(start.size(), 1);
  for (size_t i = 0; i < start.size(); ++i) dims.push_back(limit[i] - start[i]);
  return Op("slice", {a},
            absl::StrCat("start_indices = ", I64Array(start), ", limit_indices = ",
                         I64Array(limit), ", strides = ", I64Array(strides)),
            Type{std::move(dims), a.type.elem});
}

Value Builder::DynamicSlice(const Value& a, const std::vector<Value>& starts,
                            std::vector<int64_t> sizes) {
  std::vector<Value> operands = {a};
  operands.insert(operands.end(), starts.begin(), starts.end());
  return Op("dynamic_slice", operands, absl::StrCat("slice_sizes = ", I64Array(sizes)),
            Type{sizes, a.type.elem});
}

Value Builder::DynamicUpdateSlice(const Value& a, const Value& update,
                                  const std::vector<Value>& starts) {
  std::vector<Value> operands = {a, update};
  operands.insert(operands.end(), starts.begin(), starts.end());
  return Op("dynamic_update_slice", operands, "", a.type);
}

Value Builder::PadHigh(const Value& a, std::vector<int64_t> high) {
  std::vector<int64_t> zeros(high.size(), 0), dims = a.type.dims;
  for (size_t i = 0; i < dims.size(); ++i) dims[i] += high[i];
  return Op("pad", {a, Splat(0.0, F32({}))},
            absl::StrCat("edge_padding_low = ", I64Array(zeros), ", edge_padding_high = ",
                         I64Array(high), ", interior_padding = ", I64Array(zeros)),
            F32(std::move(dims)));
}

Value Builder::Gather(const Value& table, const Value& ids) {
  const int64_t n = ids.type.dims[0], width = table.type.dims[1];
  Value idx = Reshape(ids, {n, 1});
  return Op("gather", {table, idx},
            absl::StrCat("dimension_numbers = #stablehlo.gather<offset_dims = [1], "
                         "collapsed_slice_dims = [0], start_index_map = [0], "
                         "index_vector_dim = 1>, indices_are_sorted = false, slice_sizes = ",
                         I64Array({1, width})),
            F32({n, width}));
}

Value Builder::ShardingConstraint(const Value& a, absl::string_view sharding) {
  return Op("custom_call", {a},
            absl::StrCat("call_target_name = \"Sharding\", mhlo.sharding = \"", sharding, "\""),
            a.type);
}

Value Builder::FullToShard(const Value& a, absl::string_view sharding, Type local) {
  Value constrained = ShardingConstraint(a, sharding);
  return Op("custom_call", {constrained},
            "call_target_name = \"SPMDFullToShardShape\", mhlo.sharding = \"{manual}\"",
            std::move(local));
}

Value Builder::ShardToFull(const Value& a, absl::string_view sharding, Type global) {
  Value manual = ShardingConstraint(a, "{manual}");
  return Op("custom_call", {manual},
            absl::StrCat("call_target_name = \"SPMDShardToFullShape\", mhlo.sharding = \"",
                         sharding, "\""),
            std::move(global));
}

Value Builder::PartitionId() {
  Value id = Op("partition_id", {}, "", Type{{}, "ui32"});
  return Convert(id, "i32");
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
  Value out{NewName(), a.type};
  Type scalar{{}, a.type.elem};
  const std::string x = NewName(), y = NewName(), r = NewName();
  absl::StrAppend(&body_, "    ", out.ref, " = \"stablehlo.all_reduce\"(", a.ref, ") ({\n",
                  "    ^bb0(", x, ": ", TypeText(scalar), ", ", y, ": ", TypeText(scalar), "):\n",
                  "    ", r, " = \"stablehlo.", combiner, "\"(", x, ", ", y, ") : (",
                  TypeText(scalar), ", ", TypeText(scalar), ") -> ", TypeText(scalar), "\n",
                  "    \"stablehlo.return\"(", r, ") : (", TypeText(scalar), ") -> ()\n",
                  "    }) {", Groups(num_partitions), "} : (", TypeText(a.type), ") -> ",
                  TypeText(a.type), "\n");
  ++next_channel_;
  return out;
}

Value Builder::AllGather(const Value& a, int64_t dim, int64_t num_partitions) {
  Type t = a.type;
  t.dims[dim] *= num_partitions;
  Value out = Op("all_gather", {a},
                 absl::StrCat("all_gather_dim = ", dim, " : i64, ", Groups(num_partitions)),
                 std::move(t));
  ++next_channel_;
  return out;
}

}  // namespace shardrt::stablehlo
