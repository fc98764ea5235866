// shardrt generate: text generation with a Llama-architecture GGUF model (SmolLM2-135M-Instruct
// by default, fetched by scripts/bootstrap.sh), tensor-parallel over N devices (examples/llama).
//
// The prompt is tokenized (byte-level BPE), wrapped in the model's chat template with --chat,
// and run through prefill; then one decode step per token on the asynchronous executor, the
// host reading each token a few steps behind the newest scheduled one. The text streams to
// stdout as tokens arrive (whole UTF-8 characters only). stderr ends with the prefill time and
// `decoded N tokens in X s (Y tokens/s)`; --json prints one object at the end instead of the
// stream.
#include <fcntl.h>
#include <malloc.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/json_writer.h"
#include "cli/commands.h"
#include "cli/flags.h"
#include "cli/npy.h"
#include "cli/runtime_setup.h"
#include "llama/chat.h"
#include "llama/gguf.h"
#include "llama/llama_model.h"
#include "llama/tokenizer.h"
#include "llama/utf8.h"
#include "shardrt/base/limits.h"
#include "shardrt/base/status_macros.h"

namespace shardrt::cli {
namespace {

using Clock = std::chrono::steady_clock;

constexpr FlagDef kFlags[] = {
    {.name = "model", .value_name = "FILE.gguf",
     .description = "the Llama-architecture GGUF model",
     .default_text = "$SHARDRT_MODEL"},
    {.name = "prompt", .value_name = "TEXT",
     .description = "the prompt text; this or --prompt-tokens is required"},
    {.name = "prompt-tokens", .value_name = "IDS",
     .description = "the prompt as comma-separated token ids, e.g. 1,2,3"},
    {.name = "chat", .type = FlagType::kBoolean,
     .description = "wrap --prompt in the model's chat template", .default_text = "off"},
    {.name = "system", .value_name = "TEXT",
     .description = "the system message of the chat template; needs --chat"},
    {.name = "max-tokens", .type = FlagType::kInteger, .value_name = "N",
     .description = "tokens to generate at most (fewer at a stop token)", .default_text = "128",
     .int_min = 1, .int_max = 8192},
    kDevicesFlag,
    {.name = "temperature", .type = FlagType::kNumber, .value_name = "T",
     .description = "sampling temperature; 0 picks the likeliest token", .default_text = "0",
     .number_min = 0, .number_max = 100},
    {.name = "top-p", .type = FlagType::kNumber, .value_name = "P",
     .description = "sample from the likeliest tokens that hold this share of the "
                    "probability; needs --temperature",
     .default_text = "1", .number_min = 1e-6, .number_max = 1},
    {.name = "seed", .type = FlagType::kInteger, .value_name = "S",
     .description = "the sampling seed; needs --temperature", .default_text = "0", .int_min = 0,
     .int_max = INT64_MAX},
    {.name = "json", .type = FlagType::kBoolean,
     .description = "print one JSON object at the end instead of streaming the text",
     .default_text = "off"},
    {.name = "logits-out", .value_name = "FILE.npy",
     .description = "write each generated token's logits to FILE.npy (f32[tokens, vocab])"},
    kMetricsFlag,
    kTraceFlag,
    kPluginFlag,
    kCompileCacheFlag,
    {.name = "attention-block", .type = FlagType::kInteger, .value_name = "N",
     .description = "positions per step of the decode attention loop (a multiple of the devices)",
     .default_text = "256, or devices x 32 when the devices do not divide 256", .int_min = 1,
     .int_max = 8192},
    {.name = "compile-only", .type = FlagType::kBoolean,
     .description = "compile the programs into the compile cache and exit without loading "
                    "the weights",
     .default_text = "off"},
};

// The model file: --model, else $SHARDRT_MODEL. Error: neither is set.
absl::StatusOr<std::string> ModelPath(const Flags& flags) {
  if (std::optional<std::string> path = flags.Get("model")) return *path;
  if (const char* env = std::getenv("SHARDRT_MODEL"); env != nullptr && *env != '\0') return env;
  return absl::InvalidArgumentError(
      "no model: pass --model FILE.gguf or set SHARDRT_MODEL (scripts/bootstrap.sh fetches "
      "SmolLM2-135M-Instruct to .cache/models/SmolLM2-135M-Instruct.Q4_1.gguf)");
}

// "1,2,3" as token ids. Error: InvalidArgument naming the entry.
absl::StatusOr<std::vector<int32_t>> ParseIds(const std::string& text) {
  std::vector<int32_t> ids;
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    int32_t id = 0;
    if (!absl::SimpleAtoi(part, &id)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "flag --prompt-tokens: entry ", ids.size(), " is not a token id: '",
          part.substr(0, 32), "'"));
    }
    ids.push_back(id);
  }
  return ids;
}

