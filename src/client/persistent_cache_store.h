// PersistentCacheStore: the persistent compile cache's directory (shardrt/client/
// persistent_cache.h says what it holds and how it fails). Private to the library:
// ComputationClient::Compile is its one user, and the CLI's `cache` command uses the public
// Inspect/Clear functions.
//
// Layout of the directory:
//   <64 hex digits>.entry       one entry per key
//   .tmp-shardrt-<pid>-<16 hex> entries being written by process <pid> (renamed into place
//                               when whole)
//   plugin-digests/<64 hex>     the SHA-256 of a plugin file, named after its path, size,
//                               inode and times, so a process hashes the plugin only once
// An entry file: see cache_entry_file.h.
//
// The directory may be shared with files that are not the cache's (a user's, or other
// programs' when it is /tmp): eviction, Clear and Inspect act only on regular files (never
// following a symbolic link, never opening one that could block) named like an entry AND
// starting with the magic, and on temporary files of exactly the pattern above whose process is
// gone (or that are over an hour old). Reading an entry reads its header first and checks it,
// then reads only the payload length it states, which the file's size must match.
//
// Thread safety: every method may be called from several threads; processes coordinate through
// atomic renames only.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "client/cache_entry_file.h"
#include "client/sha256.h"
#include "compile_cache.pb.h"
#include "shardrt/client/persistent_cache.h"
#include "shardrt/pjrt/client.h"

namespace shardrt {

// What, besides the request, shapes an executable: the plugin (its file, API version,
// attributes, platform) and the host CPU.
struct CacheEnvironment {
  std::string plugin_path;  // hashed (SHA-256 of the file's bytes), not compared by name
  std::string api_version;  // "0.81"
  std::vector<std::string> attributes;  // "name=value", any order
  std::string platform;     // name and version
  std::string cpu;          // CpuDescription()

  // `client`'s plugin and platform, and this host's CPU.
  static CacheEnvironment Of(const pjrt::Client& client);
};

// The host CPU as XLA's CPU compiler sees it: vendor, family, model and feature flags of the
// first processor in /proc/cpuinfo.
std::string CpuDescription();

class PersistentCacheStore {
 public:
  // Creates the directory (and parents) if needed and computes the environment's part of every
  // key (the plugin file's SHA-256 is memoized in the directory). Errors: InvalidArgument for an
  // empty directory; the file system's (the caller then compiles without a cache).
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<PersistentCacheStore>> Open(
      const PersistentCacheOptions& options, const CacheEnvironment& environment);

  // The key of a request whose own digest (compile options, program, global shapes) is
  // `request_digest`.
  std::string Key(absl::string_view request_digest) const;

  // The entry stored under `key`, or nullopt when there is none. An entry that cannot be read
  // or is not whole, of this format and of this key is counted (PersistentCacheCorrupt),
  // removed when it is a regular file, and nullopt returned; a read error is counted
  // (PersistentCacheError). Something other than a regular file under the entry's name (a
  // FIFO, a symbolic link, a folder) is counted as corrupt without being opened for a blocking
  // read or followed. Reads at most the header and the payload length it states (bounded by
  // kMaxCacheEntryBytes). A hit refreshes the entry's modification time (LRU).
  std::optional<cache::CompileCacheEntry> Load(absl::string_view key);
  // Writes `entry` under entry.key() (temporary file, then rename), then removes the least
  // recently used entries beyond max_bytes and this cache's stale temporary files (see the
  // layout above: files that are not the cache's stay). An entry whose payload exceeds
  // kMaxCacheEntryBytes is not written. Failures are counted (PersistentCacheError).
  void Store(const cache::CompileCacheEntry& entry);
  // Whether a regular entry file for `key` exists (its contents are checked only by Load; a
  // symbolic link is not followed).
  bool Contains(absl::string_view key) const;
  // Removes the entry of `key` and counts it as corrupt (the plugin refused to load it).
  void Discard(absl::string_view key);

  const std::string& directory() const { return options_.directory; }

 private:
  explicit PersistentCacheStore(PersistentCacheOptions options)
      : options_(std::move(options)) {}
  std::string EntryPath(absl::string_view key) const;
  void Evict();

  const PersistentCacheOptions options_;
  std::string environment_;  // the environment's part of every key (a digest)
};

}  // namespace shardrt
