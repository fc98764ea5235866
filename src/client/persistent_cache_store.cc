#include "client/persistent_cache_store.h"

#include "client/cache_entry_file.h"
#include "client/sha256.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <system_error>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "shardrt/base/file_kind.h"
#include "shardrt/base/limits.h"
#include "shardrt/base/metrics.h"
#include "shardrt/base/status_macros.h"
#include "shardrt/base/trace.h"
#include "shardrt/pjrt/named_value.h"

namespace shardrt {
namespace {

namespace fs = std::filesystem;

constexpr absl::string_view kEntrySuffix = ".entry";
// Temporary files are ".tmp-shardrt-<pid>-<16 hex digits>": a name no other program is likely
// to use, with the writer's process id so that a stale one can be told from one being written.
constexpr absl::string_view kTempPrefix = ".tmp-shardrt-";
// A temporary file this old belongs to a writer that died, even if its process id is reused.
constexpr auto kStaleTempAge = std::chrono::hours(1);

void Count(absl::string_view name) { GlobalMetrics().GetCounter(name)->Add(1); }

// The whole file at `path` (a symbolic link followed) if it is a regular file of at most `max`
// bytes; nullopt if absent. A FIFO or device is refused from fstat, never read.
// Errors: DataLoss for a file that is not regular or too large; Unavailable for the rest.
absl::StatusOr<std::optional<std::string>> ReadWhole(const std::string& path, int64_t max) {
  struct stat st;
  const int fd = OpenForReading(path, /*follow=*/true, &st);
  if (fd < 0) {
    if (errno == ENOENT) return std::optional<std::string>();
    return ErrnoStatus("open", path);
  }
  absl::Cleanup close_fd = [fd] { ::close(fd); };
  if (!S_ISREG(st.st_mode) || st.st_size > max) {
    return absl::DataLossError(absl::StrCat(path, ": expected a regular file of at most ", max,
                                            " bytes, got ", FileKind(st.st_mode), " of ",
                                            st.st_size, " bytes"));
  }
  std::string bytes;
  SHARDRT_RETURN_IF_ERROR(ReadUpTo(fd, path, static_cast<size_t>(st.st_size), bytes));
  return std::optional<std::string>(std::move(bytes));
}

// A process id that no longer runs (kill(pid, 0) finds no such process). EPERM: it runs, as
// another user.
bool ProcessIsGone(int64_t pid) {
  if (pid <= 0 || pid > std::numeric_limits<pid_t>::max()) return true;
  return ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH;
}

// The process id of a temporary file of this cache, from its name: exactly
// ".tmp-shardrt-<decimal pid>-<16 lowercase hex digits>"; nullopt for any other name.
std::optional<int64_t> TempFilePid(absl::string_view name) {
  if (!absl::ConsumePrefix(&name, kTempPrefix)) return std::nullopt;
  const size_t dash = name.find('-');
  if (dash == absl::string_view::npos || dash == 0 || dash > 10) return std::nullopt;
  const absl::string_view pid = name.substr(0, dash), hex = name.substr(dash + 1);
  if (!std::all_of(pid.begin(), pid.end(), absl::ascii_isdigit) || hex.size() != 16 ||
      !std::all_of(hex.begin(), hex.end(),
                   [](char c) { return absl::ascii_isdigit(c) || (c >= 'a' && c <= 'f'); })) {
    return std::nullopt;
  }
  int64_t value = 0;
  if (!absl::SimpleAtoi(pid, &value)) return std::nullopt;
  return value;
}

// Whether `name` in `dir` is a temporary file this cache left behind: of the exact pattern, a
// regular file (not followed if a symbolic link), and its process gone or the file older than
// kStaleTempAge. Files being written by a running process stay.
bool IsStaleTempFile(const std::string& dir, absl::string_view name) {
  const std::optional<int64_t> pid = TempFilePid(name);
  if (!pid.has_value()) return false;
  struct stat st;
  if (::lstat(absl::StrCat(dir, "/", name).c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
    return false;
  }
  const auto age = std::chrono::system_clock::now() -
                   std::chrono::system_clock::from_time_t(st.st_mtim.tv_sec);
  return ProcessIsGone(*pid) || age > kStaleTempAge;
}

// Writes `bytes` to a new temporary file in `dir` and renames it to `path` (atomic).
absl::Status WriteAtomically(const std::string& dir, const std::string& path,
                             absl::string_view bytes) {
  static thread_local std::mt19937_64 rng(std::random_device{}());
  const std::string tmp = absl::StrCat(dir, "/", kTempPrefix, ::getpid(), "-",
                                       absl::Hex(rng(), absl::kZeroPad16));
  const int fd =
      ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoStatus("create", tmp);
  bool keep = false;
  absl::Cleanup cleanup = [&] {
    if (!keep) ::unlink(tmp.c_str());
  };
  {
    absl::Cleanup close_fd = [fd] { ::close(fd); };
    size_t done = 0;
    while (done < bytes.size()) {
      const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return ErrnoStatus("write", tmp);
      done += static_cast<size_t>(n);
    }
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) return ErrnoStatus("rename to", path);
  keep = true;
  return absl::OkStatus();
}

}  // namespace

std::string CpuDescription() {
  std::ifstream in("/proc/cpuinfo");
  std::string line, out;
  while (std::getline(in, line)) {
    if (line.empty()) break;  // the end of the first processor
    for (absl::string_view key : {"vendor_id", "cpu family", "model", "flags"}) {
      std::vector<absl::string_view> kv = absl::StrSplit(line, absl::MaxSplits(':', 1));
      if (kv.size() == 2 && absl::StripAsciiWhitespace(kv[0]) == key) {
        absl::StrAppend(&out, key, "=", absl::StripAsciiWhitespace(kv[1]), "\n");
      }
    }
  }
  return out;
}

namespace {

// The SHA-256 of the file at `path`, memoized under `memo_dir` by the file's identity (path,
// size, inode, device, modification and change times).
absl::StatusOr<std::string> FileDigest(const std::string& path, const std::string& memo_dir) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return ErrnoStatus("stat", path);
  const std::string identity = HexDigest(
      Sha256()
          .Field(path)
          .Field(absl::StrCat(st.st_size, ":", st.st_ino, ":", st.st_dev, ":", st.st_mtim.tv_sec,
                              ".", st.st_mtim.tv_nsec, ":", st.st_ctim.tv_sec, ".",
                              st.st_ctim.tv_nsec))
          .Finish());
  const std::string memo = absl::StrCat(memo_dir, "/", identity);
  // A memo that cannot be read (not a regular file, too long) costs a hash, like a missing one.
  absl::StatusOr<std::optional<std::string>> read_memo = ReadWhole(memo, 64);
  std::optional<std::string> known;
  if (read_memo.ok()) known = *std::move(read_memo);
  if (known.has_value() && known->size() == 64 &&
      std::all_of(known->begin(), known->end(), [](char c) { return absl::ascii_isxdigit(c); })) {
    return *known;
  }
  SHARDRT_ASSIGN_OR_RETURN(std::optional<std::string> bytes,
                           ReadWhole(path, limits::kMaxFileBytes));
  if (!bytes.has_value()) return absl::NotFoundError(absl::StrCat("no plugin file ", path));
  const std::string digest = HexDigest(Sha256().Update(*bytes).Finish());
  std::error_code ec;
  fs::create_directories(memo_dir, ec);
  if (!ec) (void)WriteAtomically(memo_dir, memo, digest);  // a memo that fails costs a hash
  return digest;
}

// "<64 lowercase hex digits>.entry".
bool IsEntryName(absl::string_view name) {
  return name.size() == 64 + kEntrySuffix.size() && absl::EndsWith(name, kEntrySuffix) &&
         std::all_of(name.begin(), name.begin() + 64,
                     [](char c) { return absl::ascii_isdigit(c) || (c >= 'a' && c <= 'f'); });
}

}  // namespace

CacheEnvironment CacheEnvironment::Of(const pjrt::Client& client) {
  const pjrt::Plugin& plugin = *client.plugin();
  CacheEnvironment env;
  env.plugin_path = plugin.path();
  env.api_version = absl::StrCat(plugin.api_major(), ".", plugin.api_minor());
  for (const pjrt::NamedValue& v : plugin.attributes()) {
    env.attributes.push_back(NamedValueToString(v));
  }
  env.platform = absl::StrCat(client.platform_name(), " ", client.platform_version());
  env.cpu = CpuDescription();
  return env;
}

absl::StatusOr<std::unique_ptr<PersistentCacheStore>> PersistentCacheStore::Open(
    const PersistentCacheOptions& options, const CacheEnvironment& environment) {
  if (options.directory.empty()) {
    return absl::InvalidArgumentError("persistent compile cache: no directory");
  }
  std::error_code ec;
  fs::create_directories(options.directory, ec);
  if (ec || !fs::is_directory(options.directory)) {
    return absl::UnavailableError(absl::StrCat("persistent compile cache: cannot use '",
                                               options.directory, "' as a directory",
                                               ec ? absl::StrCat(": ", ec.message()) : ""));
  }
  std::unique_ptr<PersistentCacheStore> store(new PersistentCacheStore(options));
  SHARDRT_ASSIGN_OR_RETURN(
      std::string plugin_digest,
      FileDigest(environment.plugin_path, options.directory + "/plugin-digests"));
  Sha256 env;
  env.Field("shardrt persistent compile cache").Field(absl::StrCat(kCacheEntryFormatVersion));
  env.Field(plugin_digest).Field(environment.api_version);
  std::vector<std::string> attributes = environment.attributes;
  std::sort(attributes.begin(), attributes.end());
  for (const std::string& a : attributes) env.Field(a);
  env.Field(environment.platform).Field(environment.cpu);
  store->environment_ = env.Finish();
  return store;
}

std::string PersistentCacheStore::Key(absl::string_view request_digest) const {
  return Sha256().Field(environment_).Field(request_digest).Finish();
}

std::string PersistentCacheStore::EntryPath(absl::string_view key) const {
  return absl::StrCat(options_.directory, "/", HexDigest(key), kEntrySuffix);
}

std::optional<cache::CompileCacheEntry> PersistentCacheStore::Load(absl::string_view key) {
  const std::string path = EntryPath(key);
  absl::StatusOr<std::optional<cache::CompileCacheEntry>> read = ReadCacheEntryFile(path);
  if (read.ok() && !read->has_value()) return std::nullopt;
  if (!read.ok() && read.status().code() != absl::StatusCode::kDataLoss) {
    Count(kPersistentCacheError);
    return std::nullopt;
  }
  if (!read.ok() || (*read)->key() != key) {  // damaged, or of another key
    Count(kPersistentCacheCorrupt);
    // Only a regular file under the entry's own name is removed (Store replaces it anyway); a
    // FIFO, link or folder there is left to whoever made it.
    struct stat st;
    if (::lstat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode)) ::unlink(path.c_str());
    return std::nullopt;
  }
  GlobalMetrics().GetMetric(kPersistentCacheBytes, MetricRepr::kBytes)->AddSample(
      double(kCacheEntryHeaderBytes + (*read)->ByteSizeLong()));
  ::utimensat(AT_FDCWD, path.c_str(), nullptr, AT_SYMLINK_NOFOLLOW);  // most recently used
  return **std::move(read);
}

