// Sharding: how an array is placed on N devices, with XLA's OpSharding / HloSharding
// semantics (one array, no tuples):
//   - replicated: every device holds the whole array;
//   - maximal:    one device holds the whole array;
//   - manual:     the program partitions by hand; no index domains;
//   - tiled:      a tile assignment (see tile_assignment.h) splits array dim i into dims()[i]
//                 tiles; trailing "subgroup" dims of the assignment, each manual or replicated,
//                 hold copies of the same tile. One trailing replicated dim is XLA's
//                 `last_tile_dim_replicate` (partial replication).
//
// Canonical form. Every factory canonicalizes as XLA's HloSharding does, so that equal
// placements give equal values and print the same text:
//   - subgroup dims of size 1 are dropped; subgroup dims of the same type are merged (manual
//     dims first, then replicated);
//   - with no data tiling left, manual subgroups become Manual() and replicated ones
//     Replicated(); a tiled sharding on a single device becomes Replicated();
//   - when the last subgroup dim is replicated, the devices of each replica group are sorted
//     (a replica group is a set; a device's replica index is its rank within its group).
// So operator== means "same placement": an explicit device list equals the iota form that
// spells the same list.
//
// Immutable value type; thread-compatible.
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "shardrt/base/export.h"
#include "shardrt/sharding/shape.h"
#include "shardrt/sharding/tile_assignment.h"

namespace shardrt {

// The kind of a trailing subgroup dim of a tile assignment (XLA's `last_tile_dims`).
enum class SubgroupType : uint8_t { kManual, kReplicated };

class SHARDRT_EXPORT Sharding {
 public:
  enum class Kind : uint8_t { kReplicated, kMaximal, kManual, kTiled };

  // Replicated.
  Sharding() = default;

  static Sharding Replicated() { return Sharding(); }
  static Sharding Manual();
  // The whole array on device `device`. Error: InvalidArgument if device is negative.
  [[nodiscard]] static absl::StatusOr<Sharding> Maximal(int64_t device);
  // Tiled over `tiles`: the last subgroup_types.size() dims of `tiles` are subgroup dims,
  // the others split the array's dims. Canonicalizes (see above), so the result may be
  // replicated or manual. Error: InvalidArgument if there are more subgroup types than dims.
  [[nodiscard]] static absl::StatusOr<Sharding> Tiled(
      TileAssignment tiles, std::span<const SubgroupType> subgroup_types = {});
  // Tiled with the last dim of `tiles` replicating (XLA's PartialTile).
  [[nodiscard]] static absl::StatusOr<Sharding> PartiallyReplicated(TileAssignment tiles);

  Kind kind() const { return kind_; }
  bool IsReplicated() const { return kind_ == Kind::kReplicated; }
  bool IsMaximal() const { return kind_ == Kind::kMaximal; }
  bool IsManual() const { return kind_ == Kind::kManual; }
  bool IsTiled() const { return kind_ == Kind::kTiled; }

  // Maximal: the device holding the array; -1 otherwise.
  int64_t maximal_device() const { return maximal_device_; }
  // Tiled: the (canonical) tile assignment, subgroup dims included; empty otherwise.
  const TileAssignment& tile_assignment() const { return tiles_; }
  // Tiled: the types of the trailing subgroup dims (canonical: {}, {kReplicated},
  // {kManual} or {kManual, kReplicated}); empty otherwise.
  const std::vector<SubgroupType>& subgroup_types() const { return subgroup_types_; }
  // XLA's replicate_on_last_tile_dim: subgroup_types() == {kReplicated}.
  bool ReplicateOnLastTileDim() const;

  // Tiled: the rank of arrays this sharding applies to (tile rank minus subgroup dims).
  // 0 otherwise (the other kinds apply to any rank).
  int64_t data_rank() const;
  // Tiled: how many ways each array dim is split (the first data_rank() tile dims).
  std::span<const int64_t> data_tile_dims() const;
  // Tiled: devices holding each tile (product of the subgroup dims); 1 otherwise.
  int64_t subgroup_size() const;
  // The device count the sharding itself fixes: the tile-assignment size when tiled,
  // nullopt for the other kinds (they fit any device count).
  std::optional<int64_t> num_devices() const;

  // Canonical XLA text, e.g. "{devices=[2,2]<=[4]}" (see text.h).
  std::string ToString() const;

  bool operator==(const Sharding&) const = default;

 private:
  Kind kind_ = Kind::kReplicated;
  int64_t maximal_device_ = -1;
  TileAssignment tiles_;
  std::vector<SubgroupType> subgroup_types_;
};

SHARDRT_EXPORT std::ostream& operator<<(std::ostream& os, const Sharding& sharding);

}  // namespace shardrt
