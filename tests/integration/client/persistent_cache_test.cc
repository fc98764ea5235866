// The persistent compile cache (shardrt/client/persistent_cache.h) on the real plugin with 8 CPU
// devices. A fresh ComputationClient stands for a new process: its in-memory cache is empty, so
// Compile consults the directory. Every test works in its own temporary directory.
//
// Covered: a miss then a hit across clients (same outputs, no compile, no more introspection than
// a compile); the directory from RuntimeOptions or $SHARDRT_COMPILE_CACHE; concurrent writers;
// every kind of damaged entry (truncated, flipped byte, garbage, another format version, another
// key's entry, an executable the plugin refuses) recompiled, counted and replaced; directories
// that cannot be used (a file, read-only, an entry's name taken); LRU eviction and its refresh
// on a hit; what changes a key; Inspect and Clear.
#include <fcntl.h>
#include <sys/fsuid.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include "client/persistent_cache_store.h"
#include "client_test_util.h"
#include "compile_cache.pb.h"
#include "shardrt/base/metrics.h"
#include "shardrt/client/persistent_cache.h"

namespace shardrt {
namespace {

namespace fs = std::filesystem;
using namespace shardrt::testing;

// ------------------------------------------------------------------------------------------
// Helpers.

// The entry file's framing (persistent_cache_store.h): magic, version, 4 zero bytes, payload
// length, SHA-256 of the payload.
constexpr size_t kHeaderBytes = 8 + 4 + 4 + 8 + 32;
constexpr char kMagic[8] = {'S', 'H', 'R', 'T', 'C', 'C', '\0', '\1'};

// A program without a declared partition count: y = 2x on f32[8], replicated, so it compiles
// for any number of devices (each count is another executable, another key).
constexpr char kScaleAnyProgram[] = R"(
module @scale_any attributes {mhlo.num_replicas = 1 : i32} {
  func.func public @main(%x: tensor<8xf32>) -> tensor<8xf32> {
    %two = stablehlo.constant dense<2.0> : tensor<8xf32>
    %y = stablehlo.multiply %x, %two : tensor<8xf32>
    return %y : tensor<8xf32>
  }
}
)";

std::string MakeTempDir() {
  std::string tmpl = ::testing::TempDir() + "/shardrt_pcache_XXXXXX";
  EXPECT_NE(mkdtemp(tmpl.data()), nullptr) << std::strerror(errno);
  return tmpl;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
  ASSERT_TRUE(out.good()) << path;
}

// Sets a file's modification time to `seconds` after the epoch (exactly: no 1-second rounding).
void SetMtime(const std::string& path, int64_t seconds) {
  struct timespec times[2];
  times[0].tv_sec = seconds;
  times[0].tv_nsec = 0;
  times[1] = times[0];
  ASSERT_EQ(::utimensat(AT_FDCWD, path.c_str(), times, 0), 0) << path << std::strerror(errno);
}

int64_t MtimeOf(const std::string& path) {
  struct stat st;
  EXPECT_EQ(::stat(path.c_str(), &st), 0) << path;
  return st.st_mtim.tv_sec;
}

// The names of the `*.entry` files in `dir`, sorted.
std::vector<std::string> EntryFiles(const std::string& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.size() > 6 && name.ends_with(".entry")) out.push_back(name);
  }
  std::sort(out.begin(), out.end());
  return out;
}

// The counters these tests watch, at one moment; differences with operator-.
struct Counts {
  int64_t hit = 0, miss = 0, corrupt = 0, error = 0, uncached = 0, cached = 0, introspection = 0;

  static Counts Now() {
    MetricsRegistry& m = GlobalMetrics();
    return {m.CounterValue(kPersistentCacheHit),    m.CounterValue(kPersistentCacheMiss),
            m.CounterValue(kPersistentCacheCorrupt), m.CounterValue(kPersistentCacheError),
            m.CounterValue(kUncachedCompile),       m.CounterValue(kCachedCompile),
            m.CounterValue(kExecutableIntrospection)};
  }
  Counts operator-(const Counts& o) const {
    return {hit - o.hit,           miss - o.miss,         corrupt - o.corrupt,
            error - o.error,       uncached - o.uncached, cached - o.cached,
            introspection - o.introspection};
  }
};

std::ostream& operator<<(std::ostream& os, const Counts& c) {
  return os << "hit " << c.hit << " miss " << c.miss << " corrupt " << c.corrupt << " error "
            << c.error << " uncached " << c.uncached << " cached " << c.cached
            << " introspection " << c.introspection;
}

// A ComputationClient over the shared test client with the persistent cache in `dir`: what a
// new process using that directory sees (an empty in-memory cache).
std::unique_ptr<ComputationClient> NewClientAsIs(const std::string& dir, int64_t max_bytes) {
  ComputationClientOptions options;
  options.num_threads = 2;
  options.max_device_parts_in_flight = kNumDevices;  // the plugin runs at least one per device
  options.persistent_cache.directory = dir;
  options.persistent_cache.max_bytes = max_bytes;
  auto client = ComputationClient::Create(TestClient(), options);
  EXPECT_TRUE(client.ok()) << client.status();
  return client.ok() ? std::move(*client) : nullptr;
}

// Opening a cache in a new directory hashes the plugin file (hundreds of MB, most of a second);
// the directory then remembers the digest (plugin-digests/). Tests copy that memo, made once per
// process, into their directories. Failures are ignored (a directory may be unusable on
// purpose; the cache then hashes the plugin itself).
void SeedPluginDigest(const std::string& dir) {
  static const std::string seed = [] {
    const std::string seed_dir = MakeTempDir();
    NewClientAsIs(seed_dir, 0);  // computes and stores the memo
    return seed_dir + "/plugin-digests";
  }();
  std::error_code ec;
  if (!fs::is_directory(dir, ec) || !fs::is_directory(seed, ec)) return;
  fs::create_directories(dir + "/plugin-digests", ec);
  if (!ec) fs::copy(seed, dir + "/plugin-digests",
                     fs::copy_options::recursive | fs::copy_options::skip_existing, ec);
}

// NewClientAsIs on `dir` with the plugin's digest seeded.
std::unique_ptr<ComputationClient> NewClient(const std::string& dir,
                                             int64_t max_bytes = int64_t{1} << 40) {
  SeedPluginDigest(dir);
  return NewClientAsIs(dir, max_bytes);
}

