#include "shardrt/sharding/sharding.h"

#include <algorithm>
#include <numeric>
#include <utility>

#include "absl/strings/str_cat.h"

namespace shardrt {

Sharding Sharding::Manual() {
  Sharding s;
  s.kind_ = Kind::kManual;
  return s;
}

absl::StatusOr<Sharding> Sharding::Maximal(int64_t device) {
  if (device < 0) {
    return absl::InvalidArgumentError(absl::StrCat("maximal device ", device, " is negative"));
  }
  Sharding s;
  s.kind_ = Kind::kMaximal;
  s.maximal_device_ = device;
  return s;
}

absl::StatusOr<Sharding> Sharding::PartiallyReplicated(TileAssignment tiles) {
  static constexpr SubgroupType kReplicatedLast[] = {SubgroupType::kReplicated};
  return Tiled(std::move(tiles), kReplicatedLast);
}

absl::StatusOr<Sharding> Sharding::Tiled(TileAssignment tiles,
                                         std::span<const SubgroupType> subgroup_types) {
  const int64_t rank = tiles.rank();
  const int64_t num_types = static_cast<int64_t>(subgroup_types.size());
  if (rank == 0) {
    return absl::InvalidArgumentError("a tiled sharding needs a non-empty tile assignment");
  }
  if (num_types > rank) {
    return absl::InvalidArgumentError(absl::StrCat(num_types, " subgroup types but the tile ",
                                                   "assignment has only ", rank, " dims"));
  }
  const int64_t data_rank = rank - num_types;
  const Shape& dims = tiles.dims();

  // Bring the subgroup dims into canonical order (manual, then replicated; size-1 dims last,
  // where the reshape below drops them) and merge those of the same type.
  std::vector<int64_t> perm(data_rank);
  std::iota(perm.begin(), perm.end(), 0);
  Shape merged(dims.begin(), dims.begin() + data_rank);
  std::vector<SubgroupType> types;
  for (SubgroupType type : {SubgroupType::kManual, SubgroupType::kReplicated}) {
    int64_t size = 1;
    for (int64_t i = 0; i < num_types; ++i) {
      if (subgroup_types[i] == type && dims[data_rank + i] > 1) {
        perm.push_back(data_rank + i);
        size *= dims[data_rank + i];
      }
    }
    if (size > 1) {
      merged.push_back(size);
      types.push_back(type);
    }
  }
  for (int64_t i = 0; i < num_types; ++i) {
    if (dims[data_rank + i] == 1) perm.push_back(data_rank + i);
  }
  if (merged.empty()) merged.push_back(1);  // rank-0 data, every subgroup dim of size 1
  bool identity = true;
  for (size_t i = 0; i < perm.size(); ++i) identity &= perm[i] == static_cast<int64_t>(i);
  if (!identity || merged != dims) {
    absl::StatusOr<TileAssignment> transposed = tiles.Transpose(perm);
    if (!transposed.ok()) return transposed.status();
    absl::StatusOr<TileAssignment> reshaped = transposed->Reshape(merged);
    if (!reshaped.ok()) return reshaped.status();
    tiles = *std::move(reshaped);
  }

  // Collapse what XLA collapses.
  const int64_t new_data_rank = tiles.rank() - static_cast<int64_t>(types.size());
  int64_t data_tiles = 1;
  for (int64_t i = 0; i < new_data_rank; ++i) data_tiles *= tiles.dims()[i];
  if (tiles.num_devices() == 1) return Replicated();
  if (data_tiles == 1 && types.size() == 1) {
    return types[0] == SubgroupType::kManual ? Manual() : Replicated();
  }

  // Replica groups are sets: sort the devices of each.
  if (!types.empty() && types.back() == SubgroupType::kReplicated) {
    const int64_t group = tiles.dims().back();
    std::vector<int64_t> devices = tiles.devices();
    for (auto it = devices.begin(); it != devices.end(); it += group) {
      std::sort(it, it + group);
    }
    absl::StatusOr<TileAssignment> sorted = TileAssignment::Create(tiles.dims(), devices);
    if (!sorted.ok()) return sorted.status();
    tiles = *std::move(sorted);
  }

  Sharding s;
  s.kind_ = Kind::kTiled;
  s.tiles_ = std::move(tiles);
  s.subgroup_types_ = std::move(types);
  return s;
}

bool Sharding::ReplicateOnLastTileDim() const {
  return subgroup_types_.size() == 1 && subgroup_types_[0] == SubgroupType::kReplicated;
}

int64_t Sharding::data_rank() const {
  if (!IsTiled()) return 0;
  return tiles_.rank() - static_cast<int64_t>(subgroup_types_.size());
}

std::span<const int64_t> Sharding::data_tile_dims() const {
  return std::span<const int64_t>(tiles_.dims()).first(data_rank());
}

int64_t Sharding::subgroup_size() const {
  int64_t size = 1;
  for (int64_t i = data_rank(); i < tiles_.rank(); ++i) size *= tiles_.dims()[i];
  return size;
}

std::optional<int64_t> Sharding::num_devices() const {
  if (!IsTiled()) return std::nullopt;
  return tiles_.num_devices();
}

std::ostream& operator<<(std::ostream& os, const Sharding& sharding) {
  return os << sharding.ToString();
}

}  // namespace shardrt
