#include "sharding/proto.h"

#include <limits>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

namespace shardrt {
namespace {

absl::Status ProtoError(absl::string_view message) {
  return absl::InvalidArgumentError(absl::StrCat("OpSharding: ", message));
}

absl::StatusOr<Sharding> TiledFromProto(const xla::OpSharding& proto) {
  Shape dims(proto.tile_assignment_dimensions().begin(),
             proto.tile_assignment_dimensions().end());
  const bool iota = !proto.iota_reshape_dims().empty();
  if (iota && !proto.tile_assignment_devices().empty()) {
    return ProtoError("both tile_assignment_devices and iota_reshape_dims are set");
  }
  if (iota && proto.iota_reshape_dims_size() != proto.iota_transpose_perm_size()) {
    return ProtoError(absl::StrCat("iota_reshape_dims has ", proto.iota_reshape_dims_size(),
                                   " entries but iota_transpose_perm has ",
                                   proto.iota_transpose_perm_size()));
  }
  absl::StatusOr<TileAssignment> tiles;
  if (iota) {
    TileAssignment::IotaForm form;
    form.reshape_dims.assign(proto.iota_reshape_dims().begin(), proto.iota_reshape_dims().end());
    form.perm.assign(proto.iota_transpose_perm().begin(), proto.iota_transpose_perm().end());
    tiles = TileAssignment::Iota(std::move(dims), std::move(form));
  } else {
    tiles = TileAssignment::Create(std::move(dims),
                                   std::vector<int64_t>(proto.tile_assignment_devices().begin(),
                                                        proto.tile_assignment_devices().end()));
  }
  if (!tiles.ok()) return ProtoError(tiles.status().message());

  std::vector<SubgroupType> types;
  if (proto.replicate_on_last_tile_dim()) {
    if (!proto.last_tile_dims().empty()) {
      return ProtoError("both replicate_on_last_tile_dim and last_tile_dims are set");
    }
    types.push_back(SubgroupType::kReplicated);
  }
  for (int type : proto.last_tile_dims()) {
    if (type == xla::OpSharding::MANUAL) {
      types.push_back(SubgroupType::kManual);
    } else if (type == xla::OpSharding::REPLICATED) {
      types.push_back(SubgroupType::kReplicated);
    } else {
      return ProtoError(absl::StrCat("last_tile_dims type ", type, " is not supported"));
    }
  }
  if (static_cast<int64_t>(types.size()) > tiles->rank()) {
    return ProtoError(absl::StrCat(types.size(), " subgroup dims but the tile assignment has ",
                                   tiles->rank(), " dims"));
  }
  absl::StatusOr<Sharding> sharding = Sharding::Tiled(*std::move(tiles), types);
  if (!sharding.ok()) return ProtoError(sharding.status().message());
  return sharding;
}

}  // namespace

xla::OpSharding ToOpSharding(const Sharding& sharding) {
  xla::OpSharding proto;
  switch (sharding.kind()) {
    case Sharding::Kind::kReplicated:
      proto.set_type(xla::OpSharding::REPLICATED);
      return proto;
    case Sharding::Kind::kManual:
      proto.set_type(xla::OpSharding::MANUAL);
      return proto;
    case Sharding::Kind::kMaximal:
      proto.set_type(xla::OpSharding::MAXIMAL);
      proto.add_tile_assignment_devices(sharding.maximal_device());
      return proto;
    case Sharding::Kind::kTiled:
      break;
  }
  proto.set_type(xla::OpSharding::OTHER);
  const TileAssignment& tiles = sharding.tile_assignment();
  for (int64_t d : tiles.dims()) proto.add_tile_assignment_dimensions(d);
  if (std::optional<TileAssignment::IotaForm> iota = tiles.AsIota()) {
    for (int64_t d : iota->reshape_dims) proto.add_iota_reshape_dims(d);
    if (iota->perm.empty()) {
      for (size_t i = 0; i < iota->reshape_dims.size(); ++i) {
        proto.add_iota_transpose_perm(static_cast<int32_t>(i));
      }
    } else {
      for (int64_t p : iota->perm) proto.add_iota_transpose_perm(static_cast<int32_t>(p));
    }
  } else {
    for (int64_t d : tiles.devices()) proto.add_tile_assignment_devices(d);
  }
  if (sharding.ReplicateOnLastTileDim()) {
    proto.set_replicate_on_last_tile_dim(true);
  } else {
    for (SubgroupType type : sharding.subgroup_types()) {
      proto.add_last_tile_dims(type == SubgroupType::kManual ? xla::OpSharding::MANUAL
                                                              : xla::OpSharding::REPLICATED);
    }
  }
  return proto;
}

absl::StatusOr<Sharding> FromOpSharding(const xla::OpSharding& proto) {
  switch (proto.type()) {
    case xla::OpSharding::REPLICATED:
      return Sharding::Replicated();
    case xla::OpSharding::MANUAL:
      return Sharding::Manual();
    case xla::OpSharding::MAXIMAL: {
      if (proto.tile_assignment_devices_size() != 1) {
        return ProtoError(absl::StrCat("a MAXIMAL sharding needs exactly one entry in "
                                       "tile_assignment_devices, got ",
                                       proto.tile_assignment_devices_size()));
      }
      absl::StatusOr<Sharding> maximal = Sharding::Maximal(proto.tile_assignment_devices(0));
      if (!maximal.ok()) return ProtoError(maximal.status().message());
      return maximal;
    }
    case xla::OpSharding::OTHER:
      return TiledFromProto(proto);
    case xla::OpSharding::TUPLE:
      return ProtoError("tuple shardings are not supported");
    default:
      return ProtoError(absl::StrCat("sharding type ", static_cast<int>(proto.type()),
                                     " is not supported"));
  }
}

std::string SerializeSharding(const Sharding& sharding) {
  return ToOpSharding(sharding).SerializeAsString();
}

absl::StatusOr<Sharding> DeserializeSharding(absl::string_view bytes) {
  xla::OpSharding proto;
  if (bytes.size() > static_cast<size_t>(std::numeric_limits<int>::max()) ||
      !proto.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    return absl::InvalidArgumentError("bytes are not a valid serialized OpSharding");
  }
  return FromOpSharding(proto);
}

}  // namespace shardrt
