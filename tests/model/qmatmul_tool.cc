// qmatmul_tool: runs the quantized matrix kernels (llama/quant_matmul.h) on data from stdin,
// for test_qmatmul.py to compare with the gguf Python package's dequantization and NumPy.
//   qmatmul_tool --isas                          prints the paths this CPU runs, one a line
//   qmatmul_tool matmul ISA TYPE ROWS COLS S     stdin: W (ROWS rows of TYPE), then x
//                                                (S x COLS f32); stdout: y (S x ROWS f32)
//                                                three times: MatmulOrder::kFastest, kPerRow,
//                                                and kPerRow one row of x at a time
//   qmatmul_tool gather ISA TYPE ROWS COLS S     stdin: W, then S int32 ids; stdout: S x COLS
//   qmatmul_tool dequant ISA TYPE ROWS COLS 0    stdin: W; stdout: ROWS x COLS, dequantized
//                                                by quants.h (DequantizeRow; ISA unused)
// TYPE is the GGUF type number. Rows are split in three uneven ranges, as threads split them.
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "llama/quant_matmul.h"
#include "llama/quants.h"

namespace {

using namespace shardrt::llama;

int Fail(const std::string& message) {
  std::fprintf(stderr, "qmatmul_tool: %s\n", message.c_str());
  return 1;
}

template <typename T>
bool ReadAll(std::vector<T>& into) {
  return std::fread(into.data(), sizeof(T), into.size(), stdin) == into.size();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 2 && std::string(argv[1]) == "--isas") {
    for (KernelIsa isa : SupportedIsas()) std::printf("%s\n", std::string(IsaName(isa)).c_str());
    return 0;
  }
  if (argc != 7) return Fail("usage: qmatmul_tool matmul|gather ISA TYPE ROWS COLS S");
  const std::string mode = argv[1], isa_name = argv[2];
  int64_t numbers[4];
  for (int i = 0; i < 4; ++i) {
    if (!absl::SimpleAtoi(argv[3 + i], &numbers[i]) || numbers[i] < 0) {
      return Fail(std::string("not a count: ") + argv[3 + i]);
    }
  }
  const auto [type, rows, cols, s] = numbers;
  KernelIsa isa = KernelIsa::kGeneric;
  bool found = false;
  for (KernelIsa candidate : SupportedIsas()) {
    if (IsaName(candidate) == isa_name) isa = candidate, found = true;
  }
  if (!found) return Fail("this CPU has no path " + isa_name);
  QuantMatrix w{static_cast<GgufType>(type), nullptr, rows, cols, 0};
  const BlockLayout layout = LayoutOf(w.type);
  if (layout.block_elements != 0) w.row_bytes = cols / layout.block_elements * layout.block_bytes;
  if (absl::Status status = CheckQuantMatrix(w); !status.ok()) {
    return Fail(std::string(status.message()));
  }
  std::vector<std::byte> data(size_t(rows * w.row_bytes));
  if (!ReadAll(data)) return Fail("stdin ended inside W");
  w.data = data.data();
  std::vector<float> y;
  if (mode == "matmul") {
    std::vector<float> x(size_t(s * cols)), scratch(size_t(MatmulScratchFloats(w)));
    if (!ReadAll(x)) return Fail("stdin ended inside x");
    y.resize(size_t(3 * s * rows));
    const int64_t cuts[] = {0, rows / 3, rows / 3 + (rows + 1) / 3, rows};
    for (int part = 0; part < 3; ++part) {
      for (MatmulOrder order : {MatmulOrder::kFastest, MatmulOrder::kPerRow}) {
        float* out = y.data() + (order == MatmulOrder::kFastest ? 0 : s * rows);
        QuantMatmulRows(isa, w, x.data(), s, out, rows, cuts[part], cuts[part + 1],
                        scratch.data(), order);
      }
      for (int64_t i = 0; i < s; ++i) {
        QuantMatmulRows(isa, w, x.data() + i * cols, 1, y.data() + (2 * s + i) * rows, rows,
                        cuts[part], cuts[part + 1], scratch.data(), MatmulOrder::kPerRow);
      }
    }
  } else if (mode == "gather") {
    std::vector<int32_t> ids(static_cast<size_t>(s));
    if (!ReadAll(ids)) return Fail("stdin ended inside the ids");
    y.resize(size_t(s * cols));
    QuantGatherRows(isa, w, ids.data(), s, y.data());
  } else if (mode == "dequant") {
    y.resize(size_t(rows * cols));
    for (int64_t r = 0; r < rows; ++r) {
      DequantizeRow(w.type, data.data() + r * w.row_bytes, 0, cols, y.data() + r * cols);
    }
  } else {
    return Fail("unknown mode " + mode);
  }
  if (std::fwrite(y.data(), sizeof(float), y.size(), stdout) != y.size()) {
    return Fail("write to stdout failed");
  }
  return 0;
}
