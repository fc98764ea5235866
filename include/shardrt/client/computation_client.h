// ComputationClient: compiles SPMD programs and runs them on sharded data.
//
// Callers hand whole sharded arrays (DataPtr) to ExecuteReplicated and get whole sharded arrays
// back. Inside: each argument is checked against the layout cached at compile time (one
// fingerprint compare), its per-device buffers are written into a devices x arguments matrix
// (in parallel over arguments), one PJRT Execute runs every device, and the outputs are wrapped
// into sharded data with their cached layouts (in parallel over outputs). No call on that path
// asks the executable about itself (see the ExecutableIntrospection counter).
//
// Ownership: the client holds the PJRT client (shared with every Data it creates) and a thread
// pool, either its own or one passed in. Thread-safety: every method is thread-safe; executions
// from many threads may share arguments.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/inlined_vector.h"
#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "shardrt/base/export.h"
#include "shardrt/base/mutex.h"
#include "shardrt/base/thread_pool.h"
#include "shardrt/client/computation.h"
#include "shardrt/data/data.h"
#include "shardrt/data/host_array.h"
#include "shardrt/pjrt/client.h"
#include "shardrt/pjrt/compile_options.h"
#include "shardrt/client/persistent_cache.h"

namespace shardrt {

class ExecutionLimiter;      // private to the library
class PersistentCacheStore;  // private to the library

struct SHARDRT_EXPORT ComputationClientOptions {
  // Borrowed pool for plumbing and transfers; null: the client creates its own.
  ThreadPool* pool = nullptr;
  // Threads of the client's own pool; 0: the number of cores.
  int num_threads = 0;
  // Device parts of multi-device executions allowed in flight; 0 (default): no bound. A
  // multi-device launch of a program with collectives takes one part per device until every
  // device has finished it (a program without any, per its compiled HLO, cannot stall and
  // takes none). The CPU plugin needs a bound of its worker-thread count, or programs with
  // collectives can stall each other (Runtime sets it; see shardrt/runtime/runtime.h).
  int64_t max_device_parts_in_flight = 0;
  // The persistent compile cache (shardrt/client/persistent_cache.h); off when its directory is
  // empty (default). A directory that cannot be used only costs the cache (counted in
  // PersistentCacheError): Create still succeeds.
  PersistentCacheOptions persistent_cache;
};

// What to compile.
// The global (unpartitioned) shapes of a program's parameters and results.
struct SHARDRT_EXPORT GlobalShapes {
  std::vector<ArrayShape> parameters;
  std::vector<ArrayShape> results;
};

// What to compile.
struct SHARDRT_EXPORT CompileRequest {
  std::string name;     // for messages and metrics; defaults to "computation"
  std::string program;  // StableHLO: MLIR text or bytecode (at most limits::kMaxFileBytes)
  // Partitions = devices; the assignment defaults to the first num_partitions addressable
  // devices in order.
  pjrt::CompileOptions options;
  // The program's global shapes. Text programs state them in @main (given ones must agree).
  // MLIR bytecode cannot be read for them, and per-device shapes do not say how uneven a split
  // is: a bytecode program with a parameter or result split over several devices needs them.
  std::optional<GlobalShapes> global_shapes;
};

// What ExecuteReplicated does with an argument whose sharding differs from the parameter's.
enum class ArgumentResharding {
  kReject,       // an error naming the argument (default)
  kReshardCopy,  // reshard a copy on device first (costs a small compiled program per layout)
};

struct SHARDRT_EXPORT ExecuteReplicatedOptions {
  ArgumentResharding resharding = ArgumentResharding::kReject;
  // Parameters the program aliases that must not be donated in this call.
  std::vector<int64_t> non_donatable_input_indices;
};

class SHARDRT_EXPORT ComputationClient {
 public:
  // Wraps `client`. Error: InvalidArgument if the client has no addressable device.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<ComputationClient>> Create(
      std::shared_ptr<pjrt::Client> client, const ComputationClientOptions& options = {});
  ~ComputationClient();

  // The PJRT client every Data of this client lives in (shared with them).
  const std::shared_ptr<pjrt::Client>& pjrt_client() const { return client_; }
  // The pool transfers and argument plumbing run on (borrowed or owned; never null).
  ThreadPool* pool() const { return pool_; }
  // The first `n` addressable devices, the default device order. Error: InvalidArgument when
  // there are fewer.
  [[nodiscard]] absl::StatusOr<std::vector<const pjrt::Device*>> DefaultDevices(size_t n) const;

  // Layout of an array of `shape` placed with `sharding` on `devices` (default: as many of the
  // default devices as the sharding needs, or all of them for replicated shardings).
  [[nodiscard]] absl::StatusOr<std::shared_ptr<const DataLayout>> MakeLayout(
      const ArrayShape& shape, const Sharding& sharding,
      std::vector<const pjrt::Device*> devices = {}) const;

