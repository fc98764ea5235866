#include "data/transfer.h"

#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>
#include <utility>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "shardrt/base/metrics.h"
#include "shardrt/base/status_macros.h"
#include "shardrt/pjrt/buffer.h"
#include "shardrt/sharding/split.h"

namespace shardrt {
namespace {

// Estimated cost of one shard's transfer call that copies its `bytes` bytes on the calling
// thread (a download's start, an upload copied during the call), for the pool's cost model:
// measured with bench/transfer_paired_bench on the CPU plugin, about 0.7 us plus 0.1 ns per
// byte, so a few shards of small arrays go on the caller's thread (a pool hop costs more than
// they do) and large ones are copied in parallel.
ParallelCost ShardCopyCost(int64_t bytes) {
  return ParallelCost{.per_item_ns = 700.0 + 0.1 * static_cast<double>(bytes)};
}

// How an upload of `uploads` shard buffers hands the caller's memory to the plugin, and what
// one shard's upload call costs the pool's cost model. A lone upload on the CPU platform is
// copied during the call (a memcpy on the calling thread: from 1 MiB on 1.5-2x faster than the
// plugin's asynchronous copy and awaiting its event, and no slower below). Several uploads, and
// any on other platforms, let the plugin copy asynchronously until their events fire: its own
// threads then copy the shards in parallel (on 2 cores at D = 8, 0.85-1.0x the time of
// synchronous copies split over shardrt's pool, which ran 1.1-1.3x slower from 512 KiB shards
// on), and the calls themselves are cheap enough to issue inline.
struct UploadPlan {
  pjrt::HostBufferSemantics semantics;
  ParallelCost cost;
};
UploadPlan PlanUpload(const pjrt::Client& client, size_t uploads, int64_t bytes_per_upload) {
  if (uploads == 1 && client.platform_name() == "cpu") {
    return {pjrt::HostBufferSemantics::kImmutableOnlyDuringCall, ShardCopyCost(bytes_per_upload)};
  }
  return {pjrt::HostBufferSemantics::kImmutableUntilTransferCompletes,
          ParallelCost{.per_item_ns = 700.0}};
}

// Uploads one shard from `origin` to layout.devices[device] as `plan` says: its buffer into
// `buffer`, and into `done` the event to await before the caller's memory may be reused (left
// empty when the plugin copied it during the call: that event is dropped unawaited).
absl::Status UploadShard(const pjrt::Client& client, const UploadPlan& plan,
                         const std::byte* origin, const DataLayout& layout, size_t device,
                         pjrt::Buffer& buffer, pjrt::Event& done) {
  SHARDRT_ASSIGN_OR_RETURN(
      pjrt::HostUpload upload,
      pjrt::Buffer::FromHost(client, origin, layout.global.type, layout.shard_dims,
                             *layout.devices[device], plan.semantics));
  buffer = std::move(upload.buffer);
  if (plan.semantics != pjrt::HostBufferSemantics::kImmutableOnlyDuringCall) {
    done = std::move(upload.done_with_host_buffer);
  }
  return absl::OkStatus();
}

// Fills shards.handles from shards.buffers, for argument lists.
void ListHandles(ShardBuffers& shards) {
  shards.handles.resize(shards.buffers.size());
  for (size_t d = 0; d < shards.buffers.size(); ++d) {
    shards.handles[d] = shards.buffers[d].handle();
  }
}

// One shard upload: where the bytes come from and how they are laid out.
struct UploadTask {
  size_t array = 0;
  size_t device = 0;
  const std::byte* origin = nullptr;  // dense row-major shard bytes
};

// Awaits every event that is not empty (all of them, even after a failure, so no transfer
// outlives its memory); the first error.
absl::Status AwaitAll(std::span<pjrt::Event> events) {
  absl::Status first_error;
  for (pjrt::Event& e : events) {
    if (e.empty()) continue;
    absl::Status s = e.Await();
    if (first_error.ok() && !s.ok()) first_error = std::move(s);
  }
  return first_error;
}

// Array i fits its layout: type, dimensions and byte count.
absl::Status CheckArray(size_t i, const HostArrayView& a, const DataLayout& layout) {
  if (a.type != layout.global.type || a.dims != layout.global.dims) {
    return absl::InvalidArgumentError(absl::StrCat(
        "TransferToDevice: array ", i, " is ", ShapeToString({a.type, a.dims}),
        " but its layout expects ", ElementTypeName(layout.global.type),
        DimsToString(layout.global.dims)));
  }
  const int64_t expected = layout.geometry.num_elements() * ElementSizeInBytes(a.type);
  if (static_cast<int64_t>(a.data.size()) != expected) {
    return absl::InvalidArgumentError(absl::StrCat("TransferToDevice: array ", i, " has ",
                                                   a.data.size(), " bytes, expected ",
                                                   expected));
  }
  return absl::OkStatus();
}

// Records one finished upload of `bytes` that started at start_ns (one clock read for both
// samples; a failed transfer records neither).
void RecordUpload(int64_t start_ns, int64_t bytes) {
  static Metric* const time = GlobalMetrics().GetMetric(kTransferToDeviceTime, MetricRepr::kTime);
  static Metric* const bytes_in = GlobalMetrics().GetMetric(kInboundData, MetricRepr::kBytes);
  const int64_t now_ns = MetricsNowNs();
  time->AddSample(now_ns, static_cast<double>(now_ns - start_ns));
  bytes_in->AddSample(now_ns, static_cast<double>(bytes));
}

// TransferToDevice of one array whose shards are runs of the caller's memory (checked), its
// common case: each shard goes up straight from the array into the new Data's buffers, with no
// task list or staging.
absl::StatusOr<DataPtr> UploadRuns(const std::shared_ptr<pjrt::Client>& client, ThreadPool* pool,
                                   const HostArrayView& a,
                                   const std::shared_ptr<const DataLayout>& layout_ptr,
                                   int64_t start_ns) {
  const DataLayout& layout = *layout_ptr;
  const size_t n = layout.devices.size();
  const int64_t elem = ElementSizeInBytes(a.type);
  ShardBuffers shards;
  shards.buffers.resize(n);
  absl::InlinedVector<pjrt::Event, 8> done(n);
  const int64_t bytes = static_cast<int64_t>(a.data.size());
  const UploadPlan plan = PlanUpload(*client, n, bytes / static_cast<int64_t>(n));
  auto upload = [&](int64_t begin, int64_t end) -> absl::Status {
    for (int64_t d = begin; d < end; ++d) {
      SHARDRT_RETURN_IF_ERROR(UploadShard(*client, plan,
                                          a.data.data() + layout.shard_offsets[d] * elem, layout,
                                          d, shards.buffers[d], done[d]));
    }
    return absl::OkStatus();
  };
  SHARDRT_RETURN_IF_ERROR(n == 1 ? upload(0, 1)
                                 : ParallelFor(pool, static_cast<int64_t>(n), plan.cost, upload));
  // The host memory must outlive the transfers: wait for all of them.
  SHARDRT_RETURN_IF_ERROR(AwaitAll(done));
  ListHandles(shards);
  DataPtr out = Data::CreateUnchecked(client, layout_ptr, std::move(shards));
  RecordUpload(start_ns, bytes);
  return out;
}

// TransferToDevice's work: uploads arrays[i] with layouts[i] into out[i] (arrays.size() slots).
absl::Status UploadArrays(const std::shared_ptr<pjrt::Client>& client, ThreadPool* pool,
                          std::span<const HostArrayView> arrays,
                          std::span<const std::shared_ptr<const DataLayout>> layouts,
                          DataPtr* out) {
  const int64_t start_ns = MetricsNowNs();
  if (arrays.size() != layouts.size()) {
    return absl::InvalidArgumentError(absl::StrCat("TransferToDevice: ", arrays.size(),
                                                   " arrays but ", layouts.size(), " layouts"));
  }
  // Staging copies for arrays whose shards are not runs of the caller's memory (allocated only
  // then), the shard uploads, and each array's buffers, filled in place. Few small allocations:
  // at small sizes these transfers cost about a microsecond per shard.
  std::vector<std::vector<std::vector<std::byte>>> padded;
  absl::InlinedVector<UploadTask, 8> tasks;
  absl::InlinedVector<ShardBuffers, 1> shards(arrays.size());
  int64_t total_bytes = 0;
  for (size_t i = 0; i < arrays.size(); ++i) {
    if (layouts[i] == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("TransferToDevice: layout ", i, " is null"));
    }
    const HostArrayView& a = arrays[i];
    const DataLayout& layout = *layouts[i];
    SHARDRT_RETURN_IF_ERROR(CheckArray(i, a, layout));
    const int64_t elem = ElementSizeInBytes(a.type);
    total_bytes += static_cast<int64_t>(a.data.size());
    const ShardGeometry& g = layout.geometry;
    // Shards that are contiguous runs of the caller's array go up straight from it; others
    // (column blocks, padded uneven shards) are first copied into dense shards. (A strided
    // host view would save that copy, but the CPU plugin then keeps a non-default device
    // layout that executions misread.)
    const bool direct = layout.shards_are_runs;
    if (!direct) {
      if (padded.empty()) padded.resize(arrays.size());
      SHARDRT_ASSIGN_OR_RETURN(padded[i],
                               SplitHostArray(g, a.type, a.data, ShardPadding::kPadded));
    }
    shards[i].buffers.resize(layout.devices.size());
    for (size_t d = 0; d < layout.devices.size(); ++d) {
      const std::byte* origin =
          direct ? a.data.data() + layout.shard_offsets[d] * elem
                 : padded[i][d].data();
      tasks.push_back(UploadTask{i, d, origin});
    }
  }
  absl::InlinedVector<pjrt::Event, 8> done(tasks.size());
  const int64_t per_task = tasks.empty() ? 0 : total_bytes / static_cast<int64_t>(tasks.size());
  const UploadPlan plan = PlanUpload(*client, tasks.size(), per_task);
  SHARDRT_RETURN_IF_ERROR(ParallelFor(
      pool, static_cast<int64_t>(tasks.size()), plan.cost,
      [&](int64_t begin, int64_t end) -> absl::Status {
        for (int64_t t = begin; t < end; ++t) {
          const UploadTask& task = tasks[t];
          SHARDRT_RETURN_IF_ERROR(UploadShard(*client, plan, task.origin, *layouts[task.array],
                                              task.device,
                                              shards[task.array].buffers[task.device], done[t]));
        }
        return absl::OkStatus();
      }));
  // The host memory must outlive the transfers: wait for all of them.
  SHARDRT_RETURN_IF_ERROR(AwaitAll(done));
  for (ShardBuffers& s : shards) ListHandles(s);
  if (arrays.size() == 1) {
    out[0] = Data::CreateUnchecked(client, layouts[0], std::move(shards[0]));
  } else {
    // Many arrays' Data side by side in host memory: an execution taking them as arguments
    // reads them in order.
    std::vector<DataPtr> data = Data::CreateUncheckedBatch(
        client, std::make_shared<const DataLayoutList>(layouts.begin(), layouts.end()),
        [&](size_t i, ShardBuffers& s) { s = std::move(shards[i]); });
    std::move(data.begin(), data.end(), out);
  }
  RecordUpload(start_ns, total_bytes);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<DataPtr>> TransferToDevice(
    const std::shared_ptr<pjrt::Client>& client, ThreadPool* pool,
    std::span<const HostArrayView> arrays,
    std::span<const std::shared_ptr<const DataLayout>> layouts) {
  std::vector<DataPtr> out(arrays.size());
  SHARDRT_RETURN_IF_ERROR(UploadArrays(client, pool, arrays, layouts, out.data()));
  return out;
}

absl::StatusOr<DataPtr> TransferToDevice(const std::shared_ptr<pjrt::Client>& client,
                                         ThreadPool* pool, const HostArrayView& array,
                                         const std::shared_ptr<const DataLayout>& layout) {
  if (layout == nullptr) return absl::InvalidArgumentError("TransferToDevice: the layout is null");
  if (layout->shards_are_runs) {
    const int64_t start_ns = MetricsNowNs();
    SHARDRT_RETURN_IF_ERROR(CheckArray(0, array, *layout));
    return UploadRuns(client, pool, array, layout, start_ns);
  }
  DataPtr out;
  SHARDRT_RETURN_IF_ERROR(UploadArrays(client, pool, {&array, 1}, {&layout, 1}, &out));
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
  const UploadPlan plan = PlanUpload(*client, num_devices, shard_bytes);
  SHARDRT_RETURN_IF_ERROR(ParallelFor(
      pool, static_cast<int64_t>(num_devices), plan.cost,
      [&](int64_t begin, int64_t end) -> absl::Status {
        for (int64_t d = begin; d < end; ++d) {
          SHARDRT_RETURN_IF_ERROR(UploadShard(*client, plan, shards[d].data(), *layout, d,
                                              buffers[d], done[d]));
        }
        return absl::OkStatus();
      }));
  SHARDRT_RETURN_IF_ERROR(AwaitAll(done));
  return Data::Create(client, std::move(layout), std::move(buffers));
}

namespace {

// Host bytes in pages of their own (an anonymous mapping, zero-filled), handed back to the
// system when destroyed: a shard produced for an upload never stays in the C library's heap,
// on top of the data on the devices.
class HostPages {
 public:
  static absl::StatusOr<HostPages> Map(size_t bytes) {
    const size_t length = std::max<size_t>(bytes, 1);
    void* p = ::mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "AssembleFromShards: cannot map ", bytes, " bytes for a shard: ", std::strerror(errno)));
    }
    return HostPages(static_cast<std::byte*>(p), bytes);
  }
  HostPages(HostPages&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}
  HostPages& operator=(HostPages&&) = delete;
  ~HostPages() {
    if (data_ != nullptr) ::munmap(data_, std::max<size_t>(size_, 1));
  }
  std::span<std::byte> span() const { return {data_, size_}; }

