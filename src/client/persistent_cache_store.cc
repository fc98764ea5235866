#include "client/persistent_cache_store.h"

#include <fcntl.h>
#include <openssl/evp.h>
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
#include "shardrt/base/limits.h"
#include "shardrt/base/metrics.h"
#include "shardrt/base/status_macros.h"
#include "shardrt/base/trace.h"
#include "shardrt/pjrt/named_value.h"

namespace shardrt {
namespace {

namespace fs = std::filesystem;

constexpr char kMagic[8] = {'S', 'H', 'R', 'T', 'C', 'C', '\0', '\1'};
constexpr uint32_t kFormatVersion = 1;
constexpr size_t kHeaderBytes = 8 + 4 + 4 + 8 + 32;
constexpr absl::string_view kEntrySuffix = ".entry";
// Temporary files are ".tmp-shardrt-<pid>-<16 hex digits>": a name no other program is likely
// to use, with the writer's process id so that a stale one can be told from one being written.
constexpr absl::string_view kTempPrefix = ".tmp-shardrt-";
// A temporary file this old belongs to a writer that died, even if its process id is reused.
constexpr auto kStaleTempAge = std::chrono::hours(1);

void Count(absl::string_view name) { GlobalMetrics().GetCounter(name)->Add(1); }

absl::Status ErrnoStatus(absl::string_view what, const std::string& path) {
  const int err = errno;
  return absl::UnavailableError(absl::StrCat(what, " ", path, ": ", std::strerror(err)));
}

// What a file that is not a regular one is, for messages ("a directory", "a FIFO", ...).
absl::string_view FileKind(mode_t mode) {
  if (S_ISREG(mode)) return "a regular file";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISLNK(mode)) return "a symbolic link";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  return "a special file";
}

// Opens `path` read-only without ever blocking in open (a FIFO or a device opens at once, and
// the caller refuses it after fstat, before any read), following a symbolic link only when
// `follow`. Fills `st` from fstat. Returns the descriptor (the caller closes it), or -1 with
// errno set (ELOOP for a symbolic link that is not followed).
int OpenForReading(const std::string& path, bool follow, struct stat* st) {
  const int flags = O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK | (follow ? 0 : O_NOFOLLOW);
  int fd;
  do {
    fd = ::open(path.c_str(), flags);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) return -1;
  if (::fstat(fd, st) != 0) {
    const int err = errno;
    ::close(fd);
    errno = err;
    return -1;
  }
  return fd;
}

// Reads up to `size` bytes from `fd` into `out` (resized to what was read: less only at the end
// of the file). Errors: Unavailable naming `path`.
absl::Status ReadUpTo(int fd, const std::string& path, size_t size, std::string& out) {
  out.assign(size, '\0');
  size_t done = 0;
  while (done < size) {
    const ssize_t n = ::read(fd, out.data() + done, size - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoStatus("read", path);
    if (n == 0) break;
    done += static_cast<size_t>(n);
  }
  out.resize(done);
  return absl::OkStatus();
}

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

void PutLe(std::string& out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}
uint64_t GetLe(absl::string_view in, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= uint64_t(static_cast<unsigned char>(in[i])) << (8 * i);
  return v;
}

// An entry's header, checked.
struct EntryHeader {
  uint64_t payload_bytes = 0;
  std::string checksum;  // SHA-256 of the payload, 32 bytes
};

// Checks the kHeaderBytes bytes of an entry's header: magic, format version, the reserved zero
// bytes, and a payload length of at most kMaxCacheEntryBytes. Error: what is wrong (DataLoss).
absl::StatusOr<EntryHeader> ParseHeader(absl::string_view header) {
  if (header.size() < kHeaderBytes) {
    return absl::DataLossError(absl::StrCat("expected a header of ", kHeaderBytes,
                                            " bytes, got ", header.size()));
  }
  if (header.substr(0, 8) != absl::string_view(kMagic, 8)) {
    return absl::DataLossError("bad magic: not a compile cache entry");
  }
  if (GetLe(header.substr(8), 4) != kFormatVersion) {
    return absl::DataLossError(absl::StrCat("format version ", GetLe(header.substr(8), 4),
                                            ", expected ", kFormatVersion));
  }
  if (GetLe(header.substr(12), 4) != 0) {
    return absl::DataLossError("the header's reserved bytes are not zero");
  }
  EntryHeader h;
  h.payload_bytes = GetLe(header.substr(16), 8);
  if (h.payload_bytes > uint64_t(kMaxCacheEntryBytes)) {
    return absl::DataLossError(absl::StrCat("the header states a payload of ", h.payload_bytes,
                                            " bytes, more than kMaxCacheEntryBytes (",
                                            kMaxCacheEntryBytes, ")"));
  }
  h.checksum = std::string(header.substr(24, 32));
  return h;
}

// Whether the file at `path` is a regular file (not followed if a symbolic link) that starts
// with the entry magic: what the cache may delete. Never blocks (a FIFO is refused from fstat).
bool StartsWithEntryMagic(const std::string& path) {
  struct stat st;
  const int fd = OpenForReading(path, /*follow=*/false, &st);
  if (fd < 0) return false;
  absl::Cleanup close_fd = [fd] { ::close(fd); };
  if (!S_ISREG(st.st_mode) || st.st_size < static_cast<off_t>(sizeof(kMagic))) return false;
  std::string magic;
  return ReadUpTo(fd, path, sizeof(kMagic), magic).ok() &&
         magic == absl::string_view(kMagic, sizeof(kMagic));
}

// The payload of the entry file at `path`, checked: the header is read and checked first, then
// only the payload length it states is read, after checking that the file's size agrees, and
// its SHA-256 compared. A symbolic link is not followed and anything but a regular file is
// refused from fstat, before any read; so at most kHeaderBytes + kMaxCacheEntryBytes bytes are
// ever read or allocated, whatever the file's size. nullopt when there is no such file.
// Errors: DataLoss saying what is wrong with the file; Unavailable for open/read failures.
absl::StatusOr<std::optional<std::string>> ReadEntryPayload(const std::string& path) {
  struct stat st;
  const int fd = OpenForReading(path, /*follow=*/false, &st);
  if (fd < 0) {
    if (errno == ENOENT) return std::optional<std::string>();
    if (errno == ELOOP) return absl::DataLossError(absl::StrCat(path, ": a symbolic link"));
    return ErrnoStatus("open", path);
  }
  absl::Cleanup close_fd = [fd] { ::close(fd); };
  if (!S_ISREG(st.st_mode)) {
    return absl::DataLossError(
        absl::StrCat(path, ": expected a regular file, got ", FileKind(st.st_mode)));
  }
  std::string header;
  SHARDRT_RETURN_IF_ERROR(ReadUpTo(fd, path, kHeaderBytes, header));
  absl::StatusOr<EntryHeader> h = ParseHeader(header);
  if (!h.ok()) return absl::DataLossError(absl::StrCat(path, ": ", h.status().message()));
  if (uint64_t(st.st_size) != kHeaderBytes + h->payload_bytes) {
    return absl::DataLossError(absl::StrCat(path, ": the header states a payload of ",
                                            h->payload_bytes, " bytes, the file holds ",
                                            int64_t(st.st_size) - int64_t(kHeaderBytes)));
  }
  std::string payload;
  SHARDRT_RETURN_IF_ERROR(ReadUpTo(fd, path, h->payload_bytes, payload));
  if (payload.size() != h->payload_bytes) {
    return absl::DataLossError(absl::StrCat(path, ": expected a payload of ", h->payload_bytes,
                                            " bytes, got ", payload.size(),
                                            " (the file shrank while read)"));
  }
  if (Sha256().Update(payload).Finish() != h->checksum) {
    return absl::DataLossError(absl::StrCat(path, ": checksum mismatch"));
  }
  return std::optional<std::string>(std::move(payload));
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

Sha256::Sha256() : ctx_(EVP_MD_CTX_new()) {
  EVP_DigestInit_ex(static_cast<EVP_MD_CTX*>(ctx_), EVP_sha256(), nullptr);
}
Sha256::~Sha256() { EVP_MD_CTX_free(static_cast<EVP_MD_CTX*>(ctx_)); }

Sha256& Sha256::Update(absl::string_view bytes) {
  EVP_DigestUpdate(static_cast<EVP_MD_CTX*>(ctx_), bytes.data(), bytes.size());
  return *this;
}

Sha256& Sha256::Field(absl::string_view bytes) {
  std::string length;
  PutLe(length, bytes.size(), 8);
  return Update(length).Update(bytes);
}

std::string Sha256::Finish() {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  EVP_DigestFinal_ex(static_cast<EVP_MD_CTX*>(ctx_), out, &n);
  return std::string(reinterpret_cast<const char*>(out), n);
}

std::string HexDigest(absl::string_view digest) {
  std::string hex;
  for (unsigned char c : digest) absl::StrAppend(&hex, absl::Hex(c, absl::kZeroPad2));
  return hex;
}

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
  env.Field("shardrt persistent compile cache").Field(absl::StrCat(kFormatVersion));
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
  absl::StatusOr<std::optional<std::string>> payload = ReadEntryPayload(path);
  if (payload.ok() && !payload->has_value()) return std::nullopt;
  if (!payload.ok() && payload.status().code() != absl::StatusCode::kDataLoss) {
    Count(kPersistentCacheError);
    return std::nullopt;
  }
  absl::Status bad = payload.status();
  cache::CompileCacheEntry entry;
  if (bad.ok()) {
    const std::string& bytes = **payload;
    if (!entry.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
      bad = absl::DataLossError("payload does not parse");
    } else if (entry.key() != key) {
      bad = absl::DataLossError("the entry is of another key");
    }
  }
  if (!bad.ok()) {
    Count(kPersistentCacheCorrupt);
    // Only a regular file under the entry's own name is removed (Store replaces it anyway); a
    // FIFO, link or folder there is left to whoever made it.
    struct stat st;
    if (::lstat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode)) ::unlink(path.c_str());
    return std::nullopt;
  }
  GlobalMetrics().GetMetric(kPersistentCacheBytes, MetricRepr::kBytes)->AddSample(
      double(kHeaderBytes + (*payload)->size()));
  ::utimensat(AT_FDCWD, path.c_str(), nullptr, AT_SYMLINK_NOFOLLOW);  // most recently used
  return entry;
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
  std::string payload;
  if (!entry.SerializeToString(&payload) ||
      payload.size() > static_cast<size_t>(kMaxCacheEntryBytes)) {
    Count(kPersistentCacheError);
    return;
  }
  std::string file(kMagic, 8);
  PutLe(file, kFormatVersion, 4);
  PutLe(file, 0, 4);
  PutLe(file, payload.size(), 8);
  file += Sha256().Update(payload).Finish();
  file += payload;
  if (!WriteAtomically(options_.directory, EntryPath(entry.key()), file).ok()) {
    Count(kPersistentCacheError);
    return;
  }
  GlobalMetrics().GetMetric(kPersistentCacheBytes, MetricRepr::kBytes)->AddSample(
      double(file.size()));
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
        !StartsWithEntryMagic(path)) {
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
    absl::StatusOr<std::optional<std::string>> payload = ReadEntryPayload(e.path().string());
    if (payload.ok() && payload->has_value()) {
      cache::CompileCacheEntry entry;
      const std::string& bytes = **payload;
      if (entry.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())) &&
          HexDigest(entry.key()) + std::string(kEntrySuffix) == name) {
        item.valid = true;
        item.name = entry.name();
      }
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
    if (StartsWithEntryMagic(p) && ::unlink(p.c_str()) == 0) ++removed;
  }
  for (const std::string& p : temps) ::unlink(p.c_str());
  // plugin-digests/ stays: it names no executable, and keeps the next process from hashing the
  // plugin again.
  return removed;
}

}  // namespace shardrt
