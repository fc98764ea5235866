// Where each device's data lies in a global array: the index domains, replica indices and
// padded shard shape of a (shape, sharding) pair on N devices.
//
// A sharding splits array dim i (size n) into k tiles; every device buffer has the padded
// shard size s = ceil(n / k) on that dim (XLA's SPMD partitioner), and tile t covers exactly
// [min(t*s, n), min((t+1)*s, n)): trailing tiles may be smaller, or empty. E.g. 10 over 4:
// [0,3) [3,6) [6,9) [9,10), padded to 3; 10 over 8: s = 2 and the last three tiles are empty.
//
// Tiles are numbered row-major over the data tile dims. The devices holding one tile are its
// replicas, numbered 0.. in tile-assignment order (for partial replication, a device's index
// along the trailing subgroup dims; for a replicated sharding, its position among the N
// devices). Manual subgroups count as replicas too (same domain, data not required to agree).
//
// Kinds: replicated: one tile, the whole array, on every device; maximal: one tile on its
// device, the other devices hold no data; tiled: as above; manual: no index domains (error).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "shardrt/base/export.h"
#include "shardrt/sharding/shape.h"
#include "shardrt/sharding/sharding.h"

namespace shardrt {

// The device count to use for `sharding`: the tile-assignment size for a tiled sharding
// (`num_devices`, if given, must match); `num_devices` for the other kinds (required).
// Error: InvalidArgument for a missing or mismatched count, a count outside
// [1, TileAssignment::kMaxDevices], a maximal device >= the count, or a manual sharding.
[[nodiscard]] SHARDRT_EXPORT absl::StatusOr<int64_t> ResolveNumDevices(
    const Sharding& sharding, std::optional<int64_t> num_devices);

// Which tile one device holds, independent of any array shape.
struct SHARDRT_EXPORT DevicePlacement {
  int64_t device = 0;
  bool holds_data = false;
  int64_t tile = -1;   // row-major index among the data tiles; -1 without data
  Shape tile_index;    // per data dim (empty unless tiled)
  int64_t replica = 0;
};

// One entry per device 0..N-1 (N from ResolveNumDevices), in device order.
[[nodiscard]] SHARDRT_EXPORT absl::StatusOr<std::vector<DevicePlacement>> PlaceDevices(
    const Sharding& sharding, std::optional<int64_t> num_devices = std::nullopt);

// The geometry of one (shape, sharding, device count): computed once by Create, then every
// accessor is O(1) (spans point into the object). Immutable; thread-safe to share.
class SHARDRT_EXPORT ShardGeometry {
 public:
  // Error: InvalidArgument for a negative dim, an element count overflowing int64, a tiled
  // sharding whose data rank differs from the shape's rank, or as ResolveNumDevices.
  [[nodiscard]] static absl::StatusOr<ShardGeometry> Create(
      Shape shape, const Sharding& sharding, std::optional<int64_t> num_devices = std::nullopt);

  const Shape& shape() const { return shape_; }
  int64_t rank() const { return static_cast<int64_t>(shape_.size()); }
  int64_t num_elements() const { return num_elements_; }
  // The padded shape every device buffer has (the whole shape unless tiled).
  const Shape& shard_shape() const { return shard_shape_; }
  int64_t shard_num_elements() const { return shard_num_elements_; }

  int64_t num_devices() const { return num_devices_; }
  // Distinct tiles (data shards), and devices per tile.
  int64_t num_tiles() const { return num_tiles_; }
  int64_t num_replicas() const { return num_replicas_; }

  // Per tile t in [0, num_tiles()): its exact domain and its devices, by replica index.
  std::span<const int64_t> tile_start(int64_t t) const { return Slice(tile_start_, t, rank()); }
  std::span<const int64_t> tile_limit(int64_t t) const { return Slice(tile_limit_, t, rank()); }
  std::span<const int64_t> tile_devices(int64_t t) const {
    return Slice(tile_devices_, t, num_replicas_);
  }

  // Per device d in [0, num_devices()).
  bool holds_data(int64_t d) const { return tile_of_device_[d] >= 0; }
  // The device's tile, or -1 if it holds no data (maximal shardings).
  int64_t tile(int64_t d) const { return tile_of_device_[d]; }
  int64_t replica(int64_t d) const { return replica_of_device_[d]; }
  // Exact domain [start, limit) per dim; all zeros for a device without data.
  std::span<const int64_t> start(int64_t d) const;
  std::span<const int64_t> limit(int64_t d) const;
  // limit - start: the unpadded shape of the device's data. All zeros for a device without
  // data; check holds_data() first, as for rank 0 that is the shape of one element.
  Shape exact_shape(int64_t d) const;

 private:
  ShardGeometry() = default;
  static std::span<const int64_t> Slice(const std::vector<int64_t>& v, int64_t i, int64_t n) {
    return std::span<const int64_t>(v).subspan(i * n, n);
  }

  Shape shape_;
  Shape shard_shape_;
  int64_t num_elements_ = 0;
  int64_t shard_num_elements_ = 0;
  int64_t num_devices_ = 0;
  int64_t num_tiles_ = 0;
  int64_t num_replicas_ = 0;
  std::vector<int64_t> tile_start_;      // num_tiles x rank
  std::vector<int64_t> tile_limit_;      // num_tiles x rank
  std::vector<int64_t> tile_devices_;    // num_tiles x num_replicas
  std::vector<int64_t> tile_of_device_;  // num_devices
  std::vector<int64_t> replica_of_device_;
  std::vector<int64_t> zeros_;           // rank zeros, for devices without data
};

}  // namespace shardrt
