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

#include "absl/functional/function_ref.h"
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

// Produces device d's shard into `into`: the layout's padded shard shape, row-major, zeroed.
// Called on pool threads, for several devices at once; an error stops the assembly.
using ShardProducer = absl::FunctionRef<absl::Status(size_t device, std::span<std::byte> into)>;

// Builds data of `layout` shard by shard: each device's shard is produced by `produce` into a
// host buffer of its own pages, uploaded, and its pages handed back to the system as soon as
// the plugin is done with them, so the host holds at most one shard per pool thread (never
// the global array). A replicated layout's shard is produced once (as device 0's) and
// uploaded to every device. `produce_ns_per_byte` estimates the producer's cost for the pool's
// cost model. Errors (nothing is kept): the producer's first error; ResourceExhausted when the
// host buffer cannot be mapped; the plugin's.
[[nodiscard]] absl::StatusOr<DataPtr> AssembleFromShards(
    const std::shared_ptr<pjrt::Client>& client, ThreadPool* pool,
    std::shared_ptr<const DataLayout> layout, ShardProducer produce,
    double produce_ns_per_byte);

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
