// Data and DataPtr: one (sharded) array on device, handled as a single object.
//
// A Data has a DataLayout (global shape, type, sharding, devices) and, once ready, one PJRT
// buffer per device in the layout's device order (padded shard shapes where the sharding is
// uneven). Single-device data is the one-device case. A placeholder has a layout but no buffers
// yet: it is filled exactly once by Assign (or failed with a Status by Fail) and can be waited
// on. Data passed as a donated argument becomes unusable (state kDonated).
//
// Thread-safety: all methods are thread-safe. Assign and Fail may race with readers: readers
// see either a pending placeholder or the complete buffers, never a partial state.
#pragma once

#include <atomic>
#include <memory>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/functional/any_invocable.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "shardrt/base/export.h"
#include "shardrt/base/mutex.h"
#include "shardrt/data/data_layout.h"
#include "shardrt/pjrt/buffer.h"
#include "shardrt/pjrt/client.h"

namespace shardrt {

class Data;
using DataPtr = std::shared_ptr<Data>;

// The buffers of one piece of data: buffers[i] lives on layout.devices[i]. Immutable once the
// data is ready; a placeholder assigned from other data reads that data's buffers.
struct SHARDRT_EXPORT ShardBuffers {
  // Inline for up to 8 devices, and held inside the Data itself: one allocation per piece of
  // data (an execution wraps every output of every call in one).
  absl::InlinedVector<PJRT_Buffer*, 8> handles;  // buffers[i].handle(), for argument lists
  absl::InlinedVector<pjrt::Buffer, 8> buffers;
};

class SHARDRT_EXPORT Data {
 public:
  enum class State : int { kPending, kReady, kFailed, kDonated };

  // Ready data owning `buffers` (one per layout device). Error: InvalidArgument if the count
  // differs from the layout's device count or a buffer is empty.
  [[nodiscard]] static absl::StatusOr<DataPtr> Create(std::shared_ptr<pjrt::Client> client,
                                                      std::shared_ptr<const DataLayout> layout,
                                                      std::vector<pjrt::Buffer> buffers);
  // Ready data owning `buffers` (moved in), without checks: the hot path's output wrapping (the
  // caller guarantees one non-empty buffer per device, and handles[i] == buffers[i].handle()).
  static DataPtr CreateUnchecked(std::shared_ptr<pjrt::Client> client,
                                 std::shared_ptr<const DataLayout> layout, ShardBuffers buffers);
  // Ready data for layouts->size() pieces at once, without checks: the hot path's output
  // wrapping. fill(i, buffers) fills piece i's buffers in place (one non-empty buffer per
  // device of (*layouts)[i], handles[j] == buffers[j].handle()). From a few pieces on, the
  // Data objects share one block of host memory, in order, which also holds the client and
  // the layout list for all of them (no reference counting per piece) and goes back when the
  // last of them dies; each one's device buffers still die with it. Thread-safety: as
  // CreateUnchecked; the pieces may then be used and dropped on any threads.
  static std::vector<DataPtr> CreateUncheckedBatch(
      const std::shared_ptr<pjrt::Client>& client, std::shared_ptr<const DataLayoutList> layouts,
      absl::FunctionRef<void(size_t i, ShardBuffers& buffers)> fill);
  // A placeholder: layout only; filled later by Assign or Fail.
  static DataPtr CreatePlaceholder(std::shared_ptr<pjrt::Client> client,
                                   std::shared_ptr<const DataLayout> layout);

  Data(const Data&) = delete;
  Data& operator=(const Data&) = delete;
  // Frees the device buffers (before the client they live in).
  ~Data() { own_.buffers.clear(); }

  // What the data is (immutable; valid while this Data lives), its client, and its state now.
  const DataLayout& layout() const { return **layout_; }
  const std::shared_ptr<const DataLayout>& shared_layout() const { return *layout_; }
  const ArrayShape& shape() const { return layout().global; }
  const Sharding& sharding() const { return layout().sharding; }
  const std::shared_ptr<pjrt::Client>& client() const { return *client_; }
  State state() const { return state_.load(std::memory_order_acquire); }

  // OK when ready; otherwise why the data cannot be used: FailedPrecondition for a pending
  // placeholder or donated data, the original error for failed data.
  [[nodiscard]] absl::Status Usable() const;
  // The buffers when ready (else null). Valid while this Data lives.
  const ShardBuffers* buffers() const {
    return state() == State::kReady ? shards_ : nullptr;
  }

