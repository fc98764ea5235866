// Host split and assemble: between one global row-major host array and per-device shard
// buffers, following a ShardGeometry. Works for every element type (only the element size
// matters); contiguous runs are copied with memcpy.
//
// Shard buffers are indexed by device id and are row-major in either layout:
//   kPadded: every device's buffer has the padded shard shape (geometry.shard_shape()); the
//            part outside the device's exact domain is zero on split and ignored on assemble.
//            A device holding no data (maximal shardings) gets a zero buffer of that shape.
//   kExact:  each buffer has the device's exact shape (geometry.exact_shape(d)); a device
//            holding no data, or an empty trailing tile, gets 0 bytes.
// All functions are thread-safe (no shared state); they leave outputs partly written on error.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "shardrt/base/element_type.h"
#include "shardrt/base/export.h"
#include "shardrt/sharding/geometry.h"

namespace shardrt {

enum class ShardPadding : uint8_t { kPadded, kExact };

// Whether AssembleHostArray checks that all replicas of each tile hold the same bytes.
enum class ReplicaCheck : uint8_t { kSkip, kVerify };

// The size in bytes of device `device`'s buffer in layout `padding`.
// Error: InvalidArgument for an invalid element type or a byte size overflowing int64.
[[nodiscard]] SHARDRT_EXPORT absl::StatusOr<int64_t> ShardByteSize(const ShardGeometry& geometry,
                                                                   ElementType type, int64_t device,
                                                                   ShardPadding padding);

// Splits `global` (geometry.shape(), row-major) into one new buffer per device.
// Error: InvalidArgument if global has the wrong byte size or the type is invalid.
[[nodiscard]] SHARDRT_EXPORT absl::StatusOr<std::vector<std::vector<std::byte>>> SplitHostArray(
    const ShardGeometry& geometry, ElementType type, std::span<const std::byte> global,
    ShardPadding padding);

// As SplitHostArray, into caller buffers: `shards` has one entry per device, each exactly
// ShardByteSize bytes. Error: InvalidArgument naming the device whose buffer is mis-sized.
[[nodiscard]] SHARDRT_EXPORT absl::Status SplitHostArrayInto(
    const ShardGeometry& geometry, ElementType type, std::span<const std::byte> global,
    ShardPadding padding, std::span<const std::span<std::byte>> shards);

// Assembles the global array from per-device buffers (one entry per device; entries of
// devices holding no data are ignored). Each tile is read from its replica 0; with
// ReplicaCheck::kVerify every other replica must match it bit for bit.
// Error: InvalidArgument for a wrong number of shards or a mis-sized buffer (naming the
// device), or a replica mismatch naming both devices and the first differing element.
[[nodiscard]] SHARDRT_EXPORT absl::StatusOr<std::vector<std::byte>> AssembleHostArray(
    const ShardGeometry& geometry, ElementType type,
    std::span<const std::span<const std::byte>> shards, ShardPadding padding,
    ReplicaCheck check = ReplicaCheck::kSkip);

// As AssembleHostArray, into `global` (exactly num_elements * element size bytes).
[[nodiscard]] SHARDRT_EXPORT absl::Status AssembleHostArrayInto(
    const ShardGeometry& geometry, ElementType type,
    std::span<const std::span<const std::byte>> shards, ShardPadding padding, ReplicaCheck check,
    std::span<std::byte> global);

}  // namespace shardrt
