#include "shardrt/llm/scheduler.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <deque>
#include <optional>
#include <span>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "llama/llama_model.h"
#include "llama/session_state.h"
#include "llama/token_stream.h"
#include "shardrt/base/mutex.h"
#include "shardrt/base/status_macros.h"

namespace shardrt::llm {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

// One request, from Submit to its DoneCallback.
struct Job {
  GenerateRequest request;
  TokenCallback on_token;
  DoneCallback on_done;
  std::vector<int32_t> prompt;
  std::unique_ptr<llama::TokenStream> stream;
  std::optional<Sampler> sampler;
  int64_t seq = 0;  // order of arrival
  int64_t row = -1;
  int64_t prefilled = 0;   // prompt tokens in the cache
  int32_t next_token = 0;  // decoding: the token the next step runs, at `position`
  int64_t position = 0;
  Clock::time_point started, first_token, last_token;

  bool decoding() const { return prefilled == int64_t(prompt.size()); }
};

}  // namespace

struct Scheduler::Impl {
  Impl(Session& session, llama::LlamaModel& model, const SchedulerOptions& options)
      : session(session), state(*session.state_), model(model), options(options),
        rows(size_t(options.max_batch)) {}

  Session& session;
  Session::State& state;
  // The session's model: fixed once its weights are loaded (Start loads them).
  llama::LlamaModel& model;
  const SchedulerOptions options;

  mutable Mutex mu;
  CondVar wake;   // the loop: a request arrived, or the scheduler stops
  CondVar ended;  // Drain: a request ended
  std::deque<std::unique_ptr<Job>> queue ABSL_GUARDED_BY(mu);
  int64_t running ABSL_GUARDED_BY(mu) = 0;  // jobs holding a row
  int64_t next_seq ABSL_GUARDED_BY(mu) = 0;
  bool accepting ABSL_GUARDED_BY(mu) = true;
  bool stopping ABSL_GUARDED_BY(mu) = false;  // the destructor: cancel everything
  SchedulerStats counters ABSL_GUARDED_BY(mu);

  // The loop's own (only its thread touches them).
  std::vector<std::unique_ptr<Job>> rows;  // the cache rows' jobs (null: free)
  std::optional<llama::KvCaches> caches;
  std::thread thread;

  void Loop();
  // Moves queued jobs into free rows; whether any row is in use. Cancels everything when
  // stopping.
  bool Admit();
  // One iteration: chunks of the waiting prompts (up to chunk_while_decoding tokens while a
  // sequence decodes, else one chunk) and a decode step (if a sequence is decoding).
  void Iterate();
  // The next chunk of the job's prompt, of at most `most` tokens (and the model's largest).
  absl::Status Prefill(Job& job, int64_t most);
  absl::Status Decode();
  // Hands a step's token to the job's stream; ends the job when it says so, or with the step's
  // error (logits that were not finite).
  void Deliver(Job& job, const absl::StatusOr<int32_t>& step);
  // Ends the job in `row` (or a queued one) with its result, or with `error`.
  void Finish(std::unique_ptr<Job> job, const absl::Status& error);
  void Release(int64_t row, const absl::Status& error) { Finish(std::move(rows[row]), error); }
  // Ends every running job with `error` (the caches they were in are gone).
  void FailRunning(const absl::Status& error);
};

