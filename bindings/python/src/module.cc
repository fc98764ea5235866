// shardrt._shardrt: the Python extension over libshardrt's public headers.
//
// The classes here are the package's public types (shardrt.Array, shardrt.Computation,
// shardrt.Sharding); shardrt/__init__.py adds the Runtime's Python-side conveniences (plugin
// discovery, JAX programs, meshes). Every call that may wait (transfers, compilation, execution,
// waiting on placeholders) releases the GIL; the library is thread-safe, so Python threads may
// share a runtime, its arrays and computations. Errors become Python exceptions carrying the
// library's message: ValueError for bad arguments (InvalidArgument, OutOfRange,
// FailedPrecondition, NotFound, AlreadyExists), TimeoutError for DeadlineExceeded, RuntimeError
// for the rest (the plugin's failures, Internal, Cancelled, ...).
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "shardrt/shardrt.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace shardrt::python {
namespace {

// Raises the Python exception for `status` (which must not be OK). Needs the GIL.
[[noreturn]] void Raise(const absl::Status& status) {
  const std::string message(status.message());
  switch (status.code()) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kOutOfRange:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kNotFound:
    case absl::StatusCode::kAlreadyExists:
      throw nb::value_error(message.c_str());
    case absl::StatusCode::kDeadlineExceeded:
      PyErr_SetString(PyExc_TimeoutError, message.c_str());
      throw nb::python_error();
    default:
      throw std::runtime_error(message);
  }
}

void Check(const absl::Status& status) {
  if (!status.ok()) Raise(status);
}

template <typename T>
T Value(absl::StatusOr<T> value) {
  if (!value.ok()) Raise(value.status());
  return *std::move(value);
}

// The DLPack element type of `type` (bf16 as DLPack's bfloat).
nb::dlpack::dtype DlpackType(ElementType type) {
  using Code = nb::dlpack::dtype_code;
  auto make = [](Code code, int bits) {
    return nb::dlpack::dtype{static_cast<uint8_t>(code), static_cast<uint8_t>(bits), 1};
  };
  switch (type) {
    case ElementType::kPred: return make(Code::Bool, 8);
    case ElementType::kS8: return make(Code::Int, 8);
    case ElementType::kS16: return make(Code::Int, 16);
    case ElementType::kS32: return make(Code::Int, 32);
    case ElementType::kS64: return make(Code::Int, 64);
    case ElementType::kU8: return make(Code::UInt, 8);
    case ElementType::kU16: return make(Code::UInt, 16);
    case ElementType::kU32: return make(Code::UInt, 32);
    case ElementType::kU64: return make(Code::UInt, 64);
    case ElementType::kF16: return make(Code::Float, 16);
    case ElementType::kF32: return make(Code::Float, 32);
    case ElementType::kF64: return make(Code::Float, 64);
    case ElementType::kBF16: return make(Code::Bfloat, 16);
    case ElementType::kInvalid: break;
  }
  return make(Code::UInt, 8);
}

// The element type of a DLPack dtype, or an error naming it.
absl::StatusOr<ElementType> FromDlpack(nb::dlpack::dtype dtype) {
  if (dtype.lanes == 1) {
    for (ElementType t :
         {ElementType::kPred, ElementType::kS8, ElementType::kS16, ElementType::kS32,
          ElementType::kS64, ElementType::kU8, ElementType::kU16, ElementType::kU32,
          ElementType::kU64, ElementType::kF16, ElementType::kF32, ElementType::kF64,
          ElementType::kBF16}) {
      if (DlpackType(t) == dtype) return t;
    }
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unsupported element type (DLPack code ", dtype.code, ", ", dtype.bits, " bits, ",
      dtype.lanes, " lanes); supported: bool, int8-64, uint8-64, float16/32/64, bfloat16"));
}

// A host array from Python: C-contiguous, on the CPU (NumPy, or anything with __dlpack__ or the
// buffer protocol).
using HostInput = nb::ndarray<nb::ro, nb::c_contig, nb::device::cpu>;
// A writable host destination.
using HostOutput = nb::ndarray<nb::c_contig, nb::device::cpu>;