  // Uploads host arrays, each split by its layout: each device receives only its shard, read
  // in place from the caller's memory where the shard is a contiguous run of it (row blocks,
  // replicated), else from a zero-padded host copy. Blocks until the caller's memory is no
  // longer needed. Errors (nothing is kept): InvalidArgument naming the array when its type or
  // dims differ from its layout's, its byte size is wrong or its layout is null; the plugin's
  // error. Thread-safe.
  [[nodiscard]] absl::StatusOr<std::vector<DataPtr>> TransferToDevice(
      absl::Span<const HostArrayView> arrays,
      absl::Span<const std::shared_ptr<const DataLayout>> layouts);
  // Uploads one array with `layout`; as above, without the lists.
  [[nodiscard]] absl::StatusOr<DataPtr> TransferToDevice(
      const HostArrayView& array, const std::shared_ptr<const DataLayout>& layout);
  // Uploads per-device shards (padded shard shape, row-major) as one piece of data.
  [[nodiscard]] absl::StatusOr<DataPtr> TransferShardsToDevice(
      std::shared_ptr<const DataLayout> layout, absl::Span<const std::span<const std::byte>> shards);
  // Builds sharded data of `layout` shard by shard, for data whose shards the caller makes
  // rather than holds (e.g. a model's weights read from a file): produce(d, into) writes
  // device d's shard (the layout's padded shard shape, row-major, zero-filled) into `into`;
  // it runs on the pool, for several devices at once. Each shard is uploaded and its host
  // pages handed back as soon as the plugin is done with them, so the host holds at most one
  // shard per pool thread; a replicated layout's shard is produced once and uploaded to every
  // device. `produce_ns_per_byte` estimates the producer's cost (the pool's cost model).
  // Errors (nothing is kept): InvalidArgument for a null layout; the producer's first error;
  // ResourceExhausted when a shard's host pages cannot be mapped; the plugin's. Thread-safe.
  [[nodiscard]] absl::StatusOr<DataPtr> AssembleFromShards(
      std::shared_ptr<const DataLayout> layout,
      absl::FunctionRef<absl::Status(size_t device, std::span<std::byte> into)> produce,
      double produce_ns_per_byte = 0.0);
  // Downloads and assembles global host arrays (a new array each).
  [[nodiscard]] absl::StatusOr<std::vector<HostArray>> TransferFromDevice(
      absl::Span<const DataPtr> data);
  // Downloads into caller memory: into[i] receives data[i]'s global array, row-major, and must
  // be exactly its byte size. Shards that are contiguous runs of the array are copied straight
  // into it; replicated data is read from one device. Blocks until done. Errors:
  // InvalidArgument for a count or size mismatch or null data; the data's own (placeholder
  // that failed, donated); the plugin's. On error the destinations may be partly written.
  [[nodiscard]] absl::Status TransferFromDevice(absl::Span<const DataPtr> data,
                                                absl::Span<const std::span<std::byte>> into);

  // A placeholder to be filled later by Data::Assign.
  DataPtr CreateDataPlaceholder(std::shared_ptr<const DataLayout> layout) const;

  // Compiles (or returns the cached computation for the same program and options: from memory,
  // else from the persistent compile cache when one is configured, which a fresh compile then
  // fills). The program is StableHLO as MLIR text or bytecode; its @main signature gives the
  // global shapes, and a program written with the Shardy dialect is compiled with the Shardy
  // partitioner. Thread-safe; concurrent calls compile concurrently.
  // Errors: InvalidArgument for bad options, or a partition count that differs from the one
  // the program declares (before the plugin sees them); the compiler's error.
  [[nodiscard]] absl::StatusOr<ComputationPtr> Compile(const CompileRequest& request)
      ABSL_LOCKS_EXCLUDED(cache_mu_);

  // Makes a later Compile of `request` fast without holding its computation now. With a
  // persistent compile cache: compiles the program into that cache unless the cache (or the
  // in-memory one) already has it; nothing is loaded and nothing stays in memory, so a process
  // can prepare programs it will load one at a time (if the cache cannot store the entry, that
  // later Compile compiles again). Without one: Compile, whose in-memory cache then keeps the
  // computation. Thread-safe. Errors: Compile's.
  [[nodiscard]] absl::Status Precompile(const CompileRequest& request)
      ABSL_LOCKS_EXCLUDED(cache_mu_);

  // Whether Compile of `request` would compile nothing: the in-memory cache holds it, or the
  // persistent compile cache has an entry for it (not read here; a damaged entry is found by
  // Compile). Thread-safe. Errors: InvalidArgument for a program over the size limit.
  [[nodiscard]] absl::StatusOr<bool> IsCompiled(const CompileRequest& request)
      ABSL_LOCKS_EXCLUDED(cache_mu_);
  // Whether a persistent compile cache is configured and usable.
  bool has_persistent_cache() const { return persistent_cache_ != nullptr; }

