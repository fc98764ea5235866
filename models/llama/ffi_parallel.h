// How the model's FFI handlers use the plugin's intra-op thread pool: work cut into chunks that
// the calling thread and up to one task per other pool thread take from a shared counter. The
// caller runs whatever no task has taken, so it never waits for a task that has not started
// (no deadlock when every pool thread is busy running a device's program, as with 8 devices on
// 2 cores); it waits only for chunks already running. Tasks that start late find no work.
#pragma once

#include <cstdint>
#include <functional>

#include "xla/ffi/api/ffi.h"

namespace shardrt::llama {

// Runs run(c) for every c in [0, count) on the caller and `pool`'s threads; returns when all
// have finished. `partitions`: the devices whose programs run at once on this machine's cores;
// a call takes at most its share of the cores (cores / partitions threads, the caller
// included): with 8 devices on 2 cores every call runs on its caller alone (helper tasks would
// only add switches between threads that all have work). `run` must be safe to call from
// several threads at once (distinct c).
void RunChunks(xla::ffi::ThreadPool& pool, int64_t count, int64_t partitions,
               std::function<void(int64_t)> run);

}  // namespace shardrt::llama
