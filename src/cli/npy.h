// NumPy .npy files: one array, a small text header and the raw element bytes.
//
// Read: format versions 1.0, 2.0 and 3.0; dtypes bool, int8..int64, uint8..uint64, float16,
// float32 and float64 in little-endian (or single-byte) order; C order, or Fortran order, which
// is transposed to row-major on read. Write: version 1.0, or 2.0 when the header needs more than
// 64 KiB; always C order, little-endian. NumPy has no standard bfloat16 dtype, so bf16 is
// refused both ways. Errors are InvalidArgument (or the file system's code for I/O) and say
// what is wrong; ReadNpy / WriteNpy put the path in front.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "shardrt/base/element_type.h"

namespace shardrt::cli {

// One array in host memory. A plain value; not thread-safe to mutate concurrently.
struct NpyArray {
  ElementType type = ElementType::kInvalid;
  std::vector<int64_t> shape;  // empty for a scalar
  // Row-major, little-endian; product(shape) * ElementSizeInBytes(type) bytes. bool is one
  // byte per element (0 or 1 as NumPy writes them; other values are kept as they are).
  std::vector<uint8_t> data;
};

// Parses the bytes of a whole .npy file. Never reads outside `bytes`, whatever they hold.
// Errors (InvalidArgument): bad magic, unsupported version, truncated or malformed header,
// unsupported dtype (complex, big-endian, structured, bf16-like opaque 'V2', ...), data size
// not matching the shape ("expected N bytes of data, got M").
[[nodiscard]] absl::StatusOr<NpyArray> ParseNpy(absl::string_view bytes);

// The bytes of a .npy file holding `array` (version 1.0 unless the header needs 2.0), with the
// header padded so the data starts at a multiple of 64 bytes, as NumPy does.
// Errors (InvalidArgument): bf16 or invalid type, a negative dimension, or `data` not holding
// exactly product(shape) elements.
[[nodiscard]] absl::StatusOr<std::string> SerializeNpy(const NpyArray& array);

// Reads and parses the file at `path`. Errors: those of ParseNpy, or the open/read failure, each
// with the path in the message. Thread-compatible (touches only `path`).
[[nodiscard]] absl::StatusOr<NpyArray> ReadNpy(const std::string& path);

// Serializes `array` and writes it to `path`, replacing any file there. Errors: those of
// SerializeNpy, or the open/write failure, each with the path in the message. On a write
// failure the file may be left partly written.
[[nodiscard]] absl::Status WriteNpy(const std::string& path, const NpyArray& array);

}  // namespace shardrt::cli