bool PersistentCacheStore::Contains(absl::string_view key) const {
  struct stat st;
  return ::lstat(EntryPath(key).c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

void PersistentCacheStore::Discard(absl::string_view key) {
  Count(kPersistentCacheCorrupt);
  const std::string path = EntryPath(key);
  struct stat st;
  if (::lstat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode)) ::unlink(path.c_str());
}

void PersistentCacheStore::Store(const cache::CompileCacheEntry& entry) {
  TraceSpan span("PersistentCacheStore", "client");
  absl::StatusOr<std::string> file = EncodeCacheEntry(entry);
  if (!file.ok()) {
    Count(kPersistentCacheError);
    return;
  }
  if (!WriteAtomically(options_.directory, EntryPath(entry.key()), *file).ok()) {
    Count(kPersistentCacheError);
    return;
  }
  GlobalMetrics().GetMetric(kPersistentCacheBytes, MetricRepr::kBytes)->AddSample(
      double(file->size()));
  Evict();
}

void PersistentCacheStore::Evict() {
  struct Item {
    std::string path;
    int64_t bytes;
    int64_t time_ns;
  };
  std::vector<Item> items;
  int64_t total = 0;
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(options_.directory, ec)) {
    const std::string name = e.path().filename().string();
    const std::string path = e.path().string();
    if (IsStaleTempFile(options_.directory, name)) {
      ::unlink(path.c_str());
      continue;
    }
    if (!IsEntryName(name)) continue;
    struct stat st;
    // Only the cache's own entries count and may go: regular files that start with the magic.
    if (::lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode) ||
        !StartsWithCacheEntryMagic(path)) {
      continue;
    }
    items.push_back({path, int64_t(st.st_size),
                     int64_t(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec});
    total += int64_t(st.st_size);
  }
  if (ec || total <= options_.max_bytes) return;
  std::sort(items.begin(), items.end(),
            [](const Item& a, const Item& b) { return a.time_ns < b.time_ns; });
  for (const Item& item : items) {
    if (total <= options_.max_bytes) break;
    if (::unlink(item.path.c_str()) == 0) total -= item.bytes;
  }
}

