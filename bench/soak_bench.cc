// Soak: many threads drive one 8-device Runtime for a long time; every value is checked against
// the host now and then, and host memory must stay flat once warm.
//
// Each of --threads threads runs --warmup steps, then (after the warm-up RSS sample, taken with
// every thread paused and the executor synchronized) --steps steps. One step is
//   ExecuteReplicated chain:  (x, acc) <- step(x, acc)   x + 1 and acc + column sums of x (an
//                                                        all-reduce across the 8 devices)
//   Executor chain:           y1 <- Schedule(add_one, x')     x' resharded back to the program's
//                                                             layout on device, that copy donated
//                             y2 <- Schedule(add_one, y1)     y1 (a placeholder) donated
//                             x' <- ReshardData(y2, {devices=[2,4]<=[8]}) on even steps,
//                                   ReplicateShardedData(y2) on odd ones
// so after k steps the first chain holds x0 + k and k * colsum(x0) + 16 * k(k-1)/2, the second
// x0' + 2k. Every --check-every steps and at the last one a thread downloads its arrays and
// compares them with these host values, and checks that y1 was donated. A wrong value, an error
// or RSS at the end more than --max-growth above the warm-up sample fails the run (exit 1).
//
//   build/bench/soak_bench [--threads 4] [--steps 2500] [--warmup W] [--check-every 100]
//                          [--max-growth 0.05]
//
// Prints a table of figures, then one line `SOAK {json}` for bench/soak. Needs the CPU plugin
// with 8 devices (as every shardrt process, PJRT_NPROC sets its worker threads).
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "shardrt/shardrt.h"

namespace shardrt::bench {
namespace {

constexpr int kDevices = 8;
constexpr int64_t kRows = 16, kCols = 4;

// One step of the ExecuteReplicated chain: (x, acc) -> (x + 1, acc + column sums of x). x is
// row-sharded, so the column sums need an all-reduce; acc is replicated.
constexpr char kStepProgram[] = R"(
module @soak_step attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%x: tensor<16x4xi32> {mhlo.sharding = "{devices=[8,1]<=[8]}"},
                         %acc: tensor<4xi32> {mhlo.sharding = "{replicated}"})
      -> (tensor<16x4xi32> {mhlo.sharding = "{devices=[8,1]<=[8]}"},
          tensor<4xi32> {mhlo.sharding = "{replicated}"}) {
    %one = stablehlo.constant dense<1> : tensor<16x4xi32>
    %next = stablehlo.add %x, %one : tensor<16x4xi32>
    %zero = stablehlo.constant dense<0> : tensor<i32>
    %sums = stablehlo.reduce(%x init: %zero) applies stablehlo.add across dimensions = [0]
        : (tensor<16x4xi32>, tensor<i32>) -> tensor<4xi32>
    %acc2 = stablehlo.add %acc, %sums : tensor<4xi32>
    return %next, %acc2 : tensor<16x4xi32>, tensor<4xi32>
  }
})";

// One step of the Executor chain: y = x + 1 with x donated to y.
constexpr char kAddOneProgram[] = R"(
module @soak_add_one attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%x: tensor<16x4xi32> {mhlo.sharding = "{devices=[8,1]<=[8]}",
                                               tf.aliasing_output = 0 : i32})
      -> (tensor<16x4xi32> {mhlo.sharding = "{devices=[8,1]<=[8]}"}) {
    %one = stablehlo.constant dense<1> : tensor<16x4xi32>
    %y = stablehlo.add %x, %one : tensor<16x4xi32>
    return %y : tensor<16x4xi32>
  }
})";

// The command line's settings (see the top of the file).
struct Options {
  int threads = 4;
  int64_t steps = 2500;
  int64_t warmup = -1;  // -1: steps / 5, within [10, 500]
  int64_t check_every = 100;
  double max_growth = 0.05;
};

// Resident set size of this process in bytes, from /proc/self/statm (0 if unreadable).
int64_t RssBytes() {
  std::ifstream statm("/proc/self/statm");
  int64_t size = 0, resident = 0;
  if (!(statm >> size >> resident)) return 0;
  return resident * sysconf(_SC_PAGESIZE);
}

