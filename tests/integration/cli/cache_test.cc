// The persistent compile cache across processes, through the CLI: `shardrt run --compile-cache
// DIR` misses then hits with the same outputs, `shardrt cache info|clear` list and empty the
// directory, two processes filling an empty cache at once leave one valid entry, and bad uses
// are one-line errors.
#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "../../common/mini_json.h"
#include "absl/strings/str_cat.h"
#include "cli/cli_runner.h"
#include "cli/npy.h"
#include "gtest/gtest.h"

namespace shardrt::cli {
namespace {

namespace fs = std::filesystem;
using testing::CliResult;
using testing::ExpectCleanError;
using testing::RunCliCaptured;
using shardrt::testing::JsonParser;
using shardrt::testing::JsonValue;

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
  auto command = [&](int i) {
    const std::string n = std::to_string(i);
    return std::string(SHARDRT_CLI_PATH) + " run " + kProgram + " --devices 8 " + c.args +
           " --compile-cache " + cache + " --metrics --out " + dir + "/out" + n + " >" + dir +
           "/stdout" + n + " 2>" + dir + "/stderr" + n;
  };
  const std::string shell = absl::StrCat("(", command(1), ") & a=$!; (", command(2),
                                        ") & b=$!; wait $a; ra=$?; wait $b; rb=$?; echo $ra $rb");
  FILE* pipe = popen(shell.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  int ra = -1, rb = -1;
  EXPECT_EQ(std::fscanf(pipe, "%d %d", &ra, &rb), 2);
  const int status = pclose(pipe);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  EXPECT_EQ(ra, 0);
  EXPECT_EQ(rb, 0);
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

}  // namespace
}  // namespace shardrt::cli
