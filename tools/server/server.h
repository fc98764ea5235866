// Server: shardrt serve's OpenAI-compatible HTTP server (cpp-httplib) over an llm::Scheduler.
//
//   POST /v1/chat/completions, POST /v1/completions  (streaming: Server-Sent Events)
//   GET  /v1/models, GET /health (503 until the model is loaded, then 200), GET /metrics
//
// Start binds the port and answers at once (/health says 503 while LoadModel runs), so a
// supervisor sees the server from its first second. Errors follow OpenAI's shape
// ({"error": {"message", "type", "param", "code"}}) with 400 for a malformed body or field, 401
// for a missing or wrong key (routes under /v1/ when an API key is set), 404 for an unknown
// route or model, 413 for a body over the limit, 429 when the queue is full, 503 while loading
// or draining, 500 for an internal failure (the server keeps running).
//
// Ownership: borrows the Runtime (which must outlive it); owns the session, the scheduler and
// the HTTP threads. Thread safety: every method may be called from any thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "shardrt/llm/session.h"
#include "shardrt/runtime/runtime.h"

namespace shardrt::server {

struct ServerOptions {
  std::string model_path;  // a Llama-architecture GGUF file
  std::string model_id;    // what /v1/models lists and requests may name; empty: the file's stem
  int64_t devices = 0;     // 0: all of the runtime's
  llm::WeightFormat weights = llm::WeightFormat::kNative;
  int64_t context_length = 0;  // positions per sequence; 0: the session's default
  int64_t max_batch = 8;       // sequences decoding together
  int64_t max_queue = 64;      // requests waiting for a sequence's row; more get 429
  int64_t prefill_chunk = 256;  // prompt tokens per step while others generate (Scheduler)
  std::string host = "127.0.0.1";
  int port = 8080;  // 0: a free port (port() tells which)
  std::string api_key;  // empty: no key
  int64_t max_body_bytes = int64_t{1} << 20;
};

class Server {
 public:
  // Opens the model file (its metadata, tokenizer and sizes: Session::Open), binds host:port
  // and starts answering on its own threads. Errors: InvalidArgument for options out of range;
  // Session::Open's (a file that is missing or not a supported model); Unavailable when the
  // address cannot be bound (naming it).
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<Server>> Start(Runtime& runtime,
                                                                     ServerOptions options);
  // Shutdown(0 s) if it has not run.
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  int port() const;
  const std::string& model_id() const;

  // Loads the model's weights and programs and starts the scheduler; /health turns 200.
  // Errors: Scheduler::Start's (the server keeps answering 503).
  [[nodiscard]] absl::Status LoadModel();

  // Stops accepting requests (503), waits up to `timeout` for the accepted ones to finish and
  // their answers to be written, then stops listening. Error: DeadlineExceeded when requests
  // were still running at the deadline (they are cancelled).
  [[nodiscard]] absl::Status Shutdown(absl::Duration timeout);

 private:
  struct Impl;
  explicit Server(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace shardrt::server
