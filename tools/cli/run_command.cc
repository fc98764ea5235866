// shardrt run PROGRAM.mlir --devices N [--arg FILE.npy[@SHARDING]]... [--out DIR] [--repeat K]
//             [--result-shape TYPE[DIMS]]... (MLIR bytecode only)
//             [--metrics] [--plugin PATH] [--partitioner gspmd|shardy]
// Compiles the program for N partitions, uploads the arguments (each with its own sharding, or
// the program's parameter sharding), runs it K times and writes the outputs as global arrays.
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <vector>
#include <sys/stat.h>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "shardrt/base/status_macros.h"
#include "cli/commands.h"
#include "cli/file_io.h"
#include "cli/flags.h"
#include "cli/npy.h"
#include "cli/runtime_setup.h"
#include "shardrt/program/program_text.h"
#include "shardrt/base/limits.h"
#include "shardrt/sharding/text.h"

namespace shardrt::cli {
namespace {

// Reads the whole program file with ReadRegularFile (bounded by limits::kMaxFileBytes), after
// saying in the program's terms what a missing or non-regular path is.
absl::StatusOr<std::string> ReadProgram(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    return absl::NotFoundError(absl::StrCat("cannot read '", path, "': no such file"));
  }
  if (!S_ISREG(st.st_mode)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "'", path, "' is ", S_ISDIR(st.st_mode) ? "a directory" : "not a regular file",
        "; expected a program file (StableHLO text or MLIR bytecode)"));
  }
  SHARDRT_ASSIGN_OR_RETURN(std::string text, ReadRegularFile(path));
  if (text.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("'", path, "' is empty; expected a program"));
  }
  return text;
}

// An --arg value: FILE.npy or FILE.npy@SHARDING. The sharding starts at the last '@' that is
// followed by '{', so a path may contain '@'.
struct ArgSpec {
  std::string file;
  std::optional<std::string> sharding;
};

ArgSpec ParseArgSpec(const std::string& spec) {
  const size_t at = spec.rfind("@{");
  if (at == std::string::npos) return {spec, std::nullopt};
  return {spec.substr(0, at), spec.substr(at + 1)};
}

