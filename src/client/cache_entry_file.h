// The compile cache's entry file: its format, and bounded reads that never block or follow a
// link. Private to the client layer (PersistentCacheStore writes and reads entries with it; the
// fuzz target cache_entry_fuzz reads any bytes with it).
//
// An entry file: the magic "SHRTCC\0\1", the format version (u32), 4 zero bytes, the payload
// length (u64, at most kMaxCacheEntryBytes), the SHA-256 of the payload (32 bytes), then the
// payload: a serialized shardrt.cache.CompileCacheEntry (proto/compile_cache.proto).
// Little-endian.
//
// Thread safety: every function may be called from several threads.
#pragma once

#include <sys/stat.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "compile_cache.pb.h"

namespace shardrt {

// The largest payload an entry may hold (the format's own bound): larger entries are not
// stored, and a header stating more is refused before anything of the payload is read.
inline constexpr int64_t kMaxCacheEntryBytes = int64_t{1} << 30;
// The header's bytes: magic, version, reserved, payload length, checksum.
inline constexpr size_t kCacheEntryHeaderBytes = 8 + 4 + 4 + 8 + 32;
// The format version written in (and required of) every header; part of every key too.
inline constexpr uint32_t kCacheEntryFormatVersion = 1;

// Unavailable: "`what` `path`: strerror(errno)".
absl::Status ErrnoStatus(absl::string_view what, const std::string& path);

// Opens `path` read-only without ever blocking in open (a FIFO or a device opens at once, and
// the caller refuses it after fstat, before any read), following a symbolic link only when
// `follow`. Fills `st` from fstat. Returns the descriptor (the caller closes it), or -1 with
// errno set (ELOOP for a symbolic link that is not followed).
int OpenForReading(const std::string& path, bool follow, struct stat* st);

// Reads up to `size` bytes from `fd` into `out` (resized to what was read: less only at the end
// of the file). Errors: Unavailable naming `path`.
absl::Status ReadUpTo(int fd, const std::string& path, size_t size, std::string& out);

// The bytes of the entry file holding `entry`. Error: ResourceExhausted when its payload is
// over kMaxCacheEntryBytes, Internal when it does not serialize.
[[nodiscard]] absl::StatusOr<std::string> EncodeCacheEntry(const cache::CompileCacheEntry& entry);

// Whether the file at `path` is a regular file (not followed if a symbolic link) that starts
// with the entry magic: what the cache may delete. Never blocks.
bool StartsWithCacheEntryMagic(const std::string& path);

// The entry in the file at `path`, checked: the header is read and checked first (magic,
// version, reserved bytes, a payload of at most kMaxCacheEntryBytes that the file's size must
// match), then only the payload it states, whose SHA-256 must match and which must parse. A
// symbolic link is not followed and anything but a regular file is refused from fstat before
// any read, so at most kCacheEntryHeaderBytes + kMaxCacheEntryBytes bytes are ever read or
// allocated, whatever the file. nullopt when there is no such file. The entry's key is not
// checked here (the caller knows which it wants).
// Errors: DataLoss saying what is wrong with the file; Unavailable for open/read failures.
[[nodiscard]] absl::StatusOr<std::optional<cache::CompileCacheEntry>> ReadCacheEntryFile(
    const std::string& path);

}  // namespace shardrt
