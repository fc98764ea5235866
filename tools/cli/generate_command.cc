// shardrt generate: text generation with a Llama-family GGUF model (SmolLM2-135M-Instruct
// by default, fetched by scripts/bootstrap.sh), tensor-parallel over N devices, through the
// library's llm::Session (shardrt/llm/session.h). This file holds what belongs to the command:
// its flags, its output (the text streams to stdout; --json prints one object at the end), and
// its process policy: a first run compiles in a child process, and the C library's heap is
// handed back to the system after compiling, after each program load and now and then while
// decoding.
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
#include <memory>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "shardrt/base/json_writer.h"
#include "cli/command_main.h"
#include "cli/commands.h"
#include "cli/file_io.h"
#include "cli/flags.h"
#include "cli/model_flags.h"
#include "cli/npy.h"
#include "cli/runtime_setup.h"
#include "shardrt/base/limits.h"
#include "shardrt/base/status_macros.h"
#include "shardrt/llm/session.h"

namespace shardrt::cli {
namespace {

constexpr FlagDef kFlags[] = {
    kModelFlag,
    {.name = "prompt", .value_name = "TEXT",
     .description = "the prompt text; this, --prompt-file or --prompt-tokens is required"},
    {.name = "prompt-file", .value_name = "FILE|-",
     .description = "the prompt text from a file, or from standard input for -"},
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
    kWeightsFlag,
    {.name = "compile-only", .type = FlagType::kBoolean,
     .description = "compile the programs into the compile cache and exit without loading "
                    "the weights",
     .default_text = "off"},
};


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

using Clock = std::chrono::steady_clock;

double Since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// What the flags ask for: the request and the session's sizes. Errors: InvalidArgument for bad
// flags and combinations, before the model is read.
struct GenerateFlags {
  llm::GenerateRequest request;
  int64_t devices = 8;
  std::string model_path;
  std::optional<std::string> logits_out;
  // --prompt-file -: read after CreateCliRuntime, which may start the process again (the input
  // goes to the process that runs); a compile child cannot read it again.
  bool prompt_from_stdin = false;
};

// The largest --prompt-file: the tokenizer's input limit.
constexpr int64_t kMaxPromptFileBytes = int64_t{16} << 20;

absl::StatusOr<GenerateFlags> ReadGenerateFlags(const Flags& flags) {
  if (!flags.positional().empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("unexpected argument '", flags.positional()[0].substr(0, 64), "'"));
  }
  if (int(flags.Has("prompt")) + int(flags.Has("prompt-file")) + int(flags.Has("prompt-tokens")) !=
      1) {
    return absl::InvalidArgumentError(
        "pass exactly one of --prompt TEXT, --prompt-file FILE|- and --prompt-tokens IDS");
  }
  if (flags.Has("prompt-tokens") && (flags.Has("chat") || flags.Has("system"))) {
    return absl::InvalidArgumentError(
        "--chat and --system apply to --prompt and --prompt-file, not --prompt-tokens");
  }
  if (flags.Has("system") && !flags.Has("chat")) {
    return absl::InvalidArgumentError("--system needs --chat");
  }
  GenerateFlags out;
  llm::GenerateRequest& r = out.request;
  SHARDRT_ASSIGN_OR_RETURN(out.devices, flags.GetInt("devices"));
  SHARDRT_ASSIGN_OR_RETURN(r.max_tokens, flags.GetInt("max-tokens"));
  SHARDRT_ASSIGN_OR_RETURN(r.sampling.temperature, flags.GetDouble("temperature"));
  SHARDRT_ASSIGN_OR_RETURN(r.sampling.top_p, flags.GetDouble("top-p"));
  SHARDRT_ASSIGN_OR_RETURN(int64_t seed, flags.GetInt("seed"));
  r.sampling.seed = static_cast<uint64_t>(seed);
  if ((flags.Has("top-p") || flags.Has("seed")) && r.sampling.temperature == 0) {
    return absl::InvalidArgumentError(
        "--top-p and --seed apply to sampling: pass --temperature T > 0 too");
  }
  out.logits_out = flags.Get("logits-out");
  // Checked now, before anything is compiled or loaded; written as the generation ends.
  if (out.logits_out.has_value()) {
    SHARDRT_RETURN_IF_ERROR(CheckOutputFile("logits-out", *out.logits_out));
  }
  // --logits-out's rows are written as they come (the command sets on_logits).
  r.logits = out.logits_out.has_value() ? llm::LogitsOutput::kStream : llm::LogitsOutput::kDiscard;
  if (flags.Has("prompt-tokens")) {
    SHARDRT_ASSIGN_OR_RETURN(r.prompt_tokens, ParseIds(*flags.Get("prompt-tokens")));
  } else {
    if (flags.Has("prompt")) {
      r.prompt = *flags.Get("prompt");
    } else if (const std::string path = *flags.Get("prompt-file"); path == "-") {
      out.prompt_from_stdin = true;  // read once the process has its final form (StdinPrompt)
    } else {
      SHARDRT_ASSIGN_OR_RETURN(r.prompt, ReadRegularFile(path));
      if (int64_t(r.prompt.size()) > kMaxPromptFileBytes) {
        return absl::InvalidArgumentError(absl::StrCat(
            "flag --prompt-file: ", path, " holds ", r.prompt.size(), " bytes; at most ",
            kMaxPromptFileBytes));
      }
    }
    if (r.prompt.empty() && !out.prompt_from_stdin) {
      return absl::InvalidArgumentError("the prompt has no tokens");
    }
    r.format = flags.Has("chat") ? llm::PromptFormat::kChat : llm::PromptFormat::kRaw;
    r.system = flags.Get("system").value_or("");
  }
  SHARDRT_ASSIGN_OR_RETURN(out.model_path, ModelPath(flags));
  return out;
}

// Compiles the programs of a prompt of `prompt_len` tokens: a first run with a compile cache
// (not itself the --compile-only child) compiles in a child process, so that the compiler's
// memory never joins the weights.
absl::Status CompileFirst(llm::Session& session, const Runtime& runtime,
                          const std::vector<std::string>& args, bool compile_only,
                          int64_t prompt_len, int64_t max_tokens) {
  if (!compile_only && runtime.client().has_persistent_cache()) {
    SHARDRT_ASSIGN_OR_RETURN(bool compiled, session.IsPrecompiled(prompt_len, max_tokens));
    // If the child fails, Precompile compiles here and reports what went wrong.
    if (!compiled) CompileInChild(args).IgnoreError();
  }
  return session.Precompile(prompt_len, max_tokens);
}

// Loads the weights, then the programs, each with the C library's heap handed back to the
// system first (the compiler frees what it used, but much of it stays mapped), and reports
// the timings on stderr. Errors: Load's and Prepare's.
absl::Status LoadAndPrepare(llm::Session& session, const GenerateFlags& g, double compile_s,
                            int64_t prompt_len) {
  malloc_trim(0);
  const Clock::time_point load_start = Clock::now();
  SHARDRT_RETURN_IF_ERROR(session.Load());
  const double load_s = Since(load_start);
  const Clock::time_point programs_start = Clock::now();
  SHARDRT_RETURN_IF_ERROR(
      session.Prepare(prompt_len, g.request.max_tokens, [] { malloc_trim(0); }));
  std::fprintf(stderr, "compiled in %.2f s, loaded %s on %lld devices in %.2f s, programs in %.2f s\n",
               compile_s, g.model_path.c_str(), static_cast<long long>(g.devices), load_s,
               Since(programs_start));
  return absl::OkStatus();
}


// The --json object. Error: it could not be written (WriteOutput's).
absl::Status PrintJson(const llm::GenerateResult& result) {
  std::vector<int64_t> prompt(result.prompt_tokens.begin(), result.prompt_tokens.end());
  std::vector<int64_t> tokens(result.tokens.begin(), result.tokens.end());
  return WriteOutput(absl::StrFormat(
      "{\"prompt_tokens\": %s, \"tokens\": %s, \"text\": %s, \"finish_reason\": \"%s\", "
      "\"prefill_s\": %.6f, \"decode_tokens_per_s\": %.3f}\n",
      JsonIntList(prompt), JsonIntList(tokens), JsonString(result.text),
      std::string(llm::FinishReasonName(result.finish_reason)), result.stats.prefill_seconds,
      result.stats.decode_tokens_per_second()));
}

// The end of a generation: the stream's last newline, --logits-out, --json, and the rates on
// stderr. Errors: the output or the logits file could not be written.
absl::Status PrintResult(const llm::GenerateResult& result, NpyRowWriter* logits, bool json) {
  // The stream's newline, before the rates on stderr.
  if (!json) SHARDRT_RETURN_IF_ERROR(WriteOutput("\n"));
  // Its rows were written as they came (on_logits): the file gets its row count and its name.
  if (logits != nullptr) SHARDRT_RETURN_IF_ERROR(logits->Finish());
  if (json) SHARDRT_RETURN_IF_ERROR(PrintJson(result));
  std::fprintf(stderr, "prefill: %lld prompt tokens in %.3f s (%.1f tokens/s)\n",
               static_cast<long long>(result.stats.prompt_tokens), result.stats.prefill_seconds,
               result.stats.prefill_tokens_per_second());
  std::fprintf(stderr, "decoded %lld tokens in %.3f s (%.2f tokens/s)\n",
               static_cast<long long>(std::max<int64_t>(result.stats.generated_tokens - 1, 0)),
               result.stats.decode_seconds, result.stats.decode_tokens_per_second());
  return absl::OkStatus();
}

// Sizes the session's cache to a prompt of `n` tokens and `max_tokens` generated ones, which
// must fit the model's context and the cache that whole units of the programs' sizes leave of
// it. Errors: InvalidArgument naming the sizes and the reason, before anything is compiled.
absl::Status CheckContext(llm::Session& session, int64_t n, int64_t max_tokens,
                          int64_t attention_block) {
  const int64_t needed = n + max_tokens, context = session.info().context;
  const std::string request = absl::StrCat("a prompt of ", n, " tokens and --max-tokens ",
                                           max_tokens, " need ", needed, " positions");
  if (needed > context) {
    return absl::InvalidArgumentError(absl::StrCat(
        request, ", but the model's context holds ", context, " positions: pass fewer --max-tokens"));
  }
  SHARDRT_RETURN_IF_ERROR(session.SetContextLength(needed));
  // The cache is whole units of the attention block and the prompt granule, rounded down where
  // rounding up would pass the model's context.
  if (session.context_length() < needed) {
    return absl::InvalidArgumentError(absl::StrCat(
        request, ", but the cache holds at most ", session.context_length(), " of the model's ",
        context, ": whole units of the attention block (", attention_block,
        ") and the prompt granule; pass a smaller --attention-block or fewer --max-tokens"));
  }
  return absl::OkStatus();
}

// The request's prompt tokens; an error about --prompt-tokens names the flag.
absl::StatusOr<std::vector<int32_t>> PromptOf(const llm::Session& session,
                                              const llm::GenerateRequest& request) {
  absl::StatusOr<std::vector<int32_t>> prompt = session.PromptTokens(request);
  if (prompt.ok() || request.prompt_tokens.empty()) return prompt;
  return absl::InvalidArgumentError(
      absl::StrCat("flag --prompt-tokens: ", prompt.status().message()));
}

}  // namespace

