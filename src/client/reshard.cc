// ComputationClient's resharding: a copy of sharded data with another sharding on the same
// devices, moved on device by a one-op program (program/reshard_program.h) compiled once per
// layout pair.
#include "absl/strings/str_cat.h"
#include "shardrt/base/status_macros.h"
#include "program/reshard_program.h"
#include "shardrt/base/metrics.h"
#include "shardrt/client/computation_client.h"

namespace shardrt {

absl::StatusOr<DataPtr> ComputationClient::ReshardData(const DataPtr& data,
                                                       const Sharding& sharding) {
  static Counter* const counter = GlobalMetrics().GetCounter(kReshardData);
  counter->Add(1);
  return ReshardTo(data, sharding);
}

absl::StatusOr<DataPtr> ComputationClient::ReplicateShardedData(const DataPtr& data) {
  static Counter* const counter = GlobalMetrics().GetCounter(kReplicateShardedData);
  counter->Add(1);
  return ReshardTo(data, Sharding::Replicated());
}

absl::StatusOr<DataPtr> ComputationClient::ReshardTo(const DataPtr& data,
                                                     const Sharding& sharding) {
  if (data == nullptr) return absl::InvalidArgumentError("resharding null data");
  SHARDRT_ASSIGN_OR_RETURN(
      std::shared_ptr<const DataLayout> target,
      DataLayout::Create(data->shape(), sharding, data->layout().devices));
  return Reshard(data, std::move(target));
}

absl::StatusOr<DataPtr> ComputationClient::Reshard(const DataPtr& data,
                                                   std::shared_ptr<const DataLayout> target) {
  SHARDRT_RETURN_IF_ERROR(data->Await());
  const DataLayout& source = data->layout();
  if (source.global != target->global) {
    return absl::InvalidArgumentError(absl::StrCat("cannot reshard ", source.ToString(), " to ",
                                                   target->ToString()));
  }
  if (source.devices != target->devices) {
    return absl::InvalidArgumentError(
        absl::StrCat("resharding across device sets is not supported: ", source.ToString(),
                     " to ", target->ToString()));
  }
  const int64_t n = static_cast<int64_t>(source.devices.size());
  CompileRequest request;
  request.name = "reshard";
  SHARDRT_ASSIGN_OR_RETURN(request.program,
                           ReshardProgram(source.global, source.sharding, target->sharding, n));
  request.options.num_partitions = n;
  for (const pjrt::Device* d : source.devices) request.options.device_assignment.push_back(d->id);
  SHARDRT_ASSIGN_OR_RETURN(ComputationPtr computation, Compile(request));
  ExecuteReplicatedOptions options;
  options.non_donatable_input_indices = {0};
  SHARDRT_ASSIGN_OR_RETURN(std::vector<DataPtr> out, Execute(*computation, {&data, 1}, options));
  return out[0];
}

}  // namespace shardrt
