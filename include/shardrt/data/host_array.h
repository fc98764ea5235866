// HostArray and HostArrayView: a dense row-major array in host memory, owned or borrowed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "shardrt/base/element_type.h"
#include "shardrt/base/export.h"

namespace shardrt {

// A borrowed host array: `data` must hold exactly product(dims) * element size bytes.
struct SHARDRT_EXPORT HostArrayView {
  ElementType type = ElementType::kInvalid;
  std::vector<int64_t> dims;
  std::span<const std::byte> data;
};

// An owned host array.
struct SHARDRT_EXPORT HostArray {
  ElementType type = ElementType::kInvalid;
  std::vector<int64_t> dims;
  std::vector<std::byte> data;

  // A view borrowing this array's bytes (valid while it lives and is not resized).
  HostArrayView view() const { return {type, dims, data}; }
};

}  // namespace shardrt
