// Program text: what shardrt reads from StableHLO programs (MLIR text or bytecode), and the one
// writer of MLIR tensor types.
//
// Reading (InspectProgram, which ComputationClient::Compile runs on every program): the global
// (unpartitioned) types of the entry function @main, which the compiled executable cannot give
// back for uneven shardings; the partition and replica counts the module declares; whether it
// uses the Shardy (sdy) dialect. Reading never recurses and is linear in the text, so no input
// exhausts the stack. Writing: MlirTensorType, which the builder (builder.h) and the module
// writer (array_spec.h) use for every tensor type they write.
//
// All functions are pure and thread-safe; none keeps a reference to its arguments.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "shardrt/base/array_shape.h"
#include "shardrt/base/export.h"

namespace shardrt {

// The global types of @main's parameters and results, in order.
struct SHARDRT_EXPORT ProgramSignature {
  std::vector<ArrayShape> parameters;
  std::vector<ArrayShape> results;
  bool operator==(const ProgramSignature&) const = default;
};

struct SHARDRT_EXPORT ProgramInfo {
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
[[nodiscard]] SHARDRT_EXPORT bool IsMlirBytecode(absl::string_view program);

// Reads what is listed in ProgramInfo in one pass. Comments (`// ...` to the end of a line)
// are ignored. Every tensor type in a text program is checked: its element count and byte size
// must fit in int64 (the compiler aborts on ones that do not).
// Error: InvalidArgument naming the line and the argument or result of @main whose type is not
// a static tensor of a supported element type (or is above limits::kMaxArrayBytes), a tensor
// type anywhere whose size overflows, a declared count that is not a number that fits, an
// unclosed bracket, or brackets nested deeper than limits::kMaxProgramNesting (which would
// overflow the compiler's recursive parser). Of bytecode, only the attributes and types it
// stores in their assembly form are read (the compiler parses them as text): InvalidArgument
// for one nested deeper than limits::kMaxProgramNesting, naming it, or for a malformed section
// frame or attribute/type table.
[[nodiscard]] SHARDRT_EXPORT absl::StatusOr<ProgramInfo> InspectProgram(absl::string_view program);

// The signature of `func.func [public] @main(...) -> ...` in MLIR text: InspectProgram's
// `signature`. nullopt when `program` is bytecode or has no @main. Errors: InspectProgram's.
[[nodiscard]] SHARDRT_EXPORT absl::StatusOr<std::optional<ProgramSignature>> ReadProgramSignature(
    absl::string_view program);

// The `mhlo.num_partitions` the module declares: nullopt when it declares none, or when the
// program is bytecode. Errors: InspectProgram's.
[[nodiscard]] SHARDRT_EXPORT absl::StatusOr<std::optional<int64_t>> DeclaredPartitions(
    absl::string_view program);

// True when the program uses the Shardy dialect (an `sdy.` name anywhere, in text or in the
// string table of bytecode); such a program needs the Shardy partitioner. Never fails.
[[nodiscard]] SHARDRT_EXPORT bool UsesShardy(absl::string_view program);

// The MLIR type of an array: "tensor<10x3xf32>", "tensor<i1>" for a pred scalar, the element
// type's own MLIR name (ElementTypeMlirName) for every element type.
// Error: InvalidArgument naming the shape for an element type without an MLIR name
// (kInvalid), a negative dimension, a rank above limits::kMaxRank, or an element count or
// byte size that overflows int64.
[[nodiscard]] SHARDRT_EXPORT absl::StatusOr<std::string> MlirTensorType(const ArrayShape& shape);

}  // namespace shardrt
