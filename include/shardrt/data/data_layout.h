// DataLayout: everything about a piece of (sharded) data except its buffers: global shape and
// element type, sharding, the devices holding it (in execution order) and the padded shape of
// each device's buffer. Immutable and shared (std::shared_ptr<const DataLayout>) by all data of
// one kind, e.g. every output j of one computation, so wrapping outputs copies a pointer.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "shardrt/base/array_shape.h"
#include "shardrt/base/export.h"
#include "shardrt/pjrt/device.h"
#include "shardrt/sharding/geometry.h"
#include "shardrt/sharding/sharding.h"

namespace shardrt {

struct SHARDRT_EXPORT DataLayout {
  ArrayShape global;                          // global (logical) shape and element type
  Sharding sharding;                          // over devices.size() devices
  std::vector<const pjrt::Device*> devices;   // device i holds shard i (borrowed from client)
  ShardGeometry geometry;                     // index domains; padded shard dims
  std::vector<int64_t> shard_dims;            // padded per-device buffer dims
  // 64-bit hash of (type, dims, canonical sharding text, device ids): ExecuteReplicated checks
  // an argument by comparing this alone.
  uint64_t fingerprint = 0;
  // Facts transfers read on every call, computed once here. A shard is a "run" when it is
  // whole (unpadded) and one contiguous run of the row-major global array, so it can move
  // straight between its device buffer and the caller's memory.
  bool shards_are_runs = false;         // every device's shard (uploads write every device)
  bool tiles_are_runs = false;          // the first device's shard of every tile (downloads)
  std::vector<int64_t> shard_offsets;   // row-major element offset of each device's shard origin

  // Builds a layout, computing the padded shard dims and the fingerprint.
  // Errors: InvalidArgument if the sharding does not fit the shape or the device count, or a
  // device is null or listed twice.
  [[nodiscard]] static absl::StatusOr<std::shared_ptr<const DataLayout>> Create(
      ArrayShape global, Sharding sharding, std::vector<const pjrt::Device*> devices);

  // Same placement of the same array: fingerprints and then fields equal.
  bool SameAs(const DataLayout& other) const;
  // "f32[16,4] {devices=[8,1]<=[8]} on 8 devices", for messages.
  std::string ToString() const;
};

// Layouts of several pieces of data, e.g. a computation's outputs in order.
using DataLayoutList = std::vector<std::shared_ptr<const DataLayout>>;

}  // namespace shardrt
