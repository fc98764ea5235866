// NamedValue: a name and a typed value, as the PJRT C API passes client create options and
// reports plugin and device attributes (PJRT_NamedValue).
#pragma once

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "shardrt/base/export.h"

namespace shardrt::pjrt {

// One of PJRT's five value types: string, int64, int64 list, float, bool. Plain value. Which
// names and types a plugin accepts is the plugin's own (e.g. the CPU plugin's int64
// "cpu_device_count"; the CUDA plugin's float "memory_fraction" or bool "preallocate").
struct SHARDRT_EXPORT NamedValue {
  using Value = std::variant<std::string, int64_t, std::vector<int64_t>, float, bool>;
  std::string name;
  Value value;
  bool operator==(const NamedValue&) const = default;
};

// "name=value" (lists as [a,b]), for messages and listings. Pure, thread-safe.
[[nodiscard]] SHARDRT_EXPORT std::string NamedValueToString(const NamedValue& value);

}  // namespace shardrt::pjrt
