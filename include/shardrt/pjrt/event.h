// Event: the unique owner of a PJRT_Event (a completion signal carrying an error or OK).
//
// Await blocks until ready and returns its Status; OnReady registers a callback that runs once,
// possibly on a plugin thread or inline: it must be quick and must not call back into PJRT work
// that could block (post to a thread pool instead). The event is never asked for its error
// before it is ready. Thread-safety: not thread-safe (one owner); the plugin object behind it is.
#pragma once

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "shardrt/base/export.h"
#include "shardrt/pjrt/opaque.h"

namespace shardrt::pjrt {

class SHARDRT_EXPORT Event {
 public:
  Event() = default;
  // Takes ownership of `event` (may be null: an empty event that is always ready and OK).
  Event(const PJRT_Api* api, PJRT_Event* event) : api_(api), event_(event) {}
  Event(Event&& other) noexcept { *this = std::move(other); }
  // Destroys what this event owned, then takes `other`'s.
  Event& operator=(Event&& other) noexcept;
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  ~Event() { Reset(); }

  // Blocks until the event is ready; returns its error (OK for an empty event).
  [[nodiscard]] absl::Status Await() const;
  // Non-blocking readiness check (true for an empty event).
  bool IsReady() const;
  // Calls `done(status)` once the event is ready (immediately for an empty event), then
  // consumes the event: this Event becomes empty. Error: the plugin's, if registration fails
  // (`done` is then not called).
  [[nodiscard]] absl::Status OnReady(absl::AnyInvocable<void(absl::Status) &&> done);

  // True when this Event owns nothing (then it counts as ready and OK).
  bool empty() const { return event_ == nullptr; }
  // Destroys the event now (does not cancel the work it tracks).
  void Reset();

 private:
  const PJRT_Api* api_ = nullptr;
  PJRT_Event* event_ = nullptr;
};

}  // namespace shardrt::pjrt