// Peak resident set size of this process in bytes, from /proc/self/status VmHWM (0 if absent).
int64_t PeakRssBytes() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::atoll(line.c_str() + 6) * 1024;
  }
  return 0;
}

// `bytes` in MiB, for the table.
double MiB(int64_t bytes) { return static_cast<double>(bytes) / (1 << 20); }

// Parses the command line into `options`. Error: InvalidArgument naming the flag and value.
[[nodiscard]] absl::Status ParseArgs(int argc, char** argv, Options& options) {
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) return absl::InvalidArgumentError(absl::StrCat(flag, " needs a value"));
    const std::string value = argv[++i];
    int64_t n = 0;
    bool ok = true;
    if (flag == "--threads") {
      ok = absl::SimpleAtoi(value, &n) && n >= 1 && n <= 64;
      options.threads = static_cast<int>(n);
    } else if (flag == "--steps") {
      ok = absl::SimpleAtoi(value, &options.steps) && options.steps >= 1 &&
           options.steps <= 10'000'000;
    } else if (flag == "--warmup") {
      ok = absl::SimpleAtoi(value, &options.warmup) && options.warmup >= 1 &&
           options.warmup <= 10'000'000;
    } else if (flag == "--check-every") {
      ok = absl::SimpleAtoi(value, &options.check_every) && options.check_every >= 1;
    } else if (flag == "--max-growth") {
      ok = absl::SimpleAtod(value, &options.max_growth) && options.max_growth >= 0;
    } else {
      return absl::InvalidArgumentError(absl::StrCat("unknown flag ", flag));
    }
    if (!ok) return absl::InvalidArgumentError(absl::StrCat("flag ", flag, ": bad value '", value, "'"));
  }
  if (options.warmup < 0) options.warmup = std::clamp<int64_t>(options.steps / 5, 10, 500);
  // The last thread's accumulator reaches k * colsum(x0) + 16 * k(k-1)/2 after k steps: it must
  // stay within s32, as the device computes it.
  const int64_t k = options.warmup + options.steps;
  int64_t colsum = 0;
  for (int64_t r = 0; r < kRows; ++r) colsum += (options.threads - 1) * 1000 + r * kCols + kCols - 1;
  if (k * colsum + kRows * k * (k - 1) / 2 > INT32_MAX) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--warmup + --steps = ", k, " with --threads ", options.threads,
        ": the checked s32 accumulator would overflow; use fewer steps or threads"));
  }
  return absl::OkStatus();
}

// What every thread shares: the runtime's client and executor, the compiled programs and the
// alternative shardings. Read-only once made; its members are thread-safe.
struct Shared {
  ComputationClient* client = nullptr;  // borrowed from the Runtime
  Executor* executor = nullptr;         // borrowed from the Runtime
  ComputationPtr step, add_one;
  Sharding blocks;  // {devices=[2,4]<=[8]}
};

// One thread's two chains and the host values they must hold. Not thread-safe: one thread runs
// it (its arrays are its own; what it shares is thread-safe).
class Worker {
 public:
  Worker(const Shared& shared, int index) : s_(shared), index_(index) {}

  // Uploads the chains' starting arrays (values distinct per thread). Errors: the transfer's.
  [[nodiscard]] absl::Status Init() {
    x0_.resize(kRows * kCols);
    for (int64_t i = 0; i < kRows * kCols; ++i) x0_[i] = static_cast<int32_t>(index_ * 1000 + i);
    const std::vector<int32_t> zeros(kCols, 0);
    const HostArrayView views[] = {
        {ElementType::kS32, {kRows, kCols}, std::as_bytes(std::span(x0_))},
        {ElementType::kS32, {kCols}, std::as_bytes(std::span(zeros))},
        {ElementType::kS32, {kRows, kCols}, std::as_bytes(std::span(x0_))}};
    const std::shared_ptr<const DataLayout> layouts[] = {
        s_.step->parameter_layout(0), s_.step->parameter_layout(1),
        s_.add_one->parameter_layout(0)};
    SHARDRT_ASSIGN_OR_RETURN(std::vector<DataPtr> data, s_.client->TransferToDevice(views, layouts));
    x_ = data[0];
    acc_ = data[1];
    chained_ = data[2];
    return absl::OkStatus();
  }

