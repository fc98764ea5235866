// shardrt.Sharding: how an array is split over devices.
#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "absl/strings/str_cat.h"
#include "objects.h"
#include "register.h"

namespace shardrt::python {
namespace {

using namespace nb::literals;

// A sharding from a mesh (axis names and sizes, optional device ids) and a partition spec.
PySharding Named(std::vector<std::pair<std::string, int64_t>> axes,
                 std::vector<int64_t> device_ids, std::vector<std::vector<std::string>> spec) {
  std::vector<MeshAxis> mesh_axes;
  for (auto& [name, size] : axes) mesh_axes.push_back({name, size});
  Mesh mesh = Value(Mesh::Create(std::move(mesh_axes), std::move(device_ids)));
  return PySharding(Value(NamedSharding(mesh, spec)));
}

// Sharding.kind: the sharding's kind as a word.
std::string KindName(const PySharding& s) {
  switch (s.get().kind()) {
    case Sharding::Kind::kReplicated: return "replicated";
    case Sharding::Kind::kMaximal: return "maximal";
    case Sharding::Kind::kManual: return "manual";
    case Sharding::Kind::kTiled: return "tiled";
  }
  return "unknown";
}

// Sharding.subgroup_types: the kinds of the trailing subgroup dims as words.
std::vector<std::string> SubgroupTypeNames(const PySharding& s) {
  std::vector<std::string> out;
  for (SubgroupType t : s.get().subgroup_types()) {
    out.push_back(t == SubgroupType::kManual ? "manual" : "replicated");
  }
  return out;
}

}  // namespace

void RegisterSharding(nb::module_& m) {
  nb::class_<PySharding>(m, "Sharding",
                         "An XLA sharding (OpSharding semantics): how an array is split over "
                         "devices. Immutable.")
      .def(nb::new_(&PySharding::Parse), "text"_a,
           "Parses XLA sharding text, e.g. '{devices=[4,2]<=[8]}' or '{replicated}'. "
           "Raises ValueError naming what is wrong.")
      .def_static("replicated", [] { return PySharding(Sharding::Replicated()); },
                  "The replicated sharding: every device holds the whole array.")
      .def_static("named", &Named, "axes"_a, "device_ids"_a, "spec"_a,
                  "The sharding of a mesh (axes: [(name, size)], device_ids: row-major mesh "
                  "array, [] for 0..N-1) and a partition spec (per array dim, the mesh axes it "
                  "is split over), as JAX's NamedSharding.")
      .def_prop_ro("num_devices",
                   [](const PySharding& s) { return s.get().num_devices(); },
                   "Devices the sharding spans (None for replicated: any number).")
      .def_prop_ro("is_replicated", [](const PySharding& s) { return s.get().IsReplicated(); })
      .def_prop_ro("kind", &KindName, "'replicated', 'maximal', 'manual' or 'tiled'.")
      .def_prop_ro("tile_assignment_dims",
                   [](const PySharding& s) { return ToTuple(s.get().tile_assignment().dims()); },
                   "Tiled: the tile assignment's dims, trailing subgroup dims included (as "
                   "XLA's HloSharding.tile_assignment_dimensions()); () for the other kinds.")
      .def_prop_ro("tile_assignment_devices",
                   [](const PySharding& s) { return s.get().tile_assignment().devices(); },
                   "Tiled: the device (partition) of each tile, row-major over "
                   "tile_assignment_dims; [] for the other kinds.")
      .def_prop_ro("subgroup_types", &SubgroupTypeNames,
                   "Tiled: the kind of each trailing subgroup dim of the tile assignment, "
                   "'manual' or 'replicated' (['replicated'] is XLA's "
                   "last_tile_dim_replicate); [] otherwise.")
      .def_prop_ro("maximal_device",
                   [](const PySharding& s) -> std::optional<int64_t> {
                     if (!s.get().IsMaximal()) return std::nullopt;
                     return s.get().maximal_device();
                   },
                   "Maximal: the device (partition) holding the whole array; None otherwise.")
      .def("__str__", &PySharding::ToString)
      .def("__repr__",
           [](const PySharding& s) { return absl::StrCat("shardrt.Sharding('", s.ToString(), "')"); })
      .def("__eq__", [](const PySharding& a, const PySharding& b) { return a.get() == b.get(); })
      .def("__hash__", [](const PySharding& s) { return nb::hash(nb::str(s.ToString().c_str())); });
}

}  // namespace shardrt::python
