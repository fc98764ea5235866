// libFuzzer target for the program layer's text reader (shardrt/program/program_text.h): any
// bytes as a program.
// For any input: no crash, no unbounded work; errors are InvalidArgument; a signature that is
// read back has static shapes of supported types within the limits, and its text form (a
// program with the same @main types) reads back as the same signature. Any violation aborts.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "shardrt/program/program_text.h"
#include "shardrt/base/limits.h"

namespace {

using namespace shardrt;

// The tensor type of a shape the reader gave back: it must be writable.
std::string TypeOf(const ArrayShape& shape) {
  absl::StatusOr<std::string> type = MlirTensorType(shape);
  if (!type.ok()) {
    std::fprintf(stderr, "program_text_fuzz: a signature type cannot be written back\n");
    std::abort();
  }
  return *type;
}

// `func.func @main(%a0: T0, ...) -> (R0, ...)` for `sig`.
std::string MainOf(const ProgramSignature& sig) {
  std::string text = "func.func @main(";
  for (size_t i = 0; i < sig.parameters.size(); ++i) {
    absl::StrAppend(&text, i ? ", " : "", "%a", i, ": ", TypeOf(sig.parameters[i]));
  }
  absl::StrAppend(&text, ") -> (");
  for (size_t i = 0; i < sig.results.size(); ++i) {
    absl::StrAppend(&text, i ? ", " : "", TypeOf(sig.results[i]));
  }
  return absl::StrCat(text, ")");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view input(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<ProgramInfo> info = InspectProgram(input);
  if (!info.ok()) {
    if (info.status().code() != absl::StatusCode::kInvalidArgument) std::abort();
    return 0;
  }
  if (!info->signature.has_value()) return 0;
  for (const auto* shapes : {&info->signature->parameters, &info->signature->results}) {
    for (const ArrayShape& s : *shapes) {
      if (s.type == ElementType::kInvalid ||
          static_cast<int64_t>(s.dims.size()) > limits::kMaxRank) {
        std::abort();
      }
      for (int64_t d : s.dims) {
        if (d < 0) std::abort();
      }
    }
  }
  absl::StatusOr<ProgramInfo> again = InspectProgram(MainOf(*info->signature));
  if (!again.ok() || !again->signature.has_value() ||
      again->signature->parameters != info->signature->parameters ||
      again->signature->results != info->signature->results) {
    std::fprintf(stderr, "program_text_fuzz: the signature does not read back\n");
    std::abort();
  }
  return 0;
}
