// Mesh + PartitionSpec -> Sharding, as JAX's NamedSharding does.
//
// A Mesh is an N-d array of device (partition) ids with a name per axis. A PartitionSpec
// gives, for each array dim, the mesh axes it is split over (major to minor; none means the
// dim is not split). The resulting tile assignment has, per array dim, the product of the
// sizes of its axes; the axes no dim uses become one trailing replicated dim (partial
// replication) when their product is more than 1. Its devices are the mesh array transposed
// so that the used axes come first, in dim order, then the unused ones in mesh order.
//
// Immutable value types; thread-compatible.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "shardrt/base/export.h"
#include "shardrt/sharding/sharding.h"

namespace shardrt {

struct SHARDRT_EXPORT MeshAxis {
  std::string name;
  int64_t size = 1;
  bool operator==(const MeshAxis&) const = default;
};

class SHARDRT_EXPORT Mesh {
 public:
  // `device_ids`: the row-major mesh array, a permutation of 0..N-1 where N is the product of
  // the axis sizes; empty means 0..N-1 in order.
  // Error: InvalidArgument for no axes, an empty or repeated axis name, a non-positive size,
  // more than TileAssignment::kMaxDevices devices, or device ids that are not such a
  // permutation.
  [[nodiscard]] static absl::StatusOr<Mesh> Create(std::vector<MeshAxis> axes,
                                                   std::vector<int64_t> device_ids = {});

  const std::vector<MeshAxis>& axes() const { return axes_; }
  const std::vector<int64_t>& device_ids() const { return devices_.devices(); }
  int64_t num_devices() const { return devices_.num_devices(); }
  // The mesh array: dims are the axis sizes.
  const TileAssignment& device_array() const { return devices_; }
  // The index of the axis called `name`, or -1.
  int64_t AxisIndex(absl::string_view name) const;

 private:
  std::vector<MeshAxis> axes_;
  TileAssignment devices_;  // dims = axis sizes
};

// One entry per array dim: the mesh axes that dim is split over, major to minor; an empty
// entry leaves the dim unsplit. E.g. {{"x"}, {}, {"y", "z"}}.
using PartitionSpec = std::vector<std::vector<std::string>>;

// The sharding of an array of rank spec.size() laid out by `spec` on `mesh`.
// Error: InvalidArgument naming the axis if it is not in the mesh or is used twice.
[[nodiscard]] SHARDRT_EXPORT absl::StatusOr<Sharding> NamedSharding(const Mesh& mesh,
                                                                    const PartitionSpec& spec);

}  // namespace shardrt