// Runs `shardrt generate ARGS --compile-only` in a child process and waits for it: the child
// compiles the programs into the compile cache, so the compiler's memory and code never join
// this process's weights (a first run would otherwise keep about 80 MB of them). The child's
// output goes to /dev/null, and it dies with this process. Errors: the child could not start or
// failed; the caller then compiles in-process, which reports what went wrong.
absl::Status CompileInChild(const std::vector<std::string>& args) {
  std::vector<std::string> strings = {"/proc/self/exe", "generate"};
  strings.insert(strings.end(), args.begin(), args.end());
  strings.push_back("--compile-only");
  std::vector<char*> argv;
  for (std::string& arg : strings) argv.push_back(arg.data());
  argv.push_back(nullptr);
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) return absl::InternalError("cannot start the compile process");
  if (pid == 0) {  // only async-signal-safe calls until exec
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);
    const int null = open("/dev/null", O_RDWR);
    if (null >= 0) {
      dup2(null, STDIN_FILENO);
      dup2(null, STDOUT_FILENO);
      dup2(null, STDERR_FILENO);
    }
    execv(argv[0], argv.data());
    _exit(127);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return absl::InternalError("lost the compile process");
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return absl::InternalError("the compile process failed");
  }
  return absl::OkStatus();
}

}  // namespace

constinit const CommandDef kGenerateCommand{
    .name = "generate",
    .usage = "(--prompt TEXT [--chat [--system TEXT]] | --prompt-tokens IDS) [flags]",
    .summary = "Generates text with a Llama-architecture GGUF model (SmolLM2-135M-Instruct from "
               "scripts/bootstrap.sh), tensor-parallel over N devices.",
    .flags = kFlags,
    .run = GenerateCommand};

