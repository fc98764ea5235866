#include "shardrt/sharding/split.h"

#include <cstring>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace shardrt {
namespace {

// One side of a box copy: a row-major buffer of shape `dims`, the box starting at `origin`.
struct Side {
  std::span<const int64_t> dims;
  std::span<const int64_t> origin;
};

// Calls run(src_offset, dst_offset, bytes, outer_index) for each contiguous run of the box
// `extent` (bytes offsets into src / dst). Dims whose extent covers both buffers fully are
// merged into the run. `outer_index` is the box-relative index of the run's first element
// on dims [0, inner). Stops early when run returns false; returns false then.
template <typename Run>
bool ForEachRun(Side src, Side dst, std::span<const int64_t> extent, int64_t elem, Run run) {
  const int64_t rank = static_cast<int64_t>(extent.size());
  for (int64_t e : extent) {
    if (e == 0) return true;
  }
  if (rank == 0) return run(int64_t{0}, int64_t{0}, elem, std::span<const int64_t>());
  std::vector<int64_t> src_stride(rank), dst_stride(rank);
  int64_t s = elem, d = elem;
  for (int64_t i = rank - 1; i >= 0; --i) {
    src_stride[i] = s;
    dst_stride[i] = d;
    s *= src.dims[i];
    d *= dst.dims[i];
  }
  int64_t inner = rank - 1;
  while (inner > 0 && extent[inner] == src.dims[inner] && extent[inner] == dst.dims[inner]) {
    --inner;
  }
  const int64_t bytes = extent[inner] * src_stride[inner];
  int64_t src_off = 0, dst_off = 0;
  for (int64_t i = 0; i < rank; ++i) {
    src_off += src.origin[i] * src_stride[i];
    dst_off += dst.origin[i] * dst_stride[i];
  }
  std::vector<int64_t> index(inner, 0);
  while (true) {
    if (!run(src_off, dst_off, bytes, std::span<const int64_t>(index))) return false;
    int64_t j = inner - 1;
    for (; j >= 0; --j) {
      if (++index[j] < extent[j]) {
        src_off += src_stride[j];
        dst_off += dst_stride[j];
        break;
      }
      src_off -= (extent[j] - 1) * src_stride[j];
      dst_off -= (extent[j] - 1) * dst_stride[j];
      index[j] = 0;
    }
    if (j < 0) return true;
  }
}

absl::StatusOr<int64_t> ElementSize(ElementType type) {
  const int64_t size = ElementSizeInBytes(type);
  if (size <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("invalid element type ", static_cast<int>(type)));
  }
  return size;
}

// Global byte size, checked against overflow.
absl::StatusOr<int64_t> GlobalBytes(const ShardGeometry& g, int64_t elem) {
  int64_t bytes = 0;
  if (!CheckedMul(g.num_elements(), elem, &bytes)) {
    return absl::InvalidArgumentError(absl::StrCat("the byte size of shape ",
                                                   DimsToString(g.shape()), " overflows int64"));
  }
  return bytes;
}

int64_t Product(std::span<const int64_t> dims) {
  int64_t p = 1;
  for (int64_t d : dims) p *= d;
  return p;
}

int64_t BufferBytes(const ShardGeometry& g, int64_t elem, int64_t device, ShardPadding padding) {
  if (padding == ShardPadding::kPadded) return g.shard_num_elements() * elem;
  if (!g.holds_data(device)) return 0;  // (a rank-0 exact shape would count 1 element)
  return Product(g.exact_shape(device)) * elem;
}

std::span<const int64_t> BufferDims(const ShardGeometry& g, const Shape& exact,
                                    ShardPadding padding) {
  return padding == ShardPadding::kPadded ? std::span<const int64_t>(g.shard_shape())
                                          : std::span<const int64_t>(exact);
}

absl::Status CheckShardCount(const ShardGeometry& g, size_t count) {
  if (static_cast<int64_t>(count) != g.num_devices()) {
    return absl::InvalidArgumentError(absl::StrCat("got ", count, " shard buffers for ",
                                                   g.num_devices(), " devices"));
  }
  return absl::OkStatus();
}

