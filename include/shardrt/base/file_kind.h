// File kinds for messages: what a path that should have been a regular file is instead.
#pragma once

#include <sys/types.h>

#include "absl/strings/string_view.h"
#include "shardrt/base/export.h"

namespace shardrt {

// The kind of file a stat(2) st_mode describes, for errors: "a regular file", "a directory",
// "a FIFO", "a symbolic link", "a socket", "a character device", "a block device", else "a
// special file". The view is of a string literal (never dangles). Pure; thread-safe.
[[nodiscard]] SHARDRT_EXPORT absl::string_view FileKind(mode_t mode);

}  // namespace shardrt