  // Drops `computation` from the in-memory compile cache, so that it is freed (with the
  // executable's host memory) once its last holder lets it go; a later Compile of the same
  // program compiles it again, or loads it from the persistent compile cache. Returns whether
  // the cache held it. Thread-safe; executions already running are not affected.
  bool EvictCompiled(const Computation& computation) ABSL_LOCKS_EXCLUDED(cache_mu_);

  // Runs `computation` on all its devices with sharded `arguments`; returns its outputs as
  // sharded data. Errors (nothing runs, no argument changes): InvalidArgument naming the
  // argument for a wrong count, shape, type, sharding (unless resharding is asked for), data
  // of another client, or data donated to one parameter and passed to another as well;
  // FailedPrecondition for donated or unfilled arguments; the plugin's.
  // Donated parameters' arguments become unusable after a successful call.
  [[nodiscard]] absl::StatusOr<std::vector<DataPtr>> ExecuteReplicated(
      const Computation& computation, absl::Span<const DataPtr> arguments,
      const ExecuteReplicatedOptions& options = {});

  // Runs a single-device computation (compiled with one partition). Same contract.
  [[nodiscard]] absl::StatusOr<std::vector<DataPtr>> ExecuteComputation(
      const Computation& computation, absl::Span<const DataPtr> arguments,
      const ExecuteReplicatedOptions& options = {});

  // A copy of `data` with `sharding` (same devices), moved on device by a small compiled
  // program cached per (shape, type, shardings, devices). Counts ReshardData.
  [[nodiscard]] absl::StatusOr<DataPtr> ReshardData(const DataPtr& data, const Sharding& sharding);
  // A fully replicated copy of `data`. Counts ReplicateShardedData.
  [[nodiscard]] absl::StatusOr<DataPtr> ReplicateShardedData(const DataPtr& data);

 private:
  ComputationClient() = default;
  // A request with its device assignment filled in, and its fingerprint (the in-memory cache's
  // key). Errors: InvalidArgument for a program over the size limit; DefaultDevices'.
  struct KeyedRequest {
    std::string name;
    pjrt::CompileOptions options;
    std::string key;
  };
  absl::StatusOr<KeyedRequest> Fingerprint(const CompileRequest& request);
  // IsCompiled and Compile of a request already fingerprinted (`keyed` is Fingerprint(request)).
  bool IsCompiled(const KeyedRequest& keyed) ABSL_LOCKS_EXCLUDED(cache_mu_);
  absl::StatusOr<ComputationPtr> Compile(const CompileRequest& request, KeyedRequest keyed)
      ABSL_LOCKS_EXCLUDED(cache_mu_);
  // The computation of persistent cache entry `key` (a hit), or nullopt (a miss, counted; a
  // corrupt entry is also discarded).
  std::optional<ComputationPtr> LoadPersistent(const std::string& name, const std::string& key);
  // Resharding (reshard.cc): a copy of `data` with `sharding` / with `target`'s layout.
  absl::StatusOr<DataPtr> ReshardTo(const DataPtr& data, const Sharding& sharding);
  absl::StatusOr<DataPtr> Reshard(const DataPtr& data, std::shared_ptr<const DataLayout> target);
  // ExecuteReplicated's steps (execute_replicated.cc): check the arguments and build the
  // devices x arguments buffer matrix, one PJRT launch, wrap the outputs. Buffer lists are
  // inline up to 16 handles: small calls allocate nothing for them.
  using BufferList = absl::InlinedVector<PJRT_Buffer*, 16>;
  absl::StatusOr<std::vector<DataPtr>> Execute(const Computation& computation,
                                               absl::Span<const DataPtr> arguments,
                                               const ExecuteReplicatedOptions& options);
  absl::Status CheckDonatedOnce(const Computation& computation,
                                const BufferList& matrix,
                                const ExecuteReplicatedOptions& options);
  absl::Status BuildArgumentMatrix(const Computation& computation,
                                   absl::Span<const DataPtr> arguments,
                                   BufferList& matrix);
  absl::Status Launch(const Computation& computation, const BufferList& matrix,
                      const ExecuteReplicatedOptions& options, BufferList& outputs);
  absl::StatusOr<std::vector<DataPtr>> WrapOutputs(const Computation& computation,
                                                   const BufferList& outputs);

  std::shared_ptr<pjrt::Client> client_;
  // Shared with the completion callbacks of executions in flight.
  std::shared_ptr<ExecutionLimiter> limiter_;
  std::unique_ptr<ThreadPool> own_pool_;
  ThreadPool* pool_ = nullptr;
  // The persistent compile cache, when configured and usable (null otherwise).
  std::unique_ptr<PersistentCacheStore> persistent_cache_;
  // shardrt::Mutex (a std::mutex): visible to ThreadSanitizer (a prebuilt Abseil is not).
  Mutex cache_mu_;
  // In-memory compile cache, keyed by the request's SHA-256 (compile options, program, global
  // shapes), not by the program text.
  absl::flat_hash_map<std::string, ComputationPtr> compile_cache_ ABSL_GUARDED_BY(cache_mu_);
};

}  // namespace shardrt
