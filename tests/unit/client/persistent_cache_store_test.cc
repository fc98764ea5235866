// PersistentCacheStore on files it did not write: a FIFO under an entry's name is refused
// without blocking, a huge sparse file under an entry's name is refused from its header without
// being read, a folder under an entry's name is listed with no size, and Clear and eviction
// remove only the cache's own entries (regular files that start with the entry magic) and its
// own stale temporary files, never a user's file in the same folder. No plugin is loaded: the
// store only hashes the plugin's file, so any file stands in for it. Every call that could block
// runs on its own thread with a deadline.
#include "client/persistent_cache_store.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <thread>

#include "../../common/finishes_within.h"
#include "gtest/gtest.h"
#include "shardrt/base/metrics.h"
#include "shardrt/base/mutex.h"
#include "shardrt/client/persistent_cache.h"

namespace shardrt {
namespace {

namespace fs = std::filesystem;

// A sparse file's size, just under limits::kMaxFileBytes (which the old reader allowed whole).
constexpr int64_t kSparseBytes = 4'294'967'000;

using testing::FinishesWithin;

std::string MakeTempDir() {
  std::string tmpl = ::testing::TempDir() + "/shardrt_store_XXXXXX";
  EXPECT_NE(mkdtemp(tmpl.data()), nullptr) << std::strerror(errno);
  return tmpl;
}

void WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
  ASSERT_TRUE(out.good()) << path;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Sets a file's modification time to `seconds_ago` before now.
void MakeOld(const std::string& path, int64_t seconds_ago) {
  struct timespec times[2];
  times[0].tv_sec = ::time(nullptr) - seconds_ago;
  times[0].tv_nsec = 0;
  times[1] = times[0];
  ASSERT_EQ(::utimensat(AT_FDCWD, path.c_str(), times, 0), 0) << path << std::strerror(errno);
}

// A sparse regular file of `bytes` bytes starting with `head`.
void WriteSparse(const std::string& path, const std::string& head, int64_t bytes) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  ASSERT_GE(fd, 0) << path << std::strerror(errno);
  EXPECT_EQ(::write(fd, head.data(), head.size()), ssize_t(head.size()));
  EXPECT_EQ(::ftruncate(fd, bytes), 0) << std::strerror(errno);
  ::close(fd);
}

// The process's peak resident set so far, in KiB.
int64_t PeakRssKib() {
  struct rusage usage {};
  ::getrusage(RUSAGE_SELF, &usage);
  return usage.ru_maxrss;
}

int64_t Corrupt() { return GlobalMetrics().CounterValue(kPersistentCacheCorrupt); }

// An entry header (persistent_cache_store.h): magic, version 1, 4 zero bytes, `length`, and a
// checksum of zeros.
std::string Header(uint64_t length) {
  std::string h("SHRTCC\0\1", 8);
  h += std::string("\1\0\0\0\0\0\0\0", 8);
  for (int i = 0; i < 8; ++i) h.push_back(static_cast<char>((length >> (8 * i)) & 0xFF));
  h += std::string(32, '\0');
  return h;
}

// A store over a fresh directory with a stand-in plugin file, and its paths.
class PersistentCacheStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = MakeTempDir();
    dir_ = root_ + "/cache";
    WriteFile(root_ + "/plugin.so", "stand-in plugin bytes");
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(root_, ec);
  }

  std::unique_ptr<PersistentCacheStore> OpenStore(int64_t max_bytes = int64_t{4} << 30) {
    PersistentCacheOptions options;
    options.directory = dir_;
    options.max_bytes = max_bytes;
    CacheEnvironment env;
    env.plugin_path = root_ + "/plugin.so";
    env.api_version = "0.81";
    env.platform = "test";
    env.cpu = "test cpu";
    absl::StatusOr<std::unique_ptr<PersistentCacheStore>> store =
        PersistentCacheStore::Open(options, env);
    EXPECT_TRUE(store.ok()) << store.status();
    return store.ok() ? *std::move(store) : nullptr;
  }

  // The file of `key`'s entry.
  std::string EntryPath(const std::string& key) const {
    return dir_ + "/" + HexDigest(key) + ".entry";
  }

  // Stores an entry named `name` for request digest `request` and returns its key.
  static std::string StoreEntry(PersistentCacheStore& store, const std::string& request,
                                const std::string& name) {
    cache::CompileCacheEntry entry;
    entry.set_key(store.Key(request));
    entry.set_name(name);
    entry.set_executable(std::string(1000, 'x'));
    store.Store(entry);
    return entry.key();
  }

  std::string root_, dir_;
};

