#include "shardrt/pjrt/executable.h"

#include <atomic>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "shardrt/base/metrics.h"
#include "shardrt/base/status_macros.h"
#include "hlo.pb.h"
#include "pjrt/call.h"

namespace shardrt::pjrt {
namespace {

// Whether `module` has no instruction that communicates across devices (HLO opcode names; the
// asynchronous forms start with the same names). A module without computations is not known to
// be free of them.
bool IsCollectiveFree(const xla::HloModuleProto& module) {
  if (module.computations().empty()) return false;
  static constexpr absl::string_view kCommunicating[] = {
      "all-reduce", "all-gather", "all-to-all", "ragged-all-to-all", "collective-permute",
      "collective-broadcast", "reduce-scatter", "send", "recv"};
  for (const xla::HloComputationProto& computation : module.computations()) {
    for (const xla::HloInstructionProto& instruction : computation.instructions()) {
      for (absl::string_view op : kCommunicating) {
        if (absl::StartsWith(instruction.opcode(), op)) return false;
      }
    }
  }
  return true;
}

Counter* IntrospectionCounter() {
  static Counter* const counter = GlobalMetrics().GetCounter(kExecutableIntrospection);
  return counter;
}

void CountIntrospection() { IntrospectionCounter()->Add(1); }

absl::StatusOr<ArrayShape> FromShapeProto(const xla::ShapeProto& shape, absl::string_view what) {
  absl::StatusOr<ElementType> type = ElementTypeFromPrimitiveType(shape.element_type());
  if (!type.ok()) {
    return absl::UnimplementedError(absl::StrCat(what, ": ", type.status().message()));
  }
  return ArrayShape{*type, {shape.dimensions().begin(), shape.dimensions().end()}};
}

std::string SerializeSharding(const xla::OpSharding& sharding) {
  std::string bytes;
  sharding.SerializeToString(&bytes);
  return bytes;
}

}  // namespace

absl::StatusOr<std::unique_ptr<LoadedExecutable>> LoadedExecutable::Compile(
    std::shared_ptr<Client> client, absl::string_view code, ProgramFormat format,
    const CompileOptions& options) {
  std::vector<int64_t> ids;
  for (const Device& d : client->addressable_devices()) ids.push_back(d.id);
  SHARDRT_RETURN_IF_ERROR(ValidateCompileOptions(options, ids));
  if (code.empty()) return absl::InvalidArgumentError("Compile: the program is empty");

  const std::string encoded = EncodeCompileOptions(options);
  std::string code_copy(code);  // PJRT_Program.code is a non-const char*
  const char* format_name = format == ProgramFormat::kMlir ? "mlir" : "hlo";
  SHARDRT_PJRT_ARGS(PJRT_Program, program);
  program.code = code_copy.data();
  program.code_size = code_copy.size();
  program.format = format_name;
  program.format_size = absl::string_view(format_name).size();

  const PJRT_Api* api = client->api();
  SHARDRT_PJRT_ARGS(PJRT_Client_Compile_Args, args);
  args.client = client->handle();
  args.program = &program;
  args.compile_options = encoded.data();
  args.compile_options_size = encoded.size();
  SHARDRT_RETURN_IF_ERROR(SHARDRT_PJRT_CALL(api, PJRT_Client_Compile, &args));

  std::unique_ptr<LoadedExecutable> exe(new LoadedExecutable());
  exe->client_ = std::move(client);
  exe->loaded_ = args.executable;
  SHARDRT_RETURN_IF_ERROR(exe->ReadSignature());
  return exe;
}

absl::StatusOr<std::unique_ptr<LoadedExecutable>> LoadedExecutable::Deserialize(
    std::shared_ptr<Client> client, absl::string_view serialized, ExecutableSignature signature,
    std::string name) {
  if (serialized.empty()) return absl::InvalidArgumentError("Deserialize: no bytes");
  const PJRT_Api* api = client->api();
  SHARDRT_PJRT_ARGS(PJRT_Executable_DeserializeAndLoad_Args, args);
  args.client = client->handle();
  args.serialized_executable = serialized.data();
  args.serialized_executable_size = serialized.size();
  SHARDRT_RETURN_IF_ERROR(SHARDRT_PJRT_CALL(api, PJRT_Executable_DeserializeAndLoad, &args));

  std::unique_ptr<LoadedExecutable> exe(new LoadedExecutable());
  exe->client_ = std::move(client);
  exe->loaded_ = args.loaded_executable;
  SHARDRT_PJRT_ARGS(PJRT_LoadedExecutable_GetExecutable_Args, get);
  get.loaded_executable = exe->loaded_;
  CountIntrospection();
  SHARDRT_RETURN_IF_ERROR(SHARDRT_PJRT_CALL(api, PJRT_LoadedExecutable_GetExecutable, &get));
  exe->executable_ = get.executable;
  exe->signature_ = std::move(signature);
  exe->name_ = std::move(name);
  return exe;
}

absl::StatusOr<std::string> LoadedExecutable::Serialize() const {
  const PJRT_Api* api = client_->api();
  SHARDRT_PJRT_ARGS(PJRT_Executable_Serialize_Args, args);
  args.executable = executable_;
  SHARDRT_RETURN_IF_ERROR(SHARDRT_PJRT_CALL(api, PJRT_Executable_Serialize, &args));
  std::string bytes(args.serialized_bytes, args.serialized_bytes_size);
  if (args.serialized_executable_deleter != nullptr) {
    args.serialized_executable_deleter(args.serialized_executable);
  }
  return bytes;
}

LoadedExecutable::~LoadedExecutable() {
  const PJRT_Api* api = client_ ? client_->api() : nullptr;
  if (api == nullptr) return;
  if (executable_ != nullptr) {
    SHARDRT_PJRT_ARGS(PJRT_Executable_Destroy_Args, args);
    args.executable = executable_;
    SHARDRT_PJRT_DESTROY(api, PJRT_Executable_Destroy, &args);
  }
  if (loaded_ != nullptr) {
    SHARDRT_PJRT_ARGS(PJRT_LoadedExecutable_Destroy_Args, args);
    args.executable = loaded_;
    SHARDRT_PJRT_DESTROY(api, PJRT_LoadedExecutable_Destroy, &args);
  }
}

absl::Status LoadedExecutable::ReadSignature() {
  const PJRT_Api* api = client_->api();
  SHARDRT_PJRT_ARGS(PJRT_LoadedExecutable_GetExecutable_Args, get);
  get.loaded_executable = loaded_;
  CountIntrospection();
  SHARDRT_RETURN_IF_ERROR(SHARDRT_PJRT_CALL(api, PJRT_LoadedExecutable_GetExecutable, &get));
  executable_ = get.executable;

  SHARDRT_PJRT_ARGS(PJRT_Executable_Name_Args, name);
  name.executable = executable_;
  CountIntrospection();
  SHARDRT_RETURN_IF_ERROR(SHARDRT_PJRT_CALL(api, PJRT_Executable_Name, &name));
  name_.assign(name.executable_name, name.executable_name_size);

  SHARDRT_ASSIGN_OR_RETURN(signature_.num_replicas, QueryNumReplicas());
  SHARDRT_ASSIGN_OR_RETURN(signature_.num_partitions, QueryNumPartitions());
  SHARDRT_ASSIGN_OR_RETURN(std::vector<PJRT_Device*> devices, QueryAddressableDevices());
  for (PJRT_Device* handle : devices) {
    const Device* device = client_->DeviceByHandle(handle);
    if (device == nullptr) {
      return absl::InternalError("compiled executable names a device the client does not list");
    }
    signature_.devices.push_back(device);
  }

  // Per-device parameter and output shapes, shardings and aliasing come from the optimized
  // (partitioned) program.
  SHARDRT_ASSIGN_OR_RETURN(std::string optimized, QueryOptimizedProgram());
  xla::HloModuleProtoWithConfig with_config;
  if (!with_config.ParseFromString(optimized) || !with_config.has_hlo_module()) {
    return absl::InternalError("could not parse the executable's optimized program");
  }
  const xla::HloModuleProto& module = with_config.hlo_module();
  const xla::ProgramShapeProto& shape = module.host_program_shape();
  for (int i = 0; i < shape.parameters_size(); ++i) {
    SHARDRT_ASSIGN_OR_RETURN(ArrayShape p,
                             FromShapeProto(shape.parameters(i), absl::StrCat("parameter ", i)));
    signature_.parameters.push_back(std::move(p));
  }
  if (shape.result().element_type() == 13 /* TUPLE */) {
    for (int i = 0; i < shape.result().tuple_shapes_size(); ++i) {
      SHARDRT_ASSIGN_OR_RETURN(ArrayShape o, FromShapeProto(shape.result().tuple_shapes(i),
                                                            absl::StrCat("output ", i)));
      signature_.outputs.push_back(std::move(o));
    }
  } else {
    SHARDRT_ASSIGN_OR_RETURN(ArrayShape o, FromShapeProto(shape.result(), "output 0"));
    signature_.outputs.push_back(std::move(o));
  }
  // Cross-check with what PJRT reports for outputs.
  SHARDRT_ASSIGN_OR_RETURN(std::vector<ArrayShape> outputs, QueryOutputShapes());
  if (outputs != signature_.outputs) {
    return absl::InternalError(absl::StrCat("executable ", name_,
                                            ": optimized program and PJRT disagree on outputs"));
  }

  signature_.parameter_shardings.resize(signature_.parameters.size());
  for (int i = 0; i < module.spmd_parameters_shardings_size() &&
                  i < static_cast<int>(signature_.parameters.size());
       ++i) {
    signature_.parameter_shardings[i] = SerializeSharding(module.spmd_parameters_shardings(i));
  }
  signature_.output_shardings.resize(signature_.outputs.size());
  if (module.has_spmd_output_sharding()) {
    const xla::OpSharding& out = module.spmd_output_sharding();
    if (out.type() == xla::OpSharding::TUPLE) {
      for (int i = 0; i < out.tuple_shardings_size() &&
                      i < static_cast<int>(signature_.outputs.size());
           ++i) {
        signature_.output_shardings[i] = SerializeSharding(out.tuple_shardings(i));
      }
    } else if (!signature_.outputs.empty()) {
      signature_.output_shardings[0] = SerializeSharding(out);
    }
  }
  signature_.collective_free = IsCollectiveFree(module);
  for (const auto& entry : module.input_output_alias().entries()) {
    int64_t output = entry.output_shape_index().empty() ? 0 : entry.output_shape_index(0);
    signature_.aliases.push_back({output, entry.parameter_number()});
  }
  return absl::OkStatus();
}

absl::Status LoadedExecutable::ExecuteRaw(PJRT_Buffer* const* const* argument_lists,
                                          size_t num_devices, size_t num_args,
                                          PJRT_Buffer** const* output_lists,
                                          const ExecuteOptions& options,
                                          std::vector<Event>* device_complete_events) const {
  if (num_devices != signature_.devices.size()) {
    return absl::InvalidArgumentError(absl::StrCat("Execute ", name_, ": got argument lists for ",
                                                   num_devices, " devices, expected ",
                                                   signature_.devices.size()));
  }
  if (num_args != signature_.parameters.size()) {
    return absl::InvalidArgumentError(absl::StrCat("Execute ", name_, ": got ", num_args,
                                                   " arguments, expected ",
                                                   signature_.parameters.size()));
  }
  for (int64_t index : options.non_donatable_input_indices) {
    if (index < 0 || index >= static_cast<int64_t>(num_args)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "Execute ", name_, ": non-donatable input index ", index, " out of range [0, ",
          num_args, ")"));
    }
  }
  const PJRT_Api* api = client_->api();
  SHARDRT_PJRT_ARGS(PJRT_ExecuteOptions, exec_options);
  exec_options.launch_id = options.launch_id;
  exec_options.non_donatable_input_indices = options.non_donatable_input_indices.data();
  exec_options.num_non_donatable_input_indices = options.non_donatable_input_indices.size();

  std::vector<PJRT_Event*> events;
  SHARDRT_PJRT_ARGS(PJRT_LoadedExecutable_Execute_Args, args);
  args.executable = loaded_;
  args.options = &exec_options;
  args.argument_lists = argument_lists;
  args.num_devices = num_devices;
  args.num_args = num_args;
  args.output_lists = output_lists;
  if (device_complete_events != nullptr) {
    events.assign(num_devices, nullptr);
    args.device_complete_events = events.data();
  }
  SHARDRT_RETURN_IF_ERROR(SHARDRT_PJRT_CALL(api, PJRT_LoadedExecutable_Execute, &args));
  if (device_complete_events != nullptr) {
    device_complete_events->clear();
    for (PJRT_Event* e : events) device_complete_events->emplace_back(api, e);
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> LoadedExecutable::QueryNumOutputs() const {
  CountIntrospection();
  SHARDRT_PJRT_ARGS(PJRT_Executable_NumOutputs_Args, args);
  args.executable = executable_;
  SHARDRT_RETURN_IF_ERROR(SHARDRT_PJRT_CALL(client_->api(), PJRT_Executable_NumOutputs, &args));
  return static_cast<int64_t>(args.num_outputs);
}

absl::StatusOr<std::vector<ArrayShape>> LoadedExecutable::QueryOutputShapes() const {
  const PJRT_Api* api = client_->api();
  CountIntrospection();
  SHARDRT_PJRT_ARGS(PJRT_Executable_OutputDimensions_Args, dims);
  dims.executable = executable_;
  SHARDRT_RETURN_IF_ERROR(SHARDRT_PJRT_CALL(api, PJRT_Executable_OutputDimensions, &dims));
  CountIntrospection();
  SHARDRT_PJRT_ARGS(PJRT_Executable_OutputElementTypes_Args, types);
  types.executable = executable_;
  SHARDRT_RETURN_IF_ERROR(SHARDRT_PJRT_CALL(api, PJRT_Executable_OutputElementTypes, &types));
  if (types.num_output_types != dims.num_outputs) {
    return absl::InternalError("PJRT reports different output counts for types and dimensions");
  }
  std::vector<ArrayShape> shapes;
  const int64_t* next = dims.dims;
  for (size_t i = 0; i < dims.num_outputs; ++i) {
    SHARDRT_ASSIGN_OR_RETURN(ElementType type, internal::FromPjrtType(types.output_types[i]));
    shapes.push_back({type, {next, next + dims.dim_sizes[i]}});
    next += dims.dim_sizes[i];
  }
  return shapes;
}

absl::StatusOr<int64_t> LoadedExecutable::QueryNumPartitions() const {
  CountIntrospection();
  SHARDRT_PJRT_ARGS(PJRT_Executable_NumPartitions_Args, args);
  args.executable = executable_;
  SHARDRT_RETURN_IF_ERROR(
      SHARDRT_PJRT_CALL(client_->api(), PJRT_Executable_NumPartitions, &args));
  return static_cast<int64_t>(args.num_partitions);
}

absl::StatusOr<int64_t> LoadedExecutable::QueryNumReplicas() const {
  CountIntrospection();
  SHARDRT_PJRT_ARGS(PJRT_Executable_NumReplicas_Args, args);
  args.executable = executable_;
  SHARDRT_RETURN_IF_ERROR(SHARDRT_PJRT_CALL(client_->api(), PJRT_Executable_NumReplicas, &args));
  return static_cast<int64_t>(args.num_replicas);
}

absl::StatusOr<std::vector<PJRT_Device*>> LoadedExecutable::QueryAddressableDevices() const {
  CountIntrospection();
  SHARDRT_PJRT_ARGS(PJRT_LoadedExecutable_AddressableDevices_Args, args);
  args.executable = loaded_;
  SHARDRT_RETURN_IF_ERROR(
      SHARDRT_PJRT_CALL(client_->api(), PJRT_LoadedExecutable_AddressableDevices, &args));
  return std::vector<PJRT_Device*>(args.addressable_devices,
                                   args.addressable_devices + args.num_addressable_devices);
}

absl::StatusOr<std::string> LoadedExecutable::QueryOptimizedProgram() const {
  const PJRT_Api* api = client_->api();
  CountIntrospection();
  SHARDRT_PJRT_ARGS(PJRT_Program, program);
  SHARDRT_PJRT_ARGS(PJRT_Executable_OptimizedProgram_Args, args);
  args.executable = executable_;
  args.program = &program;
  SHARDRT_RETURN_IF_ERROR(SHARDRT_PJRT_CALL(api, PJRT_Executable_OptimizedProgram, &args));
  std::string code(program.code_size, '\0');
  program.code = code.data();
  SHARDRT_RETURN_IF_ERROR(SHARDRT_PJRT_CALL(api, PJRT_Executable_OptimizedProgram, &args));
  code.resize(program.code_size);
  return code;
}

}  // namespace shardrt::pjrt
