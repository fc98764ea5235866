// ProgramSignature: the global (unpartitioned) types of a StableHLO program's entry function,
// read from its MLIR text. The compiled executable only knows per-device shapes; with uneven
// shardings the global shape cannot be recovered from those, so it is read from the program.
#pragma once

#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "pjrt/executable.h"

namespace shardrt {

struct ProgramSignature {
  std::vector<pjrt::ArrayShape> parameters;
  std::vector<pjrt::ArrayShape> results;
};

// Parses the signature of `func.func [public] @main(...) -> ...` in MLIR text.
// Returns nullopt when `program` is not MLIR text (e.g. bytecode) or has no @main.
// Error: InvalidArgument naming the argument or result whose type is not a static tensor of
// a supported element type.
[[nodiscard]] absl::StatusOr<std::optional<ProgramSignature>> ParseProgramSignature(
    absl::string_view program);

}  // namespace shardrt
