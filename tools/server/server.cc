#include "server/server.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <map>
#include <random>
#include <thread>
#include <utility>
#include <variant>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "httplib.h"
#include "nlohmann/json.hpp"
#include "server/api_request.h"
#include "server/prometheus.h"
#include "shardrt/base/metrics.h"
#include "shardrt/base/mutex.h"
#include "shardrt/base/status_macros.h"
#include "shardrt/llm/scheduler.h"

namespace shardrt::server {
namespace {

using Json = nlohmann::json;
using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

std::string ErrorBody(const ApiError& e) {
  Json error = {{"message", e.message},
                {"type", e.type},
                {"param", e.param.empty() ? Json(nullptr) : Json(e.param)},
                {"code", e.code.empty() ? Json(nullptr) : Json(e.code)}};
  return Json{{"error", error}}.dump();
}

void SendError(httplib::Response& res, const ApiError& e) {
  res.status = e.status;
  res.set_content(ErrorBody(e), "application/json");
}

ApiError ErrorOf(int status, std::string message, std::string type, std::string code = "") {
  return ApiError{.status = status, .message = std::move(message), .type = std::move(type),
                  .code = std::move(code)};
}

// A request's error from the scheduler or session as the client gets it.
ApiError ErrorOfStatus(const absl::Status& status) {
  const std::string message(status.message());
  switch (status.code()) {
    case absl::StatusCode::kInvalidArgument:
      return ErrorOf(400, message, "invalid_request_error",
                     absl::StrContains(message, "cache positions") ? "context_length_exceeded"
                                                                   : "");
    case absl::StatusCode::kResourceExhausted:
      return ErrorOf(429, message, "rate_limit_error", "queue_full");
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kUnavailable:
      return ErrorOf(503, message, "server_error", "unavailable");
    default:
      return ErrorOf(500, message, "server_error", "internal_error");
  }
}

std::string FinishReasonText(llm::FinishReason reason) {
  return reason == llm::FinishReason::kMaxTokens ? "length" : "stop";
}

// What the scheduler's callbacks hand to the HTTP thread that answers the request.
struct Channel {
  Mutex mu;
  CondVar cv;
  std::string pending ABSL_GUARDED_BY(mu);  // text not written yet
  bool done ABSL_GUARDED_BY(mu) = false;
  absl::StatusOr<llm::GenerateResult> result ABSL_GUARDED_BY(mu) = absl::UnknownError("running");
  llm::Cancellation cancel;
  // The scheduler's thread only.
  Clock::time_point submitted, last_token;
  int64_t tokens = 0;
};

// Debian's cpp-httplib listens with the backlog it was compiled with (5): dozens of clients
// connecting at once to a busy process overflow it (the kernel's ListenOverflows), and a client
// may see its connection reset. listen() again on the bound socket (found among this process's
// descriptors by its port) raises the backlog to `backlog` (the kernel caps it at somaxconn).
// Returns whether it found the socket.
bool RaiseBacklog(int port, int backlog) {
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return false;
  bool found = false;
  while (dirent* entry = readdir(dir)) {
    int fd = 0;
    if (!absl::SimpleAtoi(entry->d_name, &fd) || fd == dirfd(dir)) continue;
    int accepting = 0;
    socklen_t length = sizeof(accepting);
    if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &accepting, &length) != 0 || !accepting) {
      continue;
    }
    sockaddr_storage address{};
    length = sizeof(address);
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) continue;
    const int bound =
        address.ss_family == AF_INET
            ? ntohs(reinterpret_cast<const sockaddr_in*>(&address)->sin_port)
            : address.ss_family == AF_INET6
                  ? ntohs(reinterpret_cast<const sockaddr_in6*>(&address)->sin6_port)
                  : -1;
    if (bound == port && ::listen(fd, backlog) == 0) found = true;
  }
  closedir(dir);
  return found;
}

}  // namespace

struct Server::Impl {
  Runtime& runtime;
  ServerOptions options;
  httplib::Server http;
  std::thread listener;
  int port = 0;

  std::atomic<bool> ready{false};
  std::atomic<bool> draining{false};
  // Shutdown's deadline passed: answers still waiting give up (the scheduler then cancels
  // their requests).
  std::atomic<bool> abandon{false};
  std::atomic<int64_t> in_flight{0};  // completion requests being answered
  std::unique_ptr<llm::Session> session;
  std::unique_ptr<llm::Scheduler> scheduler;
  std::atomic<bool> shut_down{false};

