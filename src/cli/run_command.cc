// shardrt run PROGRAM.mlir --devices N [--arg FILE.npy[@SHARDING]]... [--out DIR] [--repeat K]
//             [--metrics] [--plugin PATH] [--partitioner gspmd|shardy]
// Compiles the program for N partitions, uploads the arguments (each with its own sharding, or
// the program's parameter sharding), runs it K times and writes the outputs as global arrays.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <sys/stat.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "shardrt/base/status_macros.h"
#include "cli/commands.h"
#include "cli/flags.h"
#include "cli/npy.h"
#include "cli/runtime_setup.h"
#include "shardrt/sharding/text.h"

namespace shardrt::cli {
namespace {

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read '", path, "'"));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

absl::Status RunCommand(const std::vector<std::string>& args) {
  SHARDRT_ASSIGN_OR_RETURN(
      Flags flags,
      Flags::Parse(args, {.with_value = {"devices", "arg", "out", "repeat", "plugin",
                                         "partitioner", "trace"},
                          .boolean = {"metrics"}}));
  if (flags.positional().size() != 1) {
    return absl::InvalidArgumentError("expected exactly one PROGRAM.mlir argument");
  }
  const std::string program_path = flags.positional()[0];
  SHARDRT_ASSIGN_OR_RETURN(int64_t num_devices, flags.GetInt("devices", 8, 1, 4096));
  SHARDRT_ASSIGN_OR_RETURN(int64_t repeat, flags.GetInt("repeat", 1, 1, 1'000'000));
  pjrt::Partitioner partitioner = pjrt::Partitioner::kGspmd;
  if (auto p = flags.Get("partitioner"); p.has_value()) {
    if (*p == "shardy") {
      partitioner = pjrt::Partitioner::kShardy;
    } else if (*p != "gspmd") {
      return absl::InvalidArgumentError(
          absl::StrCat("--partitioner: expected gspmd or shardy, got '", *p, "'"));
    }
  }
  SHARDRT_ASSIGN_OR_RETURN(std::string program, ReadFile(program_path));

  CommandReports reports(flags.Has("metrics"), flags.Get("trace"));
  SHARDRT_RETURN_IF_ERROR(reports.Start());
  SHARDRT_ASSIGN_OR_RETURN(std::unique_ptr<Runtime> runtime,
                           CreateCliRuntime(num_devices, flags.Get("plugin")));
  ComputationClient* client = &runtime->client();
  CompileRequest request;
  request.name = program_path.substr(program_path.find_last_of('/') + 1);
  request.program = program;
  request.options.num_partitions = num_devices;
  request.options.partitioner = partitioner;
  SHARDRT_ASSIGN_OR_RETURN(ComputationPtr computation, client->Compile(request));

  const std::vector<std::string> arg_specs = flags.GetAll("arg");
  if (arg_specs.size() != computation->num_parameters()) {
    return absl::InvalidArgumentError(absl::StrCat(program_path, " takes ",
                                                   computation->num_parameters(),
                                                   " arguments, got ", arg_specs.size(), " --arg"));
  }
  std::vector<NpyArray> hosts;
  std::vector<HostArrayView> views;
  std::vector<std::shared_ptr<const DataLayout>> layouts;
  hosts.reserve(arg_specs.size());
  for (size_t i = 0; i < arg_specs.size(); ++i) {
    const std::string& spec = arg_specs[i];
    const size_t at = spec.find('@');
    const std::string file = spec.substr(0, at);
    const auto& expected = computation->parameter_layout(i);
    SHARDRT_ASSIGN_OR_RETURN(NpyArray npy, ReadNpy(file));
    ArrayShape got{npy.type, npy.shape};
    if (got != expected->global) {
      return absl::InvalidArgumentError(absl::StrCat("argument ", i, " (", file, "): expected ",
                                                     ShapeToString(expected->global), ", got ",
                                                     ShapeToString(got)));
    }
    std::shared_ptr<const DataLayout> layout = expected;
    if (at != std::string::npos) {
      absl::StatusOr<Sharding> sharding = ParseSharding(spec.substr(at + 1));
      if (!sharding.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat("argument ", i, " sharding: ", sharding.status().message()));
      }
      SHARDRT_ASSIGN_OR_RETURN(layout, DataLayout::Create(expected->global, *sharding,
                                                          computation->devices()));
    }
    hosts.push_back(std::move(npy));
    views.push_back({hosts.back().type, hosts.back().shape,
                     std::as_bytes(std::span(hosts.back().data))});
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
  const std::optional<std::string> out_dir = flags.Get("out");
  if (out_dir.has_value()) ::mkdir(out_dir->c_str(), 0755);
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