  // Fills a placeholder with `source`'s buffers (shared, not copied: the placeholder keeps the
  // data that owns them alive). Errors (nothing changes): InvalidArgument if `source` is null
  // or this very data; FailedPrecondition if this is not a pending placeholder or `source` is
  // not ready; InvalidArgument naming expected vs got if shape, type, sharding or devices
  // differ, or the clients differ.
  [[nodiscard]] absl::Status Assign(const DataPtr& source);
  // Marks a pending placeholder failed with `error`; readers get that error. No-op if the data
  // is not pending.
  void Fail(absl::Status error);
  // Blocks until the data is not pending; returns Usable().
  [[nodiscard]] absl::Status Await() const;
  // As Await, but waits at most `timeout`: DeadlineExceeded naming the data if it is still
  // pending then (it stays pending; waiting again is fine).
  [[nodiscard]] absl::Status Await(absl::Duration timeout) const;
  // Calls `done(Usable())` once the data is not pending: at once if it is already, else from
  // the thread that assigns or fails it. `done` must be quick.
  void OnReady(absl::AnyInvocable<void(absl::Status) &&> done);

  // Marks ready data donated (its buffers now belong to an execution's outputs).
  // Returns false if it was not ready.
  bool MarkDonated();

  // Drops every pointer in `data` and leaves it empty; null entries are skipped. Buffers that
  // nothing else references any more (no other DataPtr to the same Data, no placeholder
  // assigned from it) are destroyed device by device: every first-device buffer, then every
  // second-device one, and so on. That is the order in which an execution's outputs were
  // created on each device, and the CPU plugin frees it up to 20 % faster than output by output
  // (which is what dropping the outputs one at a time does) for programs with hundreds of
  // outputs. Buffers still referenced elsewhere live on with their other owners.
  // Thread-safety: as for dropping each pointer; other threads may hold and use other
  // references to the same data meanwhile.
  static void ReleaseAll(std::vector<DataPtr>& data);

 private:
  // Only Data's factories can make one (the constructor is public for std::make_shared, which
  // allocates the data and its reference count together).
  struct Key {
    explicit Key() = default;
  };

 public:
  Data(Key, std::shared_ptr<pjrt::Client> client, std::shared_ptr<const DataLayout> layout,
       bool placeholder);
  // Data of a batch: `client` and `layout` belong to the batch's block, which outlives it.
  Data(Key, const std::shared_ptr<pjrt::Client>* client,
       const std::shared_ptr<const DataLayout>* layout);

 private:
  // Makes data created ready read its own buffers (own_ filled) and publishes it as ready.
  void PublishOwn();

  // What only a placeholder needs: waiting for Assign or Fail. Data created ready never waits.
  struct Waiting {
    // shardrt::Mutex (a std::mutex) rather than absl::Mutex: the prebuilt Abseil is invisible
    // to ThreadSanitizer.
    Mutex mu;
    CondVar cv;
    absl::Status error ABSL_GUARDED_BY(mu);
    std::vector<absl::AnyInvocable<void(absl::Status) &&>> waiters ABSL_GUARDED_BY(mu);
  };
  // The OnReady callbacks to run once a placeholder is complete, and the status they get.
  struct Wakeup {
    std::vector<absl::AnyInvocable<void(absl::Status) &&>> callbacks;
    absl::Status status;
  };
  // Publishes `state` (kReady, or kFailed with the error stored) and takes the callbacks. The
  // caller then releases the lock and calls Wake.
  Wakeup CompleteLocked(State state) ABSL_EXCLUSIVE_LOCKS_REQUIRED(waiting_->mu);
  // Wakes the threads waiting in Await and runs the callbacks.
  void Wake(Wakeup wakeup) ABSL_LOCKS_EXCLUDED(waiting_->mu);

  // What an execution reads of each argument comes first, the buffer handles right after it:
  // checking an argument and listing its handles reads one place.
  // The client and layout: this data's own references (own_client_, own_layout_), or for data
  // made in a batch, those its block holds (the block outlives the data).
  const std::shared_ptr<pjrt::Client>* const client_;
  const std::shared_ptr<const DataLayout>* const layout_;
  std::atomic<State> state_{State::kPending};
  // The buffers: &own_, or &owner_->own_ for an assigned placeholder. shards_ and owner_ are
  // written once, before state_ leaves kPending (release), and read after an acquire load.
  const ShardBuffers* shards_ = nullptr;
  ShardBuffers own_;
  std::shared_ptr<const Data> owner_;  // the data whose buffers an assigned placeholder reads
  const std::unique_ptr<Waiting> waiting_;  // placeholders only
  const std::shared_ptr<pjrt::Client> own_client_;
  const std::shared_ptr<const DataLayout> own_layout_;
};

}  // namespace shardrt
