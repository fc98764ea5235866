// The persistent compile cache across processes, through the CLI: `shardrt run --compile-cache
// DIR` misses then hits with the same outputs, `shardrt cache info|clear` list and empty the
// directory, two processes filling an empty cache at once leave one valid entry, bad uses
// are one-line errors, and files in the directory that are not the cache's (a FIFO or a huge
// sparse file under an entry's name, folders, a user's notes and drafts) neither hang nor are
// read whole nor are removed.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "../../common/mini_json.h"
#include "cli/cli_runner.h"
#include "cli/deadline_runner.h"
#include "cli/npy.h"
#include "gtest/gtest.h"

namespace shardrt::cli {
namespace {

namespace fs = std::filesystem;
using testing::CliResult;
using testing::ExpectCleanError;
using testing::RunCliCaptured;
using testing::RunCliWithDeadline;
using testing::TimedResult;
using shardrt::testing::JsonParser;
using shardrt::testing::JsonValue;

// How long one CLI command may take before it is killed and the test fails.
constexpr auto kRunDeadline = std::chrono::seconds(120);
constexpr auto kInfoDeadline = std::chrono::seconds(20);

// int_ops.mlir's arguments (x: s32[16,4], b: s32[4]) written as .npy files in `dir`, and the
// host's outputs (y = 3x + b, m = column maxima).
struct IntOpsCase {
  std::string args;  // "--arg DIR/x.npy --arg DIR/b.npy"
  std::vector<int32_t> y, m;
};

IntOpsCase WriteIntOpsArgs(const std::string& dir) {
  std::vector<int32_t> x(64), b = {5, -7, 1 << 20, 0};
  std::mt19937 rng(5);
  for (int32_t& v : x) v = static_cast<int32_t>(rng() % 2001) - 1000;
  auto npy = [](std::vector<int64_t> shape, const std::vector<int32_t>& v) {
    NpyArray a{ElementType::kS32, std::move(shape), std::vector<uint8_t>(v.size() * 4)};
    std::memcpy(a.data.data(), v.data(), a.data.size());
    return a;
  };
  EXPECT_TRUE(WriteNpy(dir + "/x.npy", npy({16, 4}, x)).ok());
  EXPECT_TRUE(WriteNpy(dir + "/b.npy", npy({4}, b)).ok());
  IntOpsCase c{"--arg " + dir + "/x.npy --arg " + dir + "/b.npy", {}, {}};
  for (int i = 0; i < 64; ++i) c.y.push_back(3 * x[i] + b[i % 4]);
  for (int col = 0; col < 4; ++col) {
    int32_t e = x[col];
    for (int r = 1; r < 16; ++r) e = std::max(e, x[r * 4 + col]);
    c.m.push_back(e);
  }
  return c;
}

const std::string kProgram = SHARDRT_TESTDATA_DIR "/int_ops.mlir";

// Checks the outputs `run --out out_dir` wrote against the host's; returns their bytes.
std::vector<std::vector<uint8_t>> CheckOutputs(const std::string& out_dir, const IntOpsCase& c) {
  auto y = ReadNpy(out_dir + "/output_0.npy");
  auto m = ReadNpy(out_dir + "/output_1.npy");
  EXPECT_TRUE(y.ok()) << y.status();
  EXPECT_TRUE(m.ok()) << m.status();
  if (!y.ok() || !m.ok()) return {};
  std::vector<int32_t> yv(y->data.size() / 4), mv(m->data.size() / 4);
  std::memcpy(yv.data(), y->data.data(), y->data.size());
  std::memcpy(mv.data(), m->data.data(), m->data.size());
  EXPECT_EQ(yv, c.y) << out_dir;
  EXPECT_EQ(mv, c.m) << out_dir;
  return {y->data, m->data};
}

// The value of counter `name` in a --metrics report (0 when it is not printed).
int64_t CounterIn(const std::string& report, const std::string& name) {
  const std::string head = "Counter: " + name + "\n  Value: ";
  const size_t pos = report.find(head);
  if (pos == std::string::npos) return 0;
  return std::strtoll(report.c_str() + pos + head.size(), nullptr, 10);
}

// `shardrt cache info --json` of `cache`, parsed.
JsonValue InfoJson(const std::string& cache) {
  CliResult r = RunCliCaptured("cache info --compile-cache " + cache + " --json");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  JsonValue v;
  std::string error;
  EXPECT_TRUE(JsonParser::Parse(r.out, &v, &error)) << error << "\n" << r.out;
  return v;
}

TEST(CliCacheTest, RunMissesThenHitsAcrossProcessesAndCacheInfoAndClearWork) {
  const std::string dir = testing::MakeTempDir();
  const std::string cache = dir + "/cache";
  const IntOpsCase c = WriteIntOpsArgs(dir);
  const std::string run = "run " + kProgram + " --devices 8 " + c.args + " --compile-cache " +
                          cache + " --metrics --out ";

  CliResult cold = RunCliCaptured(run + dir + "/out1");
  ASSERT_EQ(cold.exit_code, 0) << cold.err;
  EXPECT_EQ(CounterIn(cold.out, "PersistentCacheMiss"), 1) << cold.out;
  EXPECT_EQ(CounterIn(cold.out, "PersistentCacheHit"), 0) << cold.out;
  EXPECT_EQ(CounterIn(cold.out, "UncachedCompile"), 1) << cold.out;
  CliResult warm = RunCliCaptured(run + dir + "/out2");
  ASSERT_EQ(warm.exit_code, 0) << warm.err;
  EXPECT_EQ(CounterIn(warm.out, "PersistentCacheHit"), 1) << warm.out;
  EXPECT_EQ(CounterIn(warm.out, "PersistentCacheMiss"), 0) << warm.out;
  EXPECT_EQ(CounterIn(warm.out, "UncachedCompile"), 0) << warm.out;
  EXPECT_EQ(CounterIn(warm.out, "PersistentCacheCorrupt") + CounterIn(warm.out,
                                                                      "PersistentCacheError"),
            0) << warm.out;
  EXPECT_NE(warm.out.find("Metric: PersistentCacheLoadTime"), std::string::npos) << warm.out;
  const auto cold_outputs = CheckOutputs(dir + "/out1", c);
  ASSERT_FALSE(cold_outputs.empty());
  EXPECT_EQ(CheckOutputs(dir + "/out2", c), cold_outputs);

  // cache info: one entry, named after the program.
  CliResult info = RunCliCaptured("cache info --compile-cache " + cache);
  ASSERT_EQ(info.exit_code, 0) << info.err;
  EXPECT_EQ(info.out.rfind(cache + ": 1 entries, ", 0), 0u) << info.out;
  EXPECT_NE(info.out.find("int_ops.mlir"), std::string::npos) << info.out;
  EXPECT_EQ(info.out.find("(invalid)"), std::string::npos) << info.out;
  JsonValue json = InfoJson(cache);
  EXPECT_EQ(json["directory"].string, cache);
  ASSERT_EQ(json["entries"].array.size(), 1u);
  const JsonValue& entry = json["entries"].array[0];
  EXPECT_EQ(entry["name"].string, "int_ops.mlir");
  EXPECT_TRUE(entry["valid"].boolean);
  EXPECT_EQ(entry["file"].string.size(), 64u + 6u);
  EXPECT_TRUE(fs::exists(cache + "/" + entry["file"].string));
  EXPECT_EQ(entry["bytes"].number, double(fs::file_size(cache + "/" + entry["file"].string)));
  EXPECT_EQ(json["bytes"].number, entry["bytes"].number);
  EXPECT_GT(entry["modified"].number, 1.6e9);

  // The directory from $SHARDRT_COMPILE_CACHE when no flag names one.
  ASSERT_EQ(::setenv("SHARDRT_COMPILE_CACHE", cache.c_str(), 1), 0);
  CliResult from_env = RunCliCaptured("cache info");
  ::unsetenv("SHARDRT_COMPILE_CACHE");
  EXPECT_EQ(from_env.exit_code, 0) << from_env.err;
  EXPECT_EQ(from_env.out, info.out);

  // cache clear: the entry goes, files that are not the cache's stay; the next run misses.
  {
    FILE* f = std::fopen((cache + "/keep.txt").c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fclose(f);
  }
  CliResult clear = RunCliCaptured("cache clear --compile-cache " + cache);
  ASSERT_EQ(clear.exit_code, 0) << clear.err;
  EXPECT_EQ(clear.out, "removed 1 entries from " + cache + "\n");
  EXPECT_TRUE(InfoJson(cache)["entries"].array.empty());
  EXPECT_TRUE(fs::exists(cache + "/keep.txt"));
  CliResult again = RunCliCaptured(run + dir + "/out3");
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_EQ(CounterIn(again.out, "PersistentCacheMiss"), 1) << again.out;
  EXPECT_EQ(CheckOutputs(dir + "/out3", c), cold_outputs);
}

TEST(CliCacheTest, OffUsesNoDirectory) {
  const std::string dir = testing::MakeTempDir();
  const IntOpsCase c = WriteIntOpsArgs(dir);
  // "off" from the flag, and from the environment variable.
  ASSERT_EQ(::setenv("SHARDRT_COMPILE_CACHE", "off", 1), 0);
  ASSERT_EQ(::setenv("XDG_CACHE_HOME", (dir + "/xdg").c_str(), 1), 0);
  CliResult env_off = RunCliCaptured("run " + kProgram + " --devices 8 " + c.args + " --metrics");
  ::unsetenv("SHARDRT_COMPILE_CACHE");
  CliResult flag_off = RunCliCaptured("run " + kProgram + " --devices 8 " + c.args +
                                      " --compile-cache off --metrics --out " + dir + "/out");
  ::unsetenv("XDG_CACHE_HOME");
  for (const CliResult* r : {&env_off, &flag_off}) {
    ASSERT_EQ(r->exit_code, 0) << r->err;
    EXPECT_EQ(r->out.find("PersistentCache"), std::string::npos) << r->out;
    EXPECT_EQ(CounterIn(r->out, "UncachedCompile"), 1) << r->out;
  }
  CheckOutputs(dir + "/out", c);
  EXPECT_FALSE(fs::exists(dir + "/xdg")) << "'off' must not fall back to $XDG_CACHE_HOME";
}

// Two processes on an empty cache at once: both succeed with the right outputs, and exactly one
// valid entry (and no temporary file) is left.
TEST(CliCacheTest, ConcurrentProcessesOnAnEmptyCacheLeaveOneValidEntry) {
  const std::string dir = testing::MakeTempDir();
  const std::string cache = dir + "/cache";
  const IntOpsCase c = WriteIntOpsArgs(dir);
  // Both run with a deadline, each from a thread of its own so that they overlap. The runner's
  // stdout and stderr files are shared by the two, so what they hold is for diagnosis only.
  std::vector<TimedResult> runs(2);
  {
    std::vector<std::thread> threads;
    for (int i = 0; i < 2; ++i) {
      threads.emplace_back([&, i] {
        runs[i] = RunCliWithDeadline("run " + kProgram + " --devices 8 " + c.args +
                                         " --compile-cache " + cache + " --out " + dir + "/out" +
                                         std::to_string(i + 1),
                                     kRunDeadline);
      });
    }
    for (std::thread& t : threads) t.join();  // each run ends by its deadline
  }
  for (const TimedResult& r : runs) {
    EXPECT_FALSE(r.timed_out) << "a run still going after " << r.seconds << " s";
    EXPECT_EQ(r.exit_code, 0) << r.err;
  }
  const auto first = CheckOutputs(dir + "/out1", c);
  EXPECT_FALSE(first.empty());
  EXPECT_EQ(CheckOutputs(dir + "/out2", c), first);
  JsonValue json = InfoJson(cache);
  ASSERT_EQ(json["entries"].array.size(), 1u) << "entries of " << cache;
  EXPECT_TRUE(json["entries"].array[0]["valid"].boolean);
  for (const fs::directory_entry& e : fs::directory_iterator(cache)) {
    EXPECT_FALSE(e.path().filename().string().starts_with(".tmp-")) << e.path();
  }
  // And a third process hits it.
  CliResult third = RunCliCaptured("run " + kProgram + " --devices 8 " + c.args +
                                   " --compile-cache " + cache + " --metrics");
  ASSERT_EQ(third.exit_code, 0) << third.err;
  EXPECT_EQ(CounterIn(third.out, "PersistentCacheHit"), 1) << third.out;
}

TEST(CliCacheTest, BadUsesAreOneLineErrors) {
  ExpectCleanError("cache", "expected `cache info` or `cache clear`");
  ExpectCleanError("cache bogus", "expected `cache info` or `cache clear`");
  ExpectCleanError("cache info extra", "expected `cache info` or `cache clear`");
  ExpectCleanError("cache info --compile-cache=",
                   "flag --compile-cache: expected a folder or 'off', got ''");
  ExpectCleanError("cache info --compile-cache", "--compile-cache");
  ExpectCleanError("cache info --compile-cache /nonexistent",
                   "no compile cache directory '/nonexistent'");
  ExpectCleanError("cache clear --compile-cache /nonexistent",
                   "no compile cache directory '/nonexistent'");
  ExpectCleanError("run " + kProgram + " --devices 8 --compile-cache=",
                   "flag --compile-cache: expected a folder or 'off', got ''");
  // A file where the directory should be is not a cache to list.
  const std::string dir = testing::MakeTempDir();
  FILE* f = std::fopen((dir + "/file").c_str(), "w");
  ASSERT_NE(f, nullptr);
  std::fclose(f);
  ExpectCleanError("cache info --compile-cache " + dir + "/file", "no compile cache directory");
}

// A directory the run cannot use costs the cache, not the run.
TEST(CliCacheTest, RunWithAnUnusableCacheDirectoryStillSucceeds) {
  const std::string dir = testing::MakeTempDir();
  const IntOpsCase c = WriteIntOpsArgs(dir);
  FILE* f = std::fopen((dir + "/file").c_str(), "w");
  ASSERT_NE(f, nullptr);
  std::fclose(f);
  CliResult r = RunCliCaptured("run " + kProgram + " --devices 8 " + c.args + " --compile-cache " +
                               dir + "/file --metrics --out " + dir + "/out");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(CounterIn(r.out, "PersistentCacheError"), 1) << r.out;
  CheckOutputs(dir + "/out", c);
}

// The one entry file in `cache` ("" when there is not exactly one).
std::string OnlyEntryFile(const std::string& cache) {
  std::vector<std::string> entries;
  for (const fs::directory_entry& e : fs::directory_iterator(cache)) {
    if (e.path().extension() == ".entry") entries.push_back(e.path().string());
  }
  return entries.size() == 1 ? entries[0] : "";
}

// Writes `text` to `path` and sets its modification time `seconds_ago` before now.
void WriteAged(const std::string& path, const std::string& text, int64_t seconds_ago) {
  FILE* f = std::fopen(path.c_str(), "w");
  ASSERT_NE(f, nullptr) << path;
  std::fputs(text.c_str(), f);
  std::fclose(f);
  struct timespec times[2];
  times[0].tv_sec = ::time(nullptr) - seconds_ago;
  times[0].tv_nsec = 0;
  times[1] = times[0];
  ASSERT_EQ(::utimensat(AT_FDCWD, path.c_str(), times, 0), 0) << path;
}

std::string ReadText(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "r");
  if (f == nullptr) return "(missing)";
  std::string text;
  char buffer[256];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof(buffer), f)) > 0) text.append(buffer, n);
  std::fclose(f);
  return text;
}


