// Sharding <-> XLA's OpSharding proto (our minimal copy in proto/xla_data.proto, with XLA's
// field numbers, so the bytes are interchangeable with XLA's).
//
// Writing follows XLA's HloSharding::ToProto: a tiled sharding whose device list is a
// transposed iota is written in the V2 form (iota_reshape_dims / iota_transpose_perm),
// otherwise as tile_assignment_devices; `last_tile_dim_replicate` becomes
// replicate_on_last_tile_dim, other subgroups last_tile_dims. Reading accepts both forms and
// canonicalizes (sharding.h), so FromOpSharding(ToOpSharding(s)) == s and the proto agrees
// with the text form.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "shardrt/sharding/sharding.h"
#include "xla_data.pb.h"

namespace shardrt {

xla::OpSharding ToOpSharding(const Sharding& sharding);

// Error: InvalidArgument naming the field for inconsistent protos (device count differing
// from the tile dims, ids out of range or repeated, both device forms set, bad iota perm,
// both replicate_on_last_tile_dim and last_tile_dims); tuple, unknown and other types are
// rejected as unsupported.
[[nodiscard]] absl::StatusOr<Sharding> FromOpSharding(const xla::OpSharding& proto);

// The serialized bytes of ToOpSharding(sharding).
std::string SerializeSharding(const Sharding& sharding);
// Parses serialized OpSharding bytes. Error: InvalidArgument if they are not a valid
// OpSharding, or as FromOpSharding.
[[nodiscard]] absl::StatusOr<Sharding> DeserializeSharding(absl::string_view bytes);

}  // namespace shardrt
