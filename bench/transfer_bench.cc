// Host <-> device transfer throughput of sharded data against memcpy bandwidth.
//
//   Memcpy/bytes                  memcpy between two warm buffers (the host's copy bandwidth)
//   MemcpyFresh/bytes             a fresh zeroed host vector + memcpy into it: the floor of any
//                                 download that returns a new host array (page faults included)
//   TransferToDevice/D/bytes      ComputationClient::TransferToDevice of one f32[rows, 1024]
//                                 array split on dim 0 over D devices (each device gets its rows,
//                                 straight from the caller's memory); blocks until done
//   TransferFromDevice/D/bytes    ComputationClient::TransferFromDevice of that data: every
//                                 shard downloaded and the global array assembled on the host
//
// Throughput is bytes of the global array per second (Google Benchmark's bytes_per_second).
#include <benchmark/benchmark.h>

#include <cstring>
#include <vector>

#include "bench_util.h"
#include "shardrt/sharding/text.h"

namespace shardrt::bench {
namespace {

constexpr int64_t kRowBytes = 1024 * sizeof(float);

// A global f32[bytes / 4 KiB, 1024] array of ones and its layout split over `devices`.
struct Array {
  std::vector<float> values;
  HostArrayView view;
  std::shared_ptr<const DataLayout> layout;
};

Array MakeArray(ComputationClient& client, int devices, int64_t bytes) {
  Array a;
  const int64_t rows = bytes / kRowBytes;
  a.values.assign(rows * 1024, 1.0f);
  a.view = {ElementType::kF32, {rows, 1024}, std::as_bytes(std::span<const float>(a.values))};
  auto sharding = ParseSharding(devices == 1 ? "{replicated}"
                                             : absl::StrCat("{devices=[", devices, ",1]<=[",
                                                            devices, "]}"));
  CheckOk(sharding.status(), "sharding");
  auto d = client.DefaultDevices(devices);
  CheckOk(d.status(), "devices");
  auto layout = client.MakeLayout({ElementType::kF32, {rows, 1024}}, *sharding, *d);
  CheckOk(layout.status(), "layout");
  a.layout = *layout;
  return a;
}

void BM_Memcpy(benchmark::State& state) {
  const size_t bytes = state.range(0);
  std::vector<char> src(bytes, 1), dst(bytes, 0);
  for (auto _ : state) {
    std::memcpy(dst.data(), src.data(), bytes);
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * bytes);
}

void BM_MemcpyFresh(benchmark::State& state) {
  const size_t bytes = state.range(0);
  std::vector<std::byte> src(bytes, std::byte{1});
  for (auto _ : state) {
    std::vector<std::byte> dst(bytes);
    std::memcpy(dst.data(), src.data(), bytes);
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * bytes);
}

void BM_TransferToDevice(benchmark::State& state) {
  const int devices = state.range(0);
  const int64_t bytes = state.range(1);
  ComputationClient& client = ComputationClientFor(devices);
  Array a = MakeArray(client, devices, bytes);
  for (auto _ : state) {
    auto data = client.TransferToDevice({&a.view, 1}, {&a.layout, 1});
    CheckOk(data.status(), "TransferToDevice");
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * bytes);
}

void BM_TransferFromDevice(benchmark::State& state) {
  const int devices = state.range(0);
  const int64_t bytes = state.range(1);
  ComputationClient& client = ComputationClientFor(devices);
  Array a = MakeArray(client, devices, bytes);
  auto data = client.TransferToDevice({&a.view, 1}, {&a.layout, 1});
  CheckOk(data.status(), "TransferToDevice");
  for (auto _ : state) {
    auto host = client.TransferFromDevice(*data);
    CheckOk(host.status(), "TransferFromDevice");
    benchmark::DoNotOptimize((*host)[0].data.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * bytes);
}

constexpr int64_t kSizes[] = {64 << 10, 1 << 20, 16 << 20, 64 << 20};

BENCHMARK(BM_Memcpy)->Name("Memcpy")->ArgName("bytes")->Arg(kSizes[0])->Arg(kSizes[1])
    ->Arg(kSizes[2])->Arg(kSizes[3])->UseRealTime();
BENCHMARK(BM_MemcpyFresh)->Name("MemcpyFresh")->ArgName("bytes")->Arg(kSizes[0])->Arg(kSizes[1])
    ->Arg(kSizes[2])->Arg(kSizes[3])->UseRealTime();

void TransferArgs(benchmark::internal::Benchmark* b) {
  b->ArgNames({"devices", "bytes"});
  for (int d : {1, 8}) {
    for (int64_t s : kSizes) b->Args({d, s});
  }
  b->UseRealTime()->Unit(benchmark::kMicrosecond);
}
BENCHMARK(BM_TransferToDevice)->Name("TransferToDevice")->Apply(TransferArgs);
BENCHMARK(BM_TransferFromDevice)->Name("TransferFromDevice")->Apply(TransferArgs);

}  // namespace
}  // namespace shardrt::bench

BENCHMARK_MAIN();