CompileRequest IntOpsRequest() {
  CompileRequest request;
  request.name = "int_ops";
  request.program = ReadTestData("int_ops.mlir");
  request.options.num_partitions = 8;
  return request;
}

CompileRequest ScaleRequest(int partitions) {
  CompileRequest request;
  request.name = "scale_any";
  request.program = kScaleAnyProgram;
  request.options.num_partitions = partitions;
  return request;
}

ComputationPtr MustCompile(ComputationClient& client, const CompileRequest& request) {
  auto c = client.Compile(request);
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? *c : nullptr;
}

// Runs int_ops.mlir's computation on fixed random data and checks both outputs against the
// host (y = 3x + b, m = column maxima). Returns the outputs' bytes.
std::vector<std::vector<int32_t>> RunIntOps(ComputationClient& client, const ComputationPtr& c) {
  if (c == nullptr) {
    ADD_FAILURE() << "no computation";
    return {};
  }
  std::vector<int32_t> x(64), b = {5, -7, 1 << 20, 0};
  std::mt19937 rng(11);
  for (int32_t& v : x) v = static_cast<int32_t>(rng() % 2001) - 1000;
  DataPtr dx = Upload(client, MakeArray(ElementType::kS32, {16, 4}, x),
                      c->parameter_layout(0)->sharding);
  DataPtr db = Upload(client, MakeArray(ElementType::kS32, {4}, b),
                      c->parameter_layout(1)->sharding);
  if (dx == nullptr || db == nullptr) return {};
  auto out = client.ExecuteReplicated(*c, {dx, db});
  EXPECT_TRUE(out.ok()) << out.status();
  if (!out.ok() || out->size() != 2) return {};
  std::vector<int32_t> y = Values<int32_t>(Download(client, (*out)[0]));
  std::vector<int32_t> m = Values<int32_t>(Download(client, (*out)[1]));
  EXPECT_EQ(y.size(), 64u);
  EXPECT_EQ(m.size(), 4u);
  if (y.size() != 64 || m.size() != 4) return {};
  for (int r = 0; r < 16; ++r) {
    for (int col = 0; col < 4; ++col) EXPECT_EQ(y[r * 4 + col], 3 * x[r * 4 + col] + b[col]);
  }
  for (int col = 0; col < 4; ++col) {
    int32_t e = x[col];
    for (int r = 1; r < 16; ++r) e = std::max(e, x[r * 4 + col]);
    EXPECT_EQ(m[col], e);
  }
  return {y, m};
}

// Runs scale_any's computation (replicated f32[8]) and checks y = 2x.
void RunScale(ComputationClient& client, const ComputationPtr& c) {
  ASSERT_NE(c, nullptr);
  std::vector<float> x = {0.5f, -1, 2, 3.25f, -4, 5, 6.5f, -7};
  DataPtr dx = Upload(client, MakeArray(ElementType::kF32, {8}, x), Sharding::Replicated(),
                      c->num_devices());
  ASSERT_NE(dx, nullptr);
  auto out = client.ExecuteReplicated(*c, {dx});
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->size(), 1u);
  std::vector<float> y = Values<float>(Download(client, (*out)[0]));
  ASSERT_EQ(y.size(), 8u);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(y[i], 2 * x[i]);
}

// The entry file's bytes around `payload` (as PersistentCacheStore::Store writes them).
std::string Frame(const std::string& payload, uint32_t version = 1) {
  std::string file(kMagic, 8);
  for (int i = 0; i < 4; ++i) file.push_back(static_cast<char>((version >> (8 * i)) & 0xFF));
  file.append(4, '\0');
  const uint64_t n = payload.size();
  for (int i = 0; i < 8; ++i) file.push_back(static_cast<char>((n >> (8 * i)) & 0xFF));
  file += Sha256().Update(payload).Finish();
  file += payload;
  return file;
}

class PersistentCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NE(TestClient(), nullptr);
    dir_ = MakeTempDir();
  }
  void TearDown() override {
    std::error_code ec;
    for (const fs::directory_entry& e : fs::recursive_directory_iterator(dir_, ec)) {
      if (e.is_directory()) ::chmod(e.path().c_str(), 0755);
    }
    ::chmod(dir_.c_str(), 0755);
    fs::remove_all(dir_, ec);
  }
  std::string Path(const std::string& name) const { return dir_ + "/" + name; }

  std::string dir_;
};

// ------------------------------------------------------------------------------------------
// Miss, then hit.

