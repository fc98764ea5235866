#include "shardrt/client/computation.h"

#include "absl/strings/str_cat.h"
#include "shardrt/base/status_macros.h"
#include "sharding/proto.h"
#include "shardrt/sharding/shape.h"

namespace shardrt {
namespace {

absl::StatusOr<Sharding> ShardingOf(const std::string& bytes) {
  if (bytes.empty()) return Sharding::Replicated();
  return DeserializeSharding(bytes);
}

// Global shape when the program gave none (MLIR bytecode): shard dims times tiles. Exact only
// when no dimension is split over several devices, so that is the only case allowed.
absl::StatusOr<ArrayShape> DeriveGlobal(const std::string& what, const ArrayShape& shard,
                                        const Sharding& sharding) {
  if (sharding.IsTiled()) {
    for (int64_t tiles : sharding.data_tile_dims()) {
      if (tiles > 1) {
        return absl::InvalidArgumentError(absl::StrCat(
            what, ": the program does not state its global shape (MLIR bytecode), and the "
            "per-device shape ", ShapeToString(shard), " under sharding ", sharding.ToString(),
            " does not tell it exactly (splits may be uneven): give the global shapes "
            "(CompileRequest::global_shapes) or compile the program's text form"));
      }
    }
  }
  return shard;
}

absl::StatusOr<std::shared_ptr<const DataLayout>> BuildLayout(
    const std::string& what, const ArrayShape& per_device, const std::string& sharding_bytes,
    const std::vector<ArrayShape>& globals, size_t index,
    const std::vector<const pjrt::Device*>& devices) {
  absl::StatusOr<Sharding> sharding = ShardingOf(sharding_bytes);
  if (!sharding.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": unsupported sharding: ", sharding.status().message()));
  }
  ArrayShape global;
  if (index < globals.size()) {
    global = globals[index];
  } else {
    SHARDRT_ASSIGN_OR_RETURN(global, DeriveGlobal(what, per_device, *sharding));
  }
  if (global.type != per_device.type) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": program says ", ElementTypeName(global.type),
                                            ", executable says ",
                                            ElementTypeName(per_device.type)));
  }
  absl::StatusOr<std::shared_ptr<const DataLayout>> layout =
      DataLayout::Create(global, *sharding, devices);
  if (!layout.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": ", layout.status().message()));
  }
  if ((*layout)->shard_dims != per_device.dims) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": global shape ", DimsToString(global.dims), " with sharding ",
        sharding->ToString(), " gives per-device shape ", DimsToString((*layout)->shard_dims),
        " but the executable expects ", DimsToString(per_device.dims)));
  }
  return layout;
}

}  // namespace

absl::StatusOr<std::shared_ptr<const Computation>> Computation::Create(
    std::string name, std::unique_ptr<pjrt::LoadedExecutable> executable,
    const std::vector<ArrayShape>& global_parameters,
    const std::vector<ArrayShape>& global_results) {
  const pjrt::ExecutableSignature& sig = executable->signature();
  if (!global_parameters.empty() && global_parameters.size() != sig.parameters.size()) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": the program has ",
                                                   global_parameters.size(),
                                                   " parameters, the executable ",
                                                   sig.parameters.size()));
  }
  if (!global_results.empty() && global_results.size() != sig.outputs.size()) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": the program has ",
                                                   global_results.size(), " results, the executable ",
                                                   sig.outputs.size()));
  }
  std::shared_ptr<Computation> c(new Computation());
  c->name_ = std::move(name);
  c->devices_ = sig.devices;
  for (size_t i = 0; i < sig.parameters.size(); ++i) {
    SHARDRT_ASSIGN_OR_RETURN(
        auto layout, BuildLayout(absl::StrCat(c->name_, " parameter ", i), sig.parameters[i],
                                 sig.parameter_shardings[i], global_parameters, i, c->devices_));
    c->parameter_layouts_.push_back(std::move(layout));
  }
  auto outputs = std::make_shared<DataLayoutList>();
  for (size_t i = 0; i < sig.outputs.size(); ++i) {
    SHARDRT_ASSIGN_OR_RETURN(
        auto layout, BuildLayout(absl::StrCat(c->name_, " output ", i), sig.outputs[i],
                                 sig.output_shardings[i], global_results, i, c->devices_));
    outputs->push_back(std::move(layout));
  }
  c->output_layouts_ = std::move(outputs);
  c->donated_.assign(sig.parameters.size(), false);
  for (const pjrt::ParameterAlias& alias : sig.aliases) {
    if (alias.parameter_index >= 0 &&
        alias.parameter_index < static_cast<int64_t>(sig.parameters.size()) &&
        !c->donated_[alias.parameter_index]) {
      c->donated_[alias.parameter_index] = true;
      c->donated_list_.push_back(alias.parameter_index);
    }
  }
  c->executable_ = std::move(executable);
  return std::shared_ptr<const Computation>(std::move(c));
}

}  // namespace shardrt
