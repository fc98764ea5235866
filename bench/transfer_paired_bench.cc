// Small and large transfers against raw PJRT, interleaved, for paired ratios (bench/run).
//
// For each D in --devices and each size in --bytes, the array is f32[max(1, bytes / 4)] split on
// dim 0 over D devices ({devices=[D]<=[D]}; {replicated} on one device), so with fewer elements
// than devices some devices hold only padding, as XLA's tiling has it. Arms:
//   raw-up       PJRT_Client_BufferFromHostBuffer per device from host shards padded in advance,
//                then every done-with-host-buffer event awaited (the buffers are freed after)
//   up           ComputationClient::TransferToDevice of the global array (its one-array form;
//                the data freed after)
//   raw-down     PJRT_Buffer_ToHostBuffer per device into a destination prepared in advance,
//                every event awaited
//   down-into    ComputationClient::TransferFromDevice(data, into): into caller memory
//   raw-down-new raw-down into a new zeroed host array per call (std::vector<std::byte>(n)), as
//                any API that returns an owned array allocates one
//   down         ComputationClient::TransferFromDevice(data): a new host array per call
//   raw-down-rep, down-into-rep   the same downloads of the array replicated on all D devices
//                (D > 1): one device's copy is enough, as raw PJRT would read it
// One round runs `iters` calls of every arm of a point (iters sized to about 5 ms of work per
// arm), interleaved call by call in an order shuffled for every call; an arm's sample is the
// median of its calls in the round. Prints one
// JSON object per sample: {"devices", "bytes", "arm", "round", "us"}.
//
//   transfer_paired_bench [--devices 1,8] [--bytes 4,256,...] [--rounds N] [--seed S]
//                         [--arms up,raw-up,...]   (default: all)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "bench_util.h"
#include "shardrt/pjrt/buffer.h"
#include "shardrt/sharding/text.h"