 private:
  HostPages(std::byte* data, size_t size) : data_(data), size_(size) {}
  std::byte* data_;
  size_t size_;
};

}  // namespace

absl::StatusOr<DataPtr> AssembleFromShards(const std::shared_ptr<pjrt::Client>& client,
                                           ThreadPool* pool,
                                           std::shared_ptr<const DataLayout> layout,
                                           ShardProducer produce, double produce_ns_per_byte) {
  if (layout == nullptr) return absl::InvalidArgumentError("AssembleFromShards: null layout");
  static Metric* const time = GlobalMetrics().GetMetric(kTransferToDeviceTime, MetricRepr::kTime);
  ScopedTimer timer(time);
  const size_t num_devices = layout->devices.size();
  SHARDRT_ASSIGN_OR_RETURN(int64_t shard_elems, NumElements(layout->shard_dims));
  const size_t shard_bytes = static_cast<size_t>(shard_elems * ElementSizeInBytes(layout->global.type));
  // One upload at a time per shard, awaited before its pages go: the plugin copies it
  // asynchronously (several shards are in flight at once on the pool's threads).
  const UploadPlan plan{pjrt::HostBufferSemantics::kImmutableUntilTransferCompletes,
                        ParallelCost{.per_item_ns = 700.0 + (produce_ns_per_byte + 0.1) *
                                                               static_cast<double>(shard_bytes)}};
  std::optional<HostPages> replicated;
  if (layout->sharding.IsReplicated()) {
    SHARDRT_ASSIGN_OR_RETURN(HostPages pages, HostPages::Map(shard_bytes));
    SHARDRT_RETURN_IF_ERROR(produce(0, pages.span()));
    replicated.emplace(std::move(pages));
  }
  std::vector<pjrt::Buffer> buffers(num_devices);
  SHARDRT_RETURN_IF_ERROR(ParallelFor(
      pool, static_cast<int64_t>(num_devices), plan.cost,
      [&](int64_t begin, int64_t end) -> absl::Status {
        for (int64_t d = begin; d < end; ++d) {
          std::optional<HostPages> own;
          if (!replicated.has_value()) {
            SHARDRT_ASSIGN_OR_RETURN(HostPages pages, HostPages::Map(shard_bytes));
            SHARDRT_RETURN_IF_ERROR(produce(static_cast<size_t>(d), pages.span()));
            own.emplace(std::move(pages));
          }
          const std::byte* origin = (own.has_value() ? *own : *replicated).span().data();
          pjrt::Event done;
          SHARDRT_RETURN_IF_ERROR(
              UploadShard(*client, plan, origin, *layout, static_cast<size_t>(d), buffers[d], done));
          if (!done.empty()) SHARDRT_RETURN_IF_ERROR(done.Await());
        }
        return absl::OkStatus();
      }));
  return Data::Create(client, std::move(layout), std::move(buffers));
}

