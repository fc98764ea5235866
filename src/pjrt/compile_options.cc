#include "shardrt/pjrt/compile_options.h"

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "compile_options.pb.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"

namespace shardrt::pjrt {

absl::Status ValidateCompileOptions(const CompileOptions& options,
                                    const std::vector<int64_t>& device_ids) {
  if (options.num_replicas < 1 || options.num_partitions < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "compile options: num_replicas and num_partitions must be >= 1, got ",
        options.num_replicas, " and ", options.num_partitions));
  }
  const int64_t needed = options.num_replicas * options.num_partitions;
  if (needed > static_cast<int64_t>(device_ids.size())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "compile options: ", options.num_replicas, " replicas x ", options.num_partitions,
        " partitions need ", needed, " devices, but the client has ", device_ids.size()));
  }
  if (!options.device_assignment.empty()) {
    if (static_cast<int64_t>(options.device_assignment.size()) != needed) {
      return absl::InvalidArgumentError(absl::StrCat(
          "compile options: device assignment has ", options.device_assignment.size(),
          " entries, expected replicas x partitions = ", needed));
    }
    absl::flat_hash_set<int64_t> known(device_ids.begin(), device_ids.end());
    absl::flat_hash_set<int64_t> seen;
    for (int64_t id : options.device_assignment) {
      if (!known.contains(id)) {
        return absl::InvalidArgumentError(
            absl::StrCat("compile options: device assignment names unknown device id ", id));
      }
      if (!seen.insert(id).second) {
        return absl::InvalidArgumentError(
            absl::StrCat("compile options: device assignment repeats device id ", id));
      }
    }
  }
  return absl::OkStatus();
}

std::string EncodeCompileOptions(const CompileOptions& options) {
  xla::CompileOptionsProto proto;
  xla::ExecutableBuildOptionsProto* build = proto.mutable_executable_build_options();
  build->set_device_ordinal(-1);
  build->set_num_replicas(options.num_replicas);
  build->set_num_partitions(options.num_partitions);
  build->set_use_spmd_partitioning(options.num_partitions > 1);
  if (!options.device_assignment.empty()) {
    xla::DeviceAssignmentProto* da = build->mutable_device_assignment();
    da->set_replica_count(static_cast<int32_t>(options.num_replicas));
    da->set_computation_count(static_cast<int32_t>(options.num_partitions));
    // Serialized partition-major: entry p lists the devices of (replica 0..R-1, partition p).
    for (int64_t p = 0; p < options.num_partitions; ++p) {
      auto* computation = da->add_computation_devices();
      for (int64_t r = 0; r < options.num_replicas; ++r) {
        computation->add_replica_device_ids(
            options.device_assignment[r * options.num_partitions + p]);
      }
    }
  }
  using P = ShardingPropagation;
  if (options.propagation == P::kAllowToOutputs ||
      options.propagation == P::kAllowToParametersAndOutputs) {
    build->add_allow_spmd_sharding_propagation_to_output(true);
  }
  if (options.propagation == P::kAllowToParameters ||
      options.propagation == P::kAllowToParametersAndOutputs) {
    build->add_allow_spmd_sharding_propagation_to_parameters(true);
  }
  build->set_use_shardy_partitioner(options.partitioner == Partitioner::kShardy);
  for (const auto& [name, value] : options.debug_option_overrides) {
    (*proto.mutable_env_option_overrides())[name].set_string_field(value);
  }
  std::string bytes;
  {
    google::protobuf::io::StringOutputStream stream(&bytes);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);  // map entries in key order
    proto.SerializeToCodedStream(&coded);
  }
  return bytes;
}

}  // namespace shardrt::pjrt
