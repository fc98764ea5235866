#include "shardrt/pjrt/named_value.h"

#include "absl/strings/str_cat.h"
#include "shardrt/base/array_shape.h"

namespace shardrt::pjrt {

std::string NamedValueToString(const NamedValue& value) {
  struct Printer {
    std::string operator()(const std::string& v) const { return v; }
    std::string operator()(int64_t v) const { return absl::StrCat(v); }
    std::string operator()(const std::vector<int64_t>& v) const {
      return DimsToString(v);
    }
    std::string operator()(float v) const { return absl::StrCat(v); }
    std::string operator()(bool v) const { return v ? "true" : "false"; }
  };
  return absl::StrCat(value.name, "=", std::visit(Printer{}, value.value));
}

}  // namespace shardrt::pjrt
