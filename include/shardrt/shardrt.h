// shardrt: SPMD (sharded, multi-device) XLA programs on sharded data through the PJRT C API.
// This umbrella header includes every public header of libshardrt (those of shardrt/llm/ are
// libshardrt_llm's); each can also be included on its own.
//
// Start at shardrt/runtime/runtime.h (the front door). Ownership, everywhere: Create*/Compile*/
// Transfer* return owning values (unique_ptr, or shared_ptr where sharing is real: data,
// layouts, computations, the PJRT client); accessors return references borrowed from their
// owner; every object holding device state keeps the PJRT client alive. Errors are
// absl::Status values with canonical codes; nothing in the library aborts on bad input.
#pragma once

#include "shardrt/base/array_shape.h"
#include "shardrt/base/element_type.h"
#include "shardrt/base/file_kind.h"
#include "shardrt/base/json_writer.h"
#include "shardrt/base/limits.h"
#include "shardrt/base/metrics.h"
#include "shardrt/base/mutex.h"
#include "shardrt/base/status_macros.h"
#include "shardrt/base/thread_pool.h"
#include "shardrt/base/trace.h"
#include "shardrt/client/computation.h"
#include "shardrt/client/computation_client.h"
#include "shardrt/client/persistent_cache.h"
#include "shardrt/data/data.h"
#include "shardrt/data/data_layout.h"
#include "shardrt/data/host_array.h"
#include "shardrt/executor/executor.h"
#include "shardrt/pjrt/buffer.h"
#include "shardrt/pjrt/client.h"
#include "shardrt/pjrt/compile_options.h"
#include "shardrt/pjrt/device.h"
#include "shardrt/pjrt/event.h"
#include "shardrt/pjrt/executable.h"
#include "shardrt/pjrt/ffi.h"
#include "shardrt/pjrt/named_value.h"
#include "shardrt/pjrt/opaque.h"
#include "shardrt/pjrt/plugin.h"
#include "shardrt/pjrt/plugin_log.h"
#include "shardrt/program/array_spec.h"
#include "shardrt/program/builder.h"
#include "shardrt/program/program_text.h"
#include "shardrt/runtime/plugin_search.h"
#include "shardrt/runtime/runtime.h"
#include "shardrt/sharding/geometry.h"
#include "shardrt/sharding/mesh.h"
#include "shardrt/sharding/shape.h"
#include "shardrt/sharding/sharding.h"
#include "shardrt/sharding/split.h"
#include "shardrt/sharding/text.h"
#include "shardrt/sharding/tile_assignment.h"
