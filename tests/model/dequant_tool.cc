// dequant_tool: writes the GGUF reader's dequantization of a GGUF model's tensors to stdout, for
// test_dequant.py to compare with the gguf Python package's.
//   dequant_tool MODEL                               every tensor, in file order
//   dequant_tool MODEL --rect NAME R0 R1 C0 C1       rows [R0, R1) x columns [C0, C1) of NAME
// Each tensor is a line "NAME NUM_FLOATS\n" followed by NUM_FLOATS little-endian f32 values.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "llama/gguf.h"
#include "llama/quants.h"

namespace {

using shardrt::llama::Dequantize;
using shardrt::llama::GgufFile;
using shardrt::llama::GgufTensor;

int Fail(const std::string& message) {
  std::fprintf(stderr, "dequant_tool: %s\n", message.c_str());
  return 1;
}

// Dequantizes the rectangle and writes it as one record; false (after a message) on failure.
bool Write(const GgufFile& file, const GgufTensor& tensor, int64_t r0, int64_t r1, int64_t c0,
           int64_t c1) {
  std::vector<float> values(static_cast<size_t>((r1 - r0) * (c1 - c0)));
  const absl::Status status = Dequantize(file, tensor, r0, r1, c0, c1, absl::MakeSpan(values));
  if (!status.ok()) {
    Fail(std::string(status.message()));
    return false;
  }
  std::fprintf(stdout, "%s %zu\n", tensor.name.c_str(), values.size());
  if (std::fwrite(values.data(), sizeof(float), values.size(), stdout) != values.size()) {
    Fail("write to stdout failed");
    return false;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2 && !(argc == 8 && std::string(argv[2]) == "--rect")) {
    return Fail("usage: dequant_tool MODEL [--rect NAME R0 R1 C0 C1]");
  }
  absl::StatusOr<std::unique_ptr<GgufFile>> file = GgufFile::Open(argv[1]);
  if (!file.ok()) return Fail(std::string(file.status().message()));
  if (argc == 2) {
    for (const GgufTensor& tensor : (*file)->tensors()) {
      if (!Write(**file, tensor, 0, tensor.num_rows(), 0, tensor.row_length())) return 1;
    }
  } else {
    const GgufTensor* tensor = (*file)->Find(argv[3]);
    if (tensor == nullptr) return Fail(std::string("no tensor ") + argv[3]);
    int64_t bounds[4];
    for (int i = 0; i < 4; ++i) {
      if (!absl::SimpleAtoi(argv[4 + i], &bounds[i])) {
        return Fail(std::string("not an integer: ") + argv[4 + i]);
      }
    }
    if (!Write(**file, *tensor, bounds[0], bounds[1], bounds[2], bounds[3])) return 1;
  }
  return std::fflush(stdout) == 0 ? 0 : Fail("write to stdout failed");
}