  Histogram ttft{{0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}};
  Histogram itl{{0.005, 0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56}};
  Histogram duration{{0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300}};
  Mutex mu;
  std::map<std::pair<std::string, int>, int64_t> requests ABSL_GUARDED_BY(mu);

  Impl(Runtime& runtime, ServerOptions options)
      : runtime(runtime), options(std::move(options)) {}

  void Routes();
  void Completion(const httplib::Request& req, httplib::Response& res, Endpoint endpoint);
  std::string Metrics();
  Json Usage(const llm::GenerateResult& r) const {
    const int64_t prompt = int64_t(r.prompt_tokens.size()), completion = int64_t(r.tokens.size());
    return {{"prompt_tokens", prompt},
            {"completion_tokens", completion},
            {"total_tokens", prompt + completion}};
  }
};

Server::Server(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Server::~Server() {
  if (!impl_->shut_down.load()) Shutdown(absl::ZeroDuration()).IgnoreError();
}

int Server::port() const { return impl_->port; }
const std::string& Server::model_id() const { return impl_->options.model_id; }

absl::StatusOr<std::unique_ptr<Server>> Server::Start(Runtime& runtime, ServerOptions options) {
  if (options.max_body_bytes < 1024) {
    return absl::InvalidArgumentError(absl::StrCat("server: body limit ", options.max_body_bytes,
                                                   " bytes: expected at least 1024"));
  }
  if (options.port < 0 || options.port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("server: port ", options.port,
                                                   ": expected 0 to 65535"));
  }
  if (options.model_id.empty()) {
    options.model_id = std::filesystem::path(options.model_path).stem().string();
  }
  auto impl = std::make_unique<Impl>(runtime, std::move(options));
  Impl* s = impl.get();
  // The file's metadata, tokenizer and sizes are read now (quick), so that a file that is not
  // a model is refused before the server answers anyone; LoadModel does the slow part.
  llm::SessionOptions session_options{.model_path = s->options.model_path,
                                      .devices = s->options.devices,
                                      .context_length = s->options.context_length,
                                      .weights = s->options.weights};
  SHARDRT_ASSIGN_OR_RETURN(s->session, llm::Session::Open(runtime, session_options));
  // A streaming answer holds its thread: enough for every running and queued request and the
  // clients' idle keep-alive connections.
  const size_t threads = size_t(std::max<int64_t>(
      64, 2 * (s->options.max_batch + s->options.max_queue) + 16));
  s->http.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  s->http.set_payload_max_length(size_t(s->options.max_body_bytes));
  s->Routes();
  if (s->options.port == 0) {
    s->port = s->http.bind_to_any_port(s->options.host);
  } else {
    s->port = s->http.bind_to_port(s->options.host, s->options.port) ? s->options.port : -1;
  }
  if (s->port <= 0) {
    return absl::UnavailableError(absl::StrCat("server: cannot listen on ", s->options.host, ":",
                                               s->options.port));
  }
  RaiseBacklog(s->port, 4096);
  s->listener = std::thread([s] { s->http.listen_after_bind(); });
  return std::unique_ptr<Server>(new Server(std::move(impl)));
}

absl::Status Server::LoadModel() {
  Impl& s = *impl_;
  SHARDRT_ASSIGN_OR_RETURN(
      s.scheduler,
      llm::Scheduler::Start(*s.session,
                            {.max_batch = s.options.max_batch,
                             .max_queue = s.options.max_queue,
                             .chunk_while_decoding = s.options.prefill_chunk}));
  s.ready.store(true);
  return absl::OkStatus();
}