absl::StatusOr<PersistentCacheInfo> InspectPersistentCache(const std::string& directory) {
  std::error_code ec;
  if (!fs::is_directory(directory, ec)) {
    return absl::NotFoundError(absl::StrCat("no compile cache directory '", directory, "'"));
  }
  PersistentCacheInfo info;
  info.directory = directory;
  for (const fs::directory_entry& e : fs::directory_iterator(directory, ec)) {
    const std::string name = e.path().filename().string();
    if (!IsEntryName(name)) continue;
    PersistentCacheEntryInfo item;
    item.file = name;
    struct stat st;
    if (::lstat(e.path().c_str(), &st) != 0) continue;  // removed meanwhile
    item.modified_unix_seconds = st.st_mtim.tv_sec;
    // Only a regular file has bytes of its own to count (a folder's size is not the cache's).
    item.bytes = S_ISREG(st.st_mode) ? int64_t(st.st_size) : 0;
    absl::StatusOr<std::optional<cache::CompileCacheEntry>> entry =
        ReadCacheEntryFile(e.path().string());
    if (entry.ok() && entry->has_value() &&
        HexDigest((*entry)->key()) + std::string(kEntrySuffix) == name) {
      item.valid = true;
      item.name = (*entry)->name();
    }
    info.bytes += item.bytes;
    info.entries.push_back(std::move(item));
  }
  if (ec) {
    return absl::UnavailableError(absl::StrCat("reading '", directory, "': ", ec.message()));
  }
  std::sort(info.entries.begin(), info.entries.end(),
            [](const PersistentCacheEntryInfo& a, const PersistentCacheEntryInfo& b) {
              return a.modified_unix_seconds > b.modified_unix_seconds;
            });
  return info;
}

absl::StatusOr<int64_t> ClearPersistentCache(const std::string& directory) {
  std::error_code ec;
  if (!fs::is_directory(directory, ec)) {
    return absl::NotFoundError(absl::StrCat("no compile cache directory '", directory, "'"));
  }
  int64_t removed = 0;
  std::vector<std::string> entries, temps;
  for (const fs::directory_entry& e : fs::directory_iterator(directory, ec)) {
    const std::string name = e.path().filename().string();
    if (IsEntryName(name)) entries.push_back(e.path().string());
    if (IsStaleTempFile(directory, name)) temps.push_back(e.path().string());
  }
  if (ec) {
    return absl::UnavailableError(absl::StrCat("reading '", directory, "': ", ec.message()));
  }
  // An entry-named file is the cache's only if it is a regular file that starts with the magic
  // (a damaged entry of this cache still does); anything else there stays.
  for (const std::string& p : entries) {
    if (StartsWithCacheEntryMagic(p) && ::unlink(p.c_str()) == 0) ++removed;
  }
  for (const std::string& p : temps) ::unlink(p.c_str());
  // plugin-digests/ stays: it names no executable, and keeps the next process from hashing the
  // plugin again.
  return removed;
}

}  // namespace shardrt