namespace shardrt::bench {
namespace {

using Clock = std::chrono::steady_clock;

struct Point {
  ComputationClient* client = nullptr;
  int devices = 1;
  int64_t bytes = 0;
  int64_t elements = 0;
  std::vector<const pjrt::Device*> device_list;
  std::vector<float> values;  // the global array
  HostArrayView view;
  std::shared_ptr<const DataLayout> layout, replicated_layout;
  int64_t shard_elements = 0;                 // ceil(elements / D)
  std::vector<std::vector<float>> shards;     // padded host shards (raw upload source)
  DataPtr data, replicated;                   // on the devices (download sources)
  std::vector<float> dst, dst_padded;         // download destinations
};

std::shared_ptr<const DataLayout> Layout(ComputationClient& client, int64_t n,
                                         const std::string& sharding_text,
                                         const std::vector<const pjrt::Device*>& devices) {
  auto sharding = ParseSharding(sharding_text);
  CheckOk(sharding.status(), "sharding");
  auto layout = client.MakeLayout({ElementType::kF32, {n}}, *sharding, devices);
  CheckOk(layout.status(), "layout");
  return *layout;
}

Point MakePoint(int devices, int64_t bytes) {
  Point p;
  p.client = &ComputationClientFor(devices);
  p.devices = devices;
  p.bytes = bytes;
  p.elements = std::max<int64_t>(1, bytes / 4);
  auto d = p.client->DefaultDevices(devices);
  CheckOk(d.status(), "devices");
  p.device_list = *d;
  p.values.resize(p.elements);
  for (int64_t i = 0; i < p.elements; ++i) p.values[i] = static_cast<float>(i % 1000);
  p.view = {ElementType::kF32, {p.elements},
            std::as_bytes(std::span<const float>(p.values))};
  p.layout = Layout(*p.client, p.elements,
                    devices == 1 ? "{replicated}"
                                 : absl::StrCat("{devices=[", devices, "]<=[", devices, "]}"),
                    p.device_list);
  p.replicated_layout = Layout(*p.client, p.elements, "{replicated}", p.device_list);
  p.shard_elements = (p.elements + devices - 1) / devices;
  p.shards.assign(devices, std::vector<float>(p.shard_elements, 0.0f));
  for (int dev = 0; dev < devices; ++dev) {
    for (int64_t j = 0; j < p.shard_elements; ++j) {
      const int64_t i = dev * p.shard_elements + j;
      if (i < p.elements) p.shards[dev][j] = p.values[i];
    }
  }
  auto data = p.client->TransferToDevice({&p.view, 1}, {&p.layout, 1});
  CheckOk(data.status(), "upload");
  p.data = (*data)[0];
  auto rep = p.client->TransferToDevice({&p.view, 1}, {&p.replicated_layout, 1});
  CheckOk(rep.status(), "upload replicated");
  p.replicated = (*rep)[0];
  p.dst.assign(p.elements, 0.0f);
  p.dst_padded.assign(p.shard_elements * devices, 0.0f);
  return p;
}

void RawUp(Point& p) {
  const pjrt::Client& client = *p.client->pjrt_client();
  std::vector<pjrt::HostUpload> uploads;
  uploads.reserve(p.devices);
  for (int d = 0; d < p.devices; ++d) {
    auto upload = pjrt::Buffer::FromHost(client, p.shards[d].data(), ElementType::kF32,
                                         {p.shard_elements}, *p.device_list[d],
                                         pjrt::HostBufferSemantics::kImmutableUntilTransferCompletes);
    CheckOk(upload.status(), "raw upload");
    uploads.push_back(std::move(*upload));
  }
  for (pjrt::HostUpload& u : uploads) CheckOk(u.done_with_host_buffer.Await(), "raw upload done");
}

void Up(Point& p) {
  auto data = p.client->TransferToDevice(p.view, p.layout);
  CheckOk(data.status(), "TransferToDevice");
}

// Raw downloads of the first `devices` buffers of `data`, buffer d into dst + d * bytes, every
// event awaited.
void RawDownInto(const DataPtr& data, int devices, std::byte* dst, size_t bytes) {
  const ShardBuffers* buffers = data->buffers();
  std::vector<pjrt::Event> events;
  events.reserve(devices);
  for (int d = 0; d < devices; ++d) {
    auto event = buffers->buffers[d].ToHost(dst + d * bytes, bytes);
    CheckOk(event.status(), "raw download");
    events.push_back(std::move(*event));
  }
  for (pjrt::Event& e : events) {
    if (!e.empty()) CheckOk(e.Await(), "raw download done");
  }
}

size_t ShardBytes(const Point& p) { return static_cast<size_t>(p.shard_elements) * sizeof(float); }

// Every shard of the split array, into the padded destination prepared in advance.
void RawDown(Point& p) {
  RawDownInto(p.data, p.devices, reinterpret_cast<std::byte*>(p.dst_padded.data()), ShardBytes(p));
}

// One device's copy of the replicated array.
void RawDownReplicated(Point& p) {
  RawDownInto(p.replicated, 1, reinterpret_cast<std::byte*>(p.dst.data()),
              static_cast<size_t>(p.elements) * sizeof(float));
}

// Every shard into a new zeroed array, as an API returning an owned array would.
void RawDownNew(Point& p) {
  std::vector<std::byte> fresh(ShardBytes(p) * static_cast<size_t>(p.devices));
  RawDownInto(p.data, p.devices, fresh.data(), ShardBytes(p));
}

void DownInto(Point& p, const DataPtr& data) {
  std::span<std::byte> into = std::as_writable_bytes(std::span<float>(p.dst));
  CheckOk(p.client->TransferFromDevice({&data, 1}, {&into, 1}), "TransferFromDevice into");
}

void Down(Point& p) {
  auto host = p.client->TransferFromDevice({&p.data, 1});
  CheckOk(host.status(), "TransferFromDevice");
}

struct Arm {
  const char* name;
  std::function<void(Point&)> run;
};

// One call of `arm`, in microseconds.
double CallUs(Point& p, const Arm& arm) {
  const Clock::time_point t0 = Clock::now();
  arm.run(p);
  return std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
}

std::vector<int64_t> ParseList(const char* text) {
  std::vector<int64_t> out;
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    int64_t v = 0;
    if (!absl::SimpleAtoi(part, &v)) {
      std::fprintf(stderr, "not a number: %s\n", std::string(part).c_str());
      std::exit(2);
    }
    out.push_back(v);
  }
  return out;
}

int Main(int argc, char** argv) {
  std::vector<int64_t> devices = {1, 8};
  std::vector<int64_t> sizes = {4, 256, 4096, 65536, 1 << 20, 16 << 20, 64 << 20};
  int rounds = 7;
  uint64_t seed = 1;
  std::vector<std::string> only;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--arms") {
      only = absl::StrSplit(argv[i + 1], ',');
    } else if (flag == "--devices") {
      devices = ParseList(argv[i + 1]);
    } else if (flag == "--bytes") {
      sizes = ParseList(argv[i + 1]);
    } else if (flag == "--rounds") {
      rounds = std::max(2, std::atoi(argv[i + 1]));
    } else if (flag == "--seed") {
      seed = std::strtoull(argv[i + 1], nullptr, 10);
    } else {
      std::fprintf(stderr, "unknown flag %s\n", flag.c_str());
      return 2;
    }
  }
  std::mt19937_64 rng(seed);
  for (int64_t d : devices) {
    for (int64_t bytes : sizes) {
      Point p = MakePoint(static_cast<int>(d), bytes);
      std::vector<Arm> arms = {
          {"raw-up", RawUp},
          {"up", Up},
          {"raw-down", RawDown},
          {"down-into", [](Point& q) { DownInto(q, q.data); }},
          {"raw-down-new", RawDownNew},
          {"down", Down},
      };
      if (d > 1) {
        arms.push_back({"raw-down-rep", RawDownReplicated});
        arms.push_back({"down-into-rep", [](Point& q) { DownInto(q, q.replicated); }});
      }
      if (!only.empty()) {
        std::erase_if(arms, [&](const Arm& a) {
          return std::find(only.begin(), only.end(), a.name) == only.end();
        });
      }
      // About 5 ms of work per sample at ~2 GB/s, at least 5 calls (a round's median of large
      // transfers then steadies) and at most 500.
      const int iters = static_cast<int>(std::clamp<int64_t>(10'000'000 / (bytes + 20'000), 5, 500));
      for (const Arm& arm : arms) {  // warm-up
        CallUs(p, arm);
        CallUs(p, arm);
      }
      for (int r = 0; r < rounds; ++r) {
        // The arms' calls interleave one by one, each call's order shuffled: the plugin's
        // modes (its worker asleep or awake) and the machine's drift fall on every arm alike.
        std::vector<size_t> order(arms.size());
        std::vector<std::vector<double>> us(arms.size(), std::vector<double>(iters));
        for (int it = 0; it < iters; ++it) {
          for (size_t i = 0; i < order.size(); ++i) order[i] = i;
          std::shuffle(order.begin(), order.end(), rng);
          for (size_t i : order) us[i][it] = CallUs(p, arms[i]);
        }
        for (size_t i = 0; i < arms.size(); ++i) {
          std::nth_element(us[i].begin(), us[i].begin() + iters / 2, us[i].end());
          std::printf("{\"devices\": %lld, \"bytes\": %lld, \"arm\": \"%s\", \"round\": %d, "
                      "\"us\": %.3f}\n",
                      static_cast<long long>(d), static_cast<long long>(bytes), arms[i].name, r,
                      us[i][iters / 2]);
        }
      }
      std::fflush(stdout);
    }
  }
  return 0;
}

}  // namespace
}  // namespace shardrt::bench

int main(int argc, char** argv) { return shardrt::bench::Main(argc, argv); }