absl::Status CheckBufferSize(int64_t device, size_t actual, int64_t expected) {
  if (static_cast<int64_t>(actual) != expected) {
    return absl::InvalidArgumentError(absl::StrCat("shard buffer of device ", device, " has ",
                                                   actual, " bytes, expected ", expected));
  }
  return absl::OkStatus();
}

absl::Status Split(const ShardGeometry& g, ElementType type, std::span<const std::byte> global,
                   ShardPadding padding, std::span<const std::span<std::byte>> shards,
                   bool zeroed) {
  absl::StatusOr<int64_t> elem = ElementSize(type);
  if (!elem.ok()) return elem.status();
  absl::StatusOr<int64_t> global_bytes = GlobalBytes(g, *elem);
  if (!global_bytes.ok()) return global_bytes.status();
  if (static_cast<int64_t>(global.size()) != *global_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "global array has ", global.size(), " bytes, expected ", *global_bytes, " for shape ",
        DimsToString(g.shape()), " of ", ElementTypeName(type)));
  }
  absl::Status status = CheckShardCount(g, shards.size());
  if (!status.ok()) return status;
  for (int64_t d = 0; d < g.num_devices(); ++d) {
    status = CheckBufferSize(d, shards[d].size(), BufferBytes(g, *elem, d, padding));
    if (!status.ok()) return status;
  }
  const std::vector<int64_t> zeros(g.rank(), 0);
  for (int64_t d = 0; d < g.num_devices(); ++d) {
    std::span<std::byte> out = shards[d];
    const Shape exact = g.exact_shape(d);
    if (!zeroed && padding == ShardPadding::kPadded && exact != g.shard_shape() && !out.empty()) {
      std::memset(out.data(), 0, out.size());
    }
    if (!g.holds_data(d)) continue;
    ForEachRun(Side{g.shape(), g.start(d)}, Side{BufferDims(g, exact, padding), zeros}, exact,
               *elem, [&](int64_t src, int64_t dst, int64_t bytes, std::span<const int64_t>) {
                 std::memcpy(out.data() + dst, global.data() + src, bytes);
                 return true;
               });
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<int64_t> ShardByteSize(const ShardGeometry& geometry, ElementType type,
                                      int64_t device, ShardPadding padding) {
  absl::StatusOr<int64_t> elem = ElementSize(type);
  if (!elem.ok()) return elem.status();
  absl::StatusOr<int64_t> global_bytes = GlobalBytes(geometry, *elem);
  if (!global_bytes.ok()) return global_bytes.status();
  if (device < 0 || device >= geometry.num_devices()) {
    return absl::InvalidArgumentError(absl::StrCat("device ", device, " out of range [0, ",
                                                   geometry.num_devices(), ")"));
  }
  return BufferBytes(geometry, *elem, device, padding);
}

absl::StatusOr<std::vector<std::vector<std::byte>>> SplitHostArray(
    const ShardGeometry& geometry, ElementType type, std::span<const std::byte> global,
    ShardPadding padding) {
  absl::StatusOr<int64_t> elem = ElementSize(type);
  if (!elem.ok()) return elem.status();
  absl::StatusOr<int64_t> global_bytes = GlobalBytes(geometry, *elem);
  if (!global_bytes.ok()) return global_bytes.status();
  std::vector<std::vector<std::byte>> shards(geometry.num_devices());
  std::vector<std::span<std::byte>> views(geometry.num_devices());
  for (int64_t d = 0; d < geometry.num_devices(); ++d) {
    shards[d].resize(BufferBytes(geometry, *elem, d, padding));
    views[d] = shards[d];
  }
  absl::Status status = Split(geometry, type, global, padding, views, /*zeroed=*/true);
  if (!status.ok()) return status;
  return shards;
}

absl::Status SplitHostArrayInto(const ShardGeometry& geometry, ElementType type,
                                std::span<const std::byte> global, ShardPadding padding,
                                std::span<const std::span<std::byte>> shards) {
  return Split(geometry, type, global, padding, shards, /*zeroed=*/false);
}

absl::Status AssembleHostArrayInto(const ShardGeometry& g, ElementType type,
                                   std::span<const std::span<const std::byte>> shards,
                                   ShardPadding padding, ReplicaCheck check,
                                   std::span<std::byte> global) {
  absl::StatusOr<int64_t> elem = ElementSize(type);
  if (!elem.ok()) return elem.status();
  absl::StatusOr<int64_t> global_bytes = GlobalBytes(g, *elem);
  if (!global_bytes.ok()) return global_bytes.status();
  if (static_cast<int64_t>(global.size()) != *global_bytes) {
    return absl::InvalidArgumentError(absl::StrCat("global buffer has ", global.size(),
                                                   " bytes, expected ", *global_bytes));
  }
  absl::Status status = CheckShardCount(g, shards.size());
  if (!status.ok()) return status;
  for (int64_t d = 0; d < g.num_devices(); ++d) {
    if (!g.holds_data(d)) continue;
    status = CheckBufferSize(d, shards[d].size(), BufferBytes(g, *elem, d, padding));
    if (!status.ok()) return status;
  }
  const std::vector<int64_t> zeros(g.rank(), 0);
  for (int64_t t = 0; t < g.num_tiles(); ++t) {
    const std::span<const int64_t> devices = g.tile_devices(t);
    const int64_t primary = devices[0];
    const Shape exact = g.exact_shape(primary);
    const Side shard_side{BufferDims(g, exact, padding), zeros};
    const Side global_side{g.shape(), g.tile_start(t)};
    std::span<const std::byte> in = shards[primary];
    ForEachRun(shard_side, global_side, exact, *elem,
               [&](int64_t src, int64_t dst, int64_t bytes, std::span<const int64_t>) {
                 std::memcpy(global.data() + dst, in.data() + src, bytes);
                 return true;
               });
    if (check != ReplicaCheck::kVerify) continue;
    for (size_t r = 1; r < devices.size(); ++r) {
      std::span<const std::byte> replica = shards[devices[r]];
      std::optional<Shape> mismatch;
      ForEachRun(shard_side, global_side, exact, *elem,
                 [&](int64_t src, int64_t dst, int64_t bytes, std::span<const int64_t> outer) {
                   if (std::memcmp(global.data() + dst, replica.data() + src, bytes) == 0) {
                     return true;
                   }
                   int64_t byte = 0;
                   while (global[dst + byte] == replica[src + byte]) ++byte;
                   // Decode the element within the run over the inner dims.
                   int64_t element = byte / *elem;
                   Shape index(g.tile_start(t).begin(), g.tile_start(t).end());
                   for (size_t i = index.size(); i-- > outer.size();) {
                     index[i] += element % exact[i];
                     element /= exact[i];
                   }
                   for (size_t i = 0; i < outer.size(); ++i) index[i] += outer[i];
                   mismatch = std::move(index);
                   return false;
                 });
      if (mismatch.has_value()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "device ", devices[r], " (replica ", r, ") differs from device ", primary,
            " (replica 0) at element [", absl::StrJoin(*mismatch, ", "), "]"));
      }
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::byte>> AssembleHostArray(
    const ShardGeometry& geometry, ElementType type,
    std::span<const std::span<const std::byte>> shards, ShardPadding padding,
    ReplicaCheck check) {
  absl::StatusOr<int64_t> elem = ElementSize(type);
  if (!elem.ok()) return elem.status();
  absl::StatusOr<int64_t> global_bytes = GlobalBytes(geometry, *elem);
  if (!global_bytes.ok()) return global_bytes.status();
  std::vector<std::byte> global(*global_bytes);
  absl::Status status =
      AssembleHostArrayInto(geometry, type, shards, padding, check, global);
  if (!status.ok()) return status;
  return global;
}

}  // namespace shardrt
