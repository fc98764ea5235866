#include "data/transfer.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "shardrt/base/metrics.h"
#include "shardrt/base/status_macros.h"
#include "shardrt/pjrt/buffer.h"
#include "shardrt/sharding/split.h"

namespace shardrt {
namespace {

// Estimated cost of moving `bytes` bytes, for the pool's cost model.
ParallelCost TransferCost(int64_t bytes) {
  return ParallelCost{.per_item_ns = 3000.0 + 0.2 * static_cast<double>(bytes)};
}

// One shard upload: where the bytes come from and how they are laid out.
struct UploadTask {
  size_t array = 0;
  size_t device = 0;
  const std::byte* origin = nullptr;  // dense row-major shard bytes
};

// A row-major shard is one contiguous run of the global array when, for its first dim k that
// is not whole, every dim before k has extent 1 and every dim after k is whole.
bool ShardIsContiguous(const ShardGeometry& g, int64_t d) {
  int64_t k = 0;
  while (k < g.rank() && g.limit(d)[k] - g.start(d)[k] == g.shape()[k]) ++k;
  for (int64_t i = 0; i < k; ++i) {
    if (g.shape()[i] != 1 && k < g.rank()) return false;
  }
  for (int64_t i = k + 1; i < g.rank(); ++i) {
    if (g.limit(d)[i] - g.start(d)[i] != g.shape()[i]) return false;
  }
  return true;
}

// True when every device's shard is a whole (unpadded) contiguous run of the global array, so
// shards can move straight between device buffers and the global host array.
bool ShardsAreRuns(const ShardGeometry& g) {
  for (int64_t d = 0; d < g.num_devices(); ++d) {
    if (!g.holds_data(d) || g.exact_shape(d) != g.shard_shape() || !ShardIsContiguous(g, d)) {
      return false;
    }
  }
  return true;
}

// Byte offset of device d's shard origin in the row-major global array.
int64_t ShardOffsetBytes(const ShardGeometry& g, int64_t d, int64_t element_bytes) {
  int64_t offset = 0, stride = element_bytes;
  for (int64_t k = g.rank() - 1; k >= 0; --k) {
    offset += g.start(d)[k] * stride;
    stride *= g.shape()[k];
  }
  return offset;
}

}  // namespace

absl::StatusOr<std::vector<DataPtr>> TransferToDevice(
    const std::shared_ptr<pjrt::Client>& client, ThreadPool* pool,
    std::span<const HostArrayView> arrays,
    std::span<const std::shared_ptr<const DataLayout>> layouts) {
  static Metric* const time = GlobalMetrics().GetMetric(kTransferToDeviceTime, MetricRepr::kTime);
  static Metric* const bytes_in = GlobalMetrics().GetMetric(kInboundData, MetricRepr::kBytes);
  ScopedTimer timer(time);
  if (arrays.size() != layouts.size()) {
    return absl::InvalidArgumentError(absl::StrCat("TransferToDevice: ", arrays.size(),
                                                   " arrays but ", layouts.size(), " layouts"));
  }
  std::vector<std::vector<std::vector<std::byte>>> padded(arrays.size());
  std::vector<UploadTask> tasks;
  int64_t total_bytes = 0;
  for (size_t i = 0; i < arrays.size(); ++i) {
    const HostArrayView& a = arrays[i];
    const DataLayout& layout = *layouts[i];
    if (a.type != layout.global.type || a.dims != layout.global.dims) {
      return absl::InvalidArgumentError(absl::StrCat(
          "TransferToDevice: array ", i, " is ", ShapeToString({a.type, a.dims}),
          " but its layout expects ", ElementTypeName(layout.global.type),
          DimsToString(layout.global.dims)));
    }
    const int64_t elem = ElementSizeInBytes(a.type);
    const int64_t expected = layout.geometry.num_elements() * elem;
    if (static_cast<int64_t>(a.data.size()) != expected) {
      return absl::InvalidArgumentError(absl::StrCat("TransferToDevice: array ", i, " has ",
                                                     a.data.size(), " bytes, expected ",
                                                     expected));
    }
    total_bytes += expected;
    const ShardGeometry& g = layout.geometry;
    // Shards that are contiguous runs of the caller's array go up straight from it; others
    // (column blocks, padded uneven shards) are first copied into dense shards. (A strided
    // host view would save that copy, but the CPU plugin then keeps a non-default device
    // layout that executions misread.)
    const bool direct = ShardsAreRuns(g);
    if (!direct) {
      SHARDRT_ASSIGN_OR_RETURN(padded[i],
                               SplitHostArray(g, a.type, a.data, ShardPadding::kPadded));
    }
    for (size_t d = 0; d < layout.devices.size(); ++d) {
      UploadTask task{i, d, nullptr};
      if (direct) {
        task.origin = a.data.data() + ShardOffsetBytes(g, static_cast<int64_t>(d), elem);
      } else {
        task.origin = padded[i][d].data();
      }
      tasks.push_back(std::move(task));
    }
  }
  std::vector<pjrt::Buffer> buffers(tasks.size());
  std::vector<pjrt::Event> done(tasks.size());
  const int64_t per_task = tasks.empty() ? 0 : total_bytes / static_cast<int64_t>(tasks.size());
  SHARDRT_RETURN_IF_ERROR(ParallelFor(
      pool, static_cast<int64_t>(tasks.size()), TransferCost(per_task),
      [&](int64_t begin, int64_t end) -> absl::Status {
        for (int64_t t = begin; t < end; ++t) {
          const UploadTask& task = tasks[t];
          const DataLayout& layout = *layouts[task.array];
          SHARDRT_ASSIGN_OR_RETURN(
              pjrt::HostUpload upload,
              pjrt::Buffer::FromHost(
                  *client, task.origin, layout.global.type, layout.shard_dims,
                  *layout.devices[task.device],
                  pjrt::HostBufferSemantics::kImmutableUntilTransferCompletes));
          buffers[t] = std::move(upload.buffer);
          done[t] = std::move(upload.done_with_host_buffer);
        }
        return absl::OkStatus();
      }));
  // The host memory must outlive the transfers: wait for all of them.
  absl::Status first_error;
  for (pjrt::Event& e : done) {
    absl::Status s = e.Await();
    if (first_error.ok() && !s.ok()) first_error = s;
  }
  SHARDRT_RETURN_IF_ERROR(first_error);
  std::vector<DataPtr> out;
  out.reserve(arrays.size());
  size_t next = 0;
  for (size_t i = 0; i < arrays.size(); ++i) {
    std::vector<pjrt::Buffer> shards;
    for (size_t d = 0; d < layouts[i]->devices.size(); ++d) {
      shards.push_back(std::move(buffers[next++]));
    }
    SHARDRT_ASSIGN_OR_RETURN(DataPtr data, Data::Create(client, layouts[i], std::move(shards)));
    out.push_back(std::move(data));
  }
  bytes_in->AddSample(static_cast<double>(total_bytes));
  return out;
}

absl::StatusOr<DataPtr> TransferShardsToDevice(const std::shared_ptr<pjrt::Client>& client,
                                               ThreadPool* pool,
                                               std::shared_ptr<const DataLayout> layout,
                                               std::span<const std::span<const std::byte>> shards) {
  static Metric* const time = GlobalMetrics().GetMetric(kTransferToDeviceTime, MetricRepr::kTime);
  ScopedTimer timer(time);
  const size_t num_devices = layout->devices.size();
  if (shards.size() != num_devices) {
    return absl::InvalidArgumentError(absl::StrCat("TransferShardsToDevice: got ", shards.size(),
                                                   " shards for ", num_devices, " devices"));
  }
  SHARDRT_ASSIGN_OR_RETURN(int64_t shard_elems, NumElements(layout->shard_dims));
  const int64_t shard_bytes = shard_elems * ElementSizeInBytes(layout->global.type);
  for (size_t d = 0; d < num_devices; ++d) {
    if (static_cast<int64_t>(shards[d].size()) != shard_bytes) {
      return absl::InvalidArgumentError(absl::StrCat(
          "TransferShardsToDevice: shard for device ", layout->devices[d]->id, " has ",
          shards[d].size(), " bytes, expected ", shard_bytes, " (",
          ShapeToString({layout->global.type, layout->shard_dims}), ")"));
    }
  }
  std::vector<pjrt::Buffer> buffers(num_devices);
  std::vector<pjrt::Event> done(num_devices);
  SHARDRT_RETURN_IF_ERROR(ParallelFor(
      pool, static_cast<int64_t>(num_devices), TransferCost(shard_bytes),
      [&](int64_t begin, int64_t end) -> absl::Status {
        for (int64_t d = begin; d < end; ++d) {
          SHARDRT_ASSIGN_OR_RETURN(
              pjrt::HostUpload upload,
              pjrt::Buffer::FromHost(*client, shards[d].data(), layout->global.type,
                                     layout->shard_dims, *layout->devices[d],
                                     pjrt::HostBufferSemantics::kImmutableUntilTransferCompletes));
          buffers[d] = std::move(upload.buffer);
          done[d] = std::move(upload.done_with_host_buffer);
        }
        return absl::OkStatus();
      }));
  for (pjrt::Event& e : done) SHARDRT_RETURN_IF_ERROR(e.Await());
  return Data::Create(client, std::move(layout), std::move(buffers));
}

absl::StatusOr<std::vector<HostArray>> TransferFromDevice(ThreadPool* pool,
                                                          std::span<const DataPtr> data) {
  static Metric* const time =
      GlobalMetrics().GetMetric(kTransferFromDeviceTime, MetricRepr::kTime);
  static Metric* const bytes_out = GlobalMetrics().GetMetric(kOutboundData, MetricRepr::kBytes);
  ScopedTimer timer(time);
  // One download per tile (its replica 0), into the output array itself when the shards are
  // contiguous runs of it, else into a padded staging shard that Assemble places.
  struct Download {
    size_t data = 0;
    size_t device = 0;
    std::byte* dst = nullptr;
    size_t size = 0;
  };
  std::vector<Download> downloads;
  std::vector<HostArray> out(data.size());
  std::vector<std::vector<std::vector<std::byte>>> staging(data.size());
  int64_t total_bytes = 0;
  for (size_t i = 0; i < data.size(); ++i) {
    if (data[i] == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("TransferFromDevice: data ", i, " is null"));
    }
    SHARDRT_RETURN_IF_ERROR(data[i]->Await());
    const DataLayout& layout = data[i]->layout();
    const ShardGeometry& g = layout.geometry;
    const int64_t elem = ElementSizeInBytes(layout.global.type);
    SHARDRT_ASSIGN_OR_RETURN(int64_t shard_elems, NumElements(layout.shard_dims));
    const size_t shard_bytes = static_cast<size_t>(shard_elems * elem);
    out[i].type = layout.global.type;
    out[i].dims = layout.global.dims;
    const bool direct = ShardsAreRuns(g);
    if (direct) {
      out[i].data.resize(static_cast<size_t>(g.num_elements() * elem));
    } else {
      staging[i].resize(layout.devices.size());
    }
    for (int64_t t = 0; t < g.num_tiles(); ++t) {
      const int64_t d = g.tile_devices(t)[0];
      std::byte* dst = nullptr;
      if (direct) {
        dst = out[i].data.data() + ShardOffsetBytes(g, d, elem);
      } else {
        staging[i][d].resize(shard_bytes);
        dst = staging[i][d].data();
      }
      downloads.push_back({i, static_cast<size_t>(d), dst, shard_bytes});
      total_bytes += static_cast<int64_t>(shard_bytes);
    }
  }
  const int64_t per = downloads.empty() ? 0 : total_bytes / static_cast<int64_t>(downloads.size());
  SHARDRT_RETURN_IF_ERROR(ParallelFor(
      pool, static_cast<int64_t>(downloads.size()), TransferCost(per),
      [&](int64_t begin, int64_t end) -> absl::Status {
        for (int64_t k = begin; k < end; ++k) {
          const Download& dl = downloads[k];
          const ShardBuffers* buffers = data[dl.data]->buffers();
          if (buffers == nullptr) return data[dl.data]->Usable();
          SHARDRT_ASSIGN_OR_RETURN(pjrt::Event event,
                                   buffers->buffers[dl.device].ToHost(dl.dst, dl.size));
          SHARDRT_RETURN_IF_ERROR(event.Await());
        }
        return absl::OkStatus();
      }));
  for (size_t i = 0; i < data.size(); ++i) {
    if (staging[i].empty()) continue;  // downloaded in place
    const DataLayout& layout = data[i]->layout();
    const ShardGeometry& g = layout.geometry;
    std::vector<std::span<const std::byte>> spans(layout.devices.size());
    for (int64_t t = 0; t < g.num_tiles(); ++t) {
      std::span<const int64_t> devices = g.tile_devices(t);
      for (int64_t d : devices) spans[d] = staging[i][devices[0]];
    }
    SHARDRT_ASSIGN_OR_RETURN(out[i].data, AssembleHostArray(g, layout.global.type, spans,
                                                            ShardPadding::kPadded));
  }
  bytes_out->AddSample(static_cast<double>(total_bytes));
  return out;
}

}  // namespace shardrt