TEST_F(PersistentCacheTest, MissThenHitAcrossRuntimesGivesTheSameOutputs) {
  SeedPluginDigest(dir_);
  auto make_runtime = [&] {
    RuntimeOptions options;
    options.devices = kNumDevices;
    options.host_threads = 2;
    options.compile_cache.directory = dir_;
    options.compile_cache_env = CompileCacheEnv::kIgnore;
    auto runtime = Runtime::Create(options);
    EXPECT_TRUE(runtime.ok()) << runtime.status();
    return runtime.ok() ? std::move(*runtime) : nullptr;
  };
  std::vector<std::vector<int32_t>> compiled_out, loaded_out;
  ComputationPtr compiled, loaded;
  Counts compile_cost;
  {
    std::unique_ptr<Runtime> first = make_runtime();
    ASSERT_NE(first, nullptr);
    const Counts before = Counts::Now();
    compiled = MustCompile(first->client(), IntOpsRequest());
    compile_cost = Counts::Now() - before;
    ASSERT_NE(compiled, nullptr);
    EXPECT_EQ(compile_cost.miss, 1) << compile_cost;
    EXPECT_EQ(compile_cost.hit, 0) << compile_cost;
    EXPECT_EQ(compile_cost.uncached, 1) << compile_cost;
    EXPECT_EQ(compile_cost.corrupt + compile_cost.error, 0) << compile_cost;
    EXPECT_EQ(EntryFiles(dir_).size(), 1u);
    compiled_out = RunIntOps(first->client(), compiled);
    ASSERT_FALSE(compiled_out.empty());
  }
  std::unique_ptr<Runtime> second = make_runtime();
  ASSERT_NE(second, nullptr);
  const Counts before = Counts::Now();
  loaded = MustCompile(second->client(), IntOpsRequest());
  const Counts load_cost = Counts::Now() - before;
  ASSERT_NE(loaded, nullptr);
  EXPECT_EQ(load_cost.hit, 1) << load_cost;
  EXPECT_EQ(load_cost.miss, 0) << load_cost;
  EXPECT_EQ(load_cost.uncached, 0) << "a hit compiles nothing: " << load_cost;
  EXPECT_EQ(load_cost.corrupt + load_cost.error, 0) << load_cost;
  EXPECT_LE(load_cost.introspection, compile_cost.introspection)
      << "loaded: " << load_cost << "; compiled: " << compile_cost;
  EXPECT_LE(load_cost.introspection, 1) << load_cost;
  // The loaded computation has the compiled one's facts.
  EXPECT_EQ(loaded->name(), compiled->name());
  ASSERT_EQ(loaded->num_parameters(), compiled->num_parameters());
  ASSERT_EQ(loaded->num_outputs(), compiled->num_outputs());
  ASSERT_EQ(loaded->num_devices(), compiled->num_devices());
  for (size_t i = 0; i < loaded->num_devices(); ++i) {
    EXPECT_EQ(loaded->devices()[i]->id, compiled->devices()[i]->id);
  }
  for (size_t i = 0; i < loaded->num_parameters(); ++i) {
    EXPECT_EQ(loaded->parameter_layout(i)->ToString(), compiled->parameter_layout(i)->ToString());
    EXPECT_EQ(loaded->donates_parameter(i), compiled->donates_parameter(i));
  }
  for (size_t i = 0; i < loaded->num_outputs(); ++i) {
    EXPECT_EQ(loaded->output_layout(i)->ToString(), compiled->output_layout(i)->ToString());
  }
  // int_ops reduces over its sharded dimension: the partitioner adds an all-reduce, and the
  // loaded entry knows it too.
  EXPECT_FALSE(compiled->executable().signature().collective_free);
  EXPECT_FALSE(loaded->executable().signature().collective_free);
  loaded_out = RunIntOps(second->client(), loaded);
  EXPECT_EQ(loaded_out, compiled_out);
  // The same client again: its in-memory cache, not the directory.
  const Counts again_before = Counts::Now();
  EXPECT_EQ(MustCompile(second->client(), IntOpsRequest()), loaded);
  const Counts again = Counts::Now() - again_before;
  EXPECT_EQ(again.cached, 1) << again;
  EXPECT_EQ(again.hit + again.miss, 0) << again;
  EXPECT_EQ(EntryFiles(dir_).size(), 1u);
}

// Runtime: RuntimeOptions::compile_cache, else $SHARDRT_COMPILE_CACHE (with kRead); "off" there
// means none, as for the CLI.
TEST_F(PersistentCacheTest, PrecompileFillsTheCacheAndHoldsNothing) {
  std::unique_ptr<ComputationClient> client = NewClient(dir_);
  ASSERT_NE(client, nullptr);
  Counts before = Counts::Now();
  ASSERT_TRUE(client->Precompile(IntOpsRequest()).ok());
  Counts cost = Counts::Now() - before;
  EXPECT_EQ(cost.uncached, 1) << cost;  // compiled once, into the cache
  EXPECT_EQ(EntryFiles(dir_).size(), 1u);
  // Again: the entry is there, nothing compiles or loads.
  before = Counts::Now();
  ASSERT_TRUE(client->Precompile(IntOpsRequest()).ok());
  cost = Counts::Now() - before;
  EXPECT_EQ(cost.uncached + cost.hit + cost.miss + cost.cached, 0) << cost;
  // Nothing was kept in memory: Compile loads the entry, and the program runs.
  before = Counts::Now();
  ComputationPtr loaded = MustCompile(*client, IntOpsRequest());
  cost = Counts::Now() - before;
  ASSERT_NE(loaded, nullptr);
  EXPECT_EQ(cost.hit, 1) << cost;
  EXPECT_EQ(cost.uncached + cost.cached, 0) << cost;
  EXPECT_FALSE(RunIntOps(*client, loaded).empty());
  // Held in memory now: Precompile does not look further.
  before = Counts::Now();
  ASSERT_TRUE(client->Precompile(IntOpsRequest()).ok());
  cost = Counts::Now() - before;
  EXPECT_EQ(cost.uncached + cost.hit + cost.miss, 0) << cost;
  // Bad input is Compile's error.
  CompileRequest bad = IntOpsRequest();
  bad.program = "not a program";
  EXPECT_FALSE(client->Precompile(bad).ok());
}

TEST_F(PersistentCacheTest, PrecompileWithoutACacheIsCompile) {
  ComputationClientOptions options;
  options.num_threads = 2;
  options.max_device_parts_in_flight = kNumDevices;
  auto client = ComputationClient::Create(TestClient(), options);
  ASSERT_TRUE(client.ok()) << client.status();
  Counts before = Counts::Now();
  ASSERT_TRUE((*client)->Precompile(IntOpsRequest()).ok());
  EXPECT_EQ((Counts::Now() - before).uncached, 1);
  before = Counts::Now();
  ComputationPtr c = MustCompile(**client, IntOpsRequest());
  EXPECT_EQ((Counts::Now() - before).cached, 1);  // kept in memory
  ASSERT_NE(c, nullptr);
}

TEST_F(PersistentCacheTest, RuntimeTakesTheDirectoryFromTheEnvironmentWhenAllowed) {
  SeedPluginDigest(dir_);
  auto compile_with = [&](CompileCacheEnv mode, const char* value) {
    if (value != nullptr) {
      ::setenv(kCompileCacheEnv, value, 1);
    } else {
      ::unsetenv(kCompileCacheEnv);
    }
    RuntimeOptions options;
    options.devices = kNumDevices;
    options.host_threads = 2;
    options.compile_cache_env = mode;
    auto runtime = Runtime::Create(options);
    ::unsetenv(kCompileCacheEnv);
    EXPECT_TRUE(runtime.ok()) << runtime.status();
    if (!runtime.ok()) return Counts{};
    const Counts before = Counts::Now();
    RunScale((*runtime)->client(), MustCompile((*runtime)->client(), ScaleRequest(1)));
    return Counts::Now() - before;
  };
  EXPECT_EQ(compile_with(CompileCacheEnv::kRead, dir_.c_str()).miss, 1);
  EXPECT_EQ(EntryFiles(dir_).size(), 1u);
  EXPECT_EQ(compile_with(CompileCacheEnv::kRead, dir_.c_str()).hit, 1);
  for (auto [mode, value] : {std::pair{CompileCacheEnv::kIgnore, dir_.c_str()},
                             std::pair{CompileCacheEnv::kRead, static_cast<const char*>(nullptr)},
                             std::pair{CompileCacheEnv::kRead, ""},
                             std::pair{CompileCacheEnv::kRead, "off"}}) {
    SCOPED_TRACE(value == nullptr ? "unset" : value);
    const bool off_existed = fs::exists("off");
    const Counts d = compile_with(mode, value);
    EXPECT_EQ(d.hit + d.miss + d.error, 0) << "no cache: " << d;
    EXPECT_EQ(d.uncached, 1) << d;
    if (!off_existed && fs::exists("off")) {
      ADD_FAILURE() << "created a cache directory named 'off'";
      std::error_code ec;
      fs::remove_all("off", ec);
    }
  }
}