absl::Status TransferFromDeviceInto(ThreadPool* pool, std::span<const DataPtr> data,
                                    std::span<const std::span<std::byte>> into) {
  static Metric* const time =
      GlobalMetrics().GetMetric(kTransferFromDeviceTime, MetricRepr::kTime);
  static Metric* const bytes_out = GlobalMetrics().GetMetric(kOutboundData, MetricRepr::kBytes);
  ScopedTimer timer(time);
  if (data.size() != into.size()) {
    return absl::InvalidArgumentError(absl::StrCat("TransferFromDevice: ", data.size(),
                                                   " data but ", into.size(), " destinations"));
  }
  // One download per tile (its replica 0), straight into the destination when the shards are
  // contiguous runs of it, else into a padded staging shard that Assemble places.
  struct Download {
    const pjrt::Buffer* buffer = nullptr;
    std::byte* dst = nullptr;
    size_t size = 0;
  };
  std::vector<Download> downloads;
  std::vector<std::vector<std::vector<std::byte>>> staging(data.size());
  int64_t total_bytes = 0;
  for (size_t i = 0; i < data.size(); ++i) {
    if (data[i] == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("TransferFromDevice: data ", i, " is null"));
    }
    SHARDRT_RETURN_IF_ERROR(data[i]->Await());
    const ShardBuffers* buffers = data[i]->buffers();
    if (buffers == nullptr) return data[i]->Usable();
    const DataLayout& layout = data[i]->layout();
    const ShardGeometry& g = layout.geometry;
    const int64_t elem = ElementSizeInBytes(layout.global.type);
    const int64_t expected = g.num_elements() * elem;
    if (static_cast<int64_t>(into[i].size()) != expected) {
      return absl::InvalidArgumentError(absl::StrCat(
          "TransferFromDevice: destination ", i, " has ", into[i].size(), " bytes, ",
          ShapeToString(layout.global), " needs ", expected));
    }
    SHARDRT_ASSIGN_OR_RETURN(int64_t shard_elems, NumElements(layout.shard_dims));
    const size_t shard_bytes = static_cast<size_t>(shard_elems * elem);
    const bool direct = layout.tiles_are_runs;
    if (!direct) staging[i].resize(layout.devices.size());
    for (int64_t t = 0; t < g.num_tiles(); ++t) {
      const int64_t d = g.tile_devices(t)[0];
      std::byte* dst = nullptr;
      if (direct) {
        dst = into[i].data() + layout.shard_offsets[d] * elem;
      } else {
        staging[i][d].resize(shard_bytes);
        dst = staging[i][d].data();
      }
      downloads.push_back({&buffers->buffers[d], dst, shard_bytes});
      total_bytes += static_cast<int64_t>(shard_bytes);
    }
  }
  // Every copy is started before any is awaited, so the plugin runs them together.
  std::vector<pjrt::Event> done(downloads.size());
  const int64_t per = downloads.empty() ? 0 : total_bytes / static_cast<int64_t>(downloads.size());
  SHARDRT_RETURN_IF_ERROR(ParallelFor(
      pool, static_cast<int64_t>(downloads.size()), ShardCopyCost(per),
      [&](int64_t begin, int64_t end) -> absl::Status {
        for (int64_t k = begin; k < end; ++k) {
          SHARDRT_ASSIGN_OR_RETURN(done[k],
                                   downloads[k].buffer->ToHost(downloads[k].dst, downloads[k].size));
        }
        return absl::OkStatus();
      }));
  SHARDRT_RETURN_IF_ERROR(AwaitAll(done));
  for (size_t i = 0; i < data.size(); ++i) {
    if (staging[i].empty()) continue;  // downloaded in place
    const DataLayout& layout = data[i]->layout();
    const ShardGeometry& g = layout.geometry;
    std::vector<std::span<const std::byte>> spans(layout.devices.size());
    for (int64_t t = 0; t < g.num_tiles(); ++t) {
      std::span<const int64_t> devices = g.tile_devices(t);
      for (int64_t d : devices) spans[d] = staging[i][devices[0]];
    }
    SHARDRT_RETURN_IF_ERROR(AssembleHostArrayInto(g, layout.global.type, spans,
                                                  ShardPadding::kPadded, ReplicaCheck::kSkip,
                                                  into[i]));
  }
  bytes_out->AddSample(static_cast<double>(total_bytes));
  return absl::OkStatus();
}

absl::StatusOr<std::vector<HostArray>> TransferFromDevice(ThreadPool* pool,
                                                          std::span<const DataPtr> data) {
  std::vector<HostArray> out(data.size());
  std::vector<std::span<std::byte>> into(data.size());
  for (size_t i = 0; i < data.size(); ++i) {
    if (data[i] == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("TransferFromDevice: data ", i, " is null"));
    }
    const DataLayout& layout = data[i]->layout();
    out[i].type = layout.global.type;
    out[i].dims = layout.global.dims;
    out[i].data.resize(static_cast<size_t>(layout.geometry.num_elements() *
                                           ElementSizeInBytes(layout.global.type)));
    into[i] = out[i].data;
  }
  SHARDRT_RETURN_IF_ERROR(TransferFromDeviceInto(pool, data, into));
  return out;
}

}  // namespace shardrt
