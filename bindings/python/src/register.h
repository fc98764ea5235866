// The extension's topics: each adds its classes and functions to the module shardrt._shardrt.
// module.cc calls each once, in the order listed here. Each needs the GIL.
#pragma once

#include <nanobind/nanobind.h>

namespace shardrt::python {

// shardrt.Sharding (sharding.cc).
void RegisterSharding(nanobind::module_& m);
// shardrt.Shard: one device's part of an array, its download and DLPack view (shards.cc).
void RegisterShards(nanobind::module_& m);
// shardrt.Array: its properties, waits, downloads, NumPy interop and deletion (arrays.cc).
void RegisterArrays(nanobind::module_& m);
// shardrt.Computation and _compile (computations.cc).
void RegisterComputations(nanobind::module_& m);
// _Runtime and _create_runtime (runtime.cc).
void RegisterRuntime(nanobind::module_& m);
// Uploads, on-device copies and releases: _put, _put_shards, _reshard, _replicate,
// _release_all (transfers.cc).
void RegisterTransfers(nanobind::module_& m);
// metrics_json, metrics_report, metrics_reset and _Trace (observability.cc).
void RegisterObservability(nanobind::module_& m);
// Text generation over llm::Session: _LlmSession, _Generation, _open_session (llm.cc; only in
// a build with the model, SHARDRT_PYTHON_LLM).
void RegisterLlm(nanobind::module_& m);

}  // namespace shardrt::python