// One client compiling from several threads at once (as LlamaModel::Prepare does): each gets a
// working computation, every later call hits the in-memory cache, and one entry is kept.
TEST_F(PersistentCacheTest, ConcurrentCompilesOnOneClient) {
  std::unique_ptr<ComputationClient> client = NewClient(dir_);
  ASSERT_NE(client, nullptr);
  std::vector<ComputationPtr> computations(4);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < computations.size(); ++i) {
    threads.emplace_back([&, i] { computations[i] = MustCompile(*client, ScaleRequest(2)); });
  }
  for (std::thread& t : threads) t.join();
  for (const ComputationPtr& c : computations) RunScale(*client, c);
  const Counts before = Counts::Now();
  EXPECT_EQ(MustCompile(*client, ScaleRequest(2)), MustCompile(*client, ScaleRequest(2)));
  EXPECT_EQ((Counts::Now() - before).cached, 2);
  EXPECT_EQ(EntryFiles(dir_).size(), 1u);
}

TEST_F(PersistentCacheTest, ConcurrentClientsOnAnEmptyCacheLeaveOneValidEntry) {
  std::unique_ptr<ComputationClient> a = NewClient(dir_), b = NewClient(dir_);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  ComputationPtr ca, cb;
  std::thread ta([&] { ca = MustCompile(*a, ScaleRequest(2)); });
  std::thread tb([&] { cb = MustCompile(*b, ScaleRequest(2)); });
  ta.join();
  tb.join();
  RunScale(*a, ca);
  RunScale(*b, cb);
  auto info = InspectPersistentCache(dir_);
  ASSERT_TRUE(info.ok()) << info.status();
  ASSERT_EQ(info->entries.size(), 1u);
  EXPECT_TRUE(info->entries[0].valid);
  for (const fs::directory_entry& e : fs::directory_iterator(dir_)) {
    EXPECT_FALSE(e.path().filename().string().starts_with(".tmp-")) << e.path();
  }
}

// ------------------------------------------------------------------------------------------
// Damaged entries: each is counted, removed, compiled again (correct results) and replaced by a
// valid entry that the next client loads.

// A valid entry of int_ops.mlir (its file name and bytes), and one of another key (scale_any on
// one device), each made once per process in a directory of its own.
struct GoldenEntry {
  std::string name, bytes;
};

GoldenEntry MakeEntry(const CompileRequest& request) {
  GoldenEntry g;
  const std::string dir = MakeTempDir();
  std::unique_ptr<ComputationClient> client = NewClient(dir);
  if (client != nullptr && MustCompile(*client, request) != nullptr) {
    std::vector<std::string> files = EntryFiles(dir);
    EXPECT_EQ(files.size(), 1u);
    if (files.size() == 1) g = {files[0], ReadFile(dir + "/" + files[0])};
  }
  std::error_code ec;
  fs::remove_all(dir, ec);
  return g;
}

const GoldenEntry& Golden() {
  static const GoldenEntry golden = MakeEntry(IntOpsRequest());
  return golden;
}

const GoldenEntry& OtherKeyEntry() {
  static const GoldenEntry other = MakeEntry(ScaleRequest(1));
  return other;
}

struct DamageCase {
  const char* name;
  // The damaged file from a valid entry of this key and (when `other_key`) a valid entry of
  // another key.
  std::string (*damage)(const std::string& valid, const std::string& other);
  bool other_key = false;
};

std::string FlipByte(std::string s, size_t i) {
  s[i] = static_cast<char>(s[i] ^ 0x5A);
  return s;
}

const DamageCase kDamageCases[] = {
    {"Empty", [](const std::string&, const std::string&) { return std::string(); }},
    {"TruncatedInTheChecksum",
     [](const std::string& v, const std::string&) { return v.substr(0, kHeaderBytes - 7); }},
    {"HeaderOnly", [](const std::string& v, const std::string&) { return v.substr(0, kHeaderBytes); }},
    {"TruncatedInThePayload",
     [](const std::string& v, const std::string&) { return v.substr(0, v.size() / 2); }},
    {"LastByteMissing",
     [](const std::string& v, const std::string&) { return v.substr(0, v.size() - 1); }},
    {"OneByteTooMany", [](const std::string& v, const std::string&) { return v + "x"; }},
    {"PayloadByteFlipped",
     [](const std::string& v, const std::string&) { return FlipByte(v, kHeaderBytes + v.size() / 3); }},
    {"ChecksumByteFlipped",
     [](const std::string& v, const std::string&) { return FlipByte(v, 24 + 5); }},
    {"MagicByteFlipped", [](const std::string& v, const std::string&) { return FlipByte(v, 2); }},
    {"LengthFieldChanged", [](const std::string& v, const std::string&) { return FlipByte(v, 16); }},
    {"RandomGarbage",
     [](const std::string& v, const std::string&) {
       std::mt19937 rng(7);
       std::string s(v.size(), '\0');
       for (char& c : s) c = static_cast<char>(rng());
       return s;
     }},
    {"VersionChanged",
     [](const std::string& v, const std::string&) {
       std::string s = v;
       s[8] = 2;  // format version 2, payload and checksum untouched
       return s;
     }},
    {"ForeignEntryOfAnotherKey",
     [](const std::string&, const std::string& other) { return other; }, /*other_key=*/true},
    {"ExecutableBytesAreGarbage",
     [](const std::string& v, const std::string&) {
       cache::CompileCacheEntry entry;
       EXPECT_TRUE(entry.ParseFromString(v.substr(kHeaderBytes)));
       std::mt19937 rng(3);
       std::string garbage(entry.executable().size(), '\0');
       for (char& c : garbage) c = static_cast<char>(rng());
       entry.set_executable(garbage);
       return Frame(entry.SerializeAsString());
     }},
    {"ExecutableBytesTruncated",
     [](const std::string& v, const std::string&) {
       cache::CompileCacheEntry entry;
       EXPECT_TRUE(entry.ParseFromString(v.substr(kHeaderBytes)));
       entry.set_executable(entry.executable().substr(0, entry.executable().size() / 2));
       return Frame(entry.SerializeAsString());
     }},
    {"PayloadIsNotAnEntry",
     [](const std::string&, const std::string&) { return Frame(std::string(100, '\xff')); }},
};

