#include "shardrt/sharding/geometry.h"

#include <algorithm>
#include <numeric>
#include <utility>

#include "absl/strings/str_cat.h"
#include "shardrt/base/limits.h"

namespace shardrt {
namespace {

// The shape-independent layout: which devices hold each tile.
struct TileLayout {
  int64_t num_devices = 0;
  int64_t num_replicas = 1;
  Shape grid;                         // tiles per data dim (empty unless tiled)
  std::vector<int64_t> tile_devices;  // num_tiles x num_replicas, by replica index
  int64_t num_tiles() const {
    return static_cast<int64_t>(tile_devices.size()) / num_replicas;
  }
};

absl::StatusOr<TileLayout> LayoutOf(const Sharding& sharding, std::optional<int64_t> num_devices) {
  absl::StatusOr<int64_t> n = ResolveNumDevices(sharding, num_devices);
  if (!n.ok()) return n.status();
  TileLayout layout;
  layout.num_devices = *n;
  switch (sharding.kind()) {
    case Sharding::Kind::kReplicated:
      layout.num_replicas = *n;
      layout.tile_devices.resize(*n);
      std::iota(layout.tile_devices.begin(), layout.tile_devices.end(), 0);
      break;
    case Sharding::Kind::kMaximal:
      layout.tile_devices = {sharding.maximal_device()};
      break;
    case Sharding::Kind::kTiled: {
      std::span<const int64_t> grid = sharding.data_tile_dims();
      layout.grid.assign(grid.begin(), grid.end());
      layout.num_replicas = sharding.subgroup_size();
      // Row-major tile-assignment order is (tile, replica) order: subgroup dims are trailing.
      layout.tile_devices = sharding.tile_assignment().devices();
      break;
    }
    case Sharding::Kind::kManual:
      return absl::InvalidArgumentError("a manual sharding has no index domains");
  }
  return layout;
}

// Decodes a row-major flat index over `grid` into per-dim indices.
void Unflatten(int64_t flat, std::span<const int64_t> grid, std::span<int64_t> index) {
  for (int64_t i = static_cast<int64_t>(grid.size()) - 1; i >= 0; --i) {
    index[i] = flat % grid[i];
    flat /= grid[i];
  }
}

}  // namespace

absl::StatusOr<int64_t> ResolveNumDevices(const Sharding& sharding,
                                          std::optional<int64_t> num_devices) {
  if (sharding.IsManual()) {
    return absl::InvalidArgumentError("a manual sharding has no index domains");
  }
  if (sharding.IsTiled()) {
    const int64_t n = *sharding.num_devices();
    if (num_devices.has_value() && *num_devices != n) {
      return absl::InvalidArgumentError(absl::StrCat("the sharding uses ", n,
                                                     " devices but the device count is ",
                                                     *num_devices));
    }
    return n;
  }
  const char* kind = sharding.IsReplicated() ? "replicated" : "maximal";
  if (!num_devices.has_value()) {
    return absl::InvalidArgumentError(
        absl::StrCat("a ", kind, " sharding needs the device count"));
  }
  const int64_t n = *num_devices;
  if (n < 1 || n > TileAssignment::kMaxDevices) {
    return absl::InvalidArgumentError(absl::StrCat("device count ", n, " out of range [1, ",
                                                   TileAssignment::kMaxDevices, "]"));
  }
  if (sharding.IsMaximal() && sharding.maximal_device() >= n) {
    return absl::InvalidArgumentError(absl::StrCat(
        "maximal device ", sharding.maximal_device(), " out of range [0, ", n, ")"));
  }
  return n;
}

absl::StatusOr<std::vector<DevicePlacement>> PlaceDevices(const Sharding& sharding,
                                                          std::optional<int64_t> num_devices) {
  absl::StatusOr<TileLayout> layout = LayoutOf(sharding, num_devices);
  if (!layout.ok()) return layout.status();
  std::vector<DevicePlacement> placements(layout->num_devices);
  for (int64_t d = 0; d < layout->num_devices; ++d) placements[d].device = d;
  for (size_t i = 0; i < layout->tile_devices.size(); ++i) {
    DevicePlacement& p = placements[layout->tile_devices[i]];
    p.holds_data = true;
    p.tile = static_cast<int64_t>(i) / layout->num_replicas;
    p.replica = static_cast<int64_t>(i) % layout->num_replicas;
    p.tile_index.resize(layout->grid.size());
    Unflatten(p.tile, layout->grid, p.tile_index);
  }
  return placements;
}

absl::StatusOr<ShardGeometry> ShardGeometry::Create(Shape shape, const Sharding& sharding,
                                                    std::optional<int64_t> num_devices) {
  if (static_cast<int64_t>(shape.size()) > limits::kMaxRank) {
    return absl::InvalidArgumentError(absl::StrCat("the array has rank ", shape.size(),
                                                   "; the limit is ", limits::kMaxRank));
  }
  absl::StatusOr<int64_t> elements = NumElements(shape);
  if (!elements.ok()) return elements.status();
  if (sharding.IsTiled() && sharding.data_rank() != static_cast<int64_t>(shape.size())) {
    return absl::InvalidArgumentError(absl::StrCat("sharding has rank ", sharding.data_rank(),
                                                   " but the array has rank ", shape.size()));
  }
  absl::StatusOr<TileLayout> layout = LayoutOf(sharding, num_devices);
  if (!layout.ok()) return layout.status();

  ShardGeometry g;
  const int64_t rank = static_cast<int64_t>(shape.size());
  // The tables below hold rank integers per tile and per device: bound them before allocating.
  if (__int128{std::max<int64_t>(rank, 1)} * (layout->num_devices + layout->num_tiles()) >
      limits::kMaxGeometryEntries) {
    return absl::InvalidArgumentError(absl::StrCat(
        "rank ", rank, " over ", layout->num_devices, " devices needs more than ",
        limits::kMaxGeometryEntries, " index entries; the limit is rank x devices <= ",
        limits::kMaxGeometryEntries / 2));
  }
  Shape grid = layout->grid;
  if (grid.empty()) grid.assign(rank, 1);
  g.shape_ = std::move(shape);
  g.num_elements_ = *elements;
  g.num_devices_ = layout->num_devices;
  g.num_replicas_ = layout->num_replicas;
  g.num_tiles_ = layout->num_tiles();
  g.shard_shape_.resize(rank);
  g.shard_num_elements_ = 1;
  for (int64_t i = 0; i < rank; ++i) {
    const int64_t n = g.shape_[i];
    g.shard_shape_[i] = n / grid[i] + (n % grid[i] != 0 ? 1 : 0);
    g.shard_num_elements_ *= g.shard_shape_[i];  // <= num_elements: no overflow
  }

  g.tile_start_.resize(g.num_tiles_ * rank);
  g.tile_limit_.resize(g.num_tiles_ * rank);
  std::vector<int64_t> index(rank);
  for (int64_t t = 0; t < g.num_tiles_; ++t) {
    Unflatten(t, grid, index);
    for (int64_t i = 0; i < rank; ++i) {
      const __int128 n = g.shape_[i], s = g.shard_shape_[i];
      g.tile_start_[t * rank + i] = static_cast<int64_t>(std::min<__int128>(index[i] * s, n));
      g.tile_limit_[t * rank + i] =
          static_cast<int64_t>(std::min<__int128>((index[i] + 1) * s, n));
    }
  }
  g.tile_devices_ = std::move(layout->tile_devices);
  g.tile_of_device_.assign(g.num_devices_, -1);
  g.replica_of_device_.assign(g.num_devices_, 0);
  for (size_t i = 0; i < g.tile_devices_.size(); ++i) {
    g.tile_of_device_[g.tile_devices_[i]] = static_cast<int64_t>(i) / g.num_replicas_;
    g.replica_of_device_[g.tile_devices_[i]] = static_cast<int64_t>(i) % g.num_replicas_;
  }
  g.zeros_.assign(rank, 0);
  return g;
}

std::span<const int64_t> ShardGeometry::start(int64_t d) const {
  const int64_t t = tile_of_device_[d];
  return t < 0 ? std::span<const int64_t>(zeros_) : tile_start(t);
}

std::span<const int64_t> ShardGeometry::limit(int64_t d) const {
  const int64_t t = tile_of_device_[d];
  return t < 0 ? std::span<const int64_t>(zeros_) : tile_limit(t);
}

Shape ShardGeometry::exact_shape(int64_t d) const {
  std::span<const int64_t> lo = start(d), hi = limit(d);
  Shape shape(lo.size());
  for (size_t i = 0; i < lo.size(); ++i) shape[i] = hi[i] - lo[i];
  return shape;
}

}  // namespace shardrt
