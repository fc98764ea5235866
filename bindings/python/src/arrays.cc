// shardrt.Array: a sharded array on device, its waits, downloads and NumPy interop.
#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <chrono>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "objects.h"
#include "shardrt/base/mutex.h"
#include "register.h"

namespace shardrt::python {

using namespace nb::literals;

absl::Status AwaitBuffer(const pjrt::Buffer& buffer) {
  absl::StatusOr<pjrt::Event> ready = buffer.ReadyEvent();
  return ready.ok() ? ready->Await() : ready.status();
}

namespace {

// Waits until every buffer of `data` (computed, not a pending placeholder) is ready on its
// device, at most until `deadline`: then DeadlineExceeded naming the data. PJRT events have no
// timed wait, so each reports through a callback to one shared waiter (which outlives a timeout
// for the callbacks still to come).
absl::Status AwaitBuffersUntil(const Data& data, std::chrono::steady_clock::time_point deadline,
                               double timeout_s) {
  struct Waiter {
    Mutex mu;
    CondVar cv;
    size_t pending ABSL_GUARDED_BY(mu) = 0;
    absl::Status status ABSL_GUARDED_BY(mu);
  };
  const ShardBuffers* buffers = data.buffers();
  if (buffers == nullptr) return data.Usable();
  auto waiter = std::make_shared<Waiter>();
  {
    MutexLock lock(waiter->mu);
    waiter->pending = buffers->buffers.size();
  }
  for (const pjrt::Buffer& b : buffers->buffers) {
    absl::StatusOr<pjrt::Event> ready = b.ReadyEvent();
    if (!ready.ok()) return ready.status();
    absl::Status registered = ready->OnReady([waiter](absl::Status s) {
      MutexLock lock(waiter->mu);
      if (!s.ok() && waiter->status.ok()) waiter->status = std::move(s);
      if (--waiter->pending == 0) waiter->cv.NotifyAll();
    });
    if (!registered.ok()) return registered;
  }
  MutexLock lock(waiter->mu);
  while (waiter->pending != 0) {
    if (waiter->cv.WaitUntil(lock, deadline) == std::cv_status::timeout &&
        waiter->pending != 0) {
      return absl::DeadlineExceededError(absl::StrCat("data ", data.layout().ToString(),
                                                      " is still being computed after ",
                                                      timeout_s, " s"));
    }
  }
  return waiter->status;
}

// Waits for `data` to be computed and its buffers to be ready, bounded by `timeout_s` when
// given (see PyArray::BlockUntilReady). Needs no GIL.
absl::Status AwaitReady(const Data& data, std::optional<double> timeout_s) {
  const bool bounded = timeout_s && *timeout_s < 1e9;
  if (!bounded) {
    absl::Status status = data.Await();
    for (size_t i = 0; status.ok() && i < data.buffers()->buffers.size(); ++i) {
      status = AwaitBuffer(data.buffers()->buffers[i]);
    }
    return status;
  }
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                            std::chrono::duration<double>(std::max(*timeout_s, 0.0)));
  absl::Status status = data.Await(absl::Seconds(*timeout_s));
  return status.ok() ? AwaitBuffersUntil(data, deadline, *timeout_s) : status;
}

// Array.__array__: the download as NumPy, converted to `dtype` unless None (NumPy's protocol;
// `copy` is accepted and ignored: the download is always a new array).
nb::object ArrayProtocol(const PyArray& a, nb::handle dtype, nb::handle /*copy*/) {
  nb::object out = a.ToNumpy();
  return dtype.is_none() ? out : out.attr("astype")(dtype, "copy"_a = false);
}

}  // namespace

// --- PyArray -----------------------------------------------------------------------------------

std::vector<int64_t> PyArray::device_ids() const {
  std::vector<int64_t> ids;
  for (const pjrt::Device* d : layout().devices) ids.push_back(d->id);
  return ids;
}

