// Transfers: uploads of host arrays (_put, _put_shards), copies on device (_reshard,
// _replicate) and releases (_release_all).
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "absl/functional/function_ref.h"
#include "absl/strings/str_cat.h"
#include "objects.h"
#include "register.h"

namespace shardrt::python {
namespace {

using namespace nb::literals;

// The runtime's devices of `ids` (none: an empty list, the layout's default); ValueError for an
// id the runtime lacks.
std::vector<const pjrt::Device*> DevicesByIds(const PyRuntime& rt,
                                              const std::optional<std::vector<int64_t>>& ids) {
  std::vector<const pjrt::Device*> out;
  if (!ids) return out;
  for (int64_t id : *ids) {
    const pjrt::Device* found = nullptr;
    for (const pjrt::Device* d : rt.runtime->devices()) {
      if (d->id == id) found = d;
    }
    if (found == nullptr) {
      throw nb::value_error(absl::StrCat("device id ", id, " is not one of the runtime's ",
                                         rt.runtime->devices().size(), " devices")
                                .c_str());
    }
    out.push_back(found);
  }
  return out;
}

// The element type of host data of `dtype`: `type_name` when given (it must have dtype's bits),
// else the DLPack type's; ValueError otherwise.
ElementType TypeOf(nb::dlpack::dtype dtype, const std::optional<std::string>& type_name) {
  if (type_name) {
    ElementType t = Value(ParseElementType(*type_name));
    if (ElementSizeInBytes(t) * 8 != dtype.bits) {
      throw nb::value_error(absl::StrCat("element type ", *type_name, " has ",
                                         ElementSizeInBytes(t) * 8, " bits, the array's ",
                                         static_cast<int>(dtype.bits))
                                .c_str());
    }
    return t;
  }
  return Value(FromDlpack(dtype));
}

// _put: uploads the host array `array` split by `sharding` over `device_ids`.
nb::object Put(const RuntimePtr& rt, HostInput array, const PySharding& sharding,
               std::optional<std::vector<int64_t>> device_ids,
               std::optional<std::string> type_name) {
  ComputationClient& client = rt->runtime->client();
  const ElementType type = TypeOf(array.dtype(), type_name);
  ArrayShape shape{type, ShapeOf(array)};
  std::shared_ptr<const DataLayout> layout =
      Value(client.MakeLayout(shape, sharding.get(), DevicesByIds(*rt, device_ids)));
  HostArrayView view{type, shape.dims, BytesOf(array)};
  // `array` (and its memory) stays referenced while the GIL is released.
  return WrapArray(rt, Value(WithoutGil([&] { return client.TransferToDevice(view, layout); })));
}

// _put_shards: one array of `global_shape` from per-device host shards.
nb::object PutShards(const RuntimePtr& rt, std::vector<HostInput> shards, nb::tuple global_shape,
                     const PySharding& sharding, std::optional<std::vector<int64_t>> device_ids,
                     std::optional<std::string> type_name) {
  if (shards.empty()) throw nb::value_error("put_shards: no shards");
  ComputationClient& client = rt->runtime->client();
  const ElementType type = TypeOf(shards[0].dtype(), type_name);
  std::vector<int64_t> dims;
  for (nb::handle h : global_shape) dims.push_back(nb::cast<int64_t>(h));
  std::shared_ptr<const DataLayout> layout =
      Value(client.MakeLayout({type, dims}, sharding.get(), DevicesByIds(*rt, device_ids)));
  std::vector<std::span<const std::byte>> bytes;
  for (size_t i = 0; i < shards.size(); ++i) {
    if (!(shards[i].dtype() == shards[0].dtype())) {
      throw nb::value_error(
          absl::StrCat("put_shards: shard ", i, " has another element type than shard 0").c_str());
    }
    bytes.push_back(BytesOf(shards[i]));
  }
  return WrapArray(
      rt, Value(WithoutGil([&] { return client.TransferShardsToDevice(layout, bytes); })));
}

// Waits for `a`'s data, then wraps what `copy` makes of it on device (GIL released).
nb::object CopyOnDevice(const RuntimePtr& rt, const PyArray& a,
                        absl::FunctionRef<absl::StatusOr<DataPtr>(const DataPtr&)> copy) {
  DataPtr data = a.data();
  return WrapArray(rt, Value(WithoutGil([&]() -> absl::StatusOr<DataPtr> {
                     absl::Status ready = data->Await();
                     if (!ready.ok()) return ready;
                     return copy(data);
                   })));
}

// _reshard: a copy of `a` with `sharding`.
nb::object Reshard(const RuntimePtr& rt, const PyArray& a, const PySharding& sharding) {
  return CopyOnDevice(rt, a, [&](const DataPtr& data) {
    return rt->runtime->client().ReshardData(data, sharding.get());
  });
}

// _replicate: a replicated copy of `a`.
nb::object Replicate(const RuntimePtr& rt, const PyArray& a) {
  return CopyOnDevice(rt, a, [&](const DataPtr& data) {
    return rt->runtime->client().ReplicateShardedData(data);
  });
}

// _release_all: deletes every array of `arrays` together. Every array's data is taken only once
// all entries are checked, so that a bad entry leaves every array as it was.
void ReleaseAll(nb::sequence arrays) {
  std::vector<PyArray*> targets;
  for (nb::handle h : arrays) {
    targets.push_back(&ArrayOf(h, "release", "entry", targets.size()));
  }
  ReleaseArrays(targets);
}

}  // namespace

void RegisterTransfers(nb::module_& m) {
  m.def("_put", &Put, "runtime"_a, "array"_a, "sharding"_a, "device_ids"_a.none(),
        "type_name"_a.none());
  m.def("_put_shards", &PutShards, "runtime"_a, "shards"_a, "global_shape"_a, "sharding"_a,
        "device_ids"_a.none(), "type_name"_a.none());
  m.def("_reshard", &Reshard, "runtime"_a, "array"_a, "sharding"_a);
  m.def("_replicate", &Replicate, "runtime"_a, "array"_a);
  m.def("_release_all", &ReleaseAll, "arrays"_a);
}

}  // namespace shardrt::python