class DamagedEntryTest : public PersistentCacheTest,
                         public ::testing::WithParamInterface<DamageCase> {};

TEST_P(DamagedEntryTest, IsCountedRecompiledAndReplaced) {
  const GoldenEntry& golden = Golden();
  ASSERT_FALSE(golden.name.empty());
  std::string other;
  if (GetParam().other_key) {
    ASSERT_FALSE(OtherKeyEntry().bytes.empty());
    ASSERT_NE(OtherKeyEntry().name, golden.name);
    other = OtherKeyEntry().bytes;
  }
  const std::string damaged = GetParam().damage(golden.bytes, other);
  ASSERT_NE(damaged, golden.bytes);
  WriteFile(Path(golden.name), damaged);

  std::unique_ptr<ComputationClient> client = NewClient(dir_);
  ASSERT_NE(client, nullptr);
  const Counts before = Counts::Now();
  ComputationPtr c = MustCompile(*client, IntOpsRequest());
  const Counts d = Counts::Now() - before;
  EXPECT_EQ(d.corrupt, 1) << d;
  EXPECT_EQ(d.miss, 1) << d;
  EXPECT_EQ(d.hit, 0) << d;
  EXPECT_EQ(d.error, 0) << d;
  EXPECT_EQ(d.uncached, 1) << d;
  EXPECT_FALSE(RunIntOps(*client, c).empty());

  // A fresh, valid entry in its place, which the next client loads.
  EXPECT_EQ(EntryFiles(dir_), std::vector<std::string>{golden.name});
  auto info = InspectPersistentCache(dir_);
  ASSERT_TRUE(info.ok()) << info.status();
  ASSERT_EQ(info->entries.size(), 1u);
  EXPECT_TRUE(info->entries[0].valid);
  EXPECT_EQ(info->entries[0].name, "int_ops");
  std::unique_ptr<ComputationClient> next = NewClient(dir_);
  ASSERT_NE(next, nullptr);
  const Counts before_hit = Counts::Now();
  ComputationPtr loaded = MustCompile(*next, IntOpsRequest());
  const Counts h = Counts::Now() - before_hit;
  EXPECT_EQ(h.hit, 1) << h;
  EXPECT_EQ(h.uncached + h.corrupt, 0) << h;
  EXPECT_FALSE(RunIntOps(*next, loaded).empty());
}

INSTANTIATE_TEST_SUITE_P(AllKinds, DamagedEntryTest, ::testing::ValuesIn(kDamageCases),
                         [](const ::testing::TestParamInfo<DamageCase>& info) {
                           return std::string(info.param.name);
                         });

// ------------------------------------------------------------------------------------------
// Directories that cannot be used cost the cache, never the run.

TEST_F(PersistentCacheTest, DirectoryThatIsARegularFileCountsAnErrorAndCompiles) {
  WriteFile(Path("file"), "not a directory");
  for (const std::string& path : {Path("file"), Path("file/below")}) {
    SCOPED_TRACE(path);
    const Counts before = Counts::Now();
    std::unique_ptr<ComputationClient> client = NewClient(path);
    ASSERT_NE(client, nullptr) << "an unusable cache must not fail Create";
    ComputationPtr c = MustCompile(*client, IntOpsRequest());
    const Counts d = Counts::Now() - before;
    EXPECT_EQ(d.error, 1) << d;
    EXPECT_EQ(d.uncached, 1) << d;
    EXPECT_EQ(d.hit + d.miss + d.corrupt, 0) << "no cache to consult: " << d;
    EXPECT_FALSE(RunIntOps(*client, c).empty());
  }
  EXPECT_EQ(ReadFile(Path("file")), "not a directory");
}

// Whether a file can be created in `dir` (by this thread's file-system credentials).
bool CanCreateIn(const std::string& dir) {
  const std::string probe = dir + "/probe";
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return false;
  ::close(fd);
  ::unlink(probe.c_str());
  return true;
}

TEST_F(PersistentCacheTest, ReadOnlyDirectoryCountsAnErrorAndCompiles) {
  const std::string cache = Path("ro");
  ASSERT_EQ(::chmod(dir_.c_str(), 0755), 0);  // mkdtemp's 0700 would keep the other user out
  ASSERT_EQ(::mkdir(cache.c_str(), 0755), 0);
  SeedPluginDigest(cache);  // readable, as another process may have left it
  ASSERT_EQ(::chmod(cache.c_str(), 0555), 0);
  // Root writes through 0555. Then this test drops to another file-system user id, on a thread
  // of its own (setfsuid is per thread; going from 0 to non-zero clears the capabilities that
  // override permissions) and runs the whole "process" there.
  const bool as_root = CanCreateIn(cache);
  std::atomic<bool> skipped = false;
  auto body = [&] {
    if (as_root) {
      ::setfsuid(65534);
      if (CanCreateIn(cache)) {
        skipped = true;
        return;
      }
    }
    const Counts before = Counts::Now();
    std::unique_ptr<ComputationClient> client = NewClient(cache);
    ASSERT_NE(client, nullptr);
    ComputationPtr c = MustCompile(*client, IntOpsRequest());
    const Counts d = Counts::Now() - before;
    EXPECT_EQ(d.miss, 1) << d;
    EXPECT_GE(d.error, 1) << d;
    EXPECT_EQ(d.uncached, 1) << d;
    EXPECT_EQ(d.corrupt, 0) << d;
    EXPECT_FALSE(RunIntOps(*client, c).empty());
  };
  std::thread(body).join();
  if (skipped) GTEST_SKIP() << "the directory stays writable (running with file capabilities)";
  EXPECT_TRUE(EntryFiles(cache).empty());
}