std::vector<int64_t> ShapeOf(const HostInput& a) {
  std::vector<int64_t> dims(a.ndim());
  for (size_t i = 0; i < a.ndim(); ++i) dims[i] = static_cast<int64_t>(a.shape(i));
  return dims;
}

std::span<const std::byte> BytesOf(const HostInput& a) {
  return {static_cast<const std::byte*>(a.data()), a.nbytes()};
}

nb::tuple ToTuple(absl::Span<const int64_t> v) {
  nb::list l;
  for (int64_t x : v) l.append(x);
  return nb::tuple(l);
}

// A NumPy array of `type` and `dims` owning `bytes` (moved in).
nb::object NumpyOwning(std::unique_ptr<std::byte[]> bytes, ElementType type,
                       absl::Span<const int64_t> dims) {
  std::vector<size_t> shape(dims.begin(), dims.end());
  std::byte* raw = bytes.release();
  nb::capsule owner(raw, [](void* p) noexcept { delete[] static_cast<std::byte*>(p); });
  // NumPy has no bfloat16 of its own: bf16 comes as uint16 bits (the package views them as
  // ml_dtypes.bfloat16).
  const nb::dlpack::dtype dtype =
      DlpackType(type == ElementType::kBF16 ? ElementType::kU16 : type);
  nb::ndarray<nb::numpy> array(raw, shape.size(), shape.data(), owner, nullptr, dtype);
  return nb::cast(array, nb::rv_policy::reference);
}

// Waits until `buffer`'s value is computed (or failed).
absl::Status AwaitBuffer(const pjrt::Buffer& buffer) {
  absl::StatusOr<pjrt::Event> ready = buffer.ReadyEvent();
  return ready.ok() ? ready->Await() : ready.status();
}

// Waits until every buffer of `data` (computed, not a pending placeholder) is ready on its
// device, at most until `deadline`: then DeadlineExceeded naming the data. PJRT events have no
// timed wait, so each reports through a callback to one shared waiter (which outlives a timeout
// for the callbacks still to come).
absl::Status AwaitBuffersUntil(const Data& data, std::chrono::steady_clock::time_point deadline,
                               double timeout_s) {
  struct Waiter {
    std::mutex mu;
    std::condition_variable cv;
    size_t pending = 0;
    absl::Status status;
  };
  const ShardBuffers* buffers = data.buffers();
  if (buffers == nullptr) return data.Usable();
  auto waiter = std::make_shared<Waiter>();
  waiter->pending = buffers->buffers.size();
  for (const pjrt::Buffer& b : buffers->buffers) {
    absl::StatusOr<pjrt::Event> ready = b.ReadyEvent();
    if (!ready.ok()) return ready.status();
    absl::Status registered = ready->OnReady([waiter](absl::Status s) {
      std::lock_guard<std::mutex> lock(waiter->mu);
      if (!s.ok() && waiter->status.ok()) waiter->status = std::move(s);
      if (--waiter->pending == 0) waiter->cv.notify_all();
    });
    if (!registered.ok()) return registered;
  }
  std::unique_lock<std::mutex> lock(waiter->mu);
  if (!waiter->cv.wait_until(lock, deadline, [&] { return waiter->pending == 0; })) {
    return absl::DeadlineExceededError(absl::StrCat("data ", data.layout().ToString(),
                                                    " is still being computed after ",
                                                    timeout_s, " s"));
  }
  return waiter->status;
}

// ---------------------------------------------------------------------------------------------

// A runtime, shared by every array and computation made through it (they keep it alive).
struct PyRuntime {
  std::unique_ptr<Runtime> runtime;
  ~PyRuntime() {
    nb::gil_scoped_release release;  // waits for the executor's work
    runtime.reset();
  }
};
using RuntimePtr = std::shared_ptr<PyRuntime>;

class PySharding {
 public:
  explicit PySharding(Sharding s) : sharding_(std::move(s)) {}
  static PySharding Parse(const std::string& text) {
    return PySharding(Value(ParseSharding(text)));
  }
  const Sharding& get() const { return sharding_; }
  std::string ToString() const { return PrintSharding(sharding_); }

