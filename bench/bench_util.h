// Shared pieces of the benchmarks: one runtime per device count, the k-argument `x + 1`
// program, timing helpers, and the line protocol that bench/run drives (see ServeLoop).
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "shardrt/base/json_writer.h"
#include "shardrt/client/computation_client.h"
#include "shardrt/pjrt/client.h"
#include "shardrt/runtime/runtime.h"

namespace shardrt::bench {

// The runtime (the library's front door) for `devices` devices, created on first use and kept
// for the process (one per device count). The plugin is found as for any user
// (SHARDRT_PJRT_PLUGIN selects another, e.g. CUDA; the first `devices` of its devices are used).
inline absl::StatusOr<Runtime*> RuntimeFor(int devices) {
  static auto* runtimes = new std::map<int, std::unique_ptr<Runtime>>();
  if (auto it = runtimes->find(devices); it != runtimes->end()) return it->second.get();
  RuntimeOptions options;
  options.devices = devices;
  auto runtime = Runtime::Create(options);
  if (!runtime.ok()) return runtime.status();
  Runtime* r = runtime->get();
  (*runtimes)[devices] = std::move(*runtime);
  return r;
}

// RuntimeFor(devices)'s PJRT client.
inline absl::StatusOr<std::shared_ptr<pjrt::Client>> ClientFor(int devices) {
  auto runtime = RuntimeFor(devices);
  if (!runtime.ok()) return runtime.status();
  return (*runtime)->pjrt_client();
}

// RuntimeFor(devices)'s ComputationClient. Aborts the benchmark (CheckOk) if the runtime cannot
// be made.
inline ComputationClient& ComputationClientFor(int devices);

// Rows per device and columns of every argument of the `x + 1` program: f32[kRows * D, kCols]
// split on dim 0, so each device holds f32[kRows, kCols] (4 KiB) per argument.
inline constexpr int64_t kRows = 8;
inline constexpr int64_t kCols = 128;

// StableHLO text of main(x_0 .. x_{k-1}) -> (x_0 + 1, ..., x_{k-1} + 1), every argument and
// result f32[kRows * devices, kCols] with sharding {devices=[D,1]<=[D]} ({replicated} for one
// device), mhlo.num_partitions = devices.
inline std::string AddOneProgram(int devices, int k) {
  const std::string type = absl::StrCat("tensor<", kRows * devices, "x", kCols, "xf32>");
  const std::string sharding =
      devices == 1 ? "{replicated}" : absl::StrCat("{devices=[", devices, ",1]<=[", devices, "]}");
  const std::string attr = absl::StrCat(" {mhlo.sharding = \"", sharding, "\"}");
  std::string text = absl::StrCat("module @add_one_", k, " attributes {mhlo.num_partitions = ",
                                  devices, " : i32, mhlo.num_replicas = 1 : i32} {\n",
                                  "  func.func public @main(");
  for (int i = 0; i < k; ++i) {
    absl::StrAppend(&text, i ? ", " : "", "%arg", i, ": ", type, attr);
  }
  absl::StrAppend(&text, ") -> (");
  for (int i = 0; i < k; ++i) absl::StrAppend(&text, i ? ", " : "", type, attr);
  absl::StrAppend(&text, ") {\n    %one = stablehlo.constant dense<1.0> : ", type, "\n");
  for (int i = 0; i < k; ++i) {
    absl::StrAppend(&text, "    %r", i, " = stablehlo.add %arg", i, ", %one : ", type, "\n");
  }
  absl::StrAppend(&text, "    return ");
  for (int i = 0; i < k; ++i) absl::StrAppend(&text, i ? ", " : "", "%r", i);
  absl::StrAppend(&text, " : ");
  for (int i = 0; i < k; ++i) absl::StrAppend(&text, i ? ", " : "", type);
  absl::StrAppend(&text, "\n  }\n}\n");
  return text;
}

inline int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Dies with `status` when it is not OK (benchmarks have no error path worth keeping).
inline void CheckOk(const absl::Status& status, const char* what) {
  if (!status.ok()) {
    std::fprintf(stderr, "%s: %s\n", what, status.ToString().c_str());
    std::exit(1);
  }
}

inline ComputationClient& ComputationClientFor(int devices) {
  auto runtime = RuntimeFor(devices);
  CheckOk(runtime.status(), "runtime");
  return (*runtime)->client();
}

// The line protocol of the interleaving driver (bench/run). One request per line on stdin, one
// JSON object per line on stdout:
//   <command> <words...>   ->  {"ok":true,...} or {"ok":false,"error":"..."}
//   quit                   ->  (exits)
// `handler` gets the words of a request and appends the reply's fields after "ok" to `fields`
// (each starting with a comma, e.g. `,"samples_ns":[1,2]`), or returns an error.
using Handler =
    std::function<absl::Status(const std::vector<std::string>& words, std::string& fields)>;

inline int ServeLoop(const Handler& handler) {
  std::string line;
  while (std::getline(std::cin, line)) {
    std::istringstream in(line);
    std::vector<std::string> words;
    for (std::string w; in >> w;) words.push_back(w);
    if (words.empty()) continue;
    if (words[0] == "quit") break;
    std::string fields;
    absl::Status status = handler(words, fields);
    const std::string reply =
        status.ok() ? absl::StrCat("{\"ok\":true", fields, "}\n")
                    : absl::StrCat("{\"ok\":false,\"error\":", JsonString(status.ToString()), "}\n");
    std::fputs(reply.c_str(), stdout);
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace shardrt::bench