// The --out folder: created if missing. Error: an empty value, or a path that exists and is not
// a folder, or one that cannot be created.
absl::Status PrepareOutDir(const std::string& dir) {
  if (dir.empty()) {
    return absl::InvalidArgumentError("--out: expected a folder for the outputs, got ''");
  }
  struct stat st {};
  if (::stat(dir.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) return absl::OkStatus();
    return absl::InvalidArgumentError(
        absl::StrCat("--out '", dir, "' exists and is not a folder"));
  }
  if (::mkdir(dir.c_str(), 0755) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--out '", dir, "': cannot create the folder: ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

constexpr FlagDef kFlags[] = {
    kDevicesFlag,
    {.name = "arg", .value_name = "FILE.npy[@SHARDING]",
     .description = "the next argument of the program; @SHARDING gives it its own sharding, else "
                    "it gets the program's",
     .repeated = true},
    {.name = "out", .value_name = "DIR",
     .description = "folder to write the outputs to (output_I.npy), created if missing",
     .default_text = "none: outputs are not written"},
    {.name = "repeat", .type = FlagType::kInteger, .value_name = "K",
     .description = "runs of the program; the median time is printed", .default_text = "1",
     .int_min = 1, .int_max = 1'000'000},
    {.name = "result-shape", .value_name = "TYPE[DIMS]",
     .description = "the global shape of the next result of an MLIR bytecode program, e.g. "
                    "f32[16,4]",
     .repeated = true},
    {.name = "partitioner", .value_name = "gspmd|shardy",
     .description = "the SPMD partitioner to compile with", .default_text = "gspmd; shardy for a program with sdy attributes"},
    kMetricsFlag,
    kTraceFlag,
    kPluginFlag,
    kCompileCacheFlag,
};

// The run command's flags, read and checked. Owns copies of the values.
struct RunFlags {
  std::string program_path;
  std::string program_name;  // the file name of program_path, without its folder
  int64_t num_devices = 0;
  int64_t repeat = 1;
  pjrt::Partitioner partitioner = pjrt::Partitioner::kGspmd;
  std::optional<std::string> out_dir;
  std::vector<ArgSpec> args;  // the --arg values, in order
  bool has_result_shape = false;
  std::vector<std::string> result_shapes;  // the --result-shape values, in order
  bool metrics = false;
  std::optional<std::string> trace;
  std::optional<std::string> plugin;
  std::optional<std::string> compile_cache;
};

// Parses `args` into RunFlags. Errors: Flags::Parse's, not exactly one program, a --partitioner
// other than gspmd or shardy (InvalidArgument).
[[nodiscard]] absl::StatusOr<RunFlags> ParseRunFlags(const std::vector<std::string>& args) {
  SHARDRT_ASSIGN_OR_RETURN(Flags flags, Flags::Parse(args, kFlags));
  if (flags.positional().size() != 1) {
    return absl::InvalidArgumentError("expected exactly one PROGRAM.mlir argument");
  }
  RunFlags run;
  run.program_path = flags.positional()[0];
  run.program_name = run.program_path.substr(run.program_path.find_last_of('/') + 1);
  SHARDRT_ASSIGN_OR_RETURN(run.num_devices, flags.GetInt("devices"));
  SHARDRT_ASSIGN_OR_RETURN(run.repeat, flags.GetInt("repeat"));
  if (auto p = flags.Get("partitioner"); p.has_value()) {
    if (*p == "shardy") {
      run.partitioner = pjrt::Partitioner::kShardy;
    } else if (*p != "gspmd") {
      return absl::InvalidArgumentError(
          absl::StrCat("--partitioner: expected gspmd or shardy, got '", *p, "'"));
    }
  }
  run.out_dir = flags.Get("out");
  for (const std::string& spec : flags.GetAll("arg")) run.args.push_back(ParseArgSpec(spec));
  run.has_result_shape = flags.Has("result-shape");
  run.result_shapes = flags.GetAll("result-shape");
  run.metrics = flags.Has("metrics");
  run.trace = flags.Get("trace");
  run.plugin = flags.Get("plugin");
  run.compile_cache = flags.Get("compile-cache");
  return run;
}

// The program and its arguments as read from their files.
struct RunInputs {
  std::string program;
  bool bytecode = false;        // the program is MLIR bytecode
  std::vector<NpyArray> hosts;  // one per --arg, in order
  std::optional<GlobalShapes> global_shapes;  // set for MLIR bytecode only
};

// Reads the program and the --arg arrays, before compiling: MLIR bytecode takes its parameters'
// global shapes from the arrays (its text is not readable for them), and its results' from
// --result-shape. Errors: ReadProgram's, ReadNpy's, a bad --result-shape, or --result-shape with
// a text program (InvalidArgument).
[[nodiscard]] absl::StatusOr<RunInputs> ReadRunInputs(const RunFlags& run) {
  RunInputs in;
  SHARDRT_ASSIGN_OR_RETURN(in.program, ReadProgram(run.program_path));
  in.hosts.reserve(run.args.size());
  for (const ArgSpec& spec : run.args) {
    SHARDRT_ASSIGN_OR_RETURN(NpyArray npy, ReadNpy(spec.file));
    in.hosts.push_back(std::move(npy));
  }
  in.bytecode = IsMlirBytecode(in.program);
  if (in.bytecode) {
    in.global_shapes.emplace();
    for (const NpyArray& h : in.hosts) in.global_shapes->parameters.push_back({h.type, h.shape});
    for (const std::string& text : run.result_shapes) {
      absl::StatusOr<ArrayShape> shape = ParseShape(text);
      if (!shape.ok()) return absl::InvalidArgumentError(absl::StrCat(
          "--result-shape: ", shape.status().message()));
      in.global_shapes->results.push_back(*shape);
    }
  } else if (run.has_result_shape) {
    return absl::InvalidArgumentError(
        "--result-shape is for MLIR bytecode programs; a text program states its result shapes");
  }
  return in;
}

// Compiles the program for run.num_devices partitions. Errors: Compile's; for MLIR bytecode
// without --result-shape, a missing global shape says which flags give it.
[[nodiscard]] absl::StatusOr<ComputationPtr> CompileRunProgram(ComputationClient& client,
                                                               const RunFlags& run,
                                                               const RunInputs& in) {
  CompileRequest request;
  request.name = run.program_name;
  request.program = in.program;
  request.options.num_partitions = run.num_devices;
  request.options.partitioner = run.partitioner;
  request.global_shapes = in.global_shapes;
  absl::StatusOr<ComputationPtr> compiled = client.Compile(request);
  if (!compiled.ok() && in.bytecode && !run.has_result_shape &&
      absl::StrContains(compiled.status().message(), "does not state its global shape")) {
    return absl::Status(compiled.status().code(),
                        absl::StrCat(compiled.status().message(),
                                     "; for MLIR bytecode the --arg arrays give the parameters' "
                                     "shapes and --result-shape TYPE[DIMS] each result's"));
  }
  return compiled;
}

// The layout argument `i` is uploaded with: its own @SHARDING, else the program's. Errors
// (InvalidArgument): the array's shape is not the parameter's, a bad or unplaceable sharding.
[[nodiscard]] absl::StatusOr<std::shared_ptr<const DataLayout>> ArgumentLayout(
    const Computation& computation, size_t i, const ArgSpec& spec, const NpyArray& npy) {
  const auto& expected = computation.parameter_layout(i);
  ArrayShape got{npy.type, npy.shape};
  if (got != expected->global) {
    return absl::InvalidArgumentError(absl::StrCat("argument ", i, " (", spec.file, "): expected ",
                                                   ShapeToString(expected->global), ", got ",
                                                   ShapeToString(got)));
  }
  if (!spec.sharding.has_value()) return expected;
  absl::StatusOr<Sharding> sharding = ParseSharding(*spec.sharding);
  if (!sharding.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("argument ", i, " sharding: ", sharding.status().message()));
  }
  absl::StatusOr<std::shared_ptr<const DataLayout>> placed =
      DataLayout::Create(expected->global, *sharding, computation.devices());
  if (!placed.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("argument ", i, " (", spec.file, ") sharding: ", placed.status().message()));
  }
  return *std::move(placed);
}