 private:
  Sharding sharding_;
};

class PyArray;
class PyComputation;

nb::object WrapArray(const RuntimePtr& runtime, DataPtr data);

// One device's part of an array.
struct PyShard {
  RuntimePtr runtime;
  DataPtr data;
  size_t index = 0;  // position in the layout's device list
};

class PyArray {
 public:
  PyArray(RuntimePtr runtime, DataPtr data) : runtime_(std::move(runtime)), data_(std::move(data)) {}

  // The array's data; ValueError once release() / delete() dropped it.
  const DataPtr& data() const {
    if (data_ == nullptr) throw nb::value_error("the array was deleted (shardrt.release / delete)");
    return data_;
  }
  // Drops this array's reference to its data (the array is unusable afterwards).
  DataPtr Take() { return std::move(data_); }
  bool deleted() const { return data_ == nullptr; }
  const RuntimePtr& runtime() const { return runtime_; }
  const DataLayout& layout() const { return data()->layout(); }

  nb::tuple shape() const { return ToTuple(layout().global.dims); }
  std::string type_name() const { return std::string(ElementTypeName(layout().global.type)); }
  PySharding sharding() const { return PySharding(layout().sharding); }
  std::vector<int64_t> device_ids() const {
    std::vector<int64_t> ids;
    for (const pjrt::Device* d : layout().devices) ids.push_back(d->id);
    return ids;
  }
  int64_t size() const { return layout().geometry.num_elements(); }
  int64_t nbytes() const { return size() * ElementSizeInBytes(layout().global.type); }
  std::string state() const {
    if (data_ == nullptr) return "deleted";
    switch (data_->state()) {
      case Data::State::kPending: return "pending";
      case Data::State::kReady: return "ready";
      case Data::State::kFailed: return "failed";
      case Data::State::kDonated: return "donated";
    }
    return "unknown";
  }
  bool is_ready() const { return data()->state() != Data::State::kPending; }

  // Waits until the array is computed (placeholders) and its buffers are ready on every device.
  // With a timeout, both waits are bounded by it: the placeholder's and the device work's (a
  // launch returns before its buffers are ready). NaN, infinite or huge timeouts wait for good.
  void BlockUntilReady(std::optional<double> timeout_s) const {
    DataPtr data = this->data();  // a copy: another thread may delete this array meanwhile
    const bool bounded = timeout_s && *timeout_s < 1e9;
    absl::Status status;
    {
      nb::gil_scoped_release release;
      const auto deadline =
          std::chrono::steady_clock::now() +
          std::chrono::duration_cast<std::chrono::steady_clock::duration>(
              std::chrono::duration<double>(bounded ? std::max(*timeout_s, 0.0) : 0.0));
      status = bounded ? data->Await(absl::Seconds(*timeout_s)) : data->Await();
      if (status.ok() && bounded) {
        status = AwaitBuffersUntil(*data, deadline, *timeout_s);
      } else if (status.ok()) {
        for (const pjrt::Buffer& b : data->buffers()->buffers) {
          status = AwaitBuffer(b);
          if (!status.ok()) break;
        }
      }
    }
    Check(status);
  }

  nb::object ToNumpy() const {
    const size_t n = static_cast<size_t>(nbytes());
    auto bytes = std::make_unique<std::byte[]>(n);
    DownloadTo({bytes.get(), n});
    return NumpyOwning(std::move(bytes), layout().global.type, layout().global.dims);
  }

