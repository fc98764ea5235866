// The cost of a compile-cache hit: ComputationClient::Compile of a request whose program and
// options were compiled before (the `x + 1` program of execute_bench with k arguments on D
// devices). The cache key is the encoded options plus the whole program text, so a hit costs
// a key build and a hash of the program, and grows with the program's size; the program's
// size in bytes is reported as a counter. A cold compile of the same program is shown once
// for scale (Iterations(1): XLA compilation, no cache).
#include <benchmark/benchmark.h>

#include <atomic>

#include "bench_util.h"

namespace shardrt::bench {
namespace {

CompileRequest Request(int devices, int k, const std::string& tag = "") {
  CompileRequest r;
  r.name = absl::StrCat("add_one_", k);
  r.program = AddOneProgram(devices, k) + tag;  // a trailing comment makes a new cache key
  r.options.num_partitions = devices;
  return r;
}

void BM_CompileCacheHit(benchmark::State& state) {
  const int devices = state.range(0), k = state.range(1);
  ComputationClient& client = ComputationClientFor(devices);
  const CompileRequest request = Request(devices, k);
  CheckOk(client.Compile(request).status(), "compile");
  for (auto _ : state) {
    auto c = client.Compile(request);
    benchmark::DoNotOptimize(c);
  }
  state.counters["program_bytes"] = static_cast<double>(request.program.size());
}

void BM_CompileCold(benchmark::State& state) {
  const int devices = state.range(0), k = state.range(1);
  ComputationClient& client = ComputationClientFor(devices);
  static std::atomic<int> fresh{0};
  for (auto _ : state) {
    state.PauseTiming();
    const CompileRequest request = Request(devices, k, absl::StrCat("// ", fresh++, "\n"));
    state.ResumeTiming();
    CheckOk(client.Compile(request).status(), "compile");
  }
}

void Cases(benchmark::internal::Benchmark* b) {
  b->ArgNames({"devices", "args"});
  for (int d : {1, 8}) {
    for (int k : {1, 10, 100, 1000}) b->Args({d, k});
  }
  b->UseRealTime();
}

BENCHMARK(BM_CompileCacheHit)->Name("CompileCacheHit")->Apply(Cases)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_CompileCold)->Name("CompileCold")->Apply(Cases)->Iterations(1)
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace shardrt::bench

BENCHMARK_MAIN();