TEST_F(PersistentCacheTest, EntryPathTakenByADirectoryCountsAndCompiles) {
  const GoldenEntry& golden = Golden();
  ASSERT_FALSE(golden.name.empty());
  ASSERT_EQ(::mkdir(Path(golden.name).c_str(), 0755), 0);
  ASSERT_EQ(::mkdir(Path(golden.name + "/inside").c_str(), 0755), 0);
  std::unique_ptr<ComputationClient> client = NewClient(dir_);
  ASSERT_NE(client, nullptr);
  const Counts before = Counts::Now();
  ComputationPtr c = MustCompile(*client, IntOpsRequest());
  const Counts d = Counts::Now() - before;
  EXPECT_EQ(d.hit, 0) << d;
  EXPECT_EQ(d.uncached, 1) << d;
  EXPECT_GE(d.corrupt + d.error, 1) << "the failed write is counted: " << d;
  EXPECT_FALSE(RunIntOps(*client, c).empty());
  EXPECT_TRUE(fs::is_directory(Path(golden.name + "/inside")));
}

// ------------------------------------------------------------------------------------------
// Eviction: least recently used first, a hit refreshing an entry.

TEST_F(PersistentCacheTest, EvictsTheLeastRecentlyUsedAndAHitRefreshes) {
  // The sizes of the three entries (scale_any for 1, 2 and 4 devices), from a probe directory.
  const std::string probe = Path("probe");
  ASSERT_TRUE(fs::create_directory(probe));
  std::map<int, std::pair<std::string, int64_t>> entry;  // devices -> (file, bytes)
  {
    std::unique_ptr<ComputationClient> client = NewClient(probe);
    ASSERT_NE(client, nullptr);
    for (int devices : {1, 2, 4}) {
      std::vector<std::string> before = EntryFiles(probe);
      ASSERT_NE(MustCompile(*client, ScaleRequest(devices)), nullptr);
      for (const std::string& f : EntryFiles(probe)) {
        if (std::find(before.begin(), before.end(), f) == before.end()) {
          entry[devices] = {f, static_cast<int64_t>(fs::file_size(probe + "/" + f))};
        }
      }
    }
  }
  ASSERT_EQ(entry.size(), 3u);
  std::vector<int64_t> sizes = {entry[1].second, entry[2].second, entry[4].second};
  std::sort(sizes.begin(), sizes.end());
  // Room for any two entries, not for three.
  const int64_t max_bytes = sizes[1] + sizes[2];
  ASSERT_LT(max_bytes, sizes[0] + sizes[1] + sizes[2]);
  const std::string cache = Path("lru");
  ASSERT_TRUE(fs::create_directory(cache));
  const std::string f1 = cache + "/" + entry[1].first, f2 = cache + "/" + entry[2].first,
                    f4 = cache + "/" + entry[4].first;
  // Entries for 1 and 2 devices, 1 the older: then compiling for 4 evicts 1.
  fs::copy_file(probe + "/" + entry[1].first, f1);
  fs::copy_file(probe + "/" + entry[2].first, f2);
  const int64_t past = static_cast<int64_t>(std::time(nullptr)) - 10'000;
  SetMtime(f1, past);
  SetMtime(f2, past + 100);
  {
    std::unique_ptr<ComputationClient> client = NewClient(cache, max_bytes);
    ASSERT_NE(client, nullptr);
    const Counts before = Counts::Now();
    RunScale(*client, MustCompile(*client, ScaleRequest(4)));
    EXPECT_EQ((Counts::Now() - before).miss, 1);
  }
  EXPECT_FALSE(fs::exists(f1)) << "the least recently used entry stays";
  EXPECT_TRUE(fs::exists(f2));
  EXPECT_TRUE(fs::exists(f4));
  // Now 2 is older than 4; a hit on 2 makes it the newer, so compiling for 1 evicts 4.
  SetMtime(f2, past + 200);
  SetMtime(f4, past + 300);
  {
    std::unique_ptr<ComputationClient> client = NewClient(cache, max_bytes);
    ASSERT_NE(client, nullptr);
    const Counts before = Counts::Now();
    RunScale(*client, MustCompile(*client, ScaleRequest(2)));
    EXPECT_EQ((Counts::Now() - before).hit, 1);
    EXPECT_GT(MtimeOf(f2), past + 300) << "a hit refreshes the entry's time";
    const Counts before_miss = Counts::Now();
    RunScale(*client, MustCompile(*client, ScaleRequest(1)));
    EXPECT_EQ((Counts::Now() - before_miss).miss, 1);
  }
  EXPECT_TRUE(fs::exists(f2)) << "the entry just hit was evicted";
  EXPECT_FALSE(fs::exists(f4));
  EXPECT_TRUE(fs::exists(f1));
  int64_t total = 0;
  for (const std::string& f : EntryFiles(cache)) total += fs::file_size(cache + "/" + f);
  EXPECT_LE(total, max_bytes);
}

TEST_F(PersistentCacheTest, AnEntryLargerThanTheLimitIsNotKept) {
  std::unique_ptr<ComputationClient> client = NewClient(dir_, /*max_bytes=*/1000);
  ASSERT_NE(client, nullptr);
  const Counts before = Counts::Now();
  RunScale(*client, MustCompile(*client, ScaleRequest(1)));
  const Counts d = Counts::Now() - before;
  EXPECT_EQ(d.uncached, 1) << d;
  EXPECT_EQ(d.error, 0) << d;
  EXPECT_TRUE(EntryFiles(dir_).empty());
}

// ------------------------------------------------------------------------------------------
// What changes a key.

class KeyTest : public PersistentCacheTest {
 protected:
  CacheEnvironment BaseEnvironment() {
    CacheEnvironment env;
    env.plugin_path = Path("plugin.so");
    env.api_version = "0.81";
    env.attributes = {"xla_version=1", "stablehlo_current_version=1.2.3"};
    env.platform = "cpu 0.1";
    env.cpu = "vendor_id=GenuineIntel\nflags=avx2\n";
    return env;
  }
  // The key of `request` under `env`, with the cache in this test's directory.
  std::string KeyOf(const CacheEnvironment& env, absl::string_view request = "request") {
    PersistentCacheOptions options;
    options.directory = Path("cache");
    auto store = PersistentCacheStore::Open(options, env);
    EXPECT_TRUE(store.ok()) << store.status();
    return store.ok() ? HexDigest((*store)->Key(request)) : "";
  }
};