// A cold `run --metrics` of kProgram with DIR/cache as its compile cache, which leaves one entry.
struct CachedRun {
  std::string dir, cache;
  IntOpsCase c;
  std::string run;    // the command line (without --out)
  std::string entry;  // the path of the one entry file
  int64_t cold_peak_rss_kib = 0;
};

// Makes DIR and its arguments and runs cold; fails (fatally) unless the run stored one entry.
void ColdRunWithOneEntry(CachedRun* r) {
  r->dir = testing::MakeTempDir();
  r->cache = r->dir + "/cache";
  r->c = WriteIntOpsArgs(r->dir);
  r->run = "run " + kProgram + " --devices 8 " + r->c.args + " --compile-cache " + r->cache +
           " --metrics";
  TimedResult cold = RunCliWithDeadline(r->run, kRunDeadline);
  ASSERT_EQ(cold.exit_code, 0) << cold.err;
  r->cold_peak_rss_kib = cold.peak_rss_kib;
  r->entry = OnlyEntryFile(r->cache);
  ASSERT_FALSE(r->entry.empty());
}

// A FIFO under an entry's name: `run`, `cache info` and `cache clear` open nothing that blocks
// (before, each hung forever in open), and clear leaves the FIFO, which is not the cache's.
TEST(CliCacheTest, AFifoUnderAnEntryNameDoesNotHang) {
  CachedRun cached;
  ASSERT_NO_FATAL_FAILURE(ColdRunWithOneEntry(&cached));
  const std::string &dir = cached.dir, &cache = cached.cache, &run = cached.run,
                    &entry = cached.entry;
  const IntOpsCase& c = cached.c;
  ASSERT_EQ(::unlink(entry.c_str()), 0);
  ASSERT_EQ(::mkfifo(entry.c_str(), 0600), 0) << std::strerror(errno);

  TimedResult again = RunCliWithDeadline(run + " --out " + dir + "/out", kRunDeadline);
  ASSERT_FALSE(again.timed_out) << "run hung on a FIFO entry";
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_EQ(CounterIn(again.out, "PersistentCacheCorrupt"), 1) << again.out;
  EXPECT_EQ(CounterIn(again.out, "PersistentCacheHit"), 0) << again.out;
  CheckOutputs(dir + "/out", c);

  struct stat st {};
  if (::lstat(entry.c_str(), &st) != 0 || !S_ISFIFO(st.st_mode)) {  // replaced by the run
    ::unlink(entry.c_str());
    ASSERT_EQ(::mkfifo(entry.c_str(), 0600), 0) << std::strerror(errno);
  }
  TimedResult info = RunCliWithDeadline("cache info --compile-cache " + cache, kInfoDeadline);
  ASSERT_FALSE(info.timed_out) << "cache info hung on a FIFO entry";
  ASSERT_EQ(info.exit_code, 0) << info.err;
  EXPECT_EQ(info.out.rfind(cache + ": 1 entries, 0 bytes\n", 0), 0u) << info.out;
  EXPECT_NE(info.out.find("0 bytes    (invalid: a FIFO, not an entry file)"), std::string::npos)
      << info.out;
  TimedResult clear = RunCliWithDeadline("cache clear --compile-cache " + cache, kInfoDeadline);
  ASSERT_FALSE(clear.timed_out) << "cache clear hung on a FIFO entry";
  ASSERT_EQ(clear.exit_code, 0) << clear.err;
  EXPECT_EQ(clear.out, "removed 0 entries from " + cache + "\n");
  ASSERT_EQ(::lstat(entry.c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode));
}

