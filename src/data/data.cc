#include "shardrt/data/data.h"

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <new>
#include <vector>

#include "absl/strings/str_cat.h"

namespace shardrt {
namespace {

// Host memory for the Data objects of one batch (CreateUncheckedBatch): carved in order, given
// back when the last object carved from it is freed. Each object still dies on its own (its
// device buffers with it); only this memory waits for the last of them.
class alignas(64) DataBlock {
 public:
  static DataBlock* Create(size_t bytes, std::shared_ptr<pjrt::Client> client,
                           std::shared_ptr<const DataLayoutList> layouts) {
    void* memory = ::operator new(sizeof(DataBlock) + bytes, std::align_val_t{alignof(DataBlock)});
    return new (memory) DataBlock(bytes, std::move(client), std::move(layouts));
  }

  // What every object of the batch refers to, for as long as any of them lives.
  const std::shared_ptr<pjrt::Client>& client() const { return client_; }
  const std::shared_ptr<const DataLayout>& layout(size_t i) const { return (*layouts_)[i]; }

  // `bytes` at `align` from the block for one more object; null when it is full. Only the
  // creator allocates, before any object is shared: it counts them and publishes the count
  // once (Publish).
  void* Allocate(size_t bytes, size_t align) {
    const size_t start = (used_ + align - 1) / align * align;
    if (start + bytes > capacity_) return nullptr;
    used_ = start + bytes;
    ++allocated_;
    return storage() + start;
  }
  // The creator is done: the objects it allocated hold the block now (one count each, set with
  // one store rather than an atomic increment per object; they reach other threads only through
  // the caller's own synchronization). A block nothing was allocated from is freed.
  void Publish() {
    if (allocated_ == 0) {
      Free();
      return;
    }
    live_.store(allocated_, std::memory_order_relaxed);
  }
  bool Owns(const void* p) const {
    const std::byte* b = static_cast<const std::byte*>(p);
    return b >= storage() && b < storage() + capacity_;
  }
  // One object fewer; the last one frees the block.
  void Release() {
    if (live_.fetch_sub(1, std::memory_order_acq_rel) == 1) Free();
  }

 private:
  DataBlock(size_t capacity, std::shared_ptr<pjrt::Client> client,
            std::shared_ptr<const DataLayoutList> layouts)
      : capacity_(capacity), client_(std::move(client)), layouts_(std::move(layouts)) {}
  void Free() {
    this->~DataBlock();
    ::operator delete(static_cast<void*>(this), std::align_val_t{alignof(DataBlock)});
  }
  std::byte* storage() { return reinterpret_cast<std::byte*>(this + 1); }
  const std::byte* storage() const { return reinterpret_cast<const std::byte*>(this + 1); }

  std::atomic<int64_t> live_{0};  // objects alive, from Publish on
  const size_t capacity_;
  size_t used_ = 0;       // written by the creator only, before any object is shared
  int64_t allocated_ = 0;  // likewise
  const std::shared_ptr<pjrt::Client> client_;
  const std::shared_ptr<const DataLayoutList> layouts_;
};
static_assert(sizeof(DataBlock) % 64 == 0);  // storage() starts 64-byte aligned

// The allocator of a batch's shared_ptr control blocks (each holds its Data): from the block
// while it has room, else from the heap.
template <class T>
struct BlockAllocator {
  using value_type = T;
  explicit BlockAllocator(DataBlock* b) : block(b) {}
  template <class U>
  BlockAllocator(const BlockAllocator<U>& other) : block(other.block) {}
  T* allocate(size_t n) {
    if (void* p = block->Allocate(n * sizeof(T), alignof(T))) return static_cast<T*>(p);
    return static_cast<T*>(::operator new(n * sizeof(T)));
  }
  void deallocate(T* p, size_t n) {
    if (block->Owns(p)) {
      block->Release();
    } else {
      ::operator delete(p, n * sizeof(T));
    }
  }
  template <class U>
  bool operator==(const BlockAllocator<U>& other) const { return block == other.block; }

