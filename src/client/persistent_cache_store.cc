#include "client/persistent_cache_store.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <system_error>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
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
constexpr absl::string_view kTempPrefix = ".tmp-";

void Count(absl::string_view name) { GlobalMetrics().GetCounter(name)->Add(1); }

absl::Status ErrnoStatus(absl::string_view what, const std::string& path) {
  const int err = errno;
  return absl::UnavailableError(absl::StrCat(what, " ", path, ": ", std::strerror(err)));
}

// The whole file at `path` if it is a regular file of at most `max` bytes; nullopt if absent.
absl::StatusOr<std::optional<std::string>> ReadWhole(const std::string& path, int64_t max) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return std::optional<std::string>();
    return ErrnoStatus("open", path);
  }
  absl::Cleanup close_fd = [fd] { ::close(fd); };
  struct stat st;
  if (::fstat(fd, &st) != 0) return ErrnoStatus("stat", path);
  if (!S_ISREG(st.st_mode) || st.st_size > max) {
    return absl::DataLossError(absl::StrCat(path, ": not a regular file of at most ", max,
                                            " bytes"));
  }
  std::string bytes(static_cast<size_t>(st.st_size), '\0');
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::read(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoStatus("read", path);
    if (n == 0) break;
    done += static_cast<size_t>(n);
  }
  bytes.resize(done);
  return std::optional<std::string>(std::move(bytes));
}

// Writes `bytes` to a new temporary file in `dir` and renames it to `path` (atomic).
absl::Status WriteAtomically(const std::string& dir, const std::string& path,
                             absl::string_view bytes) {
  static thread_local std::mt19937_64 rng(std::random_device{}());
  const std::string tmp =
      absl::StrCat(dir, "/", kTempPrefix, ::getpid(), "-", absl::Hex(rng()));
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
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

// Checks an entry file's framing; returns its payload. Error: what is wrong (DataLoss).
absl::StatusOr<absl::string_view> Payload(absl::string_view file) {
  if (file.size() < kHeaderBytes) return absl::DataLossError("shorter than the header");
  if (file.substr(0, 8) != absl::string_view(kMagic, 8)) return absl::DataLossError("bad magic");
  if (GetLe(file.substr(8), 4) != kFormatVersion) {
    return absl::DataLossError(absl::StrCat("format version ", GetLe(file.substr(8), 4)));
  }
  const uint64_t length = GetLe(file.substr(16), 8);
  if (length != file.size() - kHeaderBytes) {
    return absl::DataLossError(absl::StrCat("payload of ", file.size() - kHeaderBytes,
                                            " bytes, header says ", length));
  }
  const absl::string_view payload = file.substr(kHeaderBytes);
  if (Sha256().Update(payload).Finish() != file.substr(24, 32)) {
    return absl::DataLossError("checksum mismatch");
  }
  return payload;
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
  SHARDRT_ASSIGN_OR_RETURN(std::optional<std::string> known, ReadWhole(memo, 64));
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

bool IsEntryName(absl::string_view name) {
  return name.size() == 64 + kEntrySuffix.size() && absl::EndsWith(name, kEntrySuffix);
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
  absl::StatusOr<std::optional<std::string>> file = ReadWhole(path, limits::kMaxFileBytes);
  if (file.ok() && !file->has_value()) return std::nullopt;
  if (!file.ok() && file.status().code() != absl::StatusCode::kDataLoss) {
    Count(kPersistentCacheError);
    return std::nullopt;
  }
  absl::Status bad = file.status();
  cache::CompileCacheEntry entry;
  if (bad.ok()) {
    absl::StatusOr<absl::string_view> payload = Payload(**file);
    if (!payload.ok()) {
      bad = payload.status();
    } else if (!entry.ParseFromArray(payload->data(), static_cast<int>(payload->size()))) {
      bad = absl::DataLossError("payload does not parse");
    } else if (entry.key() != key) {
      bad = absl::DataLossError("the entry is of another key");
    }
  }
  if (!bad.ok()) {
    Count(kPersistentCacheCorrupt);
    ::unlink(path.c_str());
    return std::nullopt;
  }
  GlobalMetrics().GetMetric(kPersistentCacheBytes, MetricRepr::kBytes)->AddSample(
      double((*file)->size()));
  ::utimensat(AT_FDCWD, path.c_str(), nullptr, 0);  // most recently used
  return entry;
}

bool PersistentCacheStore::Contains(absl::string_view key) const {
  struct stat st;
  return ::stat(EntryPath(key).c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

void PersistentCacheStore::Discard(absl::string_view key) {
  Count(kPersistentCacheCorrupt);
  ::unlink(EntryPath(key).c_str());
}

void PersistentCacheStore::Store(const cache::CompileCacheEntry& entry) {
  TraceSpan span("PersistentCacheStore", "client");
  std::string payload;
  if (!entry.SerializeToString(&payload)) {
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
    fs::path path;
    int64_t bytes;
    fs::file_time_type time;
  };
  std::vector<Item> items;
  int64_t total = 0;
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(options_.directory, ec)) {
    const std::string name = e.path().filename().string();
    std::error_code item_ec;
    if (absl::StartsWith(name, kTempPrefix)) {
      // A temporary file older than an hour belongs to a writer that died.
      const auto age = fs::file_time_type::clock::now() - e.last_write_time(item_ec);
      if (!item_ec && age > std::chrono::hours(1)) fs::remove(e.path(), item_ec);
      continue;
    }
    if (!IsEntryName(name)) continue;
    const int64_t bytes = static_cast<int64_t>(e.file_size(item_ec));
    const fs::file_time_type time = e.last_write_time(item_ec);
    if (item_ec) continue;
    items.push_back({e.path(), bytes, time});
    total += bytes;
  }
  if (ec || total <= options_.max_bytes) return;
  std::sort(items.begin(), items.end(),
            [](const Item& a, const Item& b) { return a.time < b.time; });
  for (const Item& item : items) {
    if (total <= options_.max_bytes) break;
    std::error_code remove_ec;
    if (fs::remove(item.path, remove_ec)) total -= item.bytes;
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
    std::error_code item_ec;
    item.bytes = static_cast<int64_t>(e.file_size(item_ec));
    struct stat st;
    if (::stat(e.path().c_str(), &st) == 0) item.modified_unix_seconds = st.st_mtim.tv_sec;
    absl::StatusOr<std::optional<std::string>> file =
        ReadWhole(e.path().string(), limits::kMaxFileBytes);
    if (file.ok() && file->has_value()) {
      absl::StatusOr<absl::string_view> payload = Payload(**file);
      cache::CompileCacheEntry entry;
      if (payload.ok() &&
          entry.ParseFromArray(payload->data(), static_cast<int>(payload->size())) &&
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
  std::vector<fs::path> doomed;
  for (const fs::directory_entry& e : fs::directory_iterator(directory, ec)) {
    const std::string name = e.path().filename().string();
    if (IsEntryName(name) || absl::StartsWith(name, kTempPrefix)) doomed.push_back(e.path());
  }
  if (ec) {
    return absl::UnavailableError(absl::StrCat("reading '", directory, "': ", ec.message()));
  }
  for (const fs::path& p : doomed) {
    std::error_code remove_ec;
    if (fs::remove(p, remove_ec) && IsEntryName(p.filename().string())) ++removed;
  }
  // plugin-digests/ stays: it names no executable, and keeps the next process from hashing the
  // plugin again.
  return removed;
}

}  // namespace shardrt
