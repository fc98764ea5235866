#include "shardrt/data/data_layout.h"

#include <algorithm>

#include "absl/hash/hash.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "shardrt/base/status_macros.h"
#include "shardrt/sharding/text.h"

namespace shardrt {
namespace {

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

// True when device d's shard is a whole (unpadded) contiguous run of the global array, so it
// can move straight between its device buffer and the global host array.
bool ShardIsRun(const ShardGeometry& g, int64_t d) {
  return g.holds_data(d) && g.exact_shape(d) == g.shard_shape() && ShardIsContiguous(g, d);
}

// Whether every device's shard is a run (an upload writes every device).
bool ShardsAreRuns(const ShardGeometry& g) {
  for (int64_t d = 0; d < g.num_devices(); ++d) {
    if (!ShardIsRun(g, d)) return false;
  }
  return true;
}

// Whether the shards a download reads, the first device of every tile, are runs.
bool TilesAreRuns(const ShardGeometry& g) {
  for (int64_t t = 0; t < g.num_tiles(); ++t) {
    if (!ShardIsRun(g, g.tile_devices(t)[0])) return false;
  }
  return true;
}

// Element offset of device d's shard origin in the row-major global array.
int64_t ShardOffset(const ShardGeometry& g, int64_t d) {
  int64_t offset = 0, stride = 1;
  for (int64_t k = g.rank() - 1; k >= 0; --k) {
    offset += g.start(d)[k] * stride;
    stride *= g.shape()[k];
  }
  return offset;
}

}  // namespace

absl::StatusOr<std::shared_ptr<const DataLayout>> DataLayout::Create(
    ArrayShape global, Sharding sharding, std::vector<const pjrt::Device*> devices) {
  if (devices.empty()) return absl::InvalidArgumentError("data needs at least one device");
  // Manual shardings (and manual subgroups) describe data inside a program's manual region;
  // data on devices has none, and XLA aborts when asked to reshard into or out of one.
  bool manual = sharding.IsManual();
  for (SubgroupType t : sharding.subgroup_types()) manual |= (t == SubgroupType::kManual);
  if (manual) {
    return absl::InvalidArgumentError(absl::StrCat(
        "data cannot have a manual sharding or manual subgroups, got ", sharding.ToString()));
  }
  if (ElementSizeInBytes(global.type) == 0) {
    return absl::InvalidArgumentError("data needs a valid element type");
  }
  SHARDRT_ASSIGN_OR_RETURN(
      ShardGeometry geometry,
      ShardGeometry::Create(global.dims, sharding, static_cast<int64_t>(devices.size())));
  // On one device every valid sharding ({maximal device=0}, a 1x1 tiling, ...) places the whole
  // array there: one canonical form, so such layouts compare equal to the program's.
  if (devices.size() == 1 && !sharding.IsReplicated()) {
    sharding = Sharding::Replicated();
    SHARDRT_ASSIGN_OR_RETURN(geometry, ShardGeometry::Create(global.dims, sharding, 1));
  }
  std::vector<int64_t> ids;
  for (size_t i = 0; i < devices.size(); ++i) {
    if (devices[i] == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("data layout: device ", i, " is null"));
    }
    ids.push_back(devices[i]->id);
  }
  // One buffer per device: a device listed twice would hold two shards of one array.
  std::vector<int64_t> sorted = ids;
  std::sort(sorted.begin(), sorted.end());
  if (auto dup = std::adjacent_find(sorted.begin(), sorted.end()); dup != sorted.end()) {
    return absl::InvalidArgumentError(absl::StrCat("data layout lists device ", *dup,
                                                   " more than once (devices ",
                                                   absl::StrJoin(ids, ","), ")"));
  }
  const uint64_t fingerprint =
      absl::HashOf(static_cast<int>(global.type), global.dims, sharding.ToString(), ids);
  std::vector<int64_t> shard_dims = geometry.shard_shape();
  const bool shards_are_runs = ShardsAreRuns(geometry);
  const bool tiles_are_runs = TilesAreRuns(geometry);
  std::vector<int64_t> shard_offsets;
  for (int64_t d = 0; d < geometry.num_devices(); ++d) {
    shard_offsets.push_back(ShardOffset(geometry, d));
  }
  auto layout = std::make_shared<DataLayout>(DataLayout{
      std::move(global), std::move(sharding), std::move(devices), std::move(geometry),
      std::move(shard_dims), fingerprint, shards_are_runs, tiles_are_runs,
      std::move(shard_offsets)});
  return std::shared_ptr<const DataLayout>(std::move(layout));
}

bool DataLayout::SameAs(const DataLayout& other) const {
  return fingerprint == other.fingerprint && global == other.global &&
         sharding == other.sharding && devices == other.devices;
}

std::string DataLayout::ToString() const {
  return absl::StrCat(ShapeToString(global), " ",
                      sharding.ToString(), " on ", devices.size(),
                      devices.size() == 1 ? " device" : " devices");
}

}  // namespace shardrt