TEST_F(PersistentCacheStoreTest, AFifoUnderAnEntryNameIsRefusedWithoutBlocking) {
  std::unique_ptr<PersistentCacheStore> store = OpenStore();
  ASSERT_NE(store, nullptr);
  const std::string key = store->Key("request");
  const std::string fifo = EntryPath(key);
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0) << std::strerror(errno);

  const int64_t corrupt_before = Corrupt();
  auto loaded = std::make_shared<std::optional<cache::CompileCacheEntry>>();
  PersistentCacheStore* raw = store.get();
  ASSERT_TRUE(FinishesWithin([raw, key, loaded] { *loaded = raw->Load(key); },
                             std::chrono::seconds(10)))
      << "Load blocked on a FIFO";
  EXPECT_FALSE(loaded->has_value());
  EXPECT_EQ(Corrupt() - corrupt_before, 1);
  EXPECT_FALSE(store->Contains(key));

  auto info = std::make_shared<absl::StatusOr<PersistentCacheInfo>>(absl::UnknownError(""));
  const std::string dir = dir_;
  ASSERT_TRUE(FinishesWithin([dir, info] { *info = InspectPersistentCache(dir); },
                             std::chrono::seconds(10)))
      << "Inspect blocked on a FIFO";
  ASSERT_TRUE(info->ok()) << info->status();
  ASSERT_EQ((*info)->entries.size(), 1u);
  EXPECT_FALSE((*info)->entries[0].valid);
  EXPECT_EQ((*info)->entries[0].bytes, 0);
  EXPECT_EQ((*info)->bytes, 0);

  auto removed = std::make_shared<absl::StatusOr<int64_t>>(absl::UnknownError(""));
  ASSERT_TRUE(FinishesWithin([dir, removed] { *removed = ClearPersistentCache(dir); },
                             std::chrono::seconds(10)))
      << "Clear blocked on a FIFO";
  ASSERT_TRUE(removed->ok()) << removed->status();
  EXPECT_EQ(**removed, 0);
  struct stat st;
  ASSERT_EQ(::lstat(fifo.c_str(), &st), 0) << "the FIFO is not the cache's to remove";
  EXPECT_TRUE(S_ISFIFO(st.st_mode));
}

TEST_F(PersistentCacheStoreTest, HugeSparseEntriesAreRefusedFromTheirHeaderWithoutBeingRead) {
  std::unique_ptr<PersistentCacheStore> store = OpenStore();
  ASSERT_NE(store, nullptr);
  const std::string key = store->Key("request");
  const std::string path = EntryPath(key);
  // Zeros (no magic); a right header whose length is past the format's bound (and agrees with
  // the file's size); a right header with a small length in a file of another size.
  const std::string heads[] = {std::string(), Header(uint64_t(kSparseBytes) - 56), Header(100)};
  const int64_t rss_before = PeakRssKib();
  for (const std::string& head : heads) {
    SCOPED_TRACE(head.size());
    WriteSparse(path, head, kSparseBytes);
    const int64_t corrupt_before = Corrupt();
    auto loaded = std::make_shared<std::optional<cache::CompileCacheEntry>>();
    PersistentCacheStore* raw = store.get();
    const auto start = std::chrono::steady_clock::now();
    ASSERT_TRUE(FinishesWithin([raw, key, loaded] { *loaded = raw->Load(key); },
                               std::chrono::seconds(20)));
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(1))
        << "the entry was read, not refused from its header";
    EXPECT_FALSE(loaded->has_value());
    EXPECT_EQ(Corrupt() - corrupt_before, 1);

    WriteSparse(path, head, kSparseBytes);
    const auto inspect_start = std::chrono::steady_clock::now();
    absl::StatusOr<PersistentCacheInfo> info = InspectPersistentCache(dir_);
    EXPECT_LT(std::chrono::steady_clock::now() - inspect_start, std::chrono::seconds(1));
    ASSERT_TRUE(info.ok()) << info.status();
    ASSERT_EQ(info->entries.size(), 1u);
    EXPECT_FALSE(info->entries[0].valid);
    EXPECT_EQ(info->entries[0].bytes, kSparseBytes);
    ASSERT_EQ(::unlink(path.c_str()), 0);
  }
  EXPECT_LT(PeakRssKib() - rss_before, 64 * 1024)
      << "reading a refused entry raised the peak resident set by more than 64 MiB";
}

TEST_F(PersistentCacheStoreTest, AFolderUnderAnEntryNameIsListedWithoutASize) {
  std::unique_ptr<PersistentCacheStore> store = OpenStore();
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(fs::create_directory(dir_ + "/" + std::string(64, 'a') + ".entry"));
  ASSERT_TRUE(fs::create_directory(dir_ + "/" + std::string(64, 'b') + ".entry"));
  absl::StatusOr<PersistentCacheInfo> info = InspectPersistentCache(dir_);
  ASSERT_TRUE(info.ok()) << info.status();
  ASSERT_EQ(info->entries.size(), 2u);
  for (const PersistentCacheEntryInfo& e : info->entries) {
    EXPECT_FALSE(e.valid) << e.file;
    EXPECT_EQ(e.bytes, 0) << e.file;
  }
  EXPECT_EQ(info->bytes, 0);
}

