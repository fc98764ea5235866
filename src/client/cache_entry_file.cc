#include "client/cache_entry_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "client/sha256.h"
#include "shardrt/base/file_kind.h"
#include "shardrt/base/status_macros.h"

namespace shardrt {
namespace {

constexpr char kMagic[8] = {'S', 'H', 'R', 'T', 'C', 'C', '\0', '\1'};

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

// Checks the kCacheEntryHeaderBytes bytes of an entry's header: magic, format version, the
// reserved zero bytes, and a payload length of at most kMaxCacheEntryBytes.
// Error: what is wrong (DataLoss).
absl::StatusOr<EntryHeader> ParseHeader(absl::string_view header) {
  if (header.size() < kCacheEntryHeaderBytes) {
    return absl::DataLossError(absl::StrCat("expected a header of ", kCacheEntryHeaderBytes,
                                            " bytes, got ", header.size()));
  }
  if (header.substr(0, 8) != absl::string_view(kMagic, 8)) {
    return absl::DataLossError("bad magic: not a compile cache entry");
  }
  if (GetLe(header.substr(8), 4) != kCacheEntryFormatVersion) {
    return absl::DataLossError(absl::StrCat("format version ", GetLe(header.substr(8), 4),
                                            ", expected ", kCacheEntryFormatVersion));
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

}  // namespace

absl::Status ErrnoStatus(absl::string_view what, const std::string& path) {
  const int err = errno;
  return absl::UnavailableError(absl::StrCat(what, " ", path, ": ", std::strerror(err)));
}

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

absl::StatusOr<std::string> EncodeCacheEntry(const cache::CompileCacheEntry& entry) {
  std::string payload;
  if (!entry.SerializeToString(&payload)) {
    return absl::InternalError("a compile cache entry does not serialize");
  }
  if (payload.size() > static_cast<size_t>(kMaxCacheEntryBytes)) {
    return absl::ResourceExhaustedError(
        absl::StrCat("a compile cache entry of ", payload.size(),
                     " bytes is over kMaxCacheEntryBytes (", kMaxCacheEntryBytes, ")"));
  }
  std::string file(kMagic, 8);
  PutLe(file, kCacheEntryFormatVersion, 4);
  PutLe(file, 0, 4);
  PutLe(file, payload.size(), 8);
  file += Sha256().Update(payload).Finish();
  file += payload;
  return file;
}

bool StartsWithCacheEntryMagic(const std::string& path) {
  struct stat st;
  const int fd = OpenForReading(path, /*follow=*/false, &st);
  if (fd < 0) return false;
  absl::Cleanup close_fd = [fd] { ::close(fd); };
  if (!S_ISREG(st.st_mode) || st.st_size < static_cast<off_t>(sizeof(kMagic))) return false;
  std::string magic;
  return ReadUpTo(fd, path, sizeof(kMagic), magic).ok() &&
         magic == absl::string_view(kMagic, sizeof(kMagic));
}

absl::StatusOr<std::optional<cache::CompileCacheEntry>> ReadCacheEntryFile(
    const std::string& path) {
  struct stat st;
  const int fd = OpenForReading(path, /*follow=*/false, &st);
  if (fd < 0) {
    if (errno == ENOENT) return std::optional<cache::CompileCacheEntry>();
    if (errno == ELOOP) return absl::DataLossError(absl::StrCat(path, ": a symbolic link"));
    return ErrnoStatus("open", path);
  }
  absl::Cleanup close_fd = [fd] { ::close(fd); };
  if (!S_ISREG(st.st_mode)) {
    return absl::DataLossError(
        absl::StrCat(path, ": expected a regular file, got ", FileKind(st.st_mode)));
  }
  std::string header;
  SHARDRT_RETURN_IF_ERROR(ReadUpTo(fd, path, kCacheEntryHeaderBytes, header));
  absl::StatusOr<EntryHeader> h = ParseHeader(header);
  if (!h.ok()) return absl::DataLossError(absl::StrCat(path, ": ", h.status().message()));
  if (uint64_t(st.st_size) != kCacheEntryHeaderBytes + h->payload_bytes) {
    return absl::DataLossError(
        absl::StrCat(path, ": the header states a payload of ", h->payload_bytes,
                     " bytes, the file holds ",
                     int64_t(st.st_size) - int64_t(kCacheEntryHeaderBytes)));
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
  cache::CompileCacheEntry entry;
  if (!entry.ParseFromArray(payload.data(), static_cast<int>(payload.size()))) {
    return absl::DataLossError(absl::StrCat(path, ": the payload does not parse"));
  }
  return std::optional<cache::CompileCacheEntry>(std::move(entry));
}

}  // namespace shardrt
