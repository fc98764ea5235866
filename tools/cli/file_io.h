// Reading and failing on files the CLI is given: one bounded way to read a whole file, and one
// way to write a whole file that never writes through a symbolic link.
#pragma once

#include <sys/types.h>

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace shardrt::cli {

// "path: what: reason" for the errno value `error`, with the status code it suggests
// (NotFound, PermissionDenied, else Unavailable).
[[nodiscard]] absl::Status IoError(const std::string& path, absl::string_view what, int error);

// The whole content of the regular file at `path`. The path is checked with stat before it is
// opened (a FIFO or a device is never opened, so never blocks) and the open file again with
// fstat (the path may have been replaced meanwhile). The size is held to limits::kMaxFileBytes
// before anything is allocated, then exactly that many bytes are read, and one more read must
// find the end of the file.
// Errors, each starting with the path: InvalidArgument for a file that is not regular ("expected
// a regular file, got a directory") or too large; Unavailable when the file changes size while
// it is read (or does not report its size, as procfs files); IoError's for open/read failures.
// Thread-compatible (touches only `path`).
[[nodiscard]] absl::StatusOr<std::string> ReadRegularFile(const std::string& path);

// Writes `bytes` as the file at `path`, replacing a regular file there, without ever writing
// through a symbolic link: the bytes go to a new temporary file in the same folder (created
// with O_CREAT | O_EXCL | O_NOFOLLOW, named ".<file name>.tmp-shardrt-<pid>-<16 hex>"), which is
// then renamed over `path` (atomic: a reader sees the old file or the whole new one). A path
// that exists and is not a regular file (a symbolic link, even to a regular file, a folder, a
// FIFO, a device) is refused and left as it is. On failure the temporary file is removed and
// `path` is untouched.
// Errors, each starting with the path: InvalidArgument "expected a regular file or no file,
// got a symbolic link; not replacing it" (or a directory, a FIFO, ...); IoError's for create,
// write and rename failures. Thread-compatible (touches only `path` and its temporary file).
[[nodiscard]] absl::Status WriteFileReplacing(const std::string& path, absl::string_view bytes);

// Everything on standard input up to its end, at most `limit` bytes. Errors: InvalidArgument
// when there is more ("standard input: more than N bytes"); IoError's for read failures.
// Blocks until the input ends. Not thread-safe (reads the process's stdin).
[[nodiscard]] absl::StatusOr<std::string> ReadStandardInput(int64_t limit);

}  // namespace shardrt::cli
