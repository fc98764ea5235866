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

}  // namespace

constinit const CommandDef kRunCommand{
    .name = "run",
    .usage = "PROGRAM.mlir [flags]",
    .summary = "Compiles a StableHLO program (text or MLIR bytecode) for N devices, runs it on "
               ".npy arguments and writes its outputs as global .npy arrays.",
    .flags = kFlags,
    .run = RunCommand};

absl::Status RunCommand(const std::vector<std::string>& args) {
  SHARDRT_ASSIGN_OR_RETURN(Flags flags, Flags::Parse(args, kFlags));
  if (flags.positional().size() != 1) {
    return absl::InvalidArgumentError("expected exactly one PROGRAM.mlir argument");
  }
  const std::string program_path = flags.positional()[0];
  SHARDRT_ASSIGN_OR_RETURN(int64_t num_devices,
                           flags.GetInt("devices"));
  SHARDRT_ASSIGN_OR_RETURN(int64_t repeat, flags.GetInt("repeat"));
  pjrt::Partitioner partitioner = pjrt::Partitioner::kGspmd;
  if (auto p = flags.Get("partitioner"); p.has_value()) {
    if (*p == "shardy") {
      partitioner = pjrt::Partitioner::kShardy;
    } else if (*p != "gspmd") {
      return absl::InvalidArgumentError(
          absl::StrCat("--partitioner: expected gspmd or shardy, got '", *p, "'"));
    }
  }
  const std::optional<std::string> out_dir = flags.Get("out");
  if (out_dir.has_value()) SHARDRT_RETURN_IF_ERROR(PrepareOutDir(*out_dir));
  SHARDRT_ASSIGN_OR_RETURN(std::string program, ReadProgram(program_path));

  // The arguments, read before compiling: MLIR bytecode takes its parameters' global shapes
  // from them (its text is not readable for them), and its results' from --result-shape.
  const std::vector<std::string> arg_specs = flags.GetAll("arg");
  std::vector<ArgSpec> specs;
  std::vector<NpyArray> hosts;
  hosts.reserve(arg_specs.size());
  for (const std::string& spec : arg_specs) {
    specs.push_back(ParseArgSpec(spec));
    SHARDRT_ASSIGN_OR_RETURN(NpyArray npy, ReadNpy(specs.back().file));
    hosts.push_back(std::move(npy));
  }
  std::optional<GlobalShapes> global_shapes;
  const bool bytecode = IsMlirBytecode(program);
  if (bytecode) {
    global_shapes.emplace();
    for (const NpyArray& h : hosts) global_shapes->parameters.push_back({h.type, h.shape});
    for (const std::string& text : flags.GetAll("result-shape")) {
      absl::StatusOr<ArrayShape> shape = ParseShape(text);
      if (!shape.ok()) return absl::InvalidArgumentError(absl::StrCat(
          "--result-shape: ", shape.status().message()));
      global_shapes->results.push_back(*shape);
    }
  } else if (flags.Has("result-shape")) {
    return absl::InvalidArgumentError(
        "--result-shape is for MLIR bytecode programs; a text program states its result shapes");
  }

  CommandReports reports(flags.Has("metrics"), flags.Get("trace"));
  SHARDRT_RETURN_IF_ERROR(reports.Start());
  SHARDRT_ASSIGN_OR_RETURN(std::unique_ptr<Runtime> runtime,
                           CreateCliRuntime(num_devices, flags.Get("plugin"), flags.Get("compile-cache")));
  ComputationClient* client = &runtime->client();
  CompileRequest request;
  request.name = program_path.substr(program_path.find_last_of('/') + 1);
  request.program = program;
  request.options.num_partitions = num_devices;
  request.options.partitioner = partitioner;
  request.global_shapes = global_shapes;
  absl::StatusOr<ComputationPtr> compiled = client->Compile(request);
  if (!compiled.ok() && bytecode && !flags.Has("result-shape") &&
      absl::StrContains(compiled.status().message(), "does not state its global shape")) {
    return absl::Status(compiled.status().code(),
                        absl::StrCat(compiled.status().message(),
                                     "; for MLIR bytecode the --arg arrays give the parameters' "
                                     "shapes and --result-shape TYPE[DIMS] each result's"));
  }
  SHARDRT_RETURN_IF_ERROR(compiled.status());
  const ComputationPtr& computation = *compiled;

  if (arg_specs.size() != computation->num_parameters()) {
    return absl::InvalidArgumentError(absl::StrCat(program_path, " takes ",
                                                   computation->num_parameters(),
                                                   " arguments, got ", arg_specs.size(), " --arg"));
  }
  std::vector<HostArrayView> views;
  std::vector<std::shared_ptr<const DataLayout>> layouts;
  for (size_t i = 0; i < arg_specs.size(); ++i) {
    const std::string& file = specs[i].file;
    const auto& expected = computation->parameter_layout(i);
    const NpyArray& npy = hosts[i];
    ArrayShape got{npy.type, npy.shape};
    if (got != expected->global) {
      return absl::InvalidArgumentError(absl::StrCat("argument ", i, " (", file, "): expected ",
                                                     ShapeToString(expected->global), ", got ",
                                                     ShapeToString(got)));
    }
    std::shared_ptr<const DataLayout> layout = expected;
    if (specs[i].sharding.has_value()) {
      absl::StatusOr<Sharding> sharding = ParseSharding(*specs[i].sharding);
      if (!sharding.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat("argument ", i, " sharding: ", sharding.status().message()));
      }
      absl::StatusOr<std::shared_ptr<const DataLayout>> placed =
          DataLayout::Create(expected->global, *sharding, computation->devices());
      if (!placed.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat("argument ", i, " (", file, ") sharding: ", placed.status().message()));
      }
      layout = *std::move(placed);
    }
    views.push_back({npy.type, npy.shape, std::as_bytes(std::span(npy.data))});
    layouts.push_back(std::move(layout));
  }
  SHARDRT_ASSIGN_OR_RETURN(std::vector<DataPtr> arguments,
                           client->TransferToDevice(views, layouts));

  ExecuteReplicatedOptions options;
  options.resharding = ArgumentResharding::kReshardCopy;
  // Keep donated inputs alive across repeats.
  options.non_donatable_input_indices = computation->donated_parameters();
  std::vector<DataPtr> outputs;
  std::vector<double> times_ms;
  for (int64_t k = 0; k < repeat; ++k) {
    auto start = std::chrono::steady_clock::now();
    SHARDRT_ASSIGN_OR_RETURN(outputs, client->ExecuteReplicated(*computation, arguments, options));
    for (const DataPtr& o : outputs) {
      const ShardBuffers* b = o->buffers();
      if (b != nullptr && !b->buffers.empty()) {
        SHARDRT_ASSIGN_OR_RETURN(pjrt::Event ready, b->buffers[0].ReadyEvent());
        SHARDRT_RETURN_IF_ERROR(ready.Await());
      }
    }
    times_ms.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
            .count());
  }
  SHARDRT_ASSIGN_OR_RETURN(std::vector<HostArray> results, client->TransferFromDevice(outputs));
  std::sort(times_ms.begin(), times_ms.end());
  std::printf("ran %s on %lld devices, %lld time(s), median %.3f ms\n", request.name.c_str(),
              static_cast<long long>(num_devices), static_cast<long long>(repeat),
              times_ms[times_ms.size() / 2]);
  for (size_t i = 0; i < results.size(); ++i) {
    std::string where;
    if (out_dir.has_value()) {
      where = absl::StrCat(*out_dir, "/output_", i, ".npy");
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
  return reports.Finish();
}

}  // namespace shardrt::cli