// Uploads the --arg arrays, each with its ArgumentLayout. Errors: a --arg count other than the
// program's parameter count (InvalidArgument), ArgumentLayout's, TransferToDevice's.
[[nodiscard]] absl::StatusOr<std::vector<DataPtr>> UploadArguments(
    ComputationClient& client, const Computation& computation, const RunFlags& run,
    const RunInputs& in) {
  if (run.args.size() != computation.num_parameters()) {
    return absl::InvalidArgumentError(absl::StrCat(run.program_path, " takes ",
                                                   computation.num_parameters(),
                                                   " arguments, got ", run.args.size(), " --arg"));
  }
  std::vector<HostArrayView> views;
  std::vector<std::shared_ptr<const DataLayout>> layouts;
  for (size_t i = 0; i < run.args.size(); ++i) {
    const NpyArray& npy = in.hosts[i];
    SHARDRT_ASSIGN_OR_RETURN(std::shared_ptr<const DataLayout> layout,
                             ArgumentLayout(computation, i, run.args[i], npy));
    views.push_back({npy.type, npy.shape, std::as_bytes(std::span(npy.data))});
    layouts.push_back(std::move(layout));
  }
  return client.TransferToDevice(views, layouts);
}

// The outputs of the last run and the time of each run, in milliseconds, sorted.
struct TimedRuns {
  std::vector<DataPtr> outputs;
  std::vector<double> times_ms;
};

// Runs the program `repeat` times on `arguments`, each run timed until its outputs are ready.
// Errors: ExecuteReplicated's and the outputs' ready events'.
[[nodiscard]] absl::StatusOr<TimedRuns> ExecuteTimed(ComputationClient& client,
                                                     const ComputationPtr& computation,
                                                     const std::vector<DataPtr>& arguments,
                                                     int64_t repeat) {
  ExecuteReplicatedOptions options;
  options.resharding = ArgumentResharding::kReshardCopy;
  // Keep donated inputs alive across repeats.
  options.non_donatable_input_indices = computation->donated_parameters();
  TimedRuns runs;
  for (int64_t k = 0; k < repeat; ++k) {
    auto start = std::chrono::steady_clock::now();
    SHARDRT_ASSIGN_OR_RETURN(runs.outputs,
                             client.ExecuteReplicated(*computation, arguments, options));
    for (const DataPtr& o : runs.outputs) {
      const ShardBuffers* b = o->buffers();
      if (b != nullptr && !b->buffers.empty()) {
        SHARDRT_ASSIGN_OR_RETURN(pjrt::Event ready, b->buffers[0].ReadyEvent());
        SHARDRT_RETURN_IF_ERROR(ready.Await());
      }
    }
    runs.times_ms.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
            .count());
  }
  std::sort(runs.times_ms.begin(), runs.times_ms.end());
  return runs;
}