  // Runs `count` more steps, checking values every `check_every` steps and after the last.
  // Errors: the first failed call or check, naming the thread and step.
  [[nodiscard]] absl::Status Run(int64_t count, int64_t check_every) {
    for (int64_t n = 0; n < count; ++n) {
      SHARDRT_RETURN_IF_ERROR(Step());
      ++steps_;
      if (steps_ % check_every == 0 || n + 1 == count) {
        SHARDRT_RETURN_IF_ERROR(Check());
      }
    }
    return absl::OkStatus();
  }

  // Value checks passed so far.
  int64_t checks() const { return checks_; }

 private:
  // `status` with "thread T step K: WHAT: " before its message (OK stays OK).
  [[nodiscard]] absl::Status Context(const absl::Status& status, const char* what) const {
    if (status.ok()) return status;
    return absl::Status(status.code(), absl::StrCat("thread ", index_, " step ", steps_ + 1, ": ",
                                                    what, ": ", status.message()));
  }

  // One step of both chains (see the top of the file). Errors: the failing call's, in Context.
  [[nodiscard]] absl::Status Step() {
    // ExecuteReplicated chain.
    absl::StatusOr<std::vector<DataPtr>> out = s_.client->ExecuteReplicated(*s_.step, {x_, acc_});
    SHARDRT_RETURN_IF_ERROR(Context(out.status(), "ExecuteReplicated"));
    x_ = (*out)[0];
    acc_ = (*out)[1];
    // Executor chain: a resharded copy donated, a placeholder donated, a reshard.
    ScheduleOptions reshard_copy;
    reshard_copy.execute.resharding = ArgumentResharding::kReshardCopy;
    absl::StatusOr<std::vector<DataPtr>> y1 =
        s_.executor->Schedule(s_.add_one, {chained_}, reshard_copy);
    SHARDRT_RETURN_IF_ERROR(Context(y1.status(), "Schedule"));
    absl::StatusOr<std::vector<DataPtr>> y2 = s_.executor->Schedule(s_.add_one, *y1);
    SHARDRT_RETURN_IF_ERROR(Context(y2.status(), "Schedule"));
    SHARDRT_RETURN_IF_ERROR(Context((*y2)[0]->Await(), "executor chain"));
    absl::StatusOr<DataPtr> next = steps_ % 2 == 0
                                       ? s_.client->ReshardData((*y2)[0], s_.blocks)
                                       : s_.client->ReplicateShardedData((*y2)[0]);
    SHARDRT_RETURN_IF_ERROR(Context(next.status(), steps_ % 2 == 0 ? "ReshardData"
                                                                   : "ReplicateShardedData"));
    chained_ = *std::move(next);
    // y2's execution (dispatched, as it has been assigned) donated y1.
    if ((*y1)[0]->state() != Data::State::kDonated) {
      return Context(absl::InternalError(absl::StrCat("expected y1 donated, its state is ",
                                                      static_cast<int>((*y1)[0]->state()))),
                     "donation");
    }
    return absl::OkStatus();
  }