  // Downloads into `out` (C-contiguous, exactly this array's bytes).
  void DownloadInto(HostOutput out) const {
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

  // Waits for the data (placeholders), then downloads the global array into `into` (exactly
  // nbytes()), with the GIL released.
  void DownloadTo(std::span<std::byte> into) const {
    DataPtr data = this->data();  // a copy: another thread may delete this array meanwhile
    absl::Status status;
    {
      nb::gil_scoped_release release;
      status = data->Await();
      if (status.ok()) {
        status = runtime_->runtime->client().TransferFromDevice({&data, 1}, {&into, 1});
      }
    }
    Check(status);
  }

  std::vector<PyShard> shards() const {
    std::vector<PyShard> out;
    for (size_t i = 0; i < layout().devices.size(); ++i) out.push_back({runtime_, data(), i});
    return out;
  }

  std::string Repr() const {
    if (deleted()) return "shardrt.Array(deleted)";
    return absl::StrCat("shardrt.Array(", layout().ToString(), ", ", state(), ")");
  }

 private:
  RuntimePtr runtime_;
  DataPtr data_;
};

nb::object WrapArray(const RuntimePtr& runtime, DataPtr data) {
  return nb::cast(PyArray(runtime, std::move(data)));
}

// The Array `h` is, else TypeError naming it as `what`'s `noun` i (e.g. "main: argument 3").
PyArray& ArrayOf(nb::handle h, const char* what, const char* noun, size_t i) {
  PyArray* a = nullptr;
  if (!nb::try_cast<PyArray*>(h, a) || a == nullptr) {
    throw nb::type_error(absl::StrCat(what, ": ", noun, " ", i, " is a ",
                                      nb::inst_name(h).c_str(), ", expected shardrt.Array")
                             .c_str());
  }
  return *a;
}

const DataPtr& DataOf(nb::handle h, size_t i, const char* what) {
  return ArrayOf(h, what, "argument", i).data();
}

// Deletes `arrays` (they become unusable) and frees their buffers together (Data::ReleaseAll).
void ReleaseArrays(absl::Span<PyArray* const> arrays) {
  std::vector<DataPtr> data;
  for (PyArray* a : arrays) {
    if (!a->deleted()) data.push_back(a->Take());
  }
  nb::gil_scoped_release release;
  Data::ReleaseAll(data);
}

// --- shards ------------------------------------------------------------------------------------

const pjrt::Buffer& ShardBuffer(const PyShard& s) {
  const ShardBuffers* buffers = s.data->buffers();
  if (buffers == nullptr) Raise(s.data->Usable());
  return buffers->buffers[s.index];
}

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

nb::object ShardToNumpy(const PyShard& s) {
  const DataLayout& layout = s.data->layout();
  int64_t elements = 1;
  for (int64_t d : layout.shard_dims) elements *= d;
  const size_t n = static_cast<size_t>(elements * ElementSizeInBytes(layout.global.type));
  auto bytes = std::make_unique<std::byte[]>(n);
  absl::Status status;
  {
    nb::gil_scoped_release release;
    status = s.data->Await();
    if (status.ok()) {
      absl::StatusOr<pjrt::Event> done = s.data->buffers()->buffers[s.index].ToHost(bytes.get(), n);
      status = done.ok() ? done->Await() : done.status();
    }
  }
  Check(status);
  return NumpyOwning(std::move(bytes), layout.global.type, layout.shard_dims);
}

// The shard's device memory as an ndarray view (CPU plugin: host memory), owning a reference
// to the data so the buffer outlives the view.
nb::ndarray<> ShardView(const PyShard& s) {
  absl::Status status;
  {
    nb::gil_scoped_release release;
    status = s.data->Await();
    if (status.ok()) status = AwaitBuffer(s.data->buffers()->buffers[s.index]);
  }
  Check(status);
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
  return nb::ndarray<>(pointer, shape.size(), shape.data(), owner, nullptr,
                       DlpackType(layout.global.type), nb::device::cpu::value, 0);
}

// --- computations ------------------------------------------------------------------------------

class PyComputation {
 public:
  PyComputation(RuntimePtr runtime, ComputationPtr c)
      : runtime_(std::move(runtime)), computation_(std::move(c)) {}

  const Computation& get() const { return *computation_; }
  const ComputationPtr& ptr() const { return computation_; }