  DataBlock* block;
};

// Below this many pieces a batch allocates each Data on its own.
constexpr size_t kMinBlockBatch = 4;
// Room per Data in a block: the object, its shared_ptr control block and alignment.
constexpr size_t kBlockBytesPerData = sizeof(Data) + 64;

}  // namespace

Data::Data(Key, std::shared_ptr<pjrt::Client> client, std::shared_ptr<const DataLayout> layout,
           bool placeholder)
    : client_(&own_client_),
      layout_(&own_layout_),
      waiting_(placeholder ? std::make_unique<Waiting>() : nullptr),
      own_client_(std::move(client)),
      own_layout_(std::move(layout)) {}

Data::Data(Key, const std::shared_ptr<pjrt::Client>* client,
           const std::shared_ptr<const DataLayout>* layout)
    : client_(client), layout_(layout) {}

absl::StatusOr<DataPtr> Data::Create(std::shared_ptr<pjrt::Client> client,
                                     std::shared_ptr<const DataLayout> layout,
                                     std::vector<pjrt::Buffer> buffers) {
  if (buffers.size() != layout->devices.size()) {
    return absl::InvalidArgumentError(absl::StrCat("data of layout ", layout->ToString(),
                                                   " needs ", layout->devices.size(),
                                                   " buffers, got ", buffers.size()));
  }
  ShardBuffers shards;
  for (size_t i = 0; i < buffers.size(); ++i) {
    if (buffers[i].empty()) {
      return absl::InvalidArgumentError(absl::StrCat("buffer ", i, " is empty"));
    }
    shards.handles.push_back(buffers[i].handle());
  }
  shards.buffers.assign(std::make_move_iterator(buffers.begin()),
                        std::make_move_iterator(buffers.end()));
  return CreateUnchecked(std::move(client), std::move(layout), std::move(shards));
}

DataPtr Data::CreateUnchecked(std::shared_ptr<pjrt::Client> client,
                              std::shared_ptr<const DataLayout> layout,
                              ShardBuffers buffers) {
  DataPtr data =
      std::make_shared<Data>(Key{}, std::move(client), std::move(layout), /*placeholder=*/false);
  data->own_ = std::move(buffers);
  data->PublishOwn();
  return data;
}

std::vector<DataPtr> Data::CreateUncheckedBatch(
    const std::shared_ptr<pjrt::Client>& client, std::shared_ptr<const DataLayoutList> layouts,
    absl::FunctionRef<void(size_t i, ShardBuffers& buffers)> fill) {
  const size_t n = layouts->size();
  std::vector<DataPtr> out(n);
  if (n < kMinBlockBatch) {
    for (size_t i = 0; i < n; ++i) {
      out[i] = std::make_shared<Data>(Key{}, client, (*layouts)[i], /*placeholder=*/false);
      fill(i, out[i]->own_);
      out[i]->PublishOwn();
    }
    return out;
  }
  DataBlock* block = DataBlock::Create(n * kBlockBytesPerData, client, std::move(layouts));
  for (size_t i = 0; i < n; ++i) {
    DataPtr data = std::allocate_shared<Data>(BlockAllocator<Data>(block), Key{},
                                              &block->client(), &block->layout(i));
    fill(i, data->own_);
    data->PublishOwn();
    out[i] = std::move(data);
  }
  block->Publish();  // the objects hold it now
  return out;
}

DataPtr Data::CreatePlaceholder(std::shared_ptr<pjrt::Client> client,
                                std::shared_ptr<const DataLayout> layout) {
  return std::make_shared<Data>(Key{}, std::move(client), std::move(layout),
                                /*placeholder=*/true);
}

absl::Status Data::Usable() const {
  switch (state()) {
    case State::kReady:
      return absl::OkStatus();
    case State::kPending:
      return absl::FailedPreconditionError(
          absl::StrCat("data ", layout().ToString(), " is a placeholder that was never assigned"));
    case State::kDonated:
      return absl::FailedPreconditionError(absl::StrCat(
          "data ", layout().ToString(), " was donated to an earlier execution and is unusable"));
    case State::kFailed: {  // only placeholders fail
      MutexLock lock(waiting_->mu);
      return waiting_->error;
    }
  }
  return absl::InternalError("unknown data state");
}

void Data::PublishOwn() {
  shards_ = &own_;
  state_.store(State::kReady, std::memory_order_release);
}

Data::Wakeup Data::CompleteLocked(State state) {
  state_.store(state, std::memory_order_release);
  Wakeup wakeup{std::move(waiting_->waiters),
                state == State::kReady ? absl::OkStatus() : waiting_->error};
  waiting_->waiters.clear();
  return wakeup;
}

void Data::Wake(Wakeup wakeup) {
  waiting_->cv.NotifyAll();
  for (auto& callback : wakeup.callbacks) std::move(callback)(wakeup.status);
}

absl::Status Data::Assign(const DataPtr& source_data) {
  if (source_data == nullptr) return absl::InvalidArgumentError("cannot assign from null data");
  const Data& source = *source_data;
  if (&source == this) return absl::InvalidArgumentError("cannot assign data to itself");
  if (absl::Status usable = source.Usable(); !usable.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot assign from data that is not ready: ", usable.message()));
  }
  if (source.client() != client()) {
    return absl::InvalidArgumentError("cannot assign data of another client");
  }
  if (!source.layout().SameAs(layout())) {
    return absl::InvalidArgumentError(absl::StrCat("Assign: placeholder expects ",
                                                   layout().ToString(), ", got ",
                                                   source.layout().ToString()));
  }
  auto not_pending = [this] {
    return absl::FailedPreconditionError(
        absl::StrCat("Assign: data ", layout().ToString(), " is not a pending placeholder"));
  };
  if (waiting_ == nullptr) return not_pending();  // created ready
  Wakeup wakeup;
  {
    MutexLock lock(waiting_->mu);
    if (state() != State::kPending) return not_pending();
    // Read the owner's buffers (a chain of placeholders ends at one owner).
    owner_ = source.owner_ != nullptr ? source.owner_ : source_data;
    shards_ = &owner_->own_;
    wakeup = CompleteLocked(State::kReady);
  }
  Wake(std::move(wakeup));
  return absl::OkStatus();
}

void Data::Fail(absl::Status error) {
  if (error.ok()) error = absl::InternalError("placeholder failed without an error");
  if (waiting_ == nullptr) return;  // created ready
  Wakeup wakeup;
  {
    MutexLock lock(waiting_->mu);
    if (state() != State::kPending) return;
    waiting_->error = std::move(error);
    wakeup = CompleteLocked(State::kFailed);
  }
  Wake(std::move(wakeup));
}

absl::Status Data::Await() const {
  if (state() != State::kPending) return Usable();
  {
    MutexLock lock(waiting_->mu);
    while (state() == State::kPending) waiting_->cv.Wait(lock);
  }
  return Usable();
}

absl::Status Data::Await(absl::Duration timeout) const {
  if (state() != State::kPending) return Usable();
  {
    const auto wait = std::chrono::nanoseconds(absl::ToInt64Nanoseconds(
        std::max(timeout, absl::ZeroDuration())));
    const auto deadline = std::chrono::steady_clock::now() + wait;
    MutexLock lock(waiting_->mu);
    while (state() == State::kPending) {
      if (waiting_->cv.WaitUntil(lock, deadline) == std::cv_status::timeout &&
          state() == State::kPending) {
        return absl::DeadlineExceededError(absl::StrCat("data ", layout().ToString(),
                                                        " still pending after ",
                                                        absl::FormatDuration(timeout)));
      }
    }
  }
  return Usable();
}

void Data::OnReady(absl::AnyInvocable<void(absl::Status) &&> done) {
  if (waiting_ != nullptr) {
    MutexLock lock(waiting_->mu);
    if (state() == State::kPending) {
      waiting_->waiters.push_back(std::move(done));
      return;
    }
  }
  std::move(done)(Usable());
}

bool Data::MarkDonated() {
  State expected = State::kReady;
  return state_.compare_exchange_strong(expected, State::kDonated, std::memory_order_acq_rel);
}

void Data::ReleaseAll(std::vector<DataPtr>& data) {
  // The data owning each entry's buffers: the entry itself, or the data an assigned placeholder
  // reads. owner_ is written once, before the state leaves kPending; a placeholder still pending
  // (or being assigned now) has no buffers to release and is simply dropped.
  absl::InlinedVector<std::shared_ptr<const Data>, 8> owners;
  owners.reserve(data.size());
  for (DataPtr& d : data) {
    if (d != nullptr && d->state() != State::kPending) {
      if (d->owner_ != nullptr) {
        owners.push_back(d->owner_);
      } else {
        owners.push_back(std::move(d));
      }
    }
    d.reset();
  }
  data.clear();
  // Only this vector references these now: nobody can take a new reference.
  owners.erase(std::remove_if(owners.begin(), owners.end(),
                              [](const std::shared_ptr<const Data>& o) {
                                return o.use_count() != 1;
                              }),
               owners.end());
  size_t devices = 0;
  for (const auto& o : owners) devices = std::max(devices, o->own_.buffers.size());
  for (size_t i = 0; i < devices; ++i) {
    for (const auto& o : owners) {
      // Every Data is created mutable (make_shared<Data>) and each of these is now owned by
      // `o` alone, so resetting one of its buffers in place is safe; the data dies right after.
      if (i < o->own_.buffers.size()) const_cast<pjrt::Buffer&>(o->own_.buffers[i]).Reset();
    }
  }
}

}  // namespace shardrt
