// `shardrt serve`: the OpenAI-compatible server (server/server.h) for one GGUF model, until
// SIGTERM or SIGINT, which drain it: no new requests, the running ones finish, exit 0.
#include <signal.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "cli/commands.h"
#include "cli/flags.h"
#include "cli/model_flags.h"
#include "cli/runtime_setup.h"
#include "server/server.h"
#include "shardrt/base/status_macros.h"

namespace shardrt::cli {
namespace {

constexpr FlagDef kFlags[] = {
    kModelFlag,
    kDevicesFlag,
    kWeightsFlag,
    {.name = "host", .value_name = "ADDRESS",
     .description = "the address to listen on (0.0.0.0: every interface)",
     .default_text = "127.0.0.1"},
    {.name = "port", .type = FlagType::kInteger, .value_name = "PORT",
     .description = "the port to listen on; 0 picks a free one (printed on stderr)",
     .default_text = "8080", .int_min = 0, .int_max = 65535},
    {.name = "max-batch", .type = FlagType::kInteger, .value_name = "B",
     .description = "requests generating at once (one key/value cache row each)",
     .default_text = "8", .int_min = 1, .int_max = 256},
    {.name = "max-queue", .type = FlagType::kInteger, .value_name = "Q",
     .description = "requests waiting for a row at most; more get 429", .default_text = "64",
     .int_min = 0, .int_max = 1 << 20},
    {.name = "prefill-chunk", .type = FlagType::kInteger, .value_name = "N",
     .description = "prompt tokens per step while other requests generate, over as many "
                    "waiting prompts as they cover (smaller: steadier streams; larger: sooner "
                    "first tokens and more tokens per second)",
     .default_text = "256", .int_min = 16, .int_max = 256},
    {.name = "context", .type = FlagType::kInteger, .value_name = "N",
     .description = "positions each request may use (prompt and answer)",
     .default_text = "2048, or the model's context when smaller", .int_min = 1,
     .int_max = 1 << 20},
    {.name = "api-key", .value_name = "KEY",
     .description = "the key clients must send (Authorization: Bearer KEY) on /v1/ routes",
     .default_text = "$SHARDRT_API_KEY, else none"},
    {.name = "model-id", .value_name = "ID",
     .description = "the model's id in /v1/models and requests", .default_text = "the file's stem"},
    {.name = "max-body-bytes", .type = FlagType::kInteger, .value_name = "N",
     .description = "the largest request body; larger ones get 413", .default_text = "1048576",
     .int_min = 1024, .int_max = int64_t{1} << 30},
    {.name = "drain-seconds", .type = FlagType::kInteger, .value_name = "S",
     .description = "on SIGTERM or SIGINT, how long running requests may take to finish",
     .default_text = "60", .int_min = 0, .int_max = 86400},
    kPluginFlag,
    kCompileCacheFlag,
};

}  // namespace

constinit const CommandDef kServeCommand{
    .name = "serve",
    .usage = "--model FILE.gguf [flags]",
    .summary = "Serves a Llama-family GGUF model (llama, qwen2) over HTTP with OpenAI's API "
               "(chat and text completions, streaming), batching the requests that arrive.",
    .flags = kFlags,
    .run = ServeCommand};

// The `serve` subcommand (see commands.h). Errors: bad flags, an address that cannot be bound,
// the model's and the runtime's errors while loading. Returns once a signal has drained it.
absl::Status ServeCommand(const std::vector<std::string>& args) {
  SHARDRT_ASSIGN_OR_RETURN(Flags flags, Flags::Parse(args, kFlags));
  if (!flags.positional().empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("unexpected argument '", flags.positional()[0].substr(0, 64), "'"));
  }
  server::ServerOptions options;
  SHARDRT_ASSIGN_OR_RETURN(options.model_path, ModelPath(flags));
  SHARDRT_ASSIGN_OR_RETURN(options.devices, flags.GetInt("devices"));
  SHARDRT_ASSIGN_OR_RETURN(options.weights, WeightsFlag(flags));
  options.host = flags.Get("host").value_or("127.0.0.1");
  SHARDRT_ASSIGN_OR_RETURN(int64_t port, flags.GetInt("port"));
  options.port = int(port);
  SHARDRT_ASSIGN_OR_RETURN(options.max_batch, flags.GetInt("max-batch"));
  SHARDRT_ASSIGN_OR_RETURN(options.max_queue, flags.GetInt("max-queue"));
  SHARDRT_ASSIGN_OR_RETURN(options.prefill_chunk, flags.GetInt("prefill-chunk"));
  SHARDRT_ASSIGN_OR_RETURN(options.context_length, flags.GetInt("context", 0));
  SHARDRT_ASSIGN_OR_RETURN(options.max_body_bytes, flags.GetInt("max-body-bytes"));
  SHARDRT_ASSIGN_OR_RETURN(int64_t drain_seconds, flags.GetInt("drain-seconds"));
  options.model_id = flags.Get("model-id").value_or("");
  if (std::optional<std::string> key = flags.Get("api-key")) {
    options.api_key = *key;
  } else if (const char* env = std::getenv("SHARDRT_API_KEY"); env != nullptr) {
    options.api_key = env;
  }
  // SIGTERM and SIGINT wait for sigwait below: blocked here, before any thread starts, so
  // every thread inherits the mask. A peer that closes its connection must not end the
  // process either.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  SHARDRT_ASSIGN_OR_RETURN(
      std::unique_ptr<Runtime> runtime,
      CreateCliRuntime(options.devices, flags.Get("plugin"), flags.Get("compile-cache")));
  SHARDRT_ASSIGN_OR_RETURN(std::unique_ptr<server::Server> server,
                           server::Server::Start(*runtime, options));
  std::fprintf(stderr, "shardrt serve: listening on http://%s:%d (loading %s)\n",
               options.host.c_str(), server->port(), options.model_path.c_str());
  SHARDRT_RETURN_IF_ERROR(server->LoadModel());
  std::fprintf(stderr, "shardrt serve: ready: model '%s' on %lld devices, %lld requests at once\n",
               server->model_id().c_str(), static_cast<long long>(options.devices),
               static_cast<long long>(options.max_batch));
  int received = 0;
  sigwait(&stop_signals, &received);
  std::fprintf(stderr, "shardrt serve: %s: draining\n", received == SIGTERM ? "SIGTERM" : "SIGINT");
  SHARDRT_RETURN_IF_ERROR(server->Shutdown(absl::Seconds(drain_seconds)));
  std::fprintf(stderr, "shardrt serve: stopped\n");
  return absl::OkStatus();
}

}  // namespace shardrt::cli
