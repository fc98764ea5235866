// HostArray and HostArrayView: a dense row-major array in host memory, owned or borrowed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"

#include "shardrt/base/element_type.h"
#include "shardrt/base/export.h"

namespace shardrt {

// A borrowed host array: `data` must hold exactly product(dims) * element size bytes.
struct SHARDRT_EXPORT HostArrayView {
  ElementType type = ElementType::kInvalid;
  std::vector<int64_t> dims;
  std::span<const std::byte> data;

  // A view of `values` (row-major) as an array of `dims`, typed from T (ElementTypeOf<T>()):
  //   std::vector<float> x(16 * 3);
  //   HostArrayView view = HostArrayView::Of<float>(x, {16, 3});
  // Borrows `values` (keep them alive while the view is used). That the count matches `dims`
  // is checked where the view is used (TransferToDevice, Runtime::Put). Thread-safe, pure.
  template <typename T>
  static HostArrayView Of(std::span<const T> values, std::vector<int64_t> dims) {
    static_assert(ElementTypeOf<T>() != ElementType::kInvalid, "no ElementType for this type");
    return {ElementTypeOf<T>(), std::move(dims), std::as_bytes(values)};
  }
};

// An owned host array.
struct SHARDRT_EXPORT HostArray {
  ElementType type = ElementType::kInvalid;
  std::vector<int64_t> dims;
  std::vector<std::byte> data;

  // A view borrowing this array's bytes (valid while it lives and is not resized).
  HostArrayView view() const { return {type, dims, data}; }

  // The elements as T, without a copy: a span over `data`, valid while this array lives and is
  // not resized. Errors: InvalidArgument naming both types when T is not the array's element
  // type (ElementTypeOf<T>()). Thread-safe for concurrent readers.
  template <typename T>
  [[nodiscard]] absl::StatusOr<std::span<const T>> values() const {
    static_assert(ElementTypeOf<T>() != ElementType::kInvalid, "no ElementType for this type");
    if (type != ElementTypeOf<T>()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "HostArray::values: the array holds ", ElementTypeName(type), ", not ",
          ElementTypeName(ElementTypeOf<T>())));
    }
    return std::span<const T>(reinterpret_cast<const T*>(data.data()), data.size() / sizeof(T));
  }
};

}  // namespace shardrt