  // Downloads both chains and compares them with the host's values after steps_ steps.
  // Errors: the download's, or InternalError naming the chain, element, value and expected value.
  [[nodiscard]] absl::Status Check() {
    SHARDRT_ASSIGN_OR_RETURN(std::vector<HostArray> host,
                             s_.client->TransferFromDevice({x_, acc_, chained_}));
    const int64_t k = steps_;
    auto compare = [&](const char* chain, const HostArray& got, int64_t i,
                       int64_t expected) -> absl::Status {
      int32_t value = 0;
      std::memcpy(&value, got.data.data() + i * sizeof(int32_t), sizeof(value));
      if (value == expected) return absl::OkStatus();
      return absl::InternalError(absl::StrCat("thread ", index_, " step ", k, ": ", chain,
                                              " element ", i, " = ", value, ", expected ",
                                              expected));
    };
    for (int64_t i = 0; i < kRows * kCols; ++i) {
      SHARDRT_RETURN_IF_ERROR(compare("ExecuteReplicated x", host[0], i, x0_[i] + k));
      SHARDRT_RETURN_IF_ERROR(compare("Executor x", host[2], i, x0_[i] + 2 * k));
    }
    for (int64_t c = 0; c < kCols; ++c) {
      int64_t colsum = 0;
      for (int64_t r = 0; r < kRows; ++r) colsum += x0_[r * kCols + c];
      SHARDRT_RETURN_IF_ERROR(
          compare("ExecuteReplicated acc", host[1], c, k * colsum + kRows * k * (k - 1) / 2));
    }
    ++checks_;
    return absl::OkStatus();
  }

  const Shared& s_;
  const int index_;
  std::vector<int32_t> x0_;
  DataPtr x_, acc_, chained_;
  int64_t steps_ = 0;
  int64_t checks_ = 0;
};

// Compiles one embedded program for the 8 devices. Errors: Compile's.
[[nodiscard]] absl::StatusOr<ComputationPtr> CompileProgram(ComputationClient& client, const char* name,
                                              const char* text) {
  CompileRequest request;
  request.name = name;
  request.program = text;
  request.options.num_partitions = kDevices;
  return client.Compile(request);
}