absl::Status Server::Shutdown(absl::Duration timeout) {
  Impl& s = *impl_;
  if (s.shut_down.exchange(true)) return absl::OkStatus();
  s.draining.store(true);
  absl::Status status;
  if (s.scheduler != nullptr) status = s.scheduler->Drain(timeout);
  // The answers of the finished requests are written by their HTTP threads; past the deadline
  // the ones still waiting give up.
  if (!status.ok()) s.abandon.store(true);
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  while (s.in_flight.load() > 0 && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  s.abandon.store(true);
  s.http.stop();
  if (s.listener.joinable()) s.listener.join();
  s.scheduler.reset();  // no HTTP thread is left to use it; cancels what is left
  return status;
}

void Server::Impl::Routes() {
  http.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (!options.api_key.empty() && absl::StartsWith(req.path, "/v1/") &&
        req.get_header_value("Authorization") != "Bearer " + options.api_key) {
      SendError(res, ErrorOf(401, "the API key is missing or wrong (Authorization: Bearer KEY)",
                             "invalid_request_error", "invalid_api_key"));
      return httplib::Server::HandlerResponse::Handled;
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });
  http.set_error_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    if (res.status == 404) {
      SendError(res, ErrorOf(404, absl::StrCat("no route ", req.method, " ", req.path.substr(0, 128)),
                             "invalid_request_error", "not_found"));
    } else if (res.status == 413) {
      SendError(res, ErrorOf(413, absl::StrCat("the request body is over the limit of ",
                                               options.max_body_bytes, " bytes"),
                             "invalid_request_error", "request_too_large"));
    } else {
      SendError(res, ErrorOf(res.status, absl::StrCat("HTTP ", res.status), "invalid_request_error"));
    }
  });
  http.set_exception_handler(
      [](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
        std::string what = "unknown";
        try {
          std::rethrow_exception(ep);
        } catch (const std::exception& e) {
          what = e.what();
        } catch (...) {
        }
        SendError(res, ErrorOf(500, absl::StrCat("internal error: ", what), "server_error",
                               "internal_error"));
      });
  http.set_logger([this](const httplib::Request& req, const httplib::Response& res) {
    MutexLock lock(mu);
    ++requests[{req.path.size() > 64 ? std::string("other") : req.path, res.status}];
  });
  http.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
    const char* state = draining ? "draining" : ready ? "ok" : "loading";
    res.status = ready && !draining ? 200 : 503;
    res.set_content(Json{{"status", state}}.dump(), "application/json");
  });
  http.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
    Json model = {{"id", options.model_id}, {"object", "model"}, {"created", 0},
                  {"owned_by", "shardrt"}};
    res.set_content(Json{{"object", "list"}, {"data", Json::array({model})}}.dump(),
                    "application/json");
  });
  http.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(Metrics(), "text/plain; version=0.0.4");
  });
  http.Post("/v1/chat/completions", [this](const httplib::Request& req, httplib::Response& res) {
    Completion(req, res, Endpoint::kChatCompletions);
  });
  http.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) {
    Completion(req, res, Endpoint::kCompletions);
  });
}