Scheduler::Scheduler(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

absl::StatusOr<std::unique_ptr<Scheduler>> Scheduler::Start(Session& session,
                                                            const SchedulerOptions& options) {
  if (options.max_batch < 1 || options.max_batch > 256) {
    return absl::InvalidArgumentError(
        absl::StrCat("scheduler: max_batch ", options.max_batch, ": expected 1 to 256"));
  }
  if (options.chunk_while_decoding < 16 || options.chunk_while_decoding > 256) {
    return absl::InvalidArgumentError(absl::StrCat("scheduler: chunk_while_decoding ",
                                                   options.chunk_while_decoding,
                                                   ": expected 16 to 256"));
  }
  if (options.max_queue < 0 || options.max_queue > (int64_t{1} << 20)) {
    return absl::InvalidArgumentError(
        absl::StrCat("scheduler: max_queue ", options.max_queue, ": expected 0 to 1048576"));
  }
  SHARDRT_RETURN_IF_ERROR(session.Load());
  llama::LlamaModel* model = nullptr;
  {
    MutexLock lock(session.state_->mu);
    model = session.state_->model.get();
  }
  SHARDRT_RETURN_IF_ERROR(model->PrepareBatched(options.max_batch));
  auto impl = std::make_unique<Impl>(session, *model, options);
  SHARDRT_ASSIGN_OR_RETURN(llama::KvCaches caches, model->NewCaches(options.max_batch));
  impl->caches = std::move(caches);
  Impl* raw = impl.get();
  impl->thread = std::thread([raw] { raw->Loop(); });
  return std::unique_ptr<Scheduler>(new Scheduler(std::move(impl)));
}

Scheduler::~Scheduler() {
  {
    MutexLock lock(impl_->mu);
    impl_->accepting = false;
    impl_->stopping = true;
  }
  impl_->wake.NotifyAll();
  impl_->thread.join();
}

const SchedulerOptions& Scheduler::options() const { return impl_->options; }

SchedulerStats Scheduler::stats() const {
  MutexLock lock(impl_->mu);
  SchedulerStats s = impl_->counters;
  s.queued = int64_t(impl_->queue.size());
  s.running = impl_->running;
  return s;
}

absl::Status Scheduler::Submit(GenerateRequest request, TokenCallback on_token,
                               DoneCallback on_done) {
  if (!on_done) return absl::InvalidArgumentError("scheduler: a request needs a DoneCallback");
  // Everything about the request is checked before it is queued.
  SHARDRT_ASSIGN_OR_RETURN(std::vector<int32_t> prompt, impl_->session.PromptTokens(request));
  SHARDRT_RETURN_IF_ERROR(CheckRequestOptions(request));
  if (request.logits == LogitsOutput::kStream) {
    return absl::InvalidArgumentError(
        "scheduler: LogitsOutput::kStream is not supported (Session::Generate streams logits)");
  }
  SHARDRT_RETURN_IF_ERROR(impl_->model.CheckFits(int64_t(prompt.size()), request.max_tokens));
  auto job = std::make_unique<Job>();
  job->request = std::move(request);
  job->on_token = std::move(on_token);
  job->on_done = std::move(on_done);
  job->prompt = std::move(prompt);
  SHARDRT_ASSIGN_OR_RETURN(const llama::Tokenizer* tokenizer,
                           impl_->state.TextFor(job->request));
  job->stream = std::make_unique<llama::TokenStream>(tokenizer, job->request,
                                                     impl_->state.StopTokens(job->request.stop),
                                                     job->on_token);
  if (job->request.sampling.temperature > 0) job->sampler.emplace(job->request.sampling);
  {
    MutexLock lock(impl_->mu);
    if (!impl_->accepting) {
      return absl::FailedPreconditionError("scheduler: draining, not accepting requests");
    }
    const int64_t free_rows = impl_->options.max_batch - impl_->running;
    if (int64_t(impl_->queue.size()) - free_rows >= impl_->options.max_queue) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "scheduler: the queue is full (", impl_->queue.size(), " requests waiting, ",
          impl_->running, " running)"));
    }
    job->seq = impl_->next_seq++;
    impl_->queue.push_back(std::move(job));
  }
  impl_->wake.NotifyOne();
  return absl::OkStatus();
}

absl::Status Scheduler::Drain(absl::Duration timeout) {
  const auto deadline = Clock::now() + absl::ToChronoNanoseconds(timeout);
  MutexLock lock(impl_->mu);
  impl_->accepting = false;
  while (!impl_->queue.empty() || impl_->running > 0) {
    if (impl_->ended.WaitUntil(lock, deadline) == std::cv_status::timeout &&
        (!impl_->queue.empty() || impl_->running > 0)) {
      return absl::DeadlineExceededError(
          absl::StrCat("scheduler: drain timed out with ", impl_->running, " requests running and ",
                       impl_->queue.size(), " queued"));
    }
  }
  return absl::OkStatus();
}

void Scheduler::Impl::Loop() {
  while (Admit()) Iterate();
}