constinit const CommandDef kGenerateCommand{
    .name = "generate",
    .usage = "((--prompt TEXT | --prompt-file FILE|-) [--chat [--system TEXT]] | "
             "--prompt-tokens IDS) [flags]",
    .summary = "Generates text with a Llama-family GGUF model (llama or qwen2; "
               "SmolLM2-135M-Instruct from scripts/bootstrap.sh), tensor-parallel over N devices.",
    .flags = kFlags,
    .run = GenerateCommand};

// The `generate` subcommand (see commands.h). Errors: bad flags (InvalidArgument, before the
// model is read; a --logits-out path that cannot be written among them, and --trace's, which
// RunCommandLine checks first), a closed standard output (before the runtime is made), a prompt
// and --max-tokens the cache cannot hold (before anything is compiled), the model file's, the
// tokenizer's, the runtime's, compilation's and the executions'; output that cannot be written
// (the first streamed token that fails ends the generation) and a --logits-out file that
// cannot be written (a file at the path then stays as it was). Owns everything it creates;
// runs on the calling thread.
absl::Status GenerateCommand(const std::vector<std::string>& args) {
  SHARDRT_ASSIGN_OR_RETURN(Flags flags, Flags::Parse(args, kFlags));
  SHARDRT_ASSIGN_OR_RETURN(GenerateFlags g, ReadGenerateFlags(flags));
  const bool json = flags.Has("json"), compile_only = flags.Has("compile-only");
  // The results go to standard output: a closed one fails before any work.
  if (!compile_only) SHARDRT_RETURN_IF_ERROR(CheckOutputOpen());
  CommandReports reports(flags.Has("metrics"), flags.Get("trace"));
  SHARDRT_RETURN_IF_ERROR(reports.Start());
  SHARDRT_ASSIGN_OR_RETURN(std::unique_ptr<Runtime> runtime,
                           CreateCliRuntime(g.devices, flags.Get("plugin"), flags.Get("compile-cache")));
  // --logits-out's file is made now (after CreateCliRuntime, which may start the process again),
  // before anything is compiled or loaded; each row is written as its token comes.
  std::unique_ptr<NpyRowWriter> logits;
  if (g.logits_out.has_value() && !compile_only) {
    SHARDRT_ASSIGN_OR_RETURN(logits, NpyRowWriter::Create(*g.logits_out));
  }
  if (g.prompt_from_stdin) {
    SHARDRT_ASSIGN_OR_RETURN(g.request.prompt, ReadStandardInput(kMaxPromptFileBytes));
    if (g.request.prompt.empty()) return absl::InvalidArgumentError("the prompt has no tokens");
  }
  if (compile_only && !runtime->client().has_persistent_cache()) {
    return absl::InvalidArgumentError(
        "--compile-only needs a compile cache (--compile-cache DIR, $SHARDRT_COMPILE_CACHE or the "
        "default; not off)");
  }
  llm::SessionOptions options{.model_path = g.model_path, .devices = g.devices,
                              .retention = llm::ProgramRetention::kReleasePrefill};
  SHARDRT_ASSIGN_OR_RETURN(options.attention_block,
                           flags.GetInt("attention-block", 256 % g.devices == 0 ? 256 : g.devices * 32));
  SHARDRT_ASSIGN_OR_RETURN(options.weights, WeightsFlag(flags));
  SHARDRT_ASSIGN_OR_RETURN(std::unique_ptr<llm::Session> session,
                           llm::Session::Open(*runtime, options));
  if (logits != nullptr) {
    SHARDRT_RETURN_IF_ERROR(logits->Start(ElementType::kF32, {session->info().vocab}));
  }
  SHARDRT_ASSIGN_OR_RETURN(std::vector<int32_t> prompt, PromptOf(*session, g.request));
  // One request per process: the cache holds exactly its positions.
  const int64_t n = int64_t(prompt.size()), max_tokens = g.request.max_tokens;
  SHARDRT_RETURN_IF_ERROR(CheckContext(*session, n, max_tokens, options.attention_block));
  const Clock::time_point compile_start = Clock::now();
  SHARDRT_RETURN_IF_ERROR(CompileFirst(*session, *runtime, args,
                                       compile_only || g.prompt_from_stdin, n, max_tokens));
  if (compile_only) {
    std::fprintf(stderr, "compiled in %.2f s\n", Since(compile_start));
    return reports.Finish();
  }
  SHARDRT_RETURN_IF_ERROR(LoadAndPrepare(*session, g, Since(compile_start), n));
  // A file whose tokenizer this build cannot read runs --prompt-tokens; its tokens are printed
  // as ids.
  const absl::Status text = session->TextStatus();
  if (!text.ok() && !json) {
    std::fprintf(stderr, "no text (%s): printing token ids\n",
                 std::string(text.message()).c_str());
  }
  // The first failed write to stdout ends the generation, and the command with it.
  absl::Status written;
  auto on_token = [&](const llm::TokenEvent& event) {
    // The prefill's memory goes soon after its token, and each step frees small temporaries:
    // trim at tokens 1, 2, 4, ..., 256 and then every 256 (a trim costs about a millisecond).
    const int64_t k = event.index + 1;
    if ((k & (k - 1)) == 0 ? k <= 256 : k % 256 == 0) malloc_trim(0);
    if (!json && !text.ok()) {
      written = WriteOutput(absl::StrCat(event.index == 0 ? "" : " ", event.token));
    } else if (!json && !event.text.empty()) {
      written = WriteOutput(absl::string_view(event.text.data(), event.text.size()));
    }
    return written.ok() ? llm::StreamControl::kContinue : llm::StreamControl::kStop;
  };
  g.request.prompt.clear();
  g.request.prompt_tokens = prompt;
  g.request.format = llm::PromptFormat::kRaw;
  g.request.system.clear();
  if (logits != nullptr) {
    g.request.on_logits = [&](int64_t, std::span<const float> row) {
      return logits->AppendRow(row.data(), row.size_bytes());
    };
  }
  SHARDRT_ASSIGN_OR_RETURN(llm::GenerateResult result, session->Generate(g.request, on_token));
  SHARDRT_RETURN_IF_ERROR(written);
  SHARDRT_RETURN_IF_ERROR(PrintResult(result, logits.get(), json));
  return reports.Finish();
}

}  // namespace shardrt::cli