void Server::Impl::Completion(const httplib::Request& req, httplib::Response& res,
                              Endpoint endpoint) {
  // Counted from the start, so that Shutdown, which sets `draining` before it waits for this
  // count to fall to 0, never leaves a request on its way to the scheduler.
  in_flight.fetch_add(1);
  bool streaming = false;  // then the stream's releaser ends the count
  auto uncount = absl::MakeCleanup([&] {
    if (!streaming) in_flight.fetch_sub(1);
  });
  if (draining) {
    return SendError(res, ErrorOf(503, "the server is shutting down", "server_error", "draining"));
  }
  if (!ready) {
    return SendError(res, ErrorOf(503, "the model is loading", "server_error", "loading"));
  }
  auto parsed = ParseCompletionRequest(endpoint, req.body);
  if (auto* e = std::get_if<ApiError>(&parsed)) return SendError(res, *e);
  CompletionParams p = std::get<CompletionParams>(std::move(parsed));
  if (!p.model.empty() && p.model != options.model_id) {
    ApiError e = ErrorOf(404, absl::StrCat("the model '", p.model.substr(0, 64),
                                           "' does not exist; this server has '",
                                           options.model_id, "'"),
                         "invalid_request_error", "model_not_found");
    e.param = "model";
    return SendError(res, e);
  }
  llm::GenerateRequest request;
  if (endpoint == Endpoint::kChatCompletions) {
    std::vector<llm::ChatMessage> messages;
    for (const ChatTurn& t : p.messages) messages.push_back({t.role, t.content});
    absl::StatusOr<std::string> text = session->ApplyChatTemplate(messages);
    if (!text.ok()) return SendError(res, ErrorOfStatus(text.status()));
    request.prompt = *std::move(text);
  } else {
    request.prompt = std::move(p.prompt);
  }
  absl::StatusOr<std::vector<int32_t>> prompt = session->PromptTokens(request);
  if (!prompt.ok()) return SendError(res, ErrorOfStatus(prompt.status()));
  request.prompt.clear();
  request.prompt_tokens = *std::move(prompt);
  const int64_t room = session->context_length() - int64_t(request.prompt_tokens.size()) + 1;
  request.max_tokens = p.max_tokens.value_or(std::max<int64_t>(room, 1));
  request.sampling.temperature = p.temperature;
  request.sampling.top_p = p.temperature > 0 ? p.top_p : 1.0;
  request.sampling.seed = p.seed.value_or(std::random_device{}());
  request.stop.strings = p.stop;

  auto channel = std::make_shared<Channel>();
  request.cancel = &channel->cancel;
  channel->submitted = Clock::now();
  auto on_token = [this, channel](const llm::TokenEvent& e) {
    const Clock::time_point now = Clock::now();
    if (channel->tokens++ == 0) {
      ttft.Observe(Seconds(channel->submitted, now));
    } else {
      itl.Observe(Seconds(channel->last_token, now));
    }
    channel->last_token = now;
    if (!e.text.empty()) {
      MutexLock lock(channel->mu);
      channel->pending.append(e.text);
    }
    channel->cv.NotifyAll();
    return llm::StreamControl::kContinue;
  };
  auto on_done = [this, channel](absl::StatusOr<llm::GenerateResult> result) {
    duration.Observe(Seconds(channel->submitted, Clock::now()));
    {
      MutexLock lock(channel->mu);
      channel->result = std::move(result);
      channel->done = true;
    }
    channel->cv.NotifyAll();
  };
  absl::Status submitted = scheduler->Submit(std::move(request), on_token, on_done);
  if (!submitted.ok()) return SendError(res, ErrorOfStatus(submitted));

  const bool chat = endpoint == Endpoint::kChatCompletions;
  const std::string id = absl::StrCat(chat ? "chatcmpl-" : "cmpl-", std::random_device{}(),
                                      std::random_device{}());
  const int64_t created = std::chrono::duration_cast<std::chrono::seconds>(
                              std::chrono::system_clock::now().time_since_epoch())
                              .count();
  const std::string model = options.model_id;
  if (!p.stream) {
    absl::StatusOr<llm::GenerateResult> result = absl::UnknownError("running");
    {
      MutexLock lock(channel->mu);
      while (!channel->done && !abandon) channel->cv.WaitFor(lock, std::chrono::milliseconds(100));
      if (channel->done) result = channel->result;
    }
    if (!result.ok()) {
      channel->cancel.Cancel();
      return SendError(res, abandon && result.status().code() == absl::StatusCode::kUnknown
                                ? ErrorOf(503, "the server is shutting down", "server_error",
                                          "draining")
                                : ErrorOfStatus(result.status()));
    }
    Json choice = {{"index", 0}, {"finish_reason", FinishReasonText(result->finish_reason)}};
    if (chat) {
      choice["message"] = {{"role", "assistant"}, {"content", result->text}};
    } else {
      choice["text"] = result->text;
      choice["logprobs"] = nullptr;
    }
    Json body = {{"id", id},
                 {"object", chat ? "chat.completion" : "text_completion"},
                 {"created", created},
                 {"model", model},
                 {"choices", Json::array({choice})},
                 {"usage", Usage(*result)}};
    res.set_content(body.dump(-1, ' ', false, Json::error_handler_t::replace), "application/json");
    return;
  }
  // Streaming: Server-Sent Events, one chunk per piece of text.
  auto chunk = [=](const Json& delta_or_text, const Json& finish) {
    Json choice = {{"index", 0}, {"finish_reason", finish}};
    if (chat) {
      choice["delta"] = delta_or_text;
    } else {
      choice["text"] = delta_or_text;
      choice["logprobs"] = nullptr;
    }
    Json body = {{"id", id},
                 {"object", chat ? "chat.completion.chunk" : "text_completion"},
                 {"created", created},
                 {"model", model},
                 {"choices", Json::array({choice})}};
    return absl::StrCat("data: ", body.dump(-1, ' ', false, Json::error_handler_t::replace),
                        "\n\n");
  };
  auto started = std::make_shared<bool>(false);
  streaming = true;
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider(
      "text/event-stream",
      [=, this](size_t, httplib::DataSink& sink) -> bool {
        if (abandon) {
          channel->cancel.Cancel();
          return false;
        }
        if (!*started) {
          *started = true;
          const std::string first = chat ? chunk(Json{{"role", "assistant"}, {"content", ""}},
                                                 nullptr)
                                         : std::string();
          if (!first.empty() && !sink.write(first.data(), first.size())) {
            channel->cancel.Cancel();
            return false;
          }
        }
        std::string text;
        bool done = false;
        absl::StatusOr<llm::GenerateResult> result = absl::UnknownError("running");
        {
          MutexLock lock(channel->mu);
          if (channel->pending.empty() && !channel->done) {
            channel->cv.WaitFor(lock, std::chrono::milliseconds(200));
          }
          text.swap(channel->pending);
          done = channel->done;
          if (done) result = channel->result;
        }
        std::string out;
        if (!text.empty()) {
          out = chunk(chat ? Json{{"content", text}} : Json(text), nullptr);
        }
        if (done) {
          if (result.ok()) {
            out += chunk(chat ? Json::object() : Json(""), FinishReasonText(result->finish_reason));
            if (p.include_usage) {
              Json usage = {{"id", id},
                            {"object", chat ? "chat.completion.chunk" : "text_completion"},
                            {"created", created},
                            {"model", model},
                            {"choices", Json::array()},
                            {"usage", Usage(*result)}};
              absl::StrAppend(&out, "data: ", usage.dump(), "\n\n");
            }
          } else {
            absl::StrAppend(&out, "data: ", ErrorBody(ErrorOfStatus(result.status())), "\n\n");
          }
          out += "data: [DONE]\n\n";
        }
        if (!out.empty() && !sink.write(out.data(), out.size())) {
          channel->cancel.Cancel();  // the client went away: its row goes to the next request
          return false;
        }
        if (done) {
          sink.done();
          return true;
        }
        if (!sink.is_writable()) {
          channel->cancel.Cancel();
          return false;
        }
        return true;
      },
      [channel, this](bool success) {
        if (!success) channel->cancel.Cancel();
        // Until the request ends, its callbacks may still run; the channel outlives them.
        in_flight.fetch_sub(1);
      });
}

