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

namespace {

// ml_dtypes.bfloat16 as a NumPy dtype; TypeError (from the ImportError) without ml_dtypes.
nb::object Bfloat16Dtype() {
  nb::object ml_dtypes;
  try {
    ml_dtypes = nb::module_::import_("ml_dtypes");
  } catch (nb::python_error& e) {
    if (!e.matches(PyExc_ImportError)) throw;
    nb::raise_from(e, PyExc_TypeError,
                   "bf16 arrays need the ml_dtypes package for their NumPy dtype");
  }
  return nb::module_::import_("numpy").attr("dtype")(ml_dtypes.attr("bfloat16"));
}

}  // namespace

nb::object NumpyDtype(ElementType type) {
  // NumPy has no bfloat16 of its own: ml_dtypes (which comes with JAX) has.
  if (type == ElementType::kBF16) return Bfloat16Dtype();
  const char* name = "uint8";
  switch (type) {
    case ElementType::kPred: name = "bool"; break;
    case ElementType::kS8: name = "int8"; break;
    case ElementType::kS16: name = "int16"; break;
    case ElementType::kS32: name = "int32"; break;
    case ElementType::kS64: name = "int64"; break;
    case ElementType::kU8: name = "uint8"; break;
    case ElementType::kU16: name = "uint16"; break;
    case ElementType::kU32: name = "uint32"; break;
    case ElementType::kU64: name = "uint64"; break;
    case ElementType::kF16: name = "float16"; break;
    case ElementType::kF32: name = "float32"; break;
    case ElementType::kF64: name = "float64"; break;
    case ElementType::kBF16:
    case ElementType::kInvalid: break;
  }
  return nb::module_::import_("numpy").attr("dtype")(name);
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
  // NumPy takes no bfloat16 through DLPack: bf16 goes as uint16 bits, then is viewed as
  // ml_dtypes.bfloat16.
  const bool bf16 = type == ElementType::kBF16;
  nb::ndarray<nb::numpy> array(raw, shape.size(), shape.data(), owner, nullptr,
                               DlpackType(bf16 ? ElementType::kU16 : type));
  nb::object out = nb::cast(array, nb::rv_policy::reference);
  return bf16 ? out.attr("view")(NumpyDtype(type)) : out;
}

}  // namespace shardrt::python
