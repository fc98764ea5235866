// MlirBytecodeAsmEntries: the attributes and types an MLIR bytecode file stores in their
// textual assembly form, which the compiler's reader hands to its recursive text parser.
//
// The bytecode format (mlir/docs/BytecodeFormat.md): the magic "ML\xefR", a version (varint), a
// NUL-terminated producer string, then sections {id | aligned << 7, length (varint),
// [alignment (varint), 0xCB padding], data}. The attribute/type offset section (id 3) lists
// numAttrs and numTypes, then groups {dialect, count, (size << 1 | hasCustomEncoding)...}; the
// attribute/type section (id 2) holds the entries back to back, attributes first. An entry
// without a custom encoding is its assembly form, NUL-terminated. Only the section frames and
// these two sections are read; everything else is skipped by length. Reading is iterative,
// linear in the input and allocates at most one view per entry.
//
// Private to the program layer (program_text.cc bounds the nesting of what is returned).
// Pure and thread-safe.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace shardrt {

// One attribute or type stored in its assembly form.
struct MlirBytecodeAsmEntry {
  enum class Kind { kAttribute, kType };
  Kind kind = Kind::kAttribute;
  int64_t index = 0;       // among the attributes (or the types) of the file
  absl::string_view text;  // a view into the program, without the NUL
};

// The assembly-form entries of `program`, which must start with the bytecode magic.
// Error: InvalidArgument naming what is malformed (a varint, a section or an entry running past
// the end of its data, a section id the format does not have, a non-power-of-two alignment,
// entry sizes that do not add up to the attribute/type section, a missing NUL), as the
// compiler's reader would refuse it too.
[[nodiscard]] absl::StatusOr<std::vector<MlirBytecodeAsmEntry>> MlirBytecodeAsmEntries(
    absl::string_view program);

}  // namespace shardrt