  // Which donated parameters to keep for this call: `donate` is None/True (donate what the
  // program declares), False (donate nothing) or a collection of argument indices that may be
  // donated (the program's other donated parameters are kept).
  std::vector<int64_t> NonDonatable(nb::handle donate) const {
    std::vector<int64_t> keep;
    const std::vector<int64_t>& donated = computation_->donated_parameters();
    if (donate.is_none()) return keep;
    if (nb::isinstance<nb::bool_>(donate)) {
      if (!nb::cast<bool>(donate)) keep = donated;
      return keep;
    }
    std::vector<int64_t> allowed;
    for (nb::handle h : nb::iter(donate)) {
      int64_t i = 0;
      if (!nb::try_cast<int64_t>(h, i) || i < 0 ||
          i >= static_cast<int64_t>(computation_->num_parameters())) {
        throw nb::value_error(absl::StrCat(computation_->name(),
                                           ": donate holds ", nb::repr(h).c_str(),
                                           ", not an argument index in [0, ",
                                           computation_->num_parameters(), ")")
                                  .c_str());
      }
      allowed.push_back(i);
    }
    for (int64_t p : donated) {
      if (std::find(allowed.begin(), allowed.end(), p) == allowed.end()) keep.push_back(p);
    }
    return keep;
  }

  std::vector<DataPtr> Arguments(const nb::args& args) const {
    std::vector<DataPtr> out;
    out.reserve(args.size());
    for (size_t i = 0; i < args.size(); ++i) {
      out.push_back(DataOf(args[i], i, computation_->name().c_str()));
    }
    return out;
  }

  nb::tuple Wrap(std::vector<DataPtr> outputs) const {
    nb::tuple result = nb::steal<nb::tuple>(PyTuple_New(static_cast<Py_ssize_t>(outputs.size())));
    for (size_t i = 0; i < outputs.size(); ++i) {
      nb::object o = WrapArray(runtime_, std::move(outputs[i]));
      PyTuple_SET_ITEM(result.ptr(), static_cast<Py_ssize_t>(i), o.release().ptr());
    }
    return result;
  }

  nb::tuple Call(nb::args args, nb::handle donate, bool reshard) const {
    std::vector<DataPtr> arguments = Arguments(args);
    ExecuteReplicatedOptions options;
    options.non_donatable_input_indices = NonDonatable(donate);
    if (reshard) options.resharding = ArgumentResharding::kReshardCopy;
    absl::StatusOr<std::vector<DataPtr>> outputs;
    {
      nb::gil_scoped_release release;
      outputs = runtime_->runtime->client().ExecuteReplicated(*computation_, arguments, options);
    }
    return Wrap(Value(std::move(outputs)));
  }

  nb::tuple CallAsync(nb::args args, nb::handle donate) const {
    std::vector<DataPtr> arguments = Arguments(args);
    ScheduleOptions options;
    options.execute.non_donatable_input_indices = NonDonatable(donate);
    absl::StatusOr<std::vector<DataPtr>> outputs;
    {
      nb::gil_scoped_release release;
      outputs = runtime_->runtime->executor().Schedule(computation_, std::move(arguments), options);
    }
    return Wrap(Value(std::move(outputs)));
  }

  // The layouts of the parameters, or of the outputs.
  std::vector<const DataLayout*> Layouts(bool outputs) const {
    std::vector<const DataLayout*> out;
    const size_t n = outputs ? computation_->num_outputs() : computation_->num_parameters();
    for (size_t i = 0; i < n; ++i) {
      out.push_back(outputs ? computation_->output_layout(i).get()
                            : computation_->parameter_layout(i).get());
    }
    return out;
  }

  std::vector<PySharding> Shardings(bool outputs) const {
    std::vector<PySharding> out;
    for (const DataLayout* layout : Layouts(outputs)) out.emplace_back(layout->sharding);
    return out;
  }

  std::vector<std::pair<std::string, nb::tuple>> Shapes(bool outputs) const {
    std::vector<std::pair<std::string, nb::tuple>> out;
    for (const DataLayout* layout : Layouts(outputs)) {
      out.emplace_back(std::string(ElementTypeName(layout->global.type)),
                       ToTuple(layout->global.dims));
    }
    return out;
  }