// The `generate` subcommand (see commands.h). Errors: bad flags (InvalidArgument, before the
// model is read), the model file's, the tokenizer's, the runtime's, compilation's and the
// executions'. Owns everything it creates; runs on the calling thread.
absl::Status GenerateCommand(const std::vector<std::string>& args) {
  SHARDRT_ASSIGN_OR_RETURN(Flags flags, Flags::Parse(args, kFlags));
  if (!flags.positional().empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("unexpected argument '", flags.positional()[0].substr(0, 64), "'"));
  }
  if (flags.Has("prompt") == flags.Has("prompt-tokens")) {
    return absl::InvalidArgumentError("pass exactly one of --prompt TEXT and --prompt-tokens IDS");
  }
  if (flags.Has("prompt-tokens") && (flags.Has("chat") || flags.Has("system"))) {
    return absl::InvalidArgumentError("--chat and --system apply to --prompt, not --prompt-tokens");
  }
  if (flags.Has("system") && !flags.Has("chat")) {
    return absl::InvalidArgumentError("--system needs --chat");
  }
  SHARDRT_ASSIGN_OR_RETURN(int64_t devices, flags.GetInt("devices"));
  SHARDRT_ASSIGN_OR_RETURN(int64_t max_tokens, flags.GetInt("max-tokens"));
  llama::GenerateOptions options;
  options.max_tokens = max_tokens;
  SHARDRT_ASSIGN_OR_RETURN(options.sampling.temperature,
                           flags.GetDouble("temperature"));
  SHARDRT_ASSIGN_OR_RETURN(options.sampling.top_p, flags.GetDouble("top-p"));
  SHARDRT_ASSIGN_OR_RETURN(int64_t seed, flags.GetInt("seed"));
  options.sampling.seed = static_cast<uint64_t>(seed);
  if ((flags.Has("top-p") || flags.Has("seed")) && options.sampling.temperature == 0) {
    return absl::InvalidArgumentError(
        "--top-p and --seed apply to sampling: pass --temperature T > 0 too");
  }
  const bool json = flags.Has("json");
  const std::optional<std::string> logits_out = flags.Get("logits-out");
  if (logits_out.has_value() && logits_out->empty()) {
    return absl::InvalidArgumentError("flag --logits-out: empty path");
  }
  options.keep_logits = logits_out.has_value();
  SHARDRT_ASSIGN_OR_RETURN(std::string model_path, ModelPath(flags));

  SHARDRT_ASSIGN_OR_RETURN(std::unique_ptr<llama::GgufFile> file,
                           llama::GgufFile::Open(model_path));
  SHARDRT_ASSIGN_OR_RETURN(std::unique_ptr<llama::Tokenizer> tokenizer,
                           llama::Tokenizer::FromGguf(*file));
  std::vector<int32_t> prompt;
  if (flags.Has("prompt-tokens")) {
    SHARDRT_ASSIGN_OR_RETURN(prompt, ParseIds(*flags.Get("prompt-tokens")));
  } else {
    std::string text = *flags.Get("prompt");
    if (flags.Has("chat")) {
      SHARDRT_ASSIGN_OR_RETURN(llama::ChatFormat format, llama::ReadChatFormat(*file));
      text = llama::ChatPrompt(format, text, flags.Get("system").value_or(""));
    }
    SHARDRT_ASSIGN_OR_RETURN(prompt, tokenizer->Encode(text));
  }
  if (prompt.empty()) return absl::InvalidArgumentError("the prompt has no tokens");
  for (size_t i = 0; i < prompt.size(); ++i) {  // before anything is compiled or loaded
    if (prompt[i] < 0 || prompt[i] >= tokenizer->vocab_size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("flag --prompt-tokens: token ", i, " is ", prompt[i],
                       ", outside the vocabulary [0, ", tokenizer->vocab_size(), ")"));
    }
  }
  for (const char* stop : {"<|im_end|>", "<|endoftext|>"}) {
    if (int32_t id = tokenizer->TokenId(stop); id >= 0) options.stop_tokens.push_back(id);
  }
  if (tokenizer->eos_id() >= 0) options.stop_tokens.push_back(tokenizer->eos_id());

  CommandReports reports(flags.Has("metrics"), flags.Get("trace"));
  SHARDRT_RETURN_IF_ERROR(reports.Start());
  SHARDRT_ASSIGN_OR_RETURN(std::unique_ptr<Runtime> runtime,
                           CreateCliRuntime(devices, flags.Get("plugin"), flags.Get("compile-cache")));
  llama::ModelOptions model_options;
  model_options.partitions = devices;
  model_options.granule = 64 % devices == 0 ? 64 : devices * 8;
  // Positions per iteration of the decode step's attention loop (a multiple of the devices).
  SHARDRT_ASSIGN_OR_RETURN(model_options.block,
                           flags.GetInt("attention-block", 256 % devices == 0 ? 256 : devices * 32));
  // One generation per process: the prefill program's memory goes once it has run.
  model_options.retention = llama::ProgramRetention::kReleasePrefill;
  model_options.cache_len = int64_t(prompt.size()) + max_tokens;
  // Compile first, then load: the compiler's memory is handed back before the weights arrive,
  // so the process never holds both.
  SHARDRT_ASSIGN_OR_RETURN(llama::LlamaConfig config, llama::LlamaConfig::FromGguf(*file));
  SHARDRT_ASSIGN_OR_RETURN(std::unique_ptr<llama::LlamaModel> model,
                           llama::LlamaModel::Create(config, runtime->client(),
                                                     runtime->executor(), model_options));
  const bool compile_only = flags.Has("compile-only");
  if (compile_only && !runtime->client().has_persistent_cache()) {
    return absl::InvalidArgumentError(
        "--compile-only needs a compile cache (--compile-cache DIR, $SHARDRT_COMPILE_CACHE or the "
        "default; not off)");
  }
  const Clock::time_point compile_start = Clock::now();
  if (!compile_only && runtime->client().has_persistent_cache()) {
    SHARDRT_ASSIGN_OR_RETURN(bool compiled,
                             model->IsPrecompiled(int64_t(prompt.size()), max_tokens));
    // A first run compiles in a child process; if that fails, Precompile compiles here.
    if (!compiled) CompileInChild(args).IgnoreError();
  }
  SHARDRT_RETURN_IF_ERROR(model->Precompile(int64_t(prompt.size()), max_tokens));
  if (compile_only) {
    std::fprintf(stderr, "compiled in %.2f s\n",
                 std::chrono::duration<double>(Clock::now() - compile_start).count());
    return reports.Finish();
  }
  // The compiler frees what it used, but the C library keeps much of it mapped; hand it back
  // (the CLI owns its process; the library does not do this).
  malloc_trim(0);
  const Clock::time_point load_start = Clock::now();
  SHARDRT_RETURN_IF_ERROR(model->LoadWeights(*file));
  // The weights are on the devices: the file's mapping (98 MB for SmolLM2) can go.
  file.reset();
  // Then the programs (from the compile cache when it is on), one at a time, the heap trimmed
  // after each load so that no load's transient stays on top of the weights.
  const Clock::time_point programs_start = Clock::now();
  SHARDRT_RETURN_IF_ERROR(
      model->Prepare(int64_t(prompt.size()), max_tokens, [] { malloc_trim(0); }));
  const Clock::time_point ready = Clock::now();
  std::fprintf(stderr, "compiled in %.2f s, loaded %s on %lld devices in %.2f s, programs in %.2f s\n",
               std::chrono::duration<double>(load_start - compile_start).count(),
               model_path.c_str(), static_cast<long long>(devices),
               std::chrono::duration<double>(programs_start - load_start).count(),
               std::chrono::duration<double>(ready - programs_start).count());

  llama::StreamDecoder stream(*tokenizer);
  std::string text;
  absl::Status stream_status;
  int64_t received = 0;
  auto on_token = [&](int32_t token) {
    // The prefill's program and temporaries are freed soon after its token arrives, and each
    // step frees small temporaries: hand what the C library keeps back to the system at tokens
    // 1, 2, 4, ..., 256 and then every 256 tokens (a trim costs about a millisecond).
    ++received;
    if ((received & (received - 1)) == 0 ? received <= 256 : received % 256 == 0) malloc_trim(0);
    // Stop tokens end the text; they are not part of it.
    for (int32_t stop : options.stop_tokens) {
      if (token == stop) return true;
    }
    absl::StatusOr<std::string> piece = stream.Push(token);
    if (!piece.ok()) {
      stream_status = piece.status();
      return false;
    }
    text += *piece;
    if (!json && !piece->empty()) {
      std::fwrite(piece->data(), 1, piece->size(), stdout);
      std::fflush(stdout);
    }
    return true;
  };
  SHARDRT_ASSIGN_OR_RETURN(llama::GenerateResult result,
                           model->Generate(prompt, options, on_token));
  SHARDRT_RETURN_IF_ERROR(stream_status);
  const std::string rest = stream.Finish();
  text += rest;
  if (!json) {
    std::fwrite(rest.data(), 1, rest.size(), stdout);
    std::fputc('\n', stdout);
    std::fflush(stdout);
  }
  if (logits_out.has_value()) {
    NpyArray array;
    array.type = ElementType::kF32;
    array.shape = {int64_t(result.logits.size()), model->config().vocab};
    for (const std::vector<float>& row : result.logits) {
      const auto* bytes = reinterpret_cast<const uint8_t*>(row.data());
      array.data.insert(array.data.end(), bytes, bytes + row.size() * sizeof(float));
    }
    SHARDRT_RETURN_IF_ERROR(WriteNpy(*logits_out, array));
  }
  const int64_t n = int64_t(result.tokens.size());
  const double decode_rate =
      n > 1 && result.decode_seconds > 0 ? double(n - 1) / result.decode_seconds : 0.0;
  if (json) {
    std::vector<int64_t> prompt64(prompt.begin(), prompt.end());
    std::vector<int64_t> tokens64(result.tokens.begin(), result.tokens.end());
    std::printf("{\"prompt_tokens\": %s, \"tokens\": %s, \"text\": %s, \"prefill_s\": %.6f, "
                "\"decode_tokens_per_s\": %.3f}\n",
                JsonIntList(prompt64).c_str(), JsonIntList(tokens64).c_str(),
                JsonString(llama::utf8::ReplaceInvalidUtf8(text)).c_str(), result.prefill_seconds, decode_rate);
  }
  std::fprintf(stderr, "prefill: %lld prompt tokens in %.3f s (%.1f tokens/s)\n",
               static_cast<long long>(result.prompt_tokens), result.prefill_seconds,
               double(result.prompt_tokens) / std::max(result.prefill_seconds, 1e-9));
  std::fprintf(stderr, "decoded %lld tokens in %.3f s (%.2f tokens/s)\n",
               static_cast<long long>(n > 0 ? n - 1 : 0), result.decode_seconds, decode_rate);
  return reports.Finish();
}

}  // namespace shardrt::cli
