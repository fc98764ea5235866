#include "shardrt/data/data.h"

#include <algorithm>
#include <chrono>
#include <vector>

#include "absl/strings/str_cat.h"

namespace shardrt {

Data::Data(Key, std::shared_ptr<pjrt::Client> client, std::shared_ptr<const DataLayout> layout)
    : client_(std::move(client)), layout_(std::move(layout)) {}

absl::StatusOr<DataPtr> Data::Create(std::shared_ptr<pjrt::Client> client,
                                     std::shared_ptr<const DataLayout> layout,
                                     std::vector<pjrt::Buffer> buffers) {
  if (buffers.size() != layout->devices.size()) {
    return absl::InvalidArgumentError(absl::StrCat("data of layout ", layout->ToString(),
                                                   " needs ", layout->devices.size(),
                                                   " buffers, got ", buffers.size()));
  }
  auto shards = std::make_shared<ShardBuffers>();
  for (size_t i = 0; i < buffers.size(); ++i) {
    if (buffers[i].empty()) {
      return absl::InvalidArgumentError(absl::StrCat("buffer ", i, " is empty"));
    }
    shards->handles.push_back(buffers[i].handle());
  }
  shards->buffers.assign(std::make_move_iterator(buffers.begin()),
                         std::make_move_iterator(buffers.end()));
  return CreateUnchecked(std::move(client), std::move(layout), std::move(shards));
}

DataPtr Data::CreateUnchecked(std::shared_ptr<pjrt::Client> client,
                              std::shared_ptr<const DataLayout> layout,
                              std::shared_ptr<const ShardBuffers> buffers) {
  DataPtr data = std::make_shared<Data>(Key{}, std::move(client), std::move(layout));
  data->buffers_ = std::move(buffers);
  data->state_.store(State::kReady, std::memory_order_release);
  return data;
}

DataPtr Data::CreatePlaceholder(std::shared_ptr<pjrt::Client> client,
                                std::shared_ptr<const DataLayout> layout) {
  return std::make_shared<Data>(Key{}, std::move(client), std::move(layout));
}

absl::Status Data::Usable() const {
  switch (state()) {
    case State::kReady:
      return absl::OkStatus();
    case State::kPending:
      return absl::FailedPreconditionError(
          absl::StrCat("data ", layout_->ToString(), " is a placeholder that was never assigned"));
    case State::kDonated:
      return absl::FailedPreconditionError(absl::StrCat(
          "data ", layout_->ToString(), " was donated to an earlier execution and is unusable"));
    case State::kFailed: {
      std::lock_guard<std::mutex> lock(mu_);
      return error_;
    }
  }
  return absl::InternalError("unknown data state");
}

void Data::Complete(State state, std::unique_lock<std::mutex>& lock) {
  state_.store(state, std::memory_order_release);
  std::vector<absl::AnyInvocable<void(absl::Status) &&>> waiters = std::move(waiters_);
  waiters_.clear();
  absl::Status status = state == State::kReady ? absl::OkStatus() : error_;
  lock.unlock();
  cv_.notify_all();
  for (auto& w : waiters) std::move(w)(status);
}

absl::Status Data::Assign(const Data& source) {
  if (&source == this) return absl::InvalidArgumentError("cannot assign data to itself");
  if (absl::Status usable = source.Usable(); !usable.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot assign from data that is not ready: ", usable.message()));
  }
  if (source.client_ != client_) {
    return absl::InvalidArgumentError("cannot assign data of another client");
  }
  if (!source.layout_->SameAs(*layout_)) {
    return absl::InvalidArgumentError(absl::StrCat("Assign: placeholder expects ",
                                                   layout_->ToString(), ", got ",
                                                   source.layout_->ToString()));
  }
  std::unique_lock<std::mutex> lock(mu_);
  if (state() != State::kPending) {
    return absl::FailedPreconditionError(
        absl::StrCat("Assign: data ", layout_->ToString(), " is not a pending placeholder"));
  }
  buffers_ = source.buffers_;
  Complete(State::kReady, lock);
  return absl::OkStatus();
}

void Data::Fail(absl::Status error) {
  if (error.ok()) error = absl::InternalError("placeholder failed without an error");
  std::unique_lock<std::mutex> lock(mu_);
  if (state() != State::kPending) return;
  error_ = std::move(error);
  Complete(State::kFailed, lock);
}

absl::Status Data::Await() const {
  if (state() != State::kPending) return Usable();
  {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return state() != State::kPending; });
  }
  return Usable();
}

absl::Status Data::Await(absl::Duration timeout) const {
  if (state() != State::kPending) return Usable();
  {
    std::unique_lock<std::mutex> lock(mu_);
    const auto wait = std::chrono::nanoseconds(absl::ToInt64Nanoseconds(
        std::max(timeout, absl::ZeroDuration())));
    if (!cv_.wait_for(lock, wait, [this] { return state() != State::kPending; })) {
      return absl::DeadlineExceededError(absl::StrCat(
          "data ", layout_->ToString(), " still pending after ", absl::FormatDuration(timeout)));
    }
  }
  return Usable();
}

void Data::OnReady(absl::AnyInvocable<void(absl::Status) &&> done) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (state() == State::kPending) {
      waiters_.push_back(std::move(done));
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
  std::vector<std::shared_ptr<const ShardBuffers>> shards;
  shards.reserve(data.size());
  for (DataPtr& d : data) {
    // buffers_ is written once, before the state leaves kPending; a pending placeholder has
    // none, and one that is being assigned now keeps its buffers (they are dropped with it).
    if (d != nullptr && d->state() != State::kPending && d->buffers_ != nullptr) {
      shards.push_back(d->buffers_);
    }
    d.reset();
  }
  data.clear();
  // Only this vector references these now: nobody can take a new reference.
  std::erase_if(shards, [](const std::shared_ptr<const ShardBuffers>& s) {
    return s.use_count() != 1;
  });
  size_t devices = 0;
  for (const auto& s : shards) devices = std::max(devices, s->buffers.size());
  for (size_t i = 0; i < devices; ++i) {
    for (const auto& s : shards) {
      // The ShardBuffers were created mutable (make_shared<ShardBuffers>) and are now owned by
      // `s` alone, so resetting one of their buffers in place is safe.
      if (i < s->buffers.size()) const_cast<pjrt::Buffer&>(s->buffers[i]).Reset();
    }
  }
}

}  // namespace shardrt
