// libFuzzer target for the .npy reader. For any bytes: ParseNpy must not crash; a rejected
// input must get a one-line InvalidArgument; an accepted array must respect the limits (rank,
// bytes, bool values) and hold exactly its shape's data, serialize, parse back identical and
// serialize to the same bytes again. Any violation aborts.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "cli/npy.h"
#include "shardrt/base/limits.h"
#include "fuzz_util.h"

namespace {

[[noreturn]] void Fail(const char* what, absl::string_view input, const std::string& detail) {
  shardrt::fuzz::Fail("npy_fuzz", what, input, detail);
}

using shardrt::fuzz::OneLine;

// Whether two arrays hold the same type, shape and bytes.
bool Same(const shardrt::cli::NpyArray& a, const shardrt::cli::NpyArray& b) {
  return a.type == b.type && a.shape == b.shape && a.data == b.data;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace shardrt;
  using cli::NpyArray;
  const absl::string_view input(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<NpyArray> parsed = cli::ParseNpy(input);
  if (!parsed.ok()) {
    if (parsed.status().code() != absl::StatusCode::kInvalidArgument ||
        !OneLine(parsed.status().message())) {
      Fail("error not a one-line InvalidArgument", input, parsed.status().ToString());
    }
    return 0;
  }

  // The limits, and the data matching the shape.
  if (static_cast<int64_t>(parsed->shape.size()) > limits::kMaxRank) {
    Fail("rank above the limit", input, absl::StrCat(parsed->shape.size()));
  }
  const int64_t element_size = ElementSizeInBytes(parsed->type);
  if (element_size <= 0 || parsed->type == ElementType::kBF16) {
    Fail("accepted an unsupported type", input, std::string(ElementTypeName(parsed->type)));
  }
  // NumPy's rule: element size times the product of the nonzero dimensions within the limit.
  int64_t count = 1;
  int64_t nonzero_bytes = element_size;
  for (const int64_t dim : parsed->shape) {
    if (dim < 0) Fail("negative dimension", input, absl::StrCat(dim));
    if (dim == 0) {
      count = 0;
      continue;
    }
    if (__builtin_mul_overflow(nonzero_bytes, dim, &nonzero_bytes) ||
        nonzero_bytes > limits::kMaxArrayBytes) {
      Fail("accepted a shape above limits::kMaxArrayBytes", input, absl::StrCat(dim));
    }
    count *= dim;  // at most nonzero_bytes
  }
  if (static_cast<int64_t>(parsed->data.size()) > limits::kMaxArrayBytes ||
      static_cast<int64_t>(parsed->data.size()) != count * element_size) {
    Fail("data does not match the shape", input, absl::StrCat(parsed->data.size(), " bytes"));
  }
  if (parsed->type == ElementType::kPred) {
    for (const uint8_t byte : parsed->data) {
      if (byte > 1) Fail("accepted a bool that is neither 0 nor 1", input, absl::StrCat(byte));
    }
  }

  // The round trip.
  absl::StatusOr<std::string> bytes = cli::SerializeNpy(*parsed);
  if (!bytes.ok()) Fail("accepted array does not serialize", input, bytes.status().ToString());
  absl::StatusOr<NpyArray> again = cli::ParseNpy(*bytes);
  if (!again.ok()) Fail("serialized array does not parse", input, again.status().ToString());
  if (!Same(*again, *parsed)) Fail("round trip differs", input, absl::CHexEscape(*bytes));
  absl::StatusOr<std::string> bytes_again = cli::SerializeNpy(*again);
  if (!bytes_again.ok() || *bytes_again != *bytes) {
    Fail("serialization not stable", input, absl::CHexEscape(*bytes));
  }
  return 0;
}
