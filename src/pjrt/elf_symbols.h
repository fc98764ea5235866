// Reading a function's address from a shared library's ELF symbol table (.symtab, the full one
// that `nm` reads, not the dynamic one dlsym sees): how Plugin::Load reaches a plugin's internal
// absl::SetMinLogLevel (shardrt/pjrt/plugin_log.h).
#pragma once

#include <cstdint>
#include <string>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace shardrt::pjrt {

// The value (link-time address) of the first defined function symbol in the 64-bit
// little-endian ELF file at `path` whose name satisfies `matches`. When `name_contains` is not
// empty, only names holding it are offered to `matches`: they are found by one search of the
// name table rather than by reading the name of every symbol (a plugin has half a million).
// Every offset and size read from the file is checked against the file's size. Errors: NotFound when no symbol matches or
// the file has no .symtab (a stripped library); InvalidArgument when the file is not a 64-bit
// little-endian ELF file or a table lies outside it; the OS's error when it cannot be read.
// Thread-safe (the file is mapped read-only for the call).
[[nodiscard]] absl::StatusOr<uint64_t> FindElfFunction(
    const std::string& path, absl::FunctionRef<bool(absl::string_view)> matches,
    absl::string_view name_contains = "");

}  // namespace shardrt::pjrt