bool Scheduler::Impl::Admit() {
  std::vector<std::unique_ptr<Job>> cancelled;
  bool any = false, stop_now = false;
  {
    MutexLock lock(mu);
    while (true) {
      if (stopping) {
        while (!queue.empty()) {
          cancelled.push_back(std::move(queue.front()));
          queue.pop_front();
        }
      }
      for (size_t r = 0; r < rows.size() && !queue.empty(); ++r) {
        if (rows[r] != nullptr) continue;
        rows[r] = std::move(queue.front());
        queue.pop_front();
        rows[r]->row = int64_t(r);
        ++running;
      }
      any = std::any_of(rows.begin(), rows.end(), [](const auto& j) { return j != nullptr; });
      stop_now = stopping;
      if (any || stop_now) break;
      wake.Wait(lock);
    }
  }
  for (auto& job : cancelled) {
    job->stream->End(FinishReason::kCancelled);
    Finish(std::move(job), absl::OkStatus());
  }
  if (stop_now) {
    for (auto& job : rows) {
      if (job != nullptr) job->stream->End(FinishReason::kCancelled);
    }
  }
  return any || !cancelled.empty();
}

void Scheduler::Impl::Iterate() {
  const Clock::time_point start = Clock::now();
  // Cancelled requests leave before any work is spent on them.
  for (size_t r = 0; r < rows.size(); ++r) {
    if (rows[r] == nullptr) continue;
    if (rows[r]->stream->cancelled()) rows[r]->stream->End(FinishReason::kCancelled);
    if (rows[r]->stream->ended()) Release(int64_t(r), absl::OkStatus());
  }
  // Prompts get up to `budget` tokens of chunks, the one admitted first first: all of its
  // prompt when nothing decodes, else chunk_while_decoding tokens over as many prompts as it
  // covers. Each prompt runs in the chunks Session::Generate gives it (so its bits do not
  // depend on its neighbours), except that a budget under the next chunk cuts that chunk.
  const bool decoding = std::any_of(rows.begin(), rows.end(), [](const auto& job) {
    return job != nullptr && job->decoding();
  });
  std::vector<Job*> waiting;
  for (auto& job : rows) {
    if (job != nullptr && !job->decoding()) waiting.push_back(job.get());
  }
  std::sort(waiting.begin(), waiting.end(),
            [](const Job* a, const Job* b) { return a->seq < b->seq; });
  absl::Status status = absl::OkStatus();
  int64_t budget = options.chunk_while_decoding;
  for (Job* job : waiting) {
    const int64_t left = int64_t(job->prompt.size()) - job->prefilled;
    const int64_t next = model.ChunkTokens(job->prefilled, left);
    if (!decoding) {
      status = Prefill(*job, left);  // nothing decodes: one chunk, then its first decode step
      break;
    }
    if (next > budget && budget < options.chunk_while_decoding) break;  // the next iteration's
    status = Prefill(*job, std::min(next, budget));
    budget -= std::min(next, budget);
    if (!status.ok() || budget < model.granule()) break;
  }
  if (status.ok()) status = Decode();
  if (!status.ok()) FailRunning(status);
  MutexLock lock(mu);
  counters.busy_seconds += Seconds(start, Clock::now());
}

absl::Status Scheduler::Impl::Prefill(Job& job, int64_t most) {
  // Whole granules unless the prompt ends, so that the next chunk starts where chunks may.
  if (most < int64_t(job.prompt.size()) - job.prefilled) {
    most = std::max(model.granule(), most / model.granule() * model.granule());
  }
  if (!caches.has_value()) {
    SHARDRT_ASSIGN_OR_RETURN(llama::KvCaches fresh, model.NewCaches(options.max_batch));
    caches = std::move(fresh);
  }
  if (job.prefilled == 0) job.started = Clock::now();
  int64_t run = 0;
  llama::KvCaches in = std::move(*caches);
  caches.reset();
  SHARDRT_ASSIGN_OR_RETURN(
      llama::StepOutputs out,
      model.ScheduleChunk(
          std::move(in), job.row,
          std::span(job.prompt).subspan(job.prefilled).first(std::min<size_t>(
              job.prompt.size() - size_t(job.prefilled), size_t(most))),
          job.prefilled, &run));
  caches = std::move(out.caches);
  job.prefilled += run;
  {
    MutexLock lock(mu);
    ++counters.prefill_chunks;
    counters.prompt_tokens += run;
  }
  if (!job.decoding()) return absl::OkStatus();
  // The prompt is in: its last position's token is the first generated one.
  absl::StatusOr<int32_t> token;
  if (job.sampler.has_value()) {
    SHARDRT_ASSIGN_OR_RETURN(std::vector<float> logits,
                             llama::HostLogits(state.runtime->client(), out.logits,
                                               state.config.vocab));
    token = llama::RowToken(-1, logits, &*job.sampler);
  } else {
    SHARDRT_ASSIGN_OR_RETURN(std::vector<int32_t> next,
                             llama::HostValues<int32_t>(state.runtime->client(), out.next_tokens));
    token = llama::RowToken(next[0], {}, nullptr);
  }
  job.position = int64_t(job.prompt.size());
  Deliver(job, token);
  return absl::OkStatus();
}