 private:
  RuntimePtr runtime_;
  ComputationPtr computation_;
};

// --- the runtime -------------------------------------------------------------------------------

RuntimePtr CreateRuntime(int64_t devices, const std::string& plugin, int host_threads,
                         std::optional<std::string> compile_cache, int64_t max_in_flight) {
  RuntimeOptions options;
  options.devices = devices;
  options.plugin = plugin;
  options.host_threads = host_threads;
  if (max_in_flight > 0) options.executor.max_in_flight = max_in_flight;
  if (compile_cache) {
    options.compile_cache.directory = *compile_cache;  // "" : off
    options.compile_cache_env = CompileCacheEnv::kIgnore;
  }
  absl::StatusOr<std::unique_ptr<Runtime>> runtime;
  {
    nb::gil_scoped_release release;
    runtime = Runtime::Create(options);
  }
  auto out = std::make_shared<PyRuntime>();
  out->runtime = Value(std::move(runtime));
  return out;
}

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

nb::object Put(const RuntimePtr& rt, HostInput array, const PySharding& sharding,
               std::optional<std::vector<int64_t>> device_ids,
               std::optional<std::string> type_name) {
  ComputationClient& client = rt->runtime->client();
  const ElementType type = TypeOf(array.dtype(), type_name);
  ArrayShape shape{type, ShapeOf(array)};
  std::shared_ptr<const DataLayout> layout =
      Value(client.MakeLayout(shape, sharding.get(), DevicesByIds(*rt, device_ids)));
  HostArrayView view{type, shape.dims, BytesOf(array)};
  absl::StatusOr<DataPtr> data;
  {
    nb::gil_scoped_release release;  // `array` (and its memory) stays referenced meanwhile
    data = client.TransferToDevice(view, layout);
  }
  return WrapArray(rt, Value(std::move(data)));
}

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
  absl::StatusOr<DataPtr> data;
  {
    nb::gil_scoped_release release;
    data = client.TransferShardsToDevice(layout, bytes);
  }
  return WrapArray(rt, Value(std::move(data)));
}

nb::object Compile(const RuntimePtr& rt, nb::bytes program, const std::string& name,
                   int64_t num_partitions) {
  CompileRequest request;
  request.name = name;
  request.program.assign(program.c_str(), program.size());
  request.options.num_partitions = num_partitions;
  absl::StatusOr<ComputationPtr> c;
  {
    nb::gil_scoped_release release;
    c = rt->runtime->client().Compile(request);
  }
  return nb::cast(PyComputation(rt, Value(std::move(c))));
}

// Waits for `a`'s data, then wraps what `copy` makes of it on device (GIL released).
nb::object CopyOnDevice(const RuntimePtr& rt, const PyArray& a,
                        absl::FunctionRef<absl::StatusOr<DataPtr>(const DataPtr&)> copy) {
  DataPtr data = a.data();
  absl::StatusOr<DataPtr> out;
  {
    nb::gil_scoped_release release;
    absl::Status ready = data->Await();
    out = ready.ok() ? copy(data) : absl::StatusOr<DataPtr>(ready);
  }
  return WrapArray(rt, Value(std::move(out)));
}

nb::object Reshard(const RuntimePtr& rt, const PyArray& a, const PySharding& sharding) {
  return CopyOnDevice(rt, a, [&](const DataPtr& data) {
    return rt->runtime->client().ReshardData(data, sharding.get());
  });
}

nb::object Replicate(const RuntimePtr& rt, const PyArray& a) {
  return CopyOnDevice(rt, a, [&](const DataPtr& data) {
    return rt->runtime->client().ReplicateShardedData(data);
  });
}

// A sharding from a mesh (axis names and sizes, optional device ids) and a partition spec.
PySharding Named(std::vector<std::pair<std::string, int64_t>> axes,
                 std::vector<int64_t> device_ids, std::vector<std::vector<std::string>> spec) {
  std::vector<MeshAxis> mesh_axes;
  for (auto& [name, size] : axes) mesh_axes.push_back({name, size});
  Mesh mesh = Value(Mesh::Create(std::move(mesh_axes), std::move(device_ids)));
  return PySharding(Value(NamedSharding(mesh, spec)));
}

