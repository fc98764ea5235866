// libFuzzer target for the compile cache's entry reader (src/client/cache_entry_file.h), which
// reads whatever file lies under an entry's name. The first input byte picks what the rest is:
// even, the whole entry file; odd, an entry's payload, framed here with a valid header (magic,
// version, length, SHA-256, written from the format's description, not with the library's
// writer) so that the payload's parser is reached. The bytes are written to a regular file that
// ReadCacheEntryFile reads like any entry. Properties: no crash; a refusal is DataLoss on one
// line; a framed payload is accepted exactly when it parses as a CompileCacheEntry; a file that
// is accepted is at least a header long and starts with the magic; and an accepted entry
// written back with EncodeCacheEntry reads back as the same entry. Any violation aborts.
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/string_view.h"
#include "client/cache_entry_file.h"
#include "client/sha256.h"
#include "fuzz_util.h"
#include "google/protobuf/stubs/logging.h"

namespace {

using namespace shardrt;

constexpr const char* kTarget = "cache_entry_fuzz";
constexpr absl::string_view kMagic("SHRTCC\0\1", 8);

// The file every input is written to, in a folder of this process's own that is removed at
// exit. (The strings are never destroyed: the exit handler runs after static destructors.)
const std::string& EntryPath() {
  static const std::string* const dir = [] {
    auto* d = new std::string("/tmp/shardrt-cache-entry-fuzz-XXXXXX");
    if (::mkdtemp(d->data()) == nullptr) std::abort();
    return d;
  }();
  static const std::string* const path = [] {
    auto* p = new std::string(*dir + "/entry");
    std::atexit([] {
      ::unlink(path->c_str());
      ::rmdir(dir->c_str());
    });
    return p;
  }();
  return *path;
}

void WriteFile(const std::string& path, absl::string_view bytes) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) std::abort();
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n <= 0) std::abort();
    done += static_cast<size_t>(n);
  }
  ::close(fd);
}

void PutLe(std::string& out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>(v >> (8 * i)));
}

// `payload` framed as the format describes: magic, version 1, 4 zero bytes, the length, the
// payload's SHA-256.
std::string Framed(absl::string_view payload) {
  std::string file(kMagic);
  PutLe(file, 1, 4);
  PutLe(file, 0, 4);
  PutLe(file, payload.size(), 8);
  file += Sha256().Update(payload).Finish();
  return file + std::string(payload);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  // A payload whose string field is not UTF-8 is refused (DataLoss); protobuf's log line about
  // it would drown the fuzzer's output.
  google::protobuf::SetLogHandler(nullptr);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const absl::string_view input(reinterpret_cast<const char*>(data), size);
  const bool framed = (data[0] & 1) != 0;
  const absl::string_view rest = input.substr(1);
  const std::string file = framed ? Framed(rest) : std::string(rest);
  const std::string& path = EntryPath();
  WriteFile(path, file);

  absl::StatusOr<std::optional<cache::CompileCacheEntry>> read = ReadCacheEntryFile(path);
  if (!read.ok()) {
    if (read.status().code() != absl::StatusCode::kDataLoss) {
      fuzz::Fail(kTarget, "a refusal is not DataLoss", input, read.status().ToString());
    }
    if (!fuzz::OneLine(read.status().message())) {
      fuzz::Fail(kTarget, "a refusal is not one line", input, read.status().ToString());
    }
    if (framed && cache::CompileCacheEntry().ParseFromString(std::string(rest))) {
      fuzz::Fail(kTarget, "a framed payload that parses was refused", input,
                 read.status().ToString());
    }
    return 0;
  }
  if (!read->has_value()) fuzz::Fail(kTarget, "an existing file read as absent", input, "");
  if (file.size() < kCacheEntryHeaderBytes || !absl::StartsWith(file, kMagic)) {
    fuzz::Fail(kTarget, "a file without a whole header was accepted", input, "");
  }
  if (framed && !cache::CompileCacheEntry().ParseFromString(std::string(rest))) {
    fuzz::Fail(kTarget, "a framed payload that does not parse was accepted", input, "");
  }
  absl::StatusOr<std::string> written = EncodeCacheEntry(**read);
  if (!written.ok()) fuzz::Fail(kTarget, "an accepted entry does not encode", input, "");
  WriteFile(path, *written);
  absl::StatusOr<std::optional<cache::CompileCacheEntry>> again = ReadCacheEntryFile(path);
  if (!again.ok() || !again->has_value() ||
      (*again)->SerializeAsString() != (*read)->SerializeAsString()) {
    fuzz::Fail(kTarget, "an accepted entry does not read back as itself", input,
               again.ok() ? "" : again.status().ToString());
  }
  return 0;
}