// The whole soak. Errors: set-up failures, the first worker error, or FailedPrecondition when
// the end RSS is over the bound.
[[nodiscard]] absl::Status Soak(const Options& options) {
  RuntimeOptions runtime_options;
  runtime_options.devices = kDevices;
  SHARDRT_ASSIGN_OR_RETURN(std::unique_ptr<Runtime> runtime, Runtime::Create(runtime_options));
  Shared shared;
  shared.client = &runtime->client();
  shared.executor = &runtime->executor();
  SHARDRT_ASSIGN_OR_RETURN(shared.step, CompileProgram(*shared.client, "soak_step", kStepProgram));
  SHARDRT_ASSIGN_OR_RETURN(shared.add_one,
                           CompileProgram(*shared.client, "soak_add_one", kAddOneProgram));
  SHARDRT_ASSIGN_OR_RETURN(shared.blocks, ParseSharding("{devices=[2,4]<=[8]}"));

  std::vector<std::unique_ptr<Worker>> workers;
  for (int t = 0; t < options.threads; ++t) {
    workers.push_back(std::make_unique<Worker>(shared, t));
    SHARDRT_RETURN_IF_ERROR(workers.back()->Init());
  }

  // Workers: warm-up, pause (the main thread samples), measured steps.
  std::barrier pause(options.threads + 1);
  // The first error any thread reports.
  struct FirstError {
    void Record(const absl::Status& s) ABSL_LOCKS_EXCLUDED(mu) {
      MutexLock lock(mu);
      if (status.ok() && !s.ok()) status = s;
    }
    absl::Status Get() ABSL_LOCKS_EXCLUDED(mu) {
      MutexLock lock(mu);
      return status;
    }
    Mutex mu;
    absl::Status status ABSL_GUARDED_BY(mu);
  } first_error;
  auto record = [&](const absl::Status& s) { first_error.Record(s); };
  std::atomic<int> running{options.threads};
  std::vector<std::thread> threads;
  const auto start = std::chrono::steady_clock::now();
  for (int t = 0; t < options.threads; ++t) {
    threads.emplace_back([&, t] {
      absl::Status s = workers[t]->Run(options.warmup, options.check_every);
      record(s);
      pause.arrive_and_wait();  // warm-up done
      pause.arrive_and_wait();  // sampled
      if (s.ok()) record(workers[t]->Run(options.steps, options.check_every));
      running.fetch_sub(1);
    });
  }
  pause.arrive_and_wait();
  absl::Status synced = shared.executor->Synchronize();
  record(synced);
  const int64_t warm_rss = RssBytes();
  const auto warm_time = std::chrono::steady_clock::now();
  pause.arrive_and_wait();
  // Samples while the measured steps run: the highest, and the value at each tenth of the time.
  int64_t max_rss = warm_rss;
  while (running.load() > 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    max_rss = std::max(max_rss, RssBytes());
  }
  for (std::thread& t : threads) t.join();
  record(shared.executor->Synchronize());
  const auto end_time = std::chrono::steady_clock::now();
  const int64_t end_rss = RssBytes();
  max_rss = std::max(max_rss, end_rss);

  int64_t checks = 0;
  for (const auto& w : workers) checks += w->checks();
  const ExecutorStats stats = shared.executor->stats();
  const double warm_s = std::chrono::duration<double>(warm_time - start).count();
  const double run_s = std::chrono::duration<double>(end_time - warm_time).count();
  const double growth = warm_rss > 0 ? static_cast<double>(end_rss - warm_rss) / warm_rss : 0;
  const int64_t measured_steps = options.threads * options.steps;
  const absl::Status error = first_error.Get();
  std::printf("soak: %d threads x (%lld warm-up + %lld steps), 8 devices\n", options.threads,
              static_cast<long long>(options.warmup), static_cast<long long>(options.steps));
  std::printf("  %-34s %12s\n", "figure", "value");
  std::printf("  %-34s %12.2f\n", "warm-up time (s)", warm_s);
  std::printf("  %-34s %12.2f\n", "measured time (s)", run_s);
  std::printf("  %-34s %12.0f\n", "measured steps / s (all threads)", measured_steps / run_s);
  std::printf("  %-34s %12lld\n", "executor executions", static_cast<long long>(stats.dispatched));
  std::printf("  %-34s %12lld\n", "value checks passed", static_cast<long long>(checks));
  std::printf("  %-34s %12.1f\n", "RSS after warm-up (MiB)", MiB(warm_rss));
  std::printf("  %-34s %12.1f\n", "RSS highest while running (MiB)", MiB(max_rss));
  std::printf("  %-34s %12.1f\n", "RSS at end (MiB)", MiB(end_rss));
  std::printf("  %-34s %+11.2f%%\n", "RSS end vs warm-up", 100 * growth);
  std::printf("  %-34s %12.1f\n", "process peak RSS (MiB)", MiB(PeakRssBytes()));
  std::printf("SOAK {\"threads\":%d,\"warmup\":%lld,\"steps\":%lld,\"checks\":%lld,"
              "\"warm_rss\":%lld,\"end_rss\":%lld,\"max_rss\":%lld,\"growth\":%.6f,"
              "\"seconds\":%.3f,\"ok\":%s}\n",
              options.threads, static_cast<long long>(options.warmup),
              static_cast<long long>(options.steps), static_cast<long long>(checks),
              static_cast<long long>(warm_rss), static_cast<long long>(end_rss),
              static_cast<long long>(max_rss), growth, warm_s + run_s,
              error.ok() && growth <= options.max_growth ? "true" : "false");
  std::fflush(stdout);
  SHARDRT_RETURN_IF_ERROR(error);
  if (growth > options.max_growth) {
    return absl::FailedPreconditionError(absl::StrCat(
        "RSS grew from ", warm_rss, " bytes after warm-up to ", end_rss, " bytes at the end (",
        100 * growth, "%), over the limit of ", 100 * options.max_growth, "%"));
  }
  return absl::OkStatus();
}

}  // namespace
}  // namespace shardrt::bench

// Runs the soak: exit 0 with "soak_bench: PASS", or 1 with one line on stderr.
int main(int argc, char** argv) {
  shardrt::bench::Options options;
  absl::Status status = shardrt::bench::ParseArgs(argc, argv, options);
  if (status.ok()) status = shardrt::bench::Soak(options);
  if (!status.ok()) {
    std::fprintf(stderr, "soak_bench: FAIL: %s\n", std::string(status.message()).c_str());
    return 1;
  }
  std::printf("soak_bench: PASS\n");
  return 0;
}
