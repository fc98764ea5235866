#include "shardrt/pjrt/event.h"

#include <memory>
#include <utility>

#include "pjrt/call.h"

namespace shardrt::pjrt {

Event& Event::operator=(Event&& other) noexcept {
  if (this != &other) {
    Reset();
    api_ = std::exchange(other.api_, nullptr);
    event_ = std::exchange(other.event_, nullptr);
  }
  return *this;
}

void Event::Reset() {
  if (event_ == nullptr) return;
  SHARDRT_PJRT_ARGS(PJRT_Event_Destroy_Args, args);
  args.event = event_;
  SHARDRT_PJRT_DESTROY(api_, PJRT_Event_Destroy, &args);
  event_ = nullptr;
}

absl::Status Event::Await() const {
  if (event_ == nullptr) return absl::OkStatus();
  SHARDRT_PJRT_ARGS(PJRT_Event_Await_Args, args);
  args.event = event_;
  return SHARDRT_PJRT_CALL(api_, PJRT_Event_Await, &args);
}

bool Event::IsReady() const {
  if (event_ == nullptr) return true;
  SHARDRT_PJRT_ARGS(PJRT_Event_IsReady_Args, args);
  args.event = event_;
  if (!SHARDRT_PJRT_CALL(api_, PJRT_Event_IsReady, &args).ok()) return false;
  return args.is_ready;
}

#if defined(__SANITIZE_THREAD__)
extern "C" void __tsan_acquire(void* addr);
extern "C" void __tsan_release(void* addr);
#endif

namespace {

// The plugin hands the callback's state from the registering thread to the thread that runs the
// callback through its own (uninstrumented) synchronization. ThreadSanitizer is told of exactly
// that hand-off, so everything else a callback touches is still checked.
void PublishToCallback(void* state) {
#if defined(__SANITIZE_THREAD__)
  __tsan_release(state);
#else
  (void)state;
#endif
}
void ReceiveInCallback(void* state) {
#if defined(__SANITIZE_THREAD__)
  __tsan_acquire(state);
#else
  (void)state;
#endif
}

struct OnReadyState {
  const PJRT_Api* api;
  absl::AnyInvocable<void(absl::Status) &&> done;
};

void OnReadyTrampoline(PJRT_Error* error, void* user_arg) {
  ReceiveInCallback(user_arg);
  std::unique_ptr<OnReadyState> state(static_cast<OnReadyState*>(user_arg));
  absl::Status status = internal::ConsumeError(state->api, error, "PJRT event");
  std::move(state->done)(std::move(status));
}
}  // namespace

absl::Status Event::OnReady(absl::AnyInvocable<void(absl::Status) &&> done) {
  if (event_ == nullptr) {
    std::move(done)(absl::OkStatus());
    return absl::OkStatus();
  }
  auto state = std::make_unique<OnReadyState>(OnReadyState{api_, std::move(done)});
  SHARDRT_PJRT_ARGS(PJRT_Event_OnReady_Args, args);
  args.event = event_;
  args.callback = &OnReadyTrampoline;
  args.user_arg = state.get();
  PublishToCallback(state.get());
  absl::Status status = SHARDRT_PJRT_CALL(api_, PJRT_Event_OnReady, &args);
  if (status.ok()) {
    state.release();  // owned by the callback now
    Reset();          // destroying the handle does not cancel the callback
  }
  return status;
}

}  // namespace shardrt::pjrt