std::string Server::Impl::Metrics() {
  PrometheusText m;
  {
    MutexLock lock(mu);
    m.Family("shardrt_http_requests_total", "counter", "HTTP requests by path and status code");
    for (const auto& [key, count] : requests) {
      m.Sample("shardrt_http_requests_total",
               absl::StrCat("path=\"", key.first, "\",code=\"", key.second, "\""), double(count));
    }
  }
  const llm::SchedulerStats s =
      scheduler != nullptr ? scheduler->stats() : llm::SchedulerStats{};
  auto counter = [&](const char* name, const char* help, double v) {
    m.Family(name, "counter", help);
    m.Sample(name, "", v);
  };
  auto gauge = [&](const char* name, const char* help, double v) {
    m.Family(name, "gauge", help);
    m.Sample(name, "", v);
  };
  gauge("shardrt_model_loaded", "1 once the model is loaded", ready ? 1 : 0);
  counter("shardrt_prompt_tokens_total", "prompt tokens prefilled", double(s.prompt_tokens));
  counter("shardrt_generated_tokens_total", "tokens generated", double(s.generated_tokens));
  counter("shardrt_requests_finished_total", "requests that ended with an answer",
          double(s.finished));
  counter("shardrt_requests_failed_total", "requests that ended with an error", double(s.failed));
  counter("shardrt_decode_steps_total", "decode steps run", double(s.decode_steps));
  counter("shardrt_prefill_chunks_total", "prompt chunks run", double(s.prefill_chunks));
  counter("shardrt_scheduler_busy_seconds_total", "seconds the scheduler spent in steps",
          s.busy_seconds);
  gauge("shardrt_queue_depth", "requests waiting for a sequence row", double(s.queued));
  gauge("shardrt_active_sequences", "requests holding a sequence row", double(s.running));
  gauge("shardrt_batch_size", "rows of the latest decode step", double(s.last_batch));
  gauge("shardrt_max_batch", "sequence rows", double(options.max_batch));
  m.Histogram("shardrt_time_to_first_token_seconds",
              "from a request's arrival to its first token", ttft.snapshot());
  m.Histogram("shardrt_inter_token_latency_seconds", "between a request's consecutive tokens",
              itl.snapshot());
  m.Histogram("shardrt_request_duration_seconds", "from a request's arrival to its end",
              duration.snapshot());
  // The runtime's own metrics (transfers, executions, compiles, ...).
  MetricsRegistry& registry = GlobalMetrics();
  for (const std::string& name : registry.CounterNames()) {
    counter(absl::StrCat("shardrt_runtime_", MetricName(name), "_total").c_str(),
            absl::StrCat("runtime counter ", name).c_str(), double(registry.CounterValue(name)));
  }
  for (const std::string& name : registry.MetricNames()) {
    Metric* metric = registry.GetMetric(name, MetricRepr::kNumber);
    const bool time = metric->repr() == MetricRepr::kTime;
    const std::string base =
        absl::StrCat("shardrt_runtime_", MetricName(name), time ? "_seconds" : "");
    m.Family(base, "summary", absl::StrCat("runtime metric ", name));
    m.Sample(base + "_sum", "", metric->Accumulator() / (time ? 1e9 : 1.0));
    m.Sample(base + "_count", "", double(metric->TotalSamples()));
  }
  return m.text();
}

}  // namespace shardrt::server
