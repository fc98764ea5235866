// shardrt.Shard: one device's part of an array, its download and its DLPack view.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>

#include "objects.h"
#include "register.h"

namespace shardrt::python {
namespace {

using namespace nb::literals;

const pjrt::Buffer& ShardBuffer(const PyShard& s) {
  const ShardBuffers* buffers = s.data->buffers();
  if (buffers == nullptr) Raise(s.data->Usable());
  return buffers->buffers[s.index];
}

// Shard.index: the slices of the global array the shard holds.
nb::tuple ShardIndex(const PyShard& s) {
  const ShardGeometry& g = s.data->layout().geometry;
  nb::list slices;
  const int64_t d = static_cast<int64_t>(s.index);
  for (int64_t k = 0; k < g.rank(); ++k) {
    const int64_t start = g.holds_data(d) ? g.start(d)[k] : 0;
    const int64_t limit = g.holds_data(d) ? g.limit(d)[k] : 0;
    slices.append(nb::slice(nb::int_(start), nb::int_(limit), nb::none()));
  }
  return nb::tuple(slices);
}

// Shard.to_numpy: waits for the data, then downloads the shard's (padded) buffer.
nb::object ShardToNumpy(const PyShard& s) {
  const DataLayout& layout = s.data->layout();
  int64_t elements = 1;
  for (int64_t d : layout.shard_dims) elements *= d;
  const size_t n = static_cast<size_t>(elements * ElementSizeInBytes(layout.global.type));
  auto bytes = std::make_unique<std::byte[]>(n);
  Check(WithoutGil([&]() -> absl::Status {
    absl::Status status = s.data->Await();
    if (!status.ok()) return status;
    absl::StatusOr<pjrt::Event> done = s.data->buffers()->buffers[s.index].ToHost(bytes.get(), n);
    return done.ok() ? done->Await() : done.status();
  }));
  return NumpyOwning(std::move(bytes), layout.global.type, layout.shard_dims);
}

// Shard `s`'s device memory as an ndarray of `dtype` for the framework Args (see ShardView).
template <typename... Args>
nb::ndarray<Args...> ViewOf(const PyShard& s, nb::dlpack::dtype dtype) {
  Check(WithoutGil([&]() -> absl::Status {
    absl::Status status = s.data->Await();
    return status.ok() ? AwaitBuffer(s.data->buffers()->buffers[s.index]) : status;
  }));
  const pjrt::Buffer& buffer = ShardBuffer(s);
  void* pointer = Value(buffer.HostPointer());
  const DataLayout& layout = s.data->layout();
  std::vector<size_t> shape(layout.shard_dims.begin(), layout.shard_dims.end());
  // The view counts as an external reference: while it lives the plugin keeps the memory for
  // this buffer (a call donating the array copies instead), so the view never reads reused
  // memory.
  Check(buffer.AcquireExternalReference());
  struct View {
    DataPtr data;
    const pjrt::Buffer* buffer;
  };
  auto* keep = new View{s.data, &buffer};
  nb::capsule owner(keep, [](void* p) noexcept {
    auto* view = static_cast<View*>(p);
    (void)view->buffer->ReleaseExternalReference();
    delete view;
  });
  return nb::ndarray<Args...>(pointer, shape.size(), shape.data(), owner, nullptr, dtype,
                              nb::device::cpu::value, 0);
}

// Shard._numpy_view: the shard's device memory as a read-only NumPy array, zero-copy (bf16 as
// ml_dtypes.bfloat16, which NumPy cannot take through DLPack).
nb::object ShardNumpyView(const PyShard& s) {
  const ElementType type = s.data->layout().global.type;
  const bool bf16 = type == ElementType::kBF16;
  nb::object out = nb::cast(
      ViewOf<nb::numpy, nb::ro>(s, DlpackType(bf16 ? ElementType::kU16 : type)),
      nb::rv_policy::reference);
  return bf16 ? out.attr("view")(NumpyDtype(type)) : out;
}

}  // namespace

// ShardView: see objects.h.
nb::ndarray<> ShardView(const PyShard& s) {
  return ViewOf<>(s, DlpackType(s.data->layout().global.type));
}

void RegisterShards(nb::module_& m) {
  nb::class_<PyShard>(m, "Shard", "One device's part of an array (a padded shard where the "
                                  "split is uneven).")
      .def_prop_ro("device_id", [](const PyShard& s) { return s.data->layout().devices[s.index]->id; })
      .def_prop_ro("index", &ShardIndex,
                   "The slices of the global array this shard holds (empty ranges for a "
                   "device holding only padding).")
      .def_prop_ro("shape", [](const PyShard& s) { return ToTuple(s.data->layout().shard_dims); },
                   "The shard's buffer shape (padded).")
      .def_prop_ro("type_name",
                   [](const PyShard& s) {
                     return std::string(ElementTypeName(s.data->layout().global.type));
                   },
                   "XLA element type name, e.g. 'f32'.")
      .def("to_numpy", &ShardToNumpy, "Downloads the shard's buffer (padded) as a new NumPy array.")
      .def("__dlpack__",
           [](const PyShard& s, nb::kwargs) {
             // An ndarray without a framework leaves the extension as a DLPack capsule.
             return nb::cast(ShardView(s));
           },
           "kwargs"_a,
           "The shard's device memory, zero-copy (CPU plugin only: its device memory is host "
           "memory). The view keeps the array alive, and while it lives a call donating the "
           "array copies it instead of reusing its memory.")
      .def("__dlpack_device__", [](const PyShard&) { return std::make_pair(1, 0); },
           "(kDLCPU, 0): the CPU plugin's buffers are host memory.")
      .def("_numpy_view", &ShardNumpyView,
           "The shard's device memory as a read-only NumPy array, zero-copy (CPU plugin "
           "only), bf16 included (as ml_dtypes.bfloat16). The view keeps the array alive, as "
           "__dlpack__'s does; used by Array.to_jax.");
}

}  // namespace shardrt::python