// A sparse file of 4,294,967,000 bytes under an entry's name is refused from its header: neither
// `run` nor `cache info` reads it (before, 4.8 GB and 4.2 GB of resident memory).
TEST(CliCacheTest, AHugeSparseFileUnderAnEntryNameIsNotRead) {
  CachedRun cached;
  ASSERT_NO_FATAL_FAILURE(ColdRunWithOneEntry(&cached));
  const std::string &cache = cached.cache, &run = cached.run, &entry = cached.entry;
  auto make_sparse = [&] {
    const int fd = ::open(entry.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    ASSERT_GE(fd, 0) << std::strerror(errno);
    EXPECT_EQ(::ftruncate(fd, 4'294'967'000), 0) << std::strerror(errno);
    ::close(fd);
  };
  constexpr int64_t kLimitKib = 1024 * 1024;  // far below the 4 GiB a read would take

  make_sparse();
  TimedResult info = RunCliWithDeadline("cache info --compile-cache " + cache, kInfoDeadline);
  ASSERT_FALSE(info.timed_out);
  ASSERT_EQ(info.exit_code, 0) << info.err;
  EXPECT_LT(info.seconds, 2.0) << "cache info read the file";
  EXPECT_LT(info.peak_rss_kib, kLimitKib) << "cache info read the file";
  EXPECT_NE(info.out.find("4294967000 bytes    (invalid)"), std::string::npos) << info.out;

  TimedResult again = RunCliWithDeadline(run, kRunDeadline);
  ASSERT_FALSE(again.timed_out);
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_EQ(CounterIn(again.out, "PersistentCacheCorrupt"), 1) << again.out;
  EXPECT_LT(again.peak_rss_kib, cached.cold_peak_rss_kib + kLimitKib) << "run read the file";
}

// Folders under entry names: listed as invalid with no size ("-1 bytes" before, and the total
// "-2 bytes"), and left by `cache clear`.
TEST(CliCacheTest, CacheInfoOnFoldersSaysWhatTheyAre) {
  const std::string cache = testing::MakeTempDir();
  for (char c : {'a', 'b'}) {
    ASSERT_TRUE(fs::create_directory(cache + "/" + std::string(64, c) + ".entry"));
  }
  TimedResult info = RunCliWithDeadline("cache info --compile-cache " + cache, kInfoDeadline);
  ASSERT_EQ(info.exit_code, 0) << info.err;
  EXPECT_EQ(info.out.rfind(cache + ": 2 entries, 0 bytes\n", 0), 0u) << info.out;
  for (const char* name : {"aaaaaaaaaaaaaaaa", "bbbbbbbbbbbbbbbb"}) {  // in either order
    EXPECT_NE(info.out.find(std::string("  ") + name +
                            "           0 bytes    (invalid: a directory, not an entry file)\n"),
              std::string::npos)
        << info.out;
  }
  EXPECT_EQ(info.out.find("-1"), std::string::npos) << info.out;
  TimedResult json =
      RunCliWithDeadline("cache info --compile-cache " + cache + " --json", kInfoDeadline);
  ASSERT_EQ(json.exit_code, 0) << json.err;
  EXPECT_EQ(json.out.find("-1"), std::string::npos) << json.out;
  EXPECT_NE(json.out.find("\"bytes\": 0}\n"), std::string::npos) << json.out;
  TimedResult clear = RunCliWithDeadline("cache clear --compile-cache " + cache, kInfoDeadline);
  ASSERT_EQ(clear.exit_code, 0) << clear.err;
  EXPECT_EQ(clear.out, "removed 0 entries from " + cache + "\n");
  EXPECT_TRUE(fs::is_directory(cache + "/" + std::string(64, 'a') + ".entry"));
}

// `cache clear` removes the cache's entries only: a user's file named like an entry and files
// starting ".tmp-" that shardrt did not write stay. A run that stores an entry (and so evicts)
// leaves a user's two-hour-old ".tmp-user-draft.txt" (before, it was deleted as a stale
// temporary file).
TEST(CliCacheTest, ClearAndEvictionLeaveFilesThatAreNotTheCaches) {
  const std::string dir = testing::MakeTempDir();
  const std::string cache = dir + "/cache";
  ASSERT_TRUE(fs::create_directory(cache));
  const IntOpsCase c = WriteIntOpsArgs(dir);
  const std::string foreign[] = {cache + "/" + std::string(64, 'f') + ".entry",
                                 cache + "/.tmp-user-draft.txt", cache + "/.tmp-123-abc"};
  for (const std::string& f : foreign) WriteAged(f, "the user's words", 2 * 3600);

  TimedResult stored = RunCliWithDeadline(
      "run " + kProgram + " --devices 8 " + c.args + " --compile-cache " + cache + " --metrics",
      kRunDeadline);
  ASSERT_EQ(stored.exit_code, 0) << stored.err;
  EXPECT_EQ(CounterIn(stored.out, "PersistentCacheMiss"), 1) << stored.out;
  for (const std::string& f : foreign) EXPECT_EQ(ReadText(f), "the user's words") << f;

  TimedResult clear = RunCliWithDeadline("cache clear --compile-cache " + cache, kInfoDeadline);
  ASSERT_EQ(clear.exit_code, 0) << clear.err;
  EXPECT_EQ(clear.out, "removed 1 entries from " + cache + "\n");
  for (const std::string& f : foreign) EXPECT_EQ(ReadText(f), "the user's words") << f;
  JsonValue json = InfoJson(cache);
  ASSERT_EQ(json["entries"].array.size(), 1u) << "the user's file, listed as invalid";
  EXPECT_FALSE(json["entries"].array[0]["valid"].boolean);
}

}  // namespace
}  // namespace shardrt::cli
