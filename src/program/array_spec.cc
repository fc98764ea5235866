#include "shardrt/program/array_spec.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "shardrt/base/status_macros.h"
#include "shardrt/sharding/shape.h"
#include "shardrt/sharding/text.h"
#include "shardrt/sharding/tile_assignment.h"

namespace shardrt::stablehlo {
namespace {

std::string Describe(const ArraySpec& spec) {
  return absl::StrCat("array '", spec.name, "' ", ShapeToString(spec.shape()));
}

bool IsIdentifier(absl::string_view name) {
  if (name.empty() || !(absl::ascii_isalpha(name[0]) || name[0] == '_')) return false;
  for (char c : name) {
    if (!(absl::ascii_isalnum(c) || c == '_' || c == '$' || c == '.')) return false;
  }
  return true;
}

// One parameter or result of @main: `TYPE {mhlo.sharding = "...", EXTRA}`.
absl::StatusOr<std::string> Declaration(const ArraySpec& spec, int64_t num_partitions,
                                        absl::string_view extra) {
  SHARDRT_ASSIGN_OR_RETURN(const Sharding sharding, ShardingOf(spec, num_partitions));
  absl::StatusOr<std::string> type = MlirTensorType(spec.shape());
  if (!type.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(spec.name, ": ", type.status().message()));
  }
  return absl::StrCat(*type, " {mhlo.sharding = \"", PrintSharding(sharding), "\"", extra, "}");
}

}  // namespace

absl::StatusOr<int64_t> ArraySpec::num_elements() const {
  return NumElements(dims, absl::StrCat("array '", name, "'"));
}

absl::StatusOr<Sharding> ShardingOf(const ArraySpec& spec, int64_t num_partitions) {
  if (num_partitions < 1) {
    return absl::InvalidArgumentError(absl::StrCat(Describe(spec), " over ", num_partitions,
                                                   " partitions: expected at least 1"));
  }
  SHARDRT_RETURN_IF_ERROR(spec.num_elements().status());
  const int64_t rank = static_cast<int64_t>(spec.dims.size());
  if (spec.split_dim < -1 || spec.split_dim >= rank) {
    return absl::InvalidArgumentError(absl::StrCat(Describe(spec), ": split dimension ",
                                                   spec.split_dim, " is not -1 or in [0, ",
                                                   rank, ")"));
  }
  if (spec.split_dim < 0 || num_partitions == 1) return Sharding::Replicated();
  if (spec.dims[spec.split_dim] % num_partitions != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(Describe(spec), ": dimension ", spec.split_dim, " (",
                     spec.dims[spec.split_dim], ") does not split evenly over ", num_partitions,
                     " partitions"));
  }
  Shape tiles(spec.dims.size(), 1);
  tiles[spec.split_dim] = num_partitions;
  SHARDRT_ASSIGN_OR_RETURN(TileAssignment assignment, TileAssignment::Iota(std::move(tiles)));
  return Sharding::Tiled(std::move(assignment));
}

absl::StatusOr<std::vector<int64_t>> ShardDims(const ArraySpec& spec, int64_t num_partitions) {
  SHARDRT_ASSIGN_OR_RETURN(const Sharding sharding, ShardingOf(spec, num_partitions));
  std::vector<int64_t> dims = spec.dims;
  if (sharding.IsTiled()) {
    const std::span<const int64_t> tiles = sharding.data_tile_dims();
    for (size_t i = 0; i < dims.size(); ++i) dims[i] /= tiles[i];
  }
  return dims;
}

absl::StatusOr<WrittenModule> WriteModule(absl::string_view name, int64_t num_partitions,
                                          const ModuleSpec& spec, const Builder& body,
                                          const std::vector<Value>& results) {
  if (!IsIdentifier(name)) {
    return absl::InvalidArgumentError(
        absl::StrCat("module name '", name, "': expected [A-Za-z_][A-Za-z0-9_$.]*"));
  }
  const std::string where = absl::StrCat("module @", name);
  if (!body.status().ok()) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": ", body.status().message()));
  }
  if (results.size() != spec.outputs.size()) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": ", results.size(),
                                                   " results for ", spec.outputs.size(),
                                                   " outputs"));
  }
  WrittenModule module;
  std::vector<std::string> params, outs, refs, types;
  for (size_t i = 0; i < spec.parameters.size(); ++i) {
    const ArraySpec& p = spec.parameters[i];
    std::string extra;
    for (const auto& [param, out] : spec.aliases) {
      if (param == static_cast<int64_t>(i)) {
        absl::StrAppend(&extra, ", tf.aliasing_output = ", out, " : i32");
      }
    }
    absl::StatusOr<std::string> decl = Declaration(p, num_partitions, extra);
    if (!decl.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, " parameter ", i, ": ", decl.status().message()));
    }
    params.push_back(absl::StrCat("%arg", i, ": ", *decl));
    module.signature.parameters.push_back(p.shape());
  }
  for (size_t i = 0; i < spec.outputs.size(); ++i) {
    const ArraySpec& o = spec.outputs[i];
    absl::StatusOr<std::string> decl = Declaration(o, num_partitions, "");
    if (!decl.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, " output ", i, ": ", decl.status().message()));
    }
    if (results[i].shape != o.shape()) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, " output ", i, " (", o.name, "): the body returns ",
          ShapeToString(results[i].shape), ", expected ", ShapeToString(o.shape())));
    }
    outs.push_back(*decl);
    refs.push_back(results[i].ref);
    types.push_back(*MlirTensorType(o.shape()));  // written above, so it can be written
    module.signature.results.push_back(o.shape());
  }
  for (const auto& [param, out] : spec.aliases) {
    if (param < 0 || param >= static_cast<int64_t>(spec.parameters.size()) || out < 0 ||
        out >= static_cast<int64_t>(spec.outputs.size())) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": alias (", param, ", ", out,
                                                     ") is out of range"));
    }
    if (spec.parameters[param].shape() != spec.outputs[out].shape()) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, ": parameter ", param, " ", ShapeToString(spec.parameters[param].shape()),
          " is donated to output ", out, " ", ShapeToString(spec.outputs[out].shape()),
          " of another type"));
    }
  }
  module.text = absl::StrCat(
      "module @", name, " attributes {mhlo.num_partitions = ", num_partitions,
      " : i32, mhlo.num_replicas = 1 : i32} {\n", "  func.func public @main(\n      ",
      absl::StrJoin(params, ",\n      "), ")\n      -> (", absl::StrJoin(outs, ",\n          "),
      ") {\n", body.body(), "    func.return ", absl::StrJoin(refs, ", "), " : ",
      absl::StrJoin(types, ", "), "\n  }\n}\n");
  return module;
}

}  // namespace shardrt::stablehlo
