// NumPy .npy files: one array, a small text header and the raw element bytes.
//
// Read: format versions 1.0, 2.0 and 3.0; dtypes bool, int8..int64, uint8..uint64, float16,
// float32 and float64 in little-endian (or single-byte) order; C order, or Fortran order, which
// is transposed to row-major on read. Write: version 1.0, or 2.0 when the header needs more than
// 64 KiB; always C order, little-endian. NumPy has no standard bfloat16 dtype, so bf16 is
// refused both ways. Errors are InvalidArgument (or the file system's code for I/O) and say
// what is wrong, in one line; ReadNpy / WriteNpy put the path in front.
//
// Reading holds every file to the bounds of shardrt/base/limits.h, checked before anything is
// allocated for it: a regular file of at most limits::kMaxFileBytes, a rank of at most
// limits::kMaxRank, and at most limits::kMaxArrayBytes of element data.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "shardrt/base/element_type.h"

namespace shardrt::cli {

// One array in host memory. A plain value that owns its bytes; not thread-safe to mutate
// concurrently.
struct NpyArray {
  ElementType type = ElementType::kInvalid;
  std::vector<int64_t> shape;  // empty for a scalar
  // Row-major, little-endian; product(shape) * ElementSizeInBytes(type) bytes. bool is one
  // byte per element, 0 or 1 (ParseNpy refuses any other byte; SerializeNpy writes what it
  // is given).
  std::vector<uint8_t> data;
};

// Parses the bytes of a whole .npy file into an array that owns a copy of the element data.
// Never reads outside `bytes`, whatever they hold, and allocates nothing for the data before
// every check below has passed. Thread-safe (pure).
// Errors (InvalidArgument): bad magic, unsupported version, truncated or malformed header,
// unsupported dtype (complex, big-endian, structured, bf16-like opaque 'V2', ...), a rank above
// limits::kMaxRank ("shape has rank R, more than limits::kMaxRank (64)"), element data above
// limits::kMaxArrayBytes or overflowing (NumPy's rule: element size times the product of the
// nonzero dimensions), data size not matching the shape ("expected N bytes of data, got M"), a
// bool element that is neither 0 nor 1 ("bool element I (row-major index) is B, expected 0 or
// 1").
[[nodiscard]] absl::StatusOr<NpyArray> ParseNpy(absl::string_view bytes);

// The bytes of a .npy file holding `array` (version 1.0 unless the header needs 2.0), with the
// header padded so the data starts at a multiple of 64 bytes, as NumPy does. The caller owns
// the returned string. Thread-safe as long as `array` is not mutated meanwhile.
// Errors (InvalidArgument): bf16 or invalid type, a negative dimension, or `data` not holding
// exactly product(shape) elements.
[[nodiscard]] absl::StatusOr<std::string> SerializeNpy(const NpyArray& array);

// Reads and parses the file at `path`. Only a regular file is read (checked before opening it
// and again on the open file, so a FIFO or device never blocks or streams), its size is checked
// against limits::kMaxFileBytes before anything is allocated, and exactly that many bytes are
// read. Thread-compatible (touches only `path`).
// Errors, each with the path in front:
//   InvalidArgument  "expected a regular file, got a directory" (or a FIFO, a character
//                    device, ...); "file of N bytes exceeds limits::kMaxFileBytes (4294967296)";
//                    any error of ParseNpy.
//   Unavailable      the file changed size while being read ("expected N bytes (the file's
//                    size), got M before its end: ..." / "..., got more: ..."), or a read
//                    failed.
//   NotFound / PermissionDenied / Unavailable  the open failure, with the system's reason.
[[nodiscard]] absl::StatusOr<NpyArray> ReadNpy(const std::string& path);

// Serializes `array` and writes it to `path`, replacing any file there. Thread-compatible
// (touches only `path`). Errors: those of SerializeNpy, or the open/write failure, each with the
// path in the message. On a write failure the file may be left partly written.
[[nodiscard]] absl::Status WriteNpy(const std::string& path, const NpyArray& array);

}  // namespace shardrt::cli
