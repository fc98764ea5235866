// libFuzzer target for the GGUF reader (models/llama/gguf.cc, quants.cc). The input becomes
// the content of an in-memory file (memfd) that GgufFile::Open maps like any model file. For any
// bytes: Open must not crash; a rejected input must get a one-line InvalidArgument naming the
// file. An accepted file must hold its tensors inside the file, without overlaps, each found by
// name; every getter must answer for every key without crashing; dequantizing the first rows
// of each tensor must succeed (or both Dequantize and CopyBlocks refuse a block whose scale is
// not finite), CopyBlocks must give their stored bytes, and the dequantized rows must agree,
// value for value, with a sub-rectangle of them. Any violation aborts.
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "llama/gguf.h"
#include "llama/quants.h"
#include "fuzz_util.h"

namespace {

using shardrt::llama::BlockLayout;
using shardrt::llama::CopyBlocks;
using shardrt::llama::Dequantize;
using shardrt::llama::GgufFile;
using shardrt::llama::GgufTensor;
using shardrt::llama::LayoutOf;

[[noreturn]] void Fail(const char* what, absl::string_view input, const std::string& detail) {
  shardrt::fuzz::Fail("gguf_fuzz", what, input, detail);
}

using shardrt::fuzz::OneLine;

// The in-memory file, made once per process and rewritten for each input; its path.
int MemoryFile() {
  static const int fd = [] {
    const int fd = ::memfd_create("gguf_fuzz", MFD_CLOEXEC);
    if (fd < 0) {
      std::perror("gguf_fuzz: memfd_create");
      std::abort();
    }
    return fd;
  }();
  return fd;
}

// Floats dequantized per tensor at most: the first rows, up to this many values.
constexpr int64_t kMaxFloats = int64_t{1} << 16;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view input(reinterpret_cast<const char*>(data), size);
  const int fd = MemoryFile();
  if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, data, size, 0) != static_cast<ssize_t>(size)) {
    std::perror("gguf_fuzz: writing the memfd");
    std::abort();
  }
  const std::string path = absl::StrCat("/proc/self/fd/", fd);
  absl::StatusOr<std::unique_ptr<GgufFile>> opened = GgufFile::Open(path);
  if (!opened.ok()) {
    const absl::Status& status = opened.status();
    if (status.code() != absl::StatusCode::kInvalidArgument || !OneLine(status.message()) ||
        !absl::StartsWith(status.message(), absl::StrCat("GGUF file ", path, ": "))) {
      Fail("error not a one-line InvalidArgument naming the file", input, status.ToString());
    }
    return 0;
  }
  const GgufFile& file = **opened;

  // Every getter on every key: each answers (a value or an error) without crashing.
  for (const std::string& key : file.MetadataKeys()) {
    if (!file.HasKey(key)) Fail("listed key not found", input, absl::CHexEscape(key));
    size_t answered = 0;
    answered += file.GetString(key).ok();
    answered += file.GetInt(key).ok();
    answered += file.GetFloat(key).ok();
    answered += file.GetBool(key).ok();
    answered += file.GetStringArray(key).ok();
    answered += file.GetIntArray(key).ok();
    if (answered > 1) Fail("a key of several types", input, absl::CHexEscape(key));
  }

  // Tensors: inside the file, disjoint, found by name; the first rows dequantize (or both
  // Dequantize and CopyBlocks refuse a block whose scale is not finite), CopyBlocks gives
  // their stored bytes, and a sub-rectangle equals the corresponding part.
  std::vector<std::pair<uint64_t, uint64_t>> extents;
  for (const GgufTensor& tensor : file.tensors()) {
    const std::string name = absl::CHexEscape(tensor.name);
    if (file.Find(tensor.name) != &tensor) Fail("Find disagrees", input, name);
    if (tensor.bytes == 0 || tensor.offset > size || tensor.bytes > size - tensor.offset) {
      Fail("tensor data outside the file", input, name);
    }
    extents.emplace_back(tensor.offset, tensor.offset + tensor.bytes);

    const int64_t block = LayoutOf(tensor.type).block_elements;
    const int64_t cols = std::min(tensor.row_length(), kMaxFloats / block * block);
    const int64_t rows = std::min(tensor.num_rows(), std::max<int64_t>(1, kMaxFloats / cols));
    std::vector<float> full(rows * cols);
    const absl::Status status = Dequantize(file, tensor, 0, rows, 0, cols, absl::MakeSpan(full));
    const bool bad_scale =
        !status.ok() && absl::StrContains(status.message(), "is not finite");
    if (!status.ok() && !bad_scale) Fail("Dequantize failed", input, status.ToString());
    const BlockLayout layout = LayoutOf(tensor.type);
    const int64_t width = cols / block * layout.block_bytes;
    const int64_t row_bytes = tensor.row_length() / block * layout.block_bytes;
    std::vector<std::byte> blocks(rows * width);
    const absl::Status copied =
        CopyBlocks(file, tensor, 0, rows, 0, cols, absl::MakeSpan(blocks));
    if (copied.ok() != status.ok()) {
      Fail("CopyBlocks and Dequantize disagree", input,
           absl::StrCat(copied.ToString(), " / ", status.ToString()));
    }
    if (bad_scale) continue;
    for (int64_t r = 0; r < rows; ++r) {
      if (std::memcmp(&blocks[r * width], file.bytes().data() + tensor.offset + r * row_bytes,
                      width) != 0) {
        Fail("CopyBlocks differs from the stored bytes", input, name);
      }
    }
    const int64_t r0 = rows / 2, c0 = cols / 2 / block * block;
    std::vector<float> part((rows - r0) * (cols - c0));
    const absl::Status part_status =
        Dequantize(file, tensor, r0, rows, c0, cols, absl::MakeSpan(part));
    if (!part_status.ok()) Fail("Dequantize of a part failed", input, part_status.ToString());
    for (int64_t r = r0; r < rows; ++r) {
      if (std::memcmp(&part[(r - r0) * (cols - c0)], &full[r * cols + c0],
                      (cols - c0) * sizeof(float)) != 0) {
        Fail("a sub-rectangle differs from the full dequantization", input, name);
      }
    }
  }
  std::sort(extents.begin(), extents.end());
  for (size_t i = 1; i < extents.size(); ++i) {
    if (extents[i - 1].second > extents[i].first) Fail("tensors overlap", input, "");
  }
  return 0;
}
