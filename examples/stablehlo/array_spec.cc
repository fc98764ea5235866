#include "stablehlo/array_spec.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "stablehlo/builder.h"

namespace shardrt::stablehlo {

int64_t ArraySpec::num_elements() const {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

std::string ShardingText(const ArraySpec& spec, int64_t num_partitions) {
  if (spec.split_dim < 0 || num_partitions == 1) return "{replicated}";
  std::vector<int64_t> tiles(spec.dims.size(), 1);
  tiles[spec.split_dim] = num_partitions;
  return absl::StrCat("{devices=[", absl::StrJoin(tiles, ","), "]<=[", num_partitions, "]}");
}

std::vector<int64_t> ShardDims(const ArraySpec& spec, int64_t num_partitions) {
  std::vector<int64_t> dims = spec.dims;
  if (spec.split_dim >= 0) dims[spec.split_dim] /= num_partitions;
  return dims;
}

std::string SpecTypeText(const ArraySpec& spec) {
  return TypeText(Type{spec.dims, spec.type == ElementType::kS32 ? "i32" : "f32"});
}

std::string ModuleText(absl::string_view name, int64_t p, const Signature& sig,
                       const std::string& body, const std::vector<std::string>& result_refs,
                       const std::vector<std::string>& result_types) {
  std::vector<std::string> params, outs;
  for (size_t i = 0; i < sig.parameters.size(); ++i) {
    const ArraySpec& spec = sig.parameters[i];
    std::string attrs = absl::StrCat("mhlo.sharding = \"", ShardingText(spec, p), "\"");
    for (const auto& [param, out] : sig.aliases) {
      if (param == int64_t(i)) absl::StrAppend(&attrs, ", tf.aliasing_output = ", out, " : i32");
    }
    params.push_back(absl::StrCat("%arg", i, ": ", SpecTypeText(spec), " {", attrs, "}"));
  }
  for (const ArraySpec& spec : sig.outputs) {
    outs.push_back(absl::StrCat(SpecTypeText(spec), " {mhlo.sharding = \"",
                                ShardingText(spec, p), "\"}"));
  }
  return absl::StrCat("module @", name, " attributes {mhlo.num_partitions = ", p,
                      " : i32, mhlo.num_replicas = 1 : i32} {\n",
                      "  func.func public @main(\n      ", absl::StrJoin(params, ",\n      "),
                      ")\n      -> (", absl::StrJoin(outs, ",\n          "), ") {\n", body,
                      "    func.return ", absl::StrJoin(result_refs, ", "), " : ",
                      absl::StrJoin(result_types, ", "), "\n  }\n}\n");
}

}  // namespace shardrt::stablehlo