// Downloads the outputs, prints the median time and one line per output on stdout, and writes
// each output to --out when given. Errors: TransferFromDevice's, WriteNpy's.
[[nodiscard]] absl::Status WriteRunOutputs(ComputationClient& client, const RunFlags& run,
                                           const TimedRuns& runs) {
  const std::vector<DataPtr>& outputs = runs.outputs;
  SHARDRT_ASSIGN_OR_RETURN(std::vector<HostArray> results, client.TransferFromDevice(outputs));
  const std::vector<double>& times_ms = runs.times_ms;
  std::printf("ran %s on %lld devices, %lld time(s), median %.3f ms\n", run.program_name.c_str(),
              static_cast<long long>(run.num_devices), static_cast<long long>(run.repeat),
              times_ms[times_ms.size() / 2]);
  for (size_t i = 0; i < results.size(); ++i) {
    std::string where;
    if (run.out_dir.has_value()) {
      // `out/` and `out` name the same folder: one slash between it and the file.
      absl::string_view dir = *run.out_dir;
      while (dir.size() > 1 && dir.back() == '/') dir.remove_suffix(1);
      where = absl::StrCat(dir, dir == "/" ? "" : "/", "output_", i, ".npy");
      NpyArray npy{results[i].type, results[i].dims,
                   std::vector<uint8_t>(reinterpret_cast<const uint8_t*>(results[i].data.data()),
                                        reinterpret_cast<const uint8_t*>(results[i].data.data()) +
                                            results[i].data.size())};
      SHARDRT_RETURN_IF_ERROR(WriteNpy(where, npy));
    }
    std::printf("output %zu: %s %s%s%s\n", i, ShapeToString(outputs[i]->shape()).c_str(),
                outputs[i]->sharding().ToString().c_str(), where.empty() ? "" : " -> ",
                where.c_str());
  }
  return absl::OkStatus();
}

}  // namespace

constinit const CommandDef kRunCommand{
    .name = "run",
    .usage = "PROGRAM.mlir [flags]",
    .summary = "Compiles a StableHLO program (text or MLIR bytecode) for N devices, runs it on "
               ".npy arguments and writes its outputs as global .npy arrays.",
    .flags = kFlags,
    .run = RunCommand};

// The `run` subcommand (see commands.h): the steps above, in order. Prints the median time and
// the outputs on stdout. Errors: each step's, in the order of the steps. Owns everything it
// creates; runs on the calling thread.
absl::Status RunCommand(const std::vector<std::string>& args) {
  SHARDRT_ASSIGN_OR_RETURN(const RunFlags run, ParseRunFlags(args));
  if (run.out_dir.has_value()) SHARDRT_RETURN_IF_ERROR(PrepareOutDir(*run.out_dir));
  SHARDRT_ASSIGN_OR_RETURN(const RunInputs inputs, ReadRunInputs(run));

  CommandReports reports(run.metrics, run.trace);
  SHARDRT_RETURN_IF_ERROR(reports.Start());
  SHARDRT_ASSIGN_OR_RETURN(std::unique_ptr<Runtime> runtime,
                           CreateCliRuntime(run.num_devices, run.plugin, run.compile_cache));
  ComputationClient& client = runtime->client();
  SHARDRT_ASSIGN_OR_RETURN(const ComputationPtr computation,
                           CompileRunProgram(client, run, inputs));
  SHARDRT_ASSIGN_OR_RETURN(const std::vector<DataPtr> arguments,
                           UploadArguments(client, *computation, run, inputs));
  SHARDRT_ASSIGN_OR_RETURN(const TimedRuns runs,
                           ExecuteTimed(client, computation, arguments, run.repeat));
  SHARDRT_RETURN_IF_ERROR(WriteRunOutputs(client, run, runs));
  return reports.Finish();
}

}  // namespace shardrt::cli