class PyTrace {
 public:
  void Start() { Check(recorder_.Start()); }
  void Stop() { recorder_.Stop(); }
  void Write(const std::string& path) const { Check(recorder_.WriteJson(path)); }
  std::string Json() const { return recorder_.ToJson(); }
  int64_t num_events() const { return recorder_.num_events(); }
  bool recording() const { return recorder_.recording(); }

 private:
  TraceRecorder recorder_;
};

}  // namespace
}  // namespace shardrt::python

using namespace shardrt;
using namespace shardrt::python;

NB_MODULE(_shardrt, m) {
  m.doc() = "shardrt's extension: SPMD XLA programs on sharded data through the PJRT C API.";

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
      .def("__str__", &PySharding::ToString)
      .def("__repr__",
           [](const PySharding& s) { return absl::StrCat("shardrt.Sharding('", s.ToString(), "')"); })
      .def("__eq__", [](const PySharding& a, const PySharding& b) { return a.get() == b.get(); })
      .def("__hash__", [](const PySharding& s) { return nb::hash(nb::str(s.ToString().c_str())); });

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
           "(kDLCPU, 0): the CPU plugin's buffers are host memory.");

  nb::class_<PyArray>(m, "Array",
                      "A sharded array on device: global shape, element type, sharding and one "
                      "buffer per device. Arrays returned by call_async are placeholders until "
                      "their execution is dispatched (state 'pending'); block_until_ready waits "
                      "until the devices have computed them. Thread-safe.")
      .def_prop_ro("shape", &PyArray::shape)
      .def_prop_ro("type_name", &PyArray::type_name, "XLA element type name, e.g. 'f32'.")
      .def_prop_ro("sharding", &PyArray::sharding)
      .def_prop_ro("device_ids", &PyArray::device_ids, "Device of each shard, in shard order.")
      .def_prop_ro("size", &PyArray::size)
      .def_prop_ro("nbytes", &PyArray::nbytes)
      .def_prop_ro("state", &PyArray::state, "'pending', 'ready', 'failed' or 'donated'.")
      .def_prop_ro("is_ready", &PyArray::is_ready)
      .def_prop_ro("shards", &PyArray::shards)
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
      .def_prop_ro("is_deleted", &PyArray::deleted)
      .def("__repr__", &PyArray::Repr);

  nb::class_<PyComputation>(m, "Computation",
                            "A compiled SPMD program. Call it with shardrt.Arrays; it returns a "
                            "tuple of Arrays. Thread-safe.")
      .def("__call__", &PyComputation::Call, "args"_a, nb::kw_only(), "donate"_a = nb::none(),
           "reshard"_a = false,
           "Runs on all its devices (one PJRT launch), GIL released. donate: None/True donates "
           "what the program declares, False nothing, or a collection of argument indices. "
           "reshard=True reshards arguments with another sharding first (a copy).")
      .def("call_async", &PyComputation::CallAsync, "args"_a, nb::kw_only(),
           "donate"_a = nb::none(),
           "Schedules the call on the runtime's executor and returns placeholder Arrays at "
           "once; arguments may be placeholders. Errors arrive through the outputs.")
      .def_prop_ro("name", [](const PyComputation& c) { return c.get().name(); })
      .def_prop_ro("num_devices", [](const PyComputation& c) { return c.get().num_devices(); })
      .def_prop_ro("num_parameters", [](const PyComputation& c) { return c.get().num_parameters(); })
      .def_prop_ro("num_outputs", [](const PyComputation& c) { return c.get().num_outputs(); })
      .def_prop_ro("donated_parameters",
                   [](const PyComputation& c) { return c.get().donated_parameters(); })
      .def_prop_ro("parameter_shardings", [](const PyComputation& c) { return c.Shardings(false); })
      .def_prop_ro("output_shardings", [](const PyComputation& c) { return c.Shardings(true); })
      .def_prop_ro("parameter_shapes", [](const PyComputation& c) { return c.Shapes(false); },
                   "(type name, global shape) of each parameter.")
      .def_prop_ro("output_shapes", [](const PyComputation& c) { return c.Shapes(true); });

  nb::class_<PyRuntime>(m, "_Runtime")
      .def_prop_ro("device_ids",
                   [](const PyRuntime& r) {
                     std::vector<int64_t> ids;
                     for (const pjrt::Device* d : r.runtime->devices()) ids.push_back(d->id);
                     return ids;
                   })
      .def_prop_ro("device_kinds",
                   [](const PyRuntime& r) {
                     std::vector<std::string> kinds;
                     for (const pjrt::Device* d : r.runtime->devices()) kinds.push_back(d->kind);
                     return kinds;
                   })
      .def_prop_ro("platform", [](const PyRuntime& r) { return r.runtime->platform_name(); })
      .def_prop_ro("plugin_path", [](const PyRuntime& r) { return r.runtime->plugin().path(); })
      .def_prop_ro("plugin_threads", [](const PyRuntime& r) { return r.runtime->plugin_threads(); })
      .def_prop_ro("host_threads", [](const PyRuntime& r) { return r.runtime->pool().num_threads(); })
      .def_prop_ro("has_compile_cache",
                   [](const PyRuntime& r) { return r.runtime->client().has_persistent_cache(); })
      .def("synchronize",
           [](const PyRuntime& r) {
             absl::Status s;
             {
               nb::gil_scoped_release release;
               s = r.runtime->executor().Synchronize();
             }
             Check(s);
           })
      .def("executor_stats", [](const PyRuntime& r) {
        ExecutorStats s = r.runtime->executor().stats();
        nb::dict d;
        d["scheduled"] = s.scheduled;
        d["dispatched"] = s.dispatched;
        d["failed"] = s.failed;
        d["in_flight"] = s.in_flight;
        d["device_pending"] = s.device_pending;
        return d;
      });

  m.def("_create_runtime", &CreateRuntime, "devices"_a, "plugin"_a, "host_threads"_a,
        "compile_cache"_a.none(), "max_in_flight"_a);
  m.def("_put", &Put, "runtime"_a, "array"_a, "sharding"_a, "device_ids"_a.none(),
        "type_name"_a.none());
  m.def("_put_shards", &PutShards, "runtime"_a, "shards"_a, "global_shape"_a, "sharding"_a,
        "device_ids"_a.none(), "type_name"_a.none());
  m.def("_compile", &Compile, "runtime"_a, "program"_a, "name"_a, "num_partitions"_a);
  m.def("_reshard", &Reshard, "runtime"_a, "array"_a, "sharding"_a);
  m.def("_replicate", &Replicate, "runtime"_a, "array"_a);
  m.def("_release_all",
        [](nb::sequence arrays) {
          // Take every array's data first (checking all of them), so that a bad entry leaves
          // every array as it was.
          std::vector<PyArray*> targets;
          for (nb::handle h : arrays) {
            targets.push_back(&ArrayOf(h, "release", "entry", targets.size()));
          }
          ReleaseArrays(targets);
        },
        "arrays"_a);

  m.def("metrics_json", [] { return GlobalMetrics().JsonReport(); },
        "The metrics registry as JSON (PyTorch/XLA-style metrics and counters).");
  m.def("metrics_report", [] { return GlobalMetrics().TextReport(); },
        "The metrics registry as PyTorch/XLA's text report.");
  m.def("metrics_reset", [] { GlobalMetrics().Reset(); }, "Clears every metric and counter.");

  nb::class_<PyTrace>(m, "_Trace")
      .def(nb::init<>())
      .def("start", &PyTrace::Start)
      .def("stop", &PyTrace::Stop)
      .def("write", &PyTrace::Write, "path"_a)
      .def("json", &PyTrace::Json)
      .def_prop_ro("num_events", &PyTrace::num_events)
      .def_prop_ro("recording", &PyTrace::recording);
}
