// Computation: a compiled program plus everything about it that does not change between runs,
// computed once at compile time: the layout (global shape, type, sharding, devices) each
// parameter must have, the layout of each output, which parameters are donated, the device
// order. Executions read these; they never ask the executable.
//
// Thread-safety: immutable after creation; shared (std::shared_ptr<const Computation>) by every
// execution, from any thread.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "shardrt/base/export.h"
#include "shardrt/data/data_layout.h"
#include "shardrt/pjrt/executable.h"

namespace shardrt {

class SHARDRT_EXPORT Computation {
 public:
  // Builds the compile-time caches of `executable`. `global_parameters` / `global_results` are
  // the program's unpartitioned shapes; when empty they are taken from the per-device shapes,
  // which is only exact when no dimension is split over several devices (else an error).
  // Errors: InvalidArgument when the global shapes, the shardings XLA settled on and the
  // per-device shapes do not agree, when a global shape cannot be derived exactly, or for a
  // sharding this runtime cannot place.
  [[nodiscard]] static absl::StatusOr<std::shared_ptr<const Computation>> Create(
      std::string name, std::unique_ptr<pjrt::LoadedExecutable> executable,
      const std::vector<ArrayShape>& global_parameters,
      const std::vector<ArrayShape>& global_results);

  // Accessors of what Create cached; no call asks the executable anything.
  const std::string& name() const { return name_; }
  const pjrt::LoadedExecutable& executable() const { return *executable_; }
  size_t num_parameters() const { return parameter_layouts_.size(); }
  size_t num_outputs() const { return output_layouts_->size(); }
  size_t num_devices() const { return devices_.size(); }
  // Execution device order: argument lists row d feeds devices()[d].
  const std::vector<const pjrt::Device*>& devices() const { return devices_; }
  // The layout argument / output i has (i < num_parameters() / num_outputs(); unchecked).
  const std::shared_ptr<const DataLayout>& parameter_layout(size_t i) const {
    return parameter_layouts_[i];
  }
  const std::shared_ptr<const DataLayout>& output_layout(size_t i) const {
    return (*output_layouts_)[i];
  }
  const DataLayoutList& output_layouts() const { return *output_layouts_; }
  // The same list, shared: the outputs of one execution hold it (not a reference per output).
  const std::shared_ptr<const DataLayoutList>& shared_output_layouts() const {
    return output_layouts_;
  }
  // True when parameter i is aliased to an output (its buffer is donated by default).
  bool donates_parameter(size_t i) const { return donated_[i]; }
  // The indices of the donated parameters, ascending.
  const std::vector<int64_t>& donated_parameters() const { return donated_list_; }

 private:
  Computation() = default;
  std::string name_;
  std::unique_ptr<pjrt::LoadedExecutable> executable_;
  std::vector<const pjrt::Device*> devices_;
  std::vector<std::shared_ptr<const DataLayout>> parameter_layouts_;
  std::shared_ptr<const DataLayoutList> output_layouts_ = std::make_shared<DataLayoutList>();
  std::vector<bool> donated_;
  std::vector<int64_t> donated_list_;
};

using ComputationPtr = std::shared_ptr<const Computation>;

}  // namespace shardrt
