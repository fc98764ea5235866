// The persistent compile cache: compiled executables on disk, shared by every process that uses
// the same directory, so that a program compiled once starts in milliseconds afterwards.
//
// ComputationClient::Compile consults it when ComputationClientOptions::persistent_cache names a
// directory (Runtime: RuntimeOptions::compile_cache, else $SHARDRT_COMPILE_CACHE; the CLI:
// --compile-cache DIR, else $SHARDRT_COMPILE_CACHE, else $XDG_CACHE_HOME/shardrt/compile, or
// ~/.cache/shardrt/compile). Off when no directory is given.
//
// An entry's key covers everything that can change the executable: a SHA-256 of the plugin's
// file, the PJRT API version, the plugin's attributes and platform, the compile options (device
// count and assignment included), the program's bytes, the global shapes given with it, and the
// host CPU (vendor, family, model and feature flags: CPU executables are specific to them). The
// entry holds the serialized executable and every fact Compile reads at compile time (per-device
// shapes, shardings, aliasing, device order, global shapes), so a hit asks the executable nothing
// and does not read the program again.
//
// Faults cost the cache, never the run. Entries are written to a temporary file and renamed
// into place (atomic): processes compiling the same program at once each write a whole entry
// and one stays. An entry that is truncated, corrupt (its SHA-256 does not match), of another
// format or key, or that the plugin refuses to load is counted (PersistentCacheCorrupt), removed
// and compiled again. A directory that cannot be created, read or written (full, read-only)
// is counted (PersistentCacheError) and the program is compiled as without a cache. Beyond
// max_bytes the least recently used entries (by modification time, which a hit refreshes) are
// removed.
//
// Metrics: PersistentCacheHit, PersistentCacheMiss, PersistentCacheCorrupt, PersistentCacheError
// (counters), PersistentCacheLoadTime (time to read and load an entry), PersistentCacheBytes (the
// size of each entry read or written). Trace spans: "PersistentCacheLoad", "PersistentCacheStore".
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

#include "shardrt/base/export.h"

namespace shardrt {

inline constexpr absl::string_view kPersistentCacheHit = "PersistentCacheHit";
inline constexpr absl::string_view kPersistentCacheMiss = "PersistentCacheMiss";
inline constexpr absl::string_view kPersistentCacheCorrupt = "PersistentCacheCorrupt";
inline constexpr absl::string_view kPersistentCacheError = "PersistentCacheError";
inline constexpr absl::string_view kPersistentCacheLoadTime = "PersistentCacheLoadTime";
inline constexpr absl::string_view kPersistentCacheBytes = "PersistentCacheBytes";

struct SHARDRT_EXPORT PersistentCacheOptions {
  std::string directory;                   // empty: no persistent cache
  int64_t max_bytes = int64_t{4} << 30;    // total entry bytes kept (LRU eviction beyond)
};

// One entry as `shardrt cache info` lists it.
struct SHARDRT_EXPORT PersistentCacheEntryInfo {
  std::string file;  // its file name in the directory
  std::string name;  // the computation's name when stored ("" if the entry cannot be read)
  int64_t bytes = 0;
  int64_t modified_unix_seconds = 0;  // last stored or hit
  bool valid = false;  // its header and checksum are right (whether it loads is the plugin's say)
};

struct SHARDRT_EXPORT PersistentCacheInfo {
  std::string directory;
  std::vector<PersistentCacheEntryInfo> entries;  // most recently used first
  int64_t bytes = 0;                              // all entries together
};

// Lists the entries of the cache in `directory` (checking each one's header and checksum).
// Errors: NotFound if the directory does not exist; the file system's errors. Thread-safe.
[[nodiscard]] SHARDRT_EXPORT absl::StatusOr<PersistentCacheInfo> InspectPersistentCache(
    const std::string& directory);

// Removes every entry of the cache in `directory` (a regular file named <64 hex>.entry that
// starts with the entry format's magic) and its temporary files (.tmp-shardrt-<pid>-<16 hex>
// of a process that is gone, or over an hour old), leaving the directory, the plugin-digest
// memo (plugin-digests/) and anything in it that is not the cache's, even under a name that
// looks like one. Returns how many entries it removed. Errors: NotFound if the directory does not exist; the file
// system's errors. Safe while other processes use the cache (they miss and compile).
[[nodiscard]] SHARDRT_EXPORT absl::StatusOr<int64_t> ClearPersistentCache(
    const std::string& directory);

}  // namespace shardrt
