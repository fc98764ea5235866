// Transfers between host arrays and (sharded) device data, in parallel over shards.
//
// To device: each device receives only its own shard. When every shard is a contiguous run of
// the caller's array (row blocks, replicated) shards go up straight from the caller's memory;
// otherwise the array is first split into dense, zero-padded shards on the host. From device: one replica of each tile
// is downloaded and the global array is assembled on the host (no device-side gather).
//
// All functions block until the transfers are complete, are thread-safe, and run their
// per-shard work on `pool` (borrowed; may be null: everything runs on the caller).
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "shardrt/base/thread_pool.h"
#include "shardrt/data/data.h"
#include "shardrt/data/host_array.h"
#include "shardrt/pjrt/client.h"

namespace shardrt {

// Uploads arrays[i] with layouts[i]. Errors (nothing is kept): InvalidArgument naming the array
// when its type or dims differ from its layout's or its byte size is wrong; the plugin's error.
[[nodiscard]] absl::StatusOr<std::vector<DataPtr>> TransferToDevice(
    const std::shared_ptr<pjrt::Client>& client, ThreadPool* pool,
    std::span<const HostArrayView> arrays,
    std::span<const std::shared_ptr<const DataLayout>> layouts);
// Uploads one array with `layout`; as above, without the list.
[[nodiscard]] absl::StatusOr<DataPtr> TransferToDevice(
    const std::shared_ptr<pjrt::Client>& client, ThreadPool* pool, const HostArrayView& array,
    const std::shared_ptr<const DataLayout>& layout);

// Uploads per-device shards the caller already holds: shards[d] is device d's buffer in the
// layout's padded shard shape (row-major). Error: InvalidArgument naming the device whose shard
// has the wrong size; the plugin's error.
[[nodiscard]] absl::StatusOr<DataPtr> TransferShardsToDevice(
    const std::shared_ptr<pjrt::Client>& client, ThreadPool* pool,
    std::shared_ptr<const DataLayout> layout, std::span<const std::span<const std::byte>> shards);

// Downloads each data and assembles its global array. Errors: the data's own (placeholder,
// donated, failed), or the plugin's.
[[nodiscard]] absl::StatusOr<std::vector<HostArray>> TransferFromDevice(
    ThreadPool* pool, std::span<const DataPtr> data);

// As TransferFromDevice, into caller memory: into[i] receives data[i]'s global array
// (row-major, exactly its byte size). Errors: InvalidArgument for a count or size mismatch or
// null data; the data's own; the plugin's. On error the destinations may be partly written.
[[nodiscard]] absl::Status TransferFromDeviceInto(ThreadPool* pool, std::span<const DataPtr> data,
                                                  std::span<const std::span<std::byte>> into);

}  // namespace shardrt