std::string PyArray::state() const {
  if (data_ == nullptr) return "deleted";
  switch (data_->state()) {
    case Data::State::kPending: return "pending";
    case Data::State::kReady: return "ready";
    case Data::State::kFailed: return "failed";
    case Data::State::kDonated: return "donated";
  }
  return "unknown";
}

std::vector<PyShard> PyArray::shards() const {
  std::vector<PyShard> out;
  for (size_t i = 0; i < layout().devices.size(); ++i) out.push_back({runtime_, data(), i});
  return out;
}

std::string PyArray::Repr() const {
  if (deleted()) return "shardrt.Array(deleted)";
  return absl::StrCat("shardrt.Array(", layout().ToString(), ", ", state(), ")");
}

void PyArray::BlockUntilReady(std::optional<double> timeout_s) const {
  DataPtr data = this->data();  // a copy: another thread may delete this array meanwhile
  Check(WithoutGil([&] { return AwaitReady(*data, timeout_s); }));
}

nb::object PyArray::ToNumpy() const {
  const size_t n = static_cast<size_t>(nbytes());
  auto bytes = std::make_unique<std::byte[]>(n);
  DownloadTo({bytes.get(), n});
  return NumpyOwning(std::move(bytes), layout().global.type, layout().global.dims);
}

void PyArray::DownloadInto(HostOutput out) const {
  // The destination's element type must be the array's (bf16 also into uint16 bits, the form
  // NumPy arrays of ml_dtypes.bfloat16 take through the extension).
  const ElementType type = layout().global.type;
  const absl::StatusOr<ElementType> dest = FromDlpack(out.dtype());
  if (!dest.ok() || (*dest != type && !(type == ElementType::kBF16 && *dest == ElementType::kU16))) {
    throw nb::value_error(absl::StrCat("download_into: the array is ", ElementTypeName(type),
                                       ", the destination ",
                                       dest.ok() ? ElementTypeName(*dest) : "of another type")
                              .c_str());
  }
  if (out.nbytes() != static_cast<size_t>(nbytes())) {
    throw nb::value_error(absl::StrCat("download_into: destination has ", out.nbytes(),
                                       " bytes, the array ", nbytes())
                              .c_str());
  }
  DownloadTo({static_cast<std::byte*>(out.data()), out.nbytes()});
}

void PyArray::DownloadTo(std::span<std::byte> into) const {
  DataPtr data = this->data();  // a copy: another thread may delete this array meanwhile
  Check(WithoutGil([&]() -> absl::Status {
    absl::Status status = data->Await();
    if (!status.ok()) return status;
    return runtime_->runtime->client().TransferFromDevice({&data, 1}, {&into, 1});
  }));
}

// --- arrays in general -------------------------------------------------------------------------

nb::object WrapArray(const RuntimePtr& runtime, DataPtr data) {
  return nb::cast(PyArray(runtime, std::move(data)));
}

PyArray& ArrayOf(nb::handle h, const char* what, const char* noun, size_t i) {
  PyArray* a = nullptr;
  if (!nb::try_cast<PyArray*>(h, a) || a == nullptr) {
    throw nb::type_error(absl::StrCat(what, ": ", noun, " ", i, " is a ",
                                      nb::inst_name(h).c_str(), ", expected shardrt.Array")
                             .c_str());
  }
  return *a;
}

void ReleaseArrays(absl::Span<PyArray* const> arrays) {
  std::vector<DataPtr> data;
  for (PyArray* a : arrays) {
    if (!a->deleted()) data.push_back(a->Take());
  }
  WithoutGil([&] { Data::ReleaseAll(data); });
}

