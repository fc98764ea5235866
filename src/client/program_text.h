// ProgramText: everything shardrt reads from or writes as StableHLO text, in one place.
//
// Reading (InspectProgram, which ComputationClient::Compile runs on every program): the global
// (unpartitioned) types of the entry function @main, which the compiled executable cannot give
// back for uneven shardings; the partition and replica counts the module declares; whether it
// uses the Shardy (sdy) dialect. Writing: MLIR tensor types and the one-op reshard program.
// All functions are pure and thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "shardrt/base/array_shape.h"
#include "shardrt/sharding/sharding.h"

namespace shardrt {

struct ProgramSignature {
  std::vector<ArrayShape> parameters;
  std::vector<ArrayShape> results;
};

struct ProgramInfo {
  // False for MLIR bytecode (then only uses_shardy is read).
  bool is_text = true;
  // @main's types, when the program is text and has a @main.
  std::optional<ProgramSignature> signature;
  // mhlo.num_partitions / mhlo.num_replicas as the module declares them, if it does.
  std::optional<int64_t> declared_partitions;
  std::optional<int64_t> declared_replicas;
  // The program is written with the Shardy dialect (sdy.* attributes): GSPMD cannot read it.
  bool uses_shardy = false;
};

// True when `program` is MLIR bytecode (it starts with the magic "ML\xefR").
[[nodiscard]] bool IsMlirBytecode(absl::string_view program);

// Reads what is listed in ProgramInfo. Comments (`// ...` to the end of a line) are ignored.
// Error: InvalidArgument naming the argument or result of @main whose type is not a static
// tensor of a supported element type, or a declared count that is not a number that fits.
[[nodiscard]] absl::StatusOr<ProgramInfo> InspectProgram(absl::string_view program);

// Parses the signature of `func.func [public] @main(...) -> ...` in MLIR text.
// Returns nullopt when `program` is not MLIR text (e.g. bytecode) or has no @main.
// Error: as InspectProgram.
[[nodiscard]] absl::StatusOr<std::optional<ProgramSignature>> ParseProgramSignature(
    absl::string_view program);

// The MLIR type of an array: "tensor<10x3xf32>", "tensor<i1>" for a pred scalar.
[[nodiscard]] std::string MlirTensorType(const ArrayShape& shape);

// A program of `partitions` partitions whose @main returns its one parameter of `shape`, taken
// with sharding `from` and returned with sharding `to`: XLA moves the data between devices.
[[nodiscard]] std::string ReshardProgram(const ArrayShape& shape, const Sharding& from,
                                         const Sharding& to, int64_t partitions);

}  // namespace shardrt
