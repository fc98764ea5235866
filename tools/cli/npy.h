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
#include <memory>
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

// Serializes `array` and writes it to `path` with WriteFileReplacing (file_io.h): through a
// new temporary file in the same folder renamed over `path`, so a regular file there is
// replaced whole and a symbolic link, folder or FIFO there is refused, never written through.
// Thread-compatible (touches only `path` and its temporary file). Errors: those of
// SerializeNpy, or WriteFileReplacing's (a non-regular file at `path`, create/write/rename
// failures), each with the path in the message. On failure `path` is left as it was.
[[nodiscard]] absl::Status WriteNpy(const std::string& path, const NpyArray& array);

// A .npy file written a row at a time, for an array [rows, row_shape...] whose row count is
// known only at its end (version 1.0, or 2.0 for a header over 64 KiB; C order, little-endian).
// The rows go to a temporary file in the folder of `path` ("PATH.partial-PID-N"), which Finish
// writes the row count into and renames to `path`: until then a file at `path` stays as it was,
// and no row is held in memory. Not thread-safe; owned by one caller.
class NpyRowWriter {
 public:
  // Creates the temporary file (new, in the folder of `path`). Errors: IoError's with the
  // temporary file's path ("cannot create: No such file or directory", ...).
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<NpyRowWriter>> Create(
      const std::string& path);
  // Removes the temporary file unless Finish succeeded.
  ~NpyRowWriter();
  NpyRowWriter(const NpyRowWriter&) = delete;
  NpyRowWriter& operator=(const NpyRowWriter&) = delete;

  // Sets the element type and the shape of one row, and writes a header with room for any row
  // count. Call once, before AppendRow. Errors (with the path in front): InvalidArgument for
  // bf16, a type .npy lacks, a negative dimension, a second call; the write failure.
  [[nodiscard]] absl::Status Start(ElementType type, const std::vector<int64_t>& row_shape);
  // Appends one row: `size` bytes at `data`, exactly product(row_shape) elements, row-major,
  // little-endian. Errors (with the path in front): FailedPrecondition before Start or after
  // Finish; InvalidArgument for another size or an array whose size overflows; the write
  // failure.
  [[nodiscard]] absl::Status AppendRow(const void* data, size_t size);
  // Rows appended so far.
  int64_t rows() const { return rows_; }
  // Writes the row count into the header, closes the file and renames it to `path`, replacing
  // any file there. Errors (with the path in front): FailedPrecondition before Start or a second
  // time; the write, close or rename failure (the temporary file is then removed).
  [[nodiscard]] absl::Status Finish();

 private:
  NpyRowWriter(std::string path, std::string temp_path, int fd);
  // The header for `rows` rows, header_length_ bytes long (0: as short as it can be).
  absl::StatusOr<std::string> Header(int64_t rows) const;

  std::string path_;
  std::string temp_path_;
  int fd_ = -1;
  bool started_ = false;
  bool finished_ = false;
  std::string descr_;
  std::vector<int64_t> row_shape_;
  size_t row_bytes_ = 0;
  size_t header_length_ = 0;
  int64_t rows_ = 0;
};

}  // namespace shardrt::cli
