// Limits: the bounds shardrt holds every outside input to, in one place. Each is checked before
// anything is allocated for the input, and exceeding one is an InvalidArgument error that names
// the limit, the input and the value (docs/errors.md lists them with their messages).
#pragma once

#include <cstdint>

namespace shardrt::limits {

// Rank (number of dimensions) of any array or sharding. XLA has no fixed bound; real programs
// stay far below it.
inline constexpr int64_t kMaxRank = 64;

// Devices one sharding may describe (tile assignments, shard-info). Pure math: a sharding may
// describe more devices than this process has (a pod).
inline constexpr int64_t kMaxShardingDevices = int64_t{1} << 20;

// Entries of one sharding's geometry tables (rank x devices integers per table, shard-info and
// every layout): bounds a high rank and many devices together (64 Mi entries, 512 MiB a table).
inline constexpr int64_t kMaxGeometryEntries = int64_t{1} << 26;

// CPU devices a Runtime creates (the plugin's cost grows faster than linearly: 1,024 take ~1.4 s
// on 2 cores, 4,096 took over 3 minutes).
inline constexpr int64_t kMaxCpuDevices = 1024;

// Bytes of one array: its element count times element size must fit, and stay within this.
inline constexpr int64_t kMaxArrayBytes = int64_t{1} << 40;

// Bytes of a file read whole (programs, .npy arrays): regular files only, at most this large.
inline constexpr int64_t kMaxFileBytes = int64_t{4} << 30;

// Bytes of one sharding in text form. Large enough that the explicit device list of any
// sharding within kMaxShardingDevices parses back (1 Mi ids of up to 7 digits and a comma:
// 8 MiB), with room for the rest of the text.
inline constexpr int64_t kMaxShardingTextBytes = int64_t{16} << 20;

// Brackets ((), [], {}, <>) open at once in a program's text: the plugin's MLIR parser recurses
// once or twice per level and crashes its stack at about 10,000 (attributes such as [[[...]]]
// or {a = {a = ...}}); real programs (regions, types, dense literals) nest a few tens deep.
inline constexpr int64_t kMaxProgramNesting = 256;

}  // namespace shardrt::limits