TEST_F(PersistentCacheStoreTest, ClearRemovesOnlyTheCachesOwnFiles) {
  std::unique_ptr<PersistentCacheStore> store = OpenStore();
  ASSERT_NE(store, nullptr);
  const std::string key = StoreEntry(*store, "request", "mine");
  ASSERT_TRUE(store->Contains(key));
  // A damaged entry of the cache (right magic, wrong checksum) goes too.
  const std::string damaged = dir_ + "/" + std::string(64, 'c') + ".entry";
  WriteFile(damaged, Header(3) + "abc");
  // The cache's own temporary files: of a process that is gone (2^22 + 1 is above any Linux
  // pid), and of this running process (being written: it stays).
  const std::string stale_temp = dir_ + "/.tmp-shardrt-4194305-0123456789abcdef";
  const std::string live_temp =
      dir_ + "/.tmp-shardrt-" + std::to_string(::getpid()) + "-0123456789abcdef";
  WriteFile(stale_temp, "half an entry");
  WriteFile(live_temp, "half an entry");
  // A user's files.
  const std::string foreign_entry = dir_ + "/" + std::string(64, 'f') + ".entry";
  const std::string foreign[] = {foreign_entry, dir_ + "/.tmp-user-draft.txt",
                                 dir_ + "/.tmp-123-abc", dir_ + "/.tmp-shardrt-notes",
                                 dir_ + "/notes.txt"};
  for (const std::string& f : foreign) WriteFile(f, "the user's words");

  absl::StatusOr<int64_t> removed = ClearPersistentCache(dir_);
  ASSERT_TRUE(removed.ok()) << removed.status();
  EXPECT_EQ(*removed, 2);
  EXPECT_FALSE(store->Contains(key));
  EXPECT_FALSE(fs::exists(damaged));
  EXPECT_FALSE(fs::exists(stale_temp));
  EXPECT_TRUE(fs::exists(live_temp));
  for (const std::string& f : foreign) EXPECT_EQ(ReadFile(f), "the user's words") << f;
}

TEST_F(PersistentCacheStoreTest, EvictionRemovesOnlyTheCachesOwnFiles) {
  // A budget for one entry: a user's file counted as an entry would push it over.
  std::unique_ptr<PersistentCacheStore> probe = OpenStore();
  ASSERT_NE(probe, nullptr);
  const std::string probe_key = StoreEntry(*probe, "request", "mine");
  const int64_t entry_bytes = int64_t(fs::file_size(EntryPath(probe_key)));
  ASSERT_EQ(ClearPersistentCache(dir_).value_or(-1), 1);
  std::unique_ptr<PersistentCacheStore> store = OpenStore(entry_bytes + 10);
  ASSERT_NE(store, nullptr);

  // The user's files, two hours old: one named like an entry, temporary-looking ones.
  const std::string foreign[] = {dir_ + "/" + std::string(64, 'f') + ".entry",
                                 dir_ + "/.tmp-user-draft.txt", dir_ + "/.tmp-123-abc",
                                 dir_ + "/.tmp-shardrt-draft"};
  for (const std::string& f : foreign) {
    WriteFile(f, "the user's words, kept for two hours");
    MakeOld(f, 2 * 3600);
  }
  // The cache's own stale temporary files: two hours old (of a running process: the age
  // decides), and of a process that is gone (fresh: the process decides).
  const std::string old_temp =
      dir_ + "/.tmp-shardrt-" + std::to_string(::getpid()) + "-00000000000000aa";
  const std::string dead_temp = dir_ + "/.tmp-shardrt-4194305-00000000000000bb";
  WriteFile(old_temp, "half an entry");
  MakeOld(old_temp, 2 * 3600);
  WriteFile(dead_temp, "half an entry");

  const std::string key = StoreEntry(*store, "request", "mine");
  EXPECT_TRUE(store->Contains(key)) << "the user's file counted against the cache's budget";
  std::optional<cache::CompileCacheEntry> loaded = store->Load(key);
  ASSERT_TRUE(loaded.has_value());
  EXPECT_EQ(loaded->name(), "mine");
  for (const std::string& f : foreign) {
    EXPECT_EQ(ReadFile(f), "the user's words, kept for two hours") << f;
  }
  EXPECT_FALSE(fs::exists(old_temp));
  EXPECT_FALSE(fs::exists(dead_temp));

  // Over the budget, the cache's own entries go, least recently used first; the user's stay.
  const std::string second = StoreEntry(*store, "another request", "second");
  EXPECT_FALSE(store->Contains(key));
  EXPECT_TRUE(store->Contains(second));
  for (const std::string& f : foreign) EXPECT_TRUE(fs::exists(f)) << f;
}

}  // namespace
}  // namespace shardrt
