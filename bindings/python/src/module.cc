// shardrt._shardrt: the Python extension over libshardrt's public headers.
//
// The classes here are the package's public types (shardrt.Array, shardrt.Computation,
// shardrt.Sharding, shardrt.Shard); shardrt/__init__.py adds the Runtime's Python-side
// conveniences (plugin discovery, JAX programs, meshes). Every call that may wait (transfers,
// compilation, execution, waiting on placeholders) releases the GIL; the library is thread-safe,
// so Python threads may share a runtime, its arrays and computations. Errors become Python
// exceptions carrying the library's message: ValueError for bad arguments (InvalidArgument,
// OutOfRange, FailedPrecondition, NotFound, AlreadyExists), TimeoutError for DeadlineExceeded,
// RuntimeError for the rest (the plugin's failures, Internal, Cancelled, ...).
//
// One file per topic (register.h lists them); common.h holds what they share (errors, GIL
// release, element types, host arrays), objects.h the types more than one topic uses.
#include <nanobind/nanobind.h>

#include "register.h"

NB_MODULE(_shardrt, m) {
  using namespace shardrt::python;
  m.doc() = "shardrt's extension: SPMD XLA programs on sharded data through the PJRT C API.";
  RegisterSharding(m);
  RegisterShards(m);
  RegisterArrays(m);
  RegisterComputations(m);
  RegisterRuntime(m);
  RegisterTransfers(m);
  RegisterObservability(m);
#ifdef SHARDRT_PYTHON_LLM  // built with the model (bindings/python/CMakeLists.txt)
  RegisterLlm(m);
#endif
}