TEST_F(KeyTest, EveryPartOfTheEnvironmentAndTheRequestChangesTheKey) {
  WriteFile(Path("plugin.so"), "plugin bytes, version 1");
  WriteFile(Path("other.so"), "plugin bytes, version 2");
  const CacheEnvironment base = BaseEnvironment();
  const std::string key = KeyOf(base);
  ASSERT_EQ(key.size(), 64u);
  EXPECT_EQ(KeyOf(base), key) << "the same environment and request";
  CacheEnvironment reordered = base;
  std::reverse(reordered.attributes.begin(), reordered.attributes.end());
  EXPECT_EQ(KeyOf(reordered), key) << "attributes in another order";
  // The plugin is hashed, not named: a copy elsewhere is the same plugin.
  fs::copy_file(Path("plugin.so"), Path("copy.so"));
  CacheEnvironment copy = base;
  copy.plugin_path = Path("copy.so");
  EXPECT_EQ(KeyOf(copy), key) << "a copy of the plugin file";

  std::map<std::string, CacheEnvironment> changed;
  changed["plugin contents"] = base;
  changed["plugin contents"].plugin_path = Path("other.so");
  changed["api version"] = base;
  changed["api version"].api_version = "0.82";
  changed["attribute value"] = base;
  changed["attribute value"].attributes[0] = "xla_version=2";
  changed["attribute added"] = base;
  changed["attribute added"].attributes.push_back("extra=1");
  changed["platform"] = base;
  changed["platform"].platform = "cpu 0.2";
  changed["cpu"] = base;
  changed["cpu"].cpu = "vendor_id=GenuineIntel\nflags=avx2 avx512f\n";
  std::set<std::string> keys = {key};
  for (const auto& [what, env] : changed) {
    const std::string k = KeyOf(env);
    EXPECT_NE(k, key) << what;
    EXPECT_TRUE(keys.insert(k).second) << what << " gives another change's key";
  }
  EXPECT_NE(KeyOf(base, "another request"), key);
  EXPECT_NE(KeyOf(base, ""), key);
}

// The key the client itself files a request under (ComputationClient's fingerprint of it,
// which its in-memory cache uses and the persistent cache wraps in its own key): each part of
// the request that can change the executable gives another key, in both caches, and a request
// equal in all of them (the default device assignment spelled out included) the same key.
// IsCompiled reads the key without compiling anything.
TEST_F(KeyTest, TheClientsRequestKeyCoversOptionsProgramAndShapes) {
  const CompileRequest base = ScaleRequest(2);
  std::unique_ptr<ComputationClient> compiled_here = NewClient(dir_);
  ASSERT_NE(compiled_here, nullptr);
  ASSERT_NE(MustCompile(*compiled_here, base), nullptr);
  // A new client on the same directory: an empty in-memory cache, so only the entry answers.
  std::unique_ptr<ComputationClient> fresh = NewClient(dir_);
  ASSERT_NE(fresh, nullptr);
  auto is_compiled = [](ComputationClient& client, const CompileRequest& request) {
    absl::StatusOr<bool> compiled = client.IsCompiled(request);
    EXPECT_TRUE(compiled.ok()) << compiled.status();
    return compiled.ok() && *compiled;
  };

  std::map<std::string, CompileRequest> same;
  same["the same request"] = base;
  same["the default device assignment spelled out"] = base;
  same["the default device assignment spelled out"].options.device_assignment = {0, 1};
  std::map<std::string, CompileRequest> changed;
  changed["partitions"] = ScaleRequest(4);
  changed["device assignment"] = base;
  changed["device assignment"].options.device_assignment = {1, 0};
  changed["partitioner"] = base;
  changed["partitioner"].options.partitioner = pjrt::Partitioner::kShardy;
  changed["sharding propagation"] = base;
  changed["sharding propagation"].options.propagation =
      pjrt::ShardingPropagation::kAllowToOutputs;
  changed["a debug option"] = base;
  changed["a debug option"].options.debug_option_overrides = {
      {"xla_cpu_enable_fast_min_max", "false"}};
  changed["program"] = base;
  changed["program"].program += "// another program text\n";
  changed["global shapes"] = base;
  changed["global shapes"].global_shapes =
      GlobalShapes{{{ElementType::kF32, {16}}}, {{ElementType::kF32, {16}}}};
  for (ComputationClient* client : {compiled_here.get(), fresh.get()}) {
    SCOPED_TRACE(client == fresh.get() ? "persistent cache" : "in-memory cache");
    for (const auto& [what, request] : same) EXPECT_TRUE(is_compiled(*client, request)) << what;
    for (const auto& [what, request] : changed) {
      EXPECT_FALSE(is_compiled(*client, request)) << what << " keeps the key";
    }
  }
}