void RegisterArrays(nb::module_& m) {
  nb::class_<PyArray>(m, "Array",
                      "A sharded array on device: global shape, element type, sharding and one "
                      "buffer per device. Arrays returned by call_async are placeholders until "
                      "their execution is dispatched (state 'pending'); block_until_ready waits "
                      "until the devices have computed them. Thread-safe.")
      .def_prop_ro("shape", &PyArray::shape)
      .def_prop_ro("ndim", &PyArray::ndim)
      .def_prop_ro("type_name", &PyArray::type_name, "XLA element type name, e.g. 'f32'.")
      .def_prop_ro("dtype", &PyArray::dtype, "The NumPy dtype of the elements.")
      .def_prop_ro("sharding", &PyArray::sharding)
      .def_prop_ro("device_ids", &PyArray::device_ids, "Device of each shard, in shard order.")
      .def_prop_ro("size", &PyArray::size)
      .def_prop_ro("nbytes", &PyArray::nbytes)
      .def_prop_ro("state", &PyArray::state, "'pending', 'ready', 'failed' or 'donated'.")
      .def_prop_ro("is_ready", &PyArray::is_ready)
      .def_prop_ro("shards", &PyArray::shards)
      .def(
          "__dlpack__",
          [](const PyArray& a, nb::kwargs) {
            // One buffer holds the whole array only where no dimension is split: one device,
            // or replicated (then the first device's copy).
            const DataLayout& layout = a.layout();
            if (layout.shard_dims != layout.global.dims) {
              PyErr_SetString(
                  PyExc_BufferError,
                  absl::StrCat("__dlpack__: the array is split over ", layout.devices.size(),
                               " devices (", layout.sharding.ToString(),
                               "), so no one buffer holds it: use .shards[i].__dlpack__(), "
                               "to_numpy(), or replicate it first")
                      .c_str());
              throw nb::python_error();
            }
            return nb::cast(ShardView(PyShard{a.runtime(), a.data(), 0}));
          },
          "kwargs"_a,
          "The whole array's device memory, zero-copy, where one buffer holds it: an array on "
          "one device, or replicated (the first device's copy). BufferError for a split array. "
          "As Shard.__dlpack__, the view keeps the array alive.")
      .def("__dlpack_device__", [](const PyArray&) { return std::make_pair(1, 0); },
           "(kDLCPU, 0): the CPU plugin's buffers are host memory.")
      .def("block_until_ready",
           [](nb::handle self, std::optional<double> timeout) {
             nb::cast<const PyArray&>(self).BlockUntilReady(timeout);
             return nb::borrow(self);
           },
           "timeout"_a = nb::none(),
           "Waits until the array is computed; returns it. Raises the execution's error, "
           "TimeoutError after `timeout` seconds.")
      .def("to_numpy", &PyArray::ToNumpy,
           "Downloads the global array as a new NumPy array (waits for placeholders).")
      .def(
          "to_jax",
          [](nb::handle self, nb::handle mesh) {
            return nb::module_::import_("shardrt").attr("to_jax")(self, "mesh"_a = mesh);
          },
          "mesh"_a = nb::none(),
          "The array as a jax.Array, shard by shard without a global host copy (each shard's "
          "memory goes to its JAX device, zero-copy where JAX takes host memory in place); "
          "see shardrt.to_jax for the device rule, `mesh` and the errors.")
      .def("__array__", &ArrayProtocol, "dtype"_a = nb::none(), "copy"_a = nb::none(),
           "NumPy's array protocol: the download, as `dtype` when given.")
      // noconvert: a destination that is not C-contiguous and writable is refused (TypeError),
      // not silently replaced by a converted copy that the download would fill instead.
      .def("download_into", &PyArray::DownloadInto, "out"_a.noconvert(),
           "Downloads the global array into `out` (C-contiguous, writable, exactly nbytes; "
           "another array is a TypeError).")
      .def("delete",
           [](PyArray& a) {
             PyArray* one = &a;
             ReleaseArrays({&one, 1});
           },
           "Drops this array's data now (its buffers are freed unless other arrays or "
           "executions still use them); using the array afterwards is a ValueError.")
      // As jax.Array.is_deleted: True once deleted and once donated (its buffers belong to an
      // execution's output), False for pending, ready and failed arrays.
      .def_prop_ro("is_deleted",
                   [](const PyArray& a) {
                     return a.deleted() || a.data()->state() == Data::State::kDonated;
                   })
      .def("__repr__", &PyArray::Repr);
}

}  // namespace shardrt::python
