// Scheduler: many generation requests on one Session at once, by continuous batching.
//
//   auto scheduler = shardrt::llm::Scheduler::Start(*session, {.max_batch = 8});
//   (*scheduler)->Submit(request, on_token, [](absl::StatusOr<GenerateResult> result) { ... });
//
// Up to `max_batch` sequences run together, each in a row of one key/value cache on the
// devices: one decode step advances every running sequence by a token (the step's batch is
// the smallest power of two that covers the rows in use). A finished sequence leaves its row
// at once and a waiting request takes it at the next step. Prompts run in chunks (at most
// 256 tokens, the chunks Session::Generate runs) between decode steps: while others decode,
// chunk_while_decoding prompt tokens per step, over as many waiting prompts as they cover,
// oldest first; so a long prompt neither stalls the running sequences nor needs memory beyond
// its cache row and one chunk, and short prompts do not wait one step each. A greedy
// request's tokens are the same whatever runs beside it (each row's sums run in the order they
// have alone, each prompt in its own chunks) and the same as Session::Generate's; a sampled
// request with a seed is reproducible. With chunk_while_decoding under 256, a prompt's chunks
// depend on the load, and its logits may then differ from a solo run's in the last bits.
//
// Ownership: the scheduler borrows the session (which must outlive it) and owns its cache and
// its thread, which runs every step and every callback. Thread safety: every method may be
// called from any thread.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "shardrt/base/export.h"
#include "shardrt/llm/session.h"

namespace shardrt::llm {

struct SHARDRT_EXPORT SchedulerOptions {
  int64_t max_batch = 8;   // sequences running at once (cache rows), 1 to 256
  int64_t max_queue = 64;  // requests waiting for a row at most; more are refused, 0 to 1M
  // Prompt tokens per iteration while other requests decode (each iteration is chunks of the
  // waiting prompts, oldest first, up to this many tokens, then one decode step): smaller
  // keeps the decoding requests' time between tokens short, larger prefills prompts sooner and
  // in larger, more efficient chunks. A chunk the budget does not hold waits for the next
  // iteration, unless it is the iteration's first: then the budget cuts it (rounded down to
  // the chunks' granule, 16 on most device counts). 16 to 256.
  int64_t chunk_while_decoding = 256;
};

// A snapshot of the scheduler's state and counters. A request counts as finished or failed,
// and stops counting as running, once its DoneCallback has returned: read the stats after
// Drain to see every request that a caller saw end.
struct SHARDRT_EXPORT SchedulerStats {
  int64_t queued = 0;   // waiting for a row
  int64_t running = 0;  // holding a row (prefilling or decoding)
  int64_t last_batch = 0;  // rows of the latest decode step's program
  int64_t decode_steps = 0;
  int64_t prefill_chunks = 0;
  int64_t prompt_tokens = 0;     // prefilled, over all requests
  int64_t generated_tokens = 0;  // handed out, over all requests
  int64_t finished = 0;          // requests ended with a result
  int64_t failed = 0;            // requests ended with an error
  double busy_seconds = 0;       // in steps (scheduling them and reading their tokens)
};

// Called once per request, on the scheduler's thread, when it ends: its result, or the error
// that ended it (an execution error fails every request of that step).
using DoneCallback = std::function<void(absl::StatusOr<GenerateResult>)>;

class SHARDRT_EXPORT Scheduler {
 public:
  // Loads the session's weights and programs (Session::Load, then every program the
  // scheduler's steps use) and starts the scheduler's thread. Errors: InvalidArgument for
  // options out of range; Load's, compile and load errors.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<Scheduler>> Start(
      Session& session, const SchedulerOptions& options);
  // Ends every request still queued or running with FinishReason::kCancelled (their
  // DoneCallbacks run), then stops the thread.
  ~Scheduler();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Queues `request`. `on_token` (may be null) runs for each token as it arrives and may
  // return kStop; `on_done` (required) runs once when the request ends. Both run on the
  // scheduler's thread: they must return quickly and must not call into the scheduler but
  // for stats(). A request's `cancel` must stay valid until on_done. Errors (on_done is then
  // never called): InvalidArgument for a bad request (as Session::Generate's, before anything
  // runs); ResourceExhausted when max_queue requests are waiting; FailedPrecondition once the
  // scheduler drains.
  [[nodiscard]] absl::Status Submit(GenerateRequest request, TokenCallback on_token,
                                    DoneCallback on_done);

  // Stops accepting requests and waits until every accepted one has ended, or `timeout` has
  // passed. Error: DeadlineExceeded naming how many are left.
  [[nodiscard]] absl::Status Drain(absl::Duration timeout);

  // The state and counters now (see SchedulerStats). Thread safety: any thread.
  [[nodiscard]] SchedulerStats stats() const;
  const SchedulerOptions& options() const;

 private:
  struct Impl;
  explicit Scheduler(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace shardrt::llm
