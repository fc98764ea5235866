// The C++ objects behind the extension's Python types that more than one topic uses: the
// runtime, Sharding, Array and Shard. Private to the extension (src/). Arrays, shards and
// computations hold the runtime they were made by, so it lives as long as any of them.
#pragma once

#include <nanobind/nanobind.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "absl/types/span.h"
#include "common.h"
#include "shardrt/shardrt.h"

namespace shardrt::python {

// A runtime, shared by every array and computation made through it (they keep it alive).
struct PyRuntime {
  std::unique_ptr<Runtime> runtime;
  ~PyRuntime() {
    nb::gil_scoped_release release;  // waits for the executor's work
    runtime.reset();
  }
};
using RuntimePtr = std::shared_ptr<PyRuntime>;

// shardrt.Sharding: an immutable Sharding.
class PySharding {
 public:
  explicit PySharding(Sharding s) : sharding_(std::move(s)) {}
  // Parses XLA sharding text; ValueError naming what is wrong.
  static PySharding Parse(const std::string& text) {
    return PySharding(Value(ParseSharding(text)));
  }
  const Sharding& get() const { return sharding_; }
  std::string ToString() const { return PrintSharding(sharding_); }

 private:
  Sharding sharding_;
};

// shardrt.Shard: one device's part of an array.
struct PyShard {
  RuntimePtr runtime;
  DataPtr data;
  size_t index = 0;  // position in the layout's device list
};

// shardrt.Array: a sharded array on device, or a placeholder for one (call_async). Its methods
// need the GIL; those that wait release it meanwhile. Python threads may share it: methods that
// wait copy the data pointer first, so a concurrent delete() leaves them working on the data.
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
  // The data's layout; ValueError once deleted.
  const DataLayout& layout() const { return data()->layout(); }

  // The properties of shardrt.Array (ValueError once deleted, but state()).
  nb::tuple shape() const { return ToTuple(layout().global.dims); }
  size_t ndim() const { return layout().global.dims.size(); }
  std::string type_name() const { return std::string(ElementTypeName(layout().global.type)); }
  nb::object dtype() const { return NumpyDtype(layout().global.type); }
  PySharding sharding() const { return PySharding(layout().sharding); }
  std::vector<int64_t> device_ids() const;
  int64_t size() const { return layout().geometry.num_elements(); }
  int64_t nbytes() const { return size() * ElementSizeInBytes(layout().global.type); }
  std::string state() const;  // "deleted" once deleted
  bool is_ready() const { return data()->state() != Data::State::kPending; }
  std::vector<PyShard> shards() const;
  std::string Repr() const;

  // Waits until the array is computed (placeholders) and its buffers are ready on every device.
  // With a timeout, both waits are bounded by it: the placeholder's and the device work's (a
  // launch returns before its buffers are ready). NaN, infinite or huge timeouts wait for good.
  // Raises the execution's error, TimeoutError when the timeout passes.
  void BlockUntilReady(std::optional<double> timeout_s) const;

  // Downloads the global array as a new NumPy array (waits for placeholders).
  nb::object ToNumpy() const;

  // Downloads into `out` (C-contiguous, exactly this array's bytes, the array's element type or
  // uint16 for bf16); ValueError naming the mismatch.
  void DownloadInto(HostOutput out) const;

 private:
  // Waits for the data (placeholders), then downloads the global array into `into` (exactly
  // nbytes()), with the GIL released.
  void DownloadTo(std::span<std::byte> into) const;

  RuntimePtr runtime_;
  DataPtr data_;
};

// A new shardrt.Array of `data`, made through `runtime`.
nb::object WrapArray(const RuntimePtr& runtime, DataPtr data);

// The Array `h` is, else TypeError naming it as `what`'s `noun` i (e.g. "main: argument 3").
PyArray& ArrayOf(nb::handle h, const char* what, const char* noun, size_t i);

// Shard `s`'s device memory as an ndarray view (CPU plugin: host memory), zero-copy, after
// waiting for the data; the view keeps the data alive and holds an external reference to the
// buffer (a donating call copies instead). Raises the data's error. Needs the GIL.
nb::ndarray<> ShardView(const PyShard& s);

// Waits until `buffer`'s value is computed (or failed). Needs no GIL.
absl::Status AwaitBuffer(const pjrt::Buffer& buffer);

// Deletes `arrays` (they become unusable) and frees their buffers together (Data::ReleaseAll),
// with the GIL released.
void ReleaseArrays(absl::Span<PyArray* const> arrays);

}  // namespace shardrt::python
