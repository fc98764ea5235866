#include "shardrt/sharding/mesh.h"

#include <numeric>
#include <utility>

#include "absl/strings/str_cat.h"

namespace shardrt {

absl::StatusOr<Mesh> Mesh::Create(std::vector<MeshAxis> axes, std::vector<int64_t> device_ids) {
  if (axes.empty()) return absl::InvalidArgumentError("a mesh needs at least one axis");
  Shape sizes;
  for (size_t i = 0; i < axes.size(); ++i) {
    if (axes[i].name.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("mesh axis ", i, " has no name"));
    }
    for (size_t j = 0; j < i; ++j) {
      if (axes[j].name == axes[i].name) {
        return absl::InvalidArgumentError(
            absl::StrCat("mesh axis name '", axes[i].name, "' appears twice"));
      }
    }
    if (axes[i].size <= 0) {
      return absl::InvalidArgumentError(absl::StrCat("mesh axis '", axes[i].name, "' has size ",
                                                     axes[i].size, "; it must be positive"));
    }
    sizes.push_back(axes[i].size);
  }
  absl::StatusOr<TileAssignment> devices =
      device_ids.empty() ? TileAssignment::Iota(sizes)
                         : TileAssignment::Create(sizes, std::move(device_ids));
  if (!devices.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("mesh: ", devices.status().message()));
  }
  Mesh mesh;
  mesh.axes_ = std::move(axes);
  mesh.devices_ = *std::move(devices);
  return mesh;
}

int64_t Mesh::AxisIndex(absl::string_view name) const {
  for (size_t i = 0; i < axes_.size(); ++i) {
    if (axes_[i].name == name) return static_cast<int64_t>(i);
  }
  return -1;
}

absl::StatusOr<Sharding> NamedSharding(const Mesh& mesh, const PartitionSpec& spec) {
  const int64_t num_axes = static_cast<int64_t>(mesh.axes().size());
  std::vector<bool> used(num_axes, false);
  std::vector<int64_t> perm;  // mesh axes in tile-assignment order
  Shape tile_dims;
  for (size_t dim = 0; dim < spec.size(); ++dim) {
    int64_t ways = 1;
    for (const std::string& name : spec[dim]) {
      const int64_t axis = mesh.AxisIndex(name);
      if (axis < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("partition spec dim ", dim, ": mesh has no axis '", name, "'"));
      }
      if (used[axis]) {
        return absl::InvalidArgumentError(absl::StrCat(
            "partition spec dim ", dim, ": mesh axis '", name, "' is used more than once"));
      }
      used[axis] = true;
      perm.push_back(axis);
      ways *= mesh.axes()[axis].size;
    }
    tile_dims.push_back(ways);
  }
  int64_t replicas = 1;
  for (int64_t axis = 0; axis < num_axes; ++axis) {
    if (used[axis]) continue;
    perm.push_back(axis);
    replicas *= mesh.axes()[axis].size;
  }
  tile_dims.push_back(replicas);  // a trailing replicated dim; size 1 is dropped as canonical

  absl::StatusOr<TileAssignment> transposed = mesh.device_array().Transpose(perm);
  if (!transposed.ok()) return transposed.status();
  absl::StatusOr<TileAssignment> tiles = transposed->Reshape(std::move(tile_dims));
  if (!tiles.ok()) return tiles.status();
  return Sharding::PartiallyReplicated(*std::move(tiles));
}

}  // namespace shardrt
