// LoadedExecutable: the unique owner of a compiled PJRT_LoadedExecutable, plus its signature
// read once at compile time.
//
// Compile reads everything that does not change between runs (per-device parameter and output
// shapes and types, the parameter and output shardings XLA's SPMD partitioner settled on,
// input/output aliasing, device order) into an ExecutableSignature. Execute never asks the
// executable about itself. Every call that does (the Query* methods, also used by Compile) adds
// one to the ExecutableIntrospection counter, so a caller can see it stay flat.
// Thread-safety: all const methods are thread-safe (PJRT executables are synchronized).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "shardrt/base/array_shape.h"
#include "shardrt/base/element_type.h"
#include "shardrt/base/export.h"
#include "shardrt/pjrt/buffer.h"
#include "shardrt/pjrt/client.h"
#include "shardrt/pjrt/compile_options.h"
#include "shardrt/pjrt/event.h"

namespace shardrt::pjrt {

enum class ProgramFormat {
  kMlir,  // StableHLO / MHLO, MLIR text or bytecode
  kHlo,   // serialized HloModuleProto
};

// An output that reuses (aliases) a parameter's buffer: the parameter is donated.
struct SHARDRT_EXPORT ParameterAlias {
  int64_t output_index = 0;
  int64_t parameter_index = 0;
};

// Facts about a compiled program, read once at compile time.
struct SHARDRT_EXPORT ExecutableSignature {
  int64_t num_replicas = 1;
  int64_t num_partitions = 1;
  // Per-device (shard) shapes, as every device's buffer must have them.
  std::vector<ArrayShape> parameters;
  std::vector<ArrayShape> outputs;
  // Serialized OpSharding of each parameter / output after partitioning; empty strings when the
  // program carries none (single-device programs).
  std::vector<std::string> parameter_shardings;
  std::vector<std::string> output_shardings;
  std::vector<ParameterAlias> aliases;
  // Execution order of devices: argument_lists[i] feeds devices[i].
  std::vector<const Device*> devices;
  // True when the optimized program has no cross-device communication (no collective, send or
  // receive), so its device parts never wait on each other; false when it has some or when
  // that is not known.
  bool collective_free = false;
};

struct SHARDRT_EXPORT ExecuteOptions {
  // Parameters the program aliases but that must not be donated in this call.
  absl::Span<const int64_t> non_donatable_input_indices;
  int launch_id = 0;
};

class SHARDRT_EXPORT LoadedExecutable {
 public:
  // Compiles `code` for `client`. Errors: InvalidArgument for bad options (checked before the
  // plugin sees them) and the compiler's error with its message kept (e.g. unparsable MLIR).
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<LoadedExecutable>> Compile(
      std::shared_ptr<Client> client, absl::string_view code, ProgramFormat format,
      const CompileOptions& options);
  // Loads an executable that Serialize wrote (by this plugin, same version) for `client`, with
  // the compile options it was compiled with, whose facts are `signature` (as Compile read
  // them; the devices resolved in `client`) and whose name is `name`. Asks the executable
  // nothing about itself beyond the handle every executable needs (one introspection).
  // Errors: InvalidArgument for no bytes; the plugin's (e.g. bytes of another plugin).
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<LoadedExecutable>> Deserialize(
      std::shared_ptr<Client> client, absl::string_view serialized, ExecutableSignature signature,
      std::string name);
  ~LoadedExecutable();
  LoadedExecutable(const LoadedExecutable&) = delete;
  LoadedExecutable& operator=(const LoadedExecutable&) = delete;

  // What Compile read (immutable), the client it was compiled for, the name it was given.
  const ExecutableSignature& signature() const { return signature_; }
  const std::shared_ptr<Client>& client() const { return client_; }
  const std::string& name() const { return name_; }

  // The hot path: one PJRT Execute for all devices. `argument_lists` has one row per device of
  // signature().devices (each row signature().parameters.size() handles); `output_lists` has
  // one row per device with room for signature().outputs.size() handles, which the caller then
  // owns. Only counts are checked here; the caller has checked every buffer. If
  // `device_complete_events` is not null it receives one event per device.
  // Error: InvalidArgument on wrong counts; the plugin's error.
  [[nodiscard]] absl::Status ExecuteRaw(PJRT_Buffer* const* const* argument_lists,
                                        size_t num_devices, size_t num_args,
                                        PJRT_Buffer** const* output_lists,
                                        const ExecuteOptions& options,
                                        std::vector<Event>* device_complete_events) const;

  // The executable as bytes Deserialize can load (PJRT_Executable_Serialize; CPU executables
  // are specific to the host's CPU features and the plugin's version). Error: the plugin's.
  [[nodiscard]] absl::StatusOr<std::string> Serialize() const;

  // Introspection (each call counts in ExecutableIntrospection; never on the hot path).
  // Errors: the plugin's. Device handles are borrowed from the client.
  [[nodiscard]] absl::StatusOr<int64_t> QueryNumOutputs() const;
  [[nodiscard]] absl::StatusOr<std::vector<ArrayShape>> QueryOutputShapes() const;
  [[nodiscard]] absl::StatusOr<int64_t> QueryNumPartitions() const;
  [[nodiscard]] absl::StatusOr<int64_t> QueryNumReplicas() const;
  [[nodiscard]] absl::StatusOr<std::vector<PJRT_Device*>> QueryAddressableDevices() const;
  // The optimized (partitioned) program, serialized HloModuleProtoWithConfig.
  [[nodiscard]] absl::StatusOr<std::string> QueryOptimizedProgram() const;

 private:
  LoadedExecutable() = default;
  absl::Status ReadSignature();

  std::shared_ptr<Client> client_;
  PJRT_LoadedExecutable* loaded_ = nullptr;
  PJRT_Executable* executable_ = nullptr;  // from GetExecutable, owned
  std::string name_;
  ExecutableSignature signature_;
};


}  // namespace shardrt::pjrt
