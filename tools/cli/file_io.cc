#include "cli/file_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <random>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "shardrt/base/file_kind.h"
#include "shardrt/base/limits.h"

namespace shardrt::cli {

namespace {

// The error for a path that is not a regular file.
absl::Status NotRegularFile(const std::string& path, mode_t mode) {
  return absl::InvalidArgumentError(
      absl::StrCat(path, ": expected a regular file, got ", FileKind(mode)));
}

// read(2), retried on EINTR: the byte count, 0 at the end of the file, -1 with errno set.
ssize_t ReadRetrying(int fd, char* buffer, size_t size) {
  ssize_t n;
  do {
    n = ::read(fd, buffer, size);
  } while (n < 0 && errno == EINTR);
  return n;
}

}  // namespace

absl::Status IoError(const std::string& path, absl::string_view what, int error) {
  const std::string message = absl::StrCat(path, ": ", what, ": ", std::strerror(error));
  switch (error) {
    case ENOENT: return absl::NotFoundError(message);
    case EACCES:
    case EPERM: return absl::PermissionDeniedError(message);
    default: return absl::UnavailableError(message);
  }
}


// The whole content of the regular file at `path`. The path is checked with stat before it is
// opened (a FIFO or a device is never opened, so never blocks) and the open file again with
// fstat (the path may have been replaced meanwhile; it is opened non-blocking for that case).
// The size is held to limits::kMaxFileBytes before anything is allocated, then exactly that
// many bytes are read, and one more read must find the end of the file.
// Errors: as file_io.h says.
absl::StatusOr<std::string> ReadRegularFile(const std::string& path) {
  struct stat info;
  if (::stat(path.c_str(), &info) != 0) return IoError(path, "cannot open", errno);
  if (!S_ISREG(info.st_mode)) return NotRegularFile(path, info.st_mode);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0) return IoError(path, "cannot open", errno);
  absl::Cleanup close_fd = [fd] { ::close(fd); };
  if (::fstat(fd, &info) != 0) return IoError(path, "cannot stat", errno);
  if (!S_ISREG(info.st_mode)) return NotRegularFile(path, info.st_mode);
  const int status_flags = ::fcntl(fd, F_GETFL);
  if (status_flags < 0 || ::fcntl(fd, F_SETFL, status_flags & ~O_NONBLOCK) != 0) {
    return IoError(path, "cannot set blocking mode", errno);
  }
  if (info.st_size < 0 || info.st_size > limits::kMaxFileBytes) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": file of ", info.st_size,
                                " bytes exceeds limits::kMaxFileBytes (", limits::kMaxFileBytes,
                                ")"));
  }
  const size_t size = static_cast<size_t>(info.st_size);
  std::string bytes(size, '\0');
  size_t done = 0;
  while (done < size) {
    const ssize_t n = ReadRetrying(fd, bytes.data() + done, size - done);
    if (n < 0) return IoError(path, "read failed", errno);
    if (n == 0) {
      return absl::UnavailableError(
          absl::StrCat(path, ": expected ", size, " bytes (the file's size), got ", done,
                       " before its end: it changed while being read"));
    }
    done += static_cast<size_t>(n);
  }
  char extra;
  const ssize_t n = ReadRetrying(fd, &extra, 1);
  if (n < 0) return IoError(path, "read failed", errno);
  if (n > 0) {
    return absl::UnavailableError(absl::StrCat(
        path, ": expected ", size, " bytes (the file's size), got more: it changed while being "
        "read, or does not report its size"));
  }
  return bytes;
}

absl::Status WriteFileReplacing(const std::string& path, absl::string_view bytes) {
  struct stat info;
  if (::lstat(path.c_str(), &info) == 0 && !S_ISREG(info.st_mode)) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": expected a regular file or no file, got ", FileKind(info.st_mode),
        "; not replacing it"));
  }
  const size_t slash = path.find_last_of('/');
  const std::string dir = slash == std::string::npos ? "." : path.substr(0, slash + 1);
  const std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
  static thread_local std::mt19937_64 rng(std::random_device{}());
  const std::string tmp = absl::StrCat(dir, slash == std::string::npos ? "/" : "", ".", base,
                                       ".tmp-shardrt-", ::getpid(), "-",
                                       absl::Hex(rng(), absl::kZeroPad16));
  int fd;
  do {
    fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) return IoError(path, "cannot create", errno);
  bool keep = false;
  absl::Cleanup remove_tmp = [&] {
    if (!keep) ::unlink(tmp.c_str());
  };
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int error = errno;
      ::close(fd);
      return IoError(path, "write failed", error);
    }
    done += static_cast<size_t>(n);
  }
  if (::close(fd) != 0) return IoError(path, "write failed", errno);
  // rename(2) replaces a symbolic link made meanwhile itself, never its target.
  if (::rename(tmp.c_str(), path.c_str()) != 0) return IoError(path, "cannot replace", errno);
  keep = true;
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadStandardInput(int64_t limit) {
  std::string text;
  char buffer[1 << 16];
  while (true) {
    const ssize_t n = read(STDIN_FILENO, buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return IoError("standard input", "read", errno);
    if (n == 0) return text;
    if (int64_t(text.size()) + n > limit) {
      return absl::InvalidArgumentError(
          absl::StrCat("standard input: more than ", limit, " bytes"));
    }
    text.append(buffer, size_t(n));
  }
}

}  // namespace shardrt::cli
