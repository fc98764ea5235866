// XLA's sharding text: parse and print.
//
// Accepted grammar (whitespace allowed between tokens):
//   sharding   := '{' body suffix* '}'
//   body       := 'replicated' | 'manual' | 'maximal' 'device' '=' INT
//               | 'devices' '=' '[' INT (',' INT)* ']' assignment
//   assignment := INT (',' INT)*                                 explicit, row-major
//               | '<=' '[' INT (',' INT)* ']' ('T' '(' INT (',' INT)* ')')?   iota form
//   suffix     := 'last_tile_dim_replicate'
//               | 'last_tile_dims' '=' '{' TYPE (',' TYPE)* '}'    TYPE: manual | replicated
//               | 'metadata' '=' '{' ... '}'                       skipped
// Tuple shardings, {unknown}, {unreduced} and shard groups are rejected as unsupported.
//
// Canonical text (what PrintSharding writes by default; parsing it and printing again gives
// it back unchanged):
//   {replicated}   {manual}   {maximal device=K}
//   {devices=[d0,...]<ids> [last_tile_dim_replicate | last_tile_dims={manual[, replicated]}]}
// where <ids> is the iota form when the (canonical, see sharding.h) device list is a
// transposed iota: `<=[N]` for 0..N-1 in order, else `<=[r0,...]T(p0,...)` with the coarsest
// reshape dims (as XLA prints its own iota tile assignments); otherwise the explicit list
// `i0,i1,...`. All of it is text XLA parses into the same placement.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "shardrt/base/export.h"
#include "shardrt/sharding/sharding.h"

namespace shardrt {

// How PrintSharding writes the device list of a tiled sharding.
enum class DeviceListStyle : uint8_t {
  kCanonical,  // iota form when possible, else explicit (the canonical text)
  kExplicit,   // always the explicit list, as older XLA and PyTorch/XLA print it
};

// Parses one sharding in XLA's text form. Never crashes on any input.
// Error: InvalidArgument "sharding text at position P: ..." with the 0-based byte offset of
// the problem: malformed text, a device list whose size differs from the product of the tile
// dims, duplicate or out-of-range ids, bad iota dims or permutation, non-positive tile dims,
// integers that overflow int64, unsupported forms.
[[nodiscard]] SHARDRT_EXPORT absl::StatusOr<Sharding> ParseSharding(absl::string_view text);

// Prints `sharding` as XLA text.
SHARDRT_EXPORT std::string PrintSharding(const Sharding& sharding,
                                         DeviceListStyle style = DeviceListStyle::kCanonical);

}  // namespace shardrt
