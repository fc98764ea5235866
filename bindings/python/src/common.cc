// The extension's shared helpers (common.h): errors, element types, host arrays.
#include "common.h"

#include <stdexcept>
#include <string>

#include "absl/strings/str_cat.h"

namespace shardrt::python {

// --- errors ------------------------------------------------------------------------------------

void Raise(const absl::Status& status) {
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

// --- element types -----------------------------------------------------------------------------

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

// --- host arrays -------------------------------------------------------------------------------

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

nb::object NumpyOwning(std::unique_ptr<std::byte[]> bytes, ElementType type,
                       absl::Span<const int64_t> dims) {
  std::vector<size_t> shape(dims.begin(), dims.end());
  std::byte* raw = bytes.release();
  nb::capsule owner(raw, [](void* p) noexcept { delete[] static_cast<std::byte*>(p); });
  const nb::dlpack::dtype dtype =
      DlpackType(type == ElementType::kBF16 ? ElementType::kU16 : type);
  nb::ndarray<nb::numpy> array(raw, shape.size(), shape.data(), owner, nullptr, dtype);
  return nb::cast(array, nb::rv_policy::reference);
}

}  // namespace shardrt::python
