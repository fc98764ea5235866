// The extension's shared helpers: library errors as Python exceptions, GIL release, element
// types between the library, DLPack and NumPy, and host arrays from and to Python. Private to
// the extension (src/); every function here needs the GIL unless its comment says otherwise.
#pragma once

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "shardrt/shardrt.h"

namespace shardrt::python {

namespace nb = nanobind;

// --- errors ------------------------------------------------------------------------------------

// Raises the Python exception for `status` (which must not be OK), carrying its message:
// ValueError for bad arguments (InvalidArgument, OutOfRange, FailedPrecondition, NotFound,
// AlreadyExists), TimeoutError for DeadlineExceeded, RuntimeError for the rest.
[[noreturn]] void Raise(const absl::Status& status);

// Raises `status`'s exception unless it is OK.
inline void Check(const absl::Status& status) {
  if (!status.ok()) Raise(status);
}

// `value`'s value, else raises its status's exception.
template <typename T>
T Value(absl::StatusOr<T> value) {
  if (!value.ok()) Raise(value.status());
  return *std::move(value);
}

// --- the GIL -----------------------------------------------------------------------------------

// Runs `f` with the GIL released (other Python threads run meanwhile) and returns what it
// returns; the GIL is held again on return. `f` must not touch Python objects.
template <typename F>
decltype(auto) WithoutGil(F&& f) {
  nb::gil_scoped_release release;
  return std::forward<F>(f)();
}

// --- element types -----------------------------------------------------------------------------

// The DLPack element type of `type` (bf16 as DLPack's bfloat).
nb::dlpack::dtype DlpackType(ElementType type);

// The element type of a DLPack dtype, or InvalidArgument naming it.
absl::StatusOr<ElementType> FromDlpack(nb::dlpack::dtype dtype);

// The NumPy dtype of `type` (bf16: ml_dtypes.bfloat16; TypeError when ml_dtypes is missing).
nb::object NumpyDtype(ElementType type);

// --- host arrays -------------------------------------------------------------------------------

// A host array from Python: C-contiguous, on the CPU (NumPy, or anything with __dlpack__ or the
// buffer protocol).
using HostInput = nb::ndarray<nb::ro, nb::c_contig, nb::device::cpu>;
// A writable host destination.
using HostOutput = nb::ndarray<nb::c_contig, nb::device::cpu>;

// The dims of `a`.
std::vector<int64_t> ShapeOf(const HostInput& a);

// The bytes of `a` (borrowed: valid while `a` lives).
std::span<const std::byte> BytesOf(const HostInput& a);

// `v` as a Python tuple of ints.
nb::tuple ToTuple(absl::Span<const int64_t> v);

// A new NumPy array of `type` (its NumPy dtype, NumpyDtype) and `dims` owning `bytes` (moved
// in; exactly the array's bytes). TypeError for bf16 without ml_dtypes.
nb::object NumpyOwning(std::unique_ptr<std::byte[]> bytes, ElementType type,
                       absl::Span<const int64_t> dims);

}  // namespace shardrt::python