absl::Status Scheduler::Impl::Decode() {
  int64_t highest = -1;
  bool sampling = false;
  for (const auto& job : rows) {
    if (job == nullptr || !job->decoding()) continue;
    highest = job->row;
    sampling |= job->sampler.has_value();
  }
  if (highest < 0) return absl::OkStatus();
  const int64_t batch = llama::LlamaModel::DecodeBatch(highest + 1, options.max_batch);
  std::vector<int32_t> tokens(size_t(batch), 0), positions(size_t(batch), -1);
  for (int64_t b = 0; b < batch; ++b) {
    const Job* job = rows[b].get();
    if (job == nullptr || !job->decoding()) continue;
    tokens[b] = job->next_token;
    positions[b] = int32_t(job->position);
  }
  if (!caches.has_value()) return absl::InternalError("scheduler: the caches are gone");
  llama::KvCaches in = std::move(*caches);
  caches.reset();
  SHARDRT_ASSIGN_OR_RETURN(llama::StepOutputs out,
                           model.ScheduleDecode(std::move(in), tokens, positions));
  caches = std::move(out.caches);
  ComputationClient& client = state.runtime->client();
  SHARDRT_ASSIGN_OR_RETURN(std::vector<int32_t> next, llama::HostValues<int32_t>(client, out.next_tokens));
  std::vector<float> logits;
  if (sampling) {
    SHARDRT_ASSIGN_OR_RETURN(logits, llama::HostLogits(client, out.logits, state.config.vocab));
  }
  {
    MutexLock lock(mu);
    ++counters.decode_steps;
    counters.last_batch = batch;
  }
  const size_t vocab = size_t(state.config.vocab);
  for (int64_t b = 0; b < batch; ++b) {
    Job* job = rows[b].get();
    if (job == nullptr || positions[b] < 0) continue;
    const absl::StatusOr<int32_t> token = llama::RowToken(
        next[b],
        job->sampler.has_value() ? std::span<const float>(logits).subspan(size_t(b) * vocab, vocab)
                                 : std::span<const float>(),
        job->sampler.has_value() ? &*job->sampler : nullptr);
    ++job->position;
    Deliver(*job, token);
  }
  return absl::OkStatus();
}

void Scheduler::Impl::Deliver(Job& job, const absl::StatusOr<int32_t>& step) {
  // A row whose logits were not finite ends its request with that error; the others go on.
  if (!step.ok()) return Release(job.row, step.status());
  const int32_t token = *step;
  job.last_token = Clock::now();
  if (job.stream->tokens().empty()) job.first_token = job.last_token;
  absl::StatusOr<bool> more = job.stream->Push(token);
  {
    MutexLock lock(mu);
    ++counters.generated_tokens;
  }
  if (!more.ok()) return Release(job.row, more.status());
  if (!*more) return Release(job.row, absl::OkStatus());
  job.next_token = token;
}

void Scheduler::Impl::Finish(std::unique_ptr<Job> job, const absl::Status& error) {
  const bool held_row = job->row >= 0;
  if (error.ok()) {
    const GenerateStats stats{
        .prompt_tokens = int64_t(job->prompt.size()),
        .prefill_seconds = job->stream->tokens().empty() ? 0 : Seconds(job->started, job->first_token),
        .decode_seconds = Seconds(job->first_token, job->last_token)};
    job->on_done(job->stream->Result(job->prompt, stats));
  } else {
    job->on_done(error);
  }
  job.reset();
  {
    MutexLock lock(mu);
    (error.ok() ? counters.finished : counters.failed) += 1;
    if (held_row) --running;
  }
  ended.NotifyAll();
}

void Scheduler::Impl::FailRunning(const absl::Status& error) {
  for (size_t r = 0; r < rows.size(); ++r) {
    if (rows[r] != nullptr) Release(int64_t(r), error);
  }
  caches.reset();  // made again for the next prompt
}

}  // namespace shardrt::llm