TEST_F(KeyTest, RewritingThePluginFileChangesTheKey) {
  WriteFile(Path("plugin.so"), "plugin bytes, version 1");
  SetMtime(Path("plugin.so"), 1'600'000'000);
  const CacheEnvironment env = BaseEnvironment();
  const std::string key = KeyOf(env);
  EXPECT_EQ(KeyOf(env), key) << "memoized digest";
  // Same size, same inode, other bytes and another modification time.
  {
    std::fstream f(Path("plugin.so"), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(0);
    f << "PLUGIN";
  }
  SetMtime(Path("plugin.so"), 1'600'000'100);
  const std::string rewritten = KeyOf(env);
  EXPECT_NE(rewritten, key);
  // Put back as it was (bytes and time; only the change time differs): the first key again.
  {
    std::fstream f(Path("plugin.so"), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(0);
    f << "plugin";
  }
  SetMtime(Path("plugin.so"), 1'600'000'000);
  EXPECT_EQ(KeyOf(env), key);
}

TEST_F(KeyTest, AMissingPluginFileFailsOpen) {
  CacheEnvironment env = BaseEnvironment();
  env.plugin_path = Path("missing.so");
  PersistentCacheOptions options;
  options.directory = Path("cache");
  EXPECT_FALSE(PersistentCacheStore::Open(options, env).ok());
  options.directory = "";
  WriteFile(Path("plugin.so"), "bytes");
  EXPECT_EQ(PersistentCacheStore::Open(options, BaseEnvironment()).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(PersistentCacheTest, TheSameProgramForOtherDeviceCountsIsAnotherEntry) {
  {
    std::unique_ptr<ComputationClient> client = NewClient(dir_);
    ASSERT_NE(client, nullptr);
    const Counts before = Counts::Now();
    RunScale(*client, MustCompile(*client, ScaleRequest(1)));
    RunScale(*client, MustCompile(*client, ScaleRequest(2)));
    const Counts d = Counts::Now() - before;
    EXPECT_EQ(d.miss, 2) << d;
    EXPECT_EQ(d.uncached, 2) << d;
  }
  EXPECT_EQ(EntryFiles(dir_).size(), 2u);
  // Another device assignment for the same count is another executable too.
  CompileRequest reassigned = ScaleRequest(2);
  reassigned.options.device_assignment = {3, 5};
  std::unique_ptr<ComputationClient> client = NewClient(dir_);
  ASSERT_NE(client, nullptr);
  const Counts before = Counts::Now();
  ComputationPtr c2 = MustCompile(*client, ScaleRequest(2));
  ComputationPtr c1 = MustCompile(*client, ScaleRequest(1));
  EXPECT_EQ((Counts::Now() - before).hit, 2);
  ASSERT_NE(c2, nullptr);
  ASSERT_NE(c1, nullptr);
  EXPECT_EQ(c2->num_devices(), 2u);
  EXPECT_EQ(c1->num_devices(), 1u);
  RunScale(*client, c1);
  RunScale(*client, c2);
  const Counts before_reassigned = Counts::Now();
  ComputationPtr c35 = MustCompile(*client, reassigned);
  EXPECT_EQ((Counts::Now() - before_reassigned).miss, 1);
  ASSERT_NE(c35, nullptr);
  ASSERT_EQ(c35->num_devices(), 2u);
  EXPECT_EQ(c35->devices()[0]->id, 3);
  EXPECT_EQ(c35->devices()[1]->id, 5);
  EXPECT_EQ(EntryFiles(dir_).size(), 3u);
}

// ------------------------------------------------------------------------------------------
// Inspect and Clear.

TEST_F(PersistentCacheTest, InspectListsEntriesAndClearRemovesOnlyTheCache) {
  {
    std::unique_ptr<ComputationClient> client = NewClient(dir_);
    ASSERT_NE(client, nullptr);
    MustCompile(*client, ScaleRequest(1));
    MustCompile(*client, IntOpsRequest());
  }
  std::vector<std::string> valid = EntryFiles(dir_);
  ASSERT_EQ(valid.size(), 2u);
  const std::string invalid(64, 'f');
  // An entry of the cache's format (its magic) whose header is damaged; a temporary file of a
  // shardrt process that is gone (pid 4194305 is above Linux's largest); a file of another
  // program's that only looks like a temporary file.
  const std::string magic("SHRTCC\0\1", 8);
  WriteFile(Path(invalid + ".entry"), magic + "not an entry");
  WriteFile(Path(".tmp-shardrt-4194305-0123456789abcdef"), "a half-written entry");
  WriteFile(Path(".tmp-123-abc"), "another program's draft");
  WriteFile(Path("notes.txt"), "not the cache's");
  ASSERT_TRUE(fs::create_directory(Path("subdir")));
  WriteFile(Path("subdir/" + valid[0]), "not the cache's either");
  // Times: the invalid entry most recently used, then valid[1], then valid[0].
  SetMtime(Path(valid[0]), 1'700'000'000);
  SetMtime(Path(valid[1]), 1'700'000'100);
  SetMtime(Path(invalid + ".entry"), 1'700'000'200);

  auto info = InspectPersistentCache(dir_);
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->directory, dir_);
  ASSERT_EQ(info->entries.size(), 3u);
  EXPECT_EQ(info->entries[0].file, invalid + ".entry");
  EXPECT_FALSE(info->entries[0].valid);
  EXPECT_EQ(info->entries[0].name, "");
  EXPECT_EQ(info->entries[0].bytes, 20);
  EXPECT_EQ(info->entries[0].modified_unix_seconds, 1'700'000'200);
  int64_t total = 20;
  for (int i : {1, 2}) {
    const PersistentCacheEntryInfo& e = info->entries[i];
    EXPECT_EQ(e.file, valid[2 - i]);
    EXPECT_TRUE(e.valid) << e.file;
    EXPECT_EQ(e.bytes, static_cast<int64_t>(fs::file_size(Path(e.file))));
    EXPECT_EQ(e.modified_unix_seconds, 1'700'000'000 + 100 * (2 - i));
    total += e.bytes;
  }
  std::set<std::string> names = {info->entries[1].name, info->entries[2].name};
  EXPECT_EQ(names, (std::set<std::string>{"int_ops", "scale_any"}));
  EXPECT_EQ(info->bytes, total);

  auto removed = ClearPersistentCache(dir_);
  ASSERT_TRUE(removed.ok()) << removed.status();
  EXPECT_EQ(*removed, 3);
  EXPECT_TRUE(EntryFiles(dir_).empty());
  EXPECT_FALSE(fs::exists(Path(".tmp-shardrt-4194305-0123456789abcdef")));
  EXPECT_EQ(ReadFile(Path(".tmp-123-abc")), "another program's draft");
  EXPECT_EQ(ReadFile(Path("notes.txt")), "not the cache's");
  EXPECT_TRUE(fs::exists(Path("subdir/" + valid[0])));
  auto empty = InspectPersistentCache(dir_);
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_TRUE(empty->entries.empty());
  EXPECT_EQ(empty->bytes, 0);

  // After Clear the cache works as new.
  std::unique_ptr<ComputationClient> client = NewClient(dir_);
  ASSERT_NE(client, nullptr);
  const Counts before = Counts::Now();
  RunScale(*client, MustCompile(*client, ScaleRequest(1)));
  EXPECT_EQ((Counts::Now() - before).miss, 1);
  EXPECT_EQ(EntryFiles(dir_).size(), 1u);
}

TEST_F(PersistentCacheTest, InspectAndClearOfAMissingDirectoryAreNotFound) {
  EXPECT_EQ(InspectPersistentCache(Path("missing")).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(ClearPersistentCache(Path("missing")).status().code(), absl::StatusCode::kNotFound);
  WriteFile(Path("file"), "x");
  EXPECT_EQ(InspectPersistentCache(Path("file")).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(ClearPersistentCache(Path("file")).status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(fs::exists(Path("file")));
}

}  // namespace
}  // namespace shardrt
