// Test-only: a checked form of LoadedExecutable::ExecuteRaw for tests that drive the PJRT layer
// directly. args[d][a] is argument a for device d; each buffer's type, dimensions and device
// are queried and checked against the signature before the plugin sees them; returns owned
// outputs[d][o]. Errors: InvalidArgument naming the argument and device, expected vs got.
#pragma once

#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "shardrt/pjrt/buffer.h"
#include "shardrt/pjrt/executable.h"

namespace shardrt::testing {

inline absl::StatusOr<std::vector<std::vector<pjrt::Buffer>>> CheckedExecute(
    const pjrt::LoadedExecutable& exe, const std::vector<std::vector<const pjrt::Buffer*>>& args,
    const pjrt::ExecuteOptions& options) {
  const pjrt::ExecutableSignature& sig = exe.signature();
  const size_t num_devices = sig.devices.size();
  const size_t num_params = sig.parameters.size();
  const std::string name = absl::StrCat("Execute ", exe.name());
  if (args.size() != num_devices) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": got arguments for ", args.size(),
                                                   " devices, expected ", num_devices));
  }
  std::vector<std::vector<PJRT_Buffer*>> rows(num_devices);
  for (size_t d = 0; d < num_devices; ++d) {
    if (args[d].size() != num_params) {
      return absl::InvalidArgumentError(absl::StrCat(name, ": device ", d, " got ",
                                                     args[d].size(), " arguments, expected ",
                                                     num_params));
    }
    for (size_t a = 0; a < num_params; ++a) {
      const pjrt::Buffer* buffer = args[d][a];
      const std::string where =
          absl::StrCat(name, ": argument ", a, " on device ", sig.devices[d]->id);
      if (buffer == nullptr || buffer->empty() || buffer->IsDeleted()) {
        return absl::InvalidArgumentError(absl::StrCat(where, " is missing or deleted"));
      }
      absl::StatusOr<ElementType> type = buffer->QueryElementType();
      absl::StatusOr<std::vector<int64_t>> dims = buffer->QueryDimensions();
      if (!type.ok()) return type.status();
      if (!dims.ok()) return dims.status();
      const ArrayShape got{*type, *dims};
      if (got != sig.parameters[a]) {
        return absl::InvalidArgumentError(absl::StrCat(
            where, ": expected ", ShapeToString(sig.parameters[a]), ", got ", ShapeToString(got)));
      }
      absl::StatusOr<PJRT_Device*> device = buffer->QueryDevice();
      if (!device.ok()) return device.status();
      if (*device != sig.devices[d]->handle) {
        const pjrt::Device* actual = exe.client()->DeviceByHandle(*device);
        return absl::InvalidArgumentError(absl::StrCat(
            where, ": buffer is on device ", actual ? absl::StrCat(actual->id) : "?",
            ", expected device ", sig.devices[d]->id));
      }
      rows[d].push_back(buffer->handle());
    }
  }
  std::vector<PJRT_Buffer* const*> arg_ptrs(num_devices);
  for (size_t d = 0; d < num_devices; ++d) arg_ptrs[d] = rows[d].data();
  const size_t num_outputs = sig.outputs.size();
  std::vector<std::vector<PJRT_Buffer*>> out_rows(num_devices,
                                                  std::vector<PJRT_Buffer*>(num_outputs));
  std::vector<PJRT_Buffer**> out_ptrs(num_devices);
  for (size_t d = 0; d < num_devices; ++d) out_ptrs[d] = out_rows[d].data();
  absl::Status run = exe.ExecuteRaw(arg_ptrs.data(), num_devices, num_params, out_ptrs.data(),
                                    options, nullptr);
  if (!run.ok()) return run;
  std::vector<std::vector<pjrt::Buffer>> outputs(num_devices);
  const PJRT_Api* api = exe.client()->api();
  for (size_t d = 0; d < num_devices; ++d) {
    for (PJRT_Buffer* b : out_rows[d]) outputs[d].emplace_back(api, b);
  }
  return outputs;
}

}  // namespace shardrt::testing
