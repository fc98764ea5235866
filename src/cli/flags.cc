#include "cli/flags.h"

#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace shardrt::cli {
namespace {
bool Contains(const std::vector<std::string>& v, absl::string_view s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}
}  // namespace

absl::StatusOr<Flags> Flags::Parse(const std::vector<std::string>& args, const FlagSpec& spec) {
  Flags flags;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg.size() < 3 || arg.rfind("--", 0) != 0) {
      flags.positional_.push_back(arg);
      continue;
    }
    std::string name = arg.substr(2);
    std::optional<std::string> value;
    if (size_t eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
    }
    if (Contains(spec.boolean, name)) {
      if (value.has_value()) {
        return absl::InvalidArgumentError(absl::StrCat("flag --", name, " takes no value"));
      }
      flags.present_.insert(name);
      continue;
    }
    if (!Contains(spec.with_value, name)) {
      return absl::InvalidArgumentError(absl::StrCat("unknown flag --", name));
    }
    if (!value.has_value()) {
      if (i + 1 >= args.size()) {
        return absl::InvalidArgumentError(absl::StrCat("flag --", name, " needs a value"));
      }
      value = args[++i];
    }
    flags.present_.insert(name);
    flags.values_[name].push_back(*value);
  }
  return flags;
}

bool Flags::Has(absl::string_view name) const { return present_.contains(name); }

std::optional<std::string> Flags::Get(absl::string_view name) const {
  auto it = values_.find(name);
  if (it == values_.end() || it->second.empty()) return std::nullopt;
  return it->second.back();
}

std::vector<std::string> Flags::GetAll(absl::string_view name) const {
  auto it = values_.find(name);
  return it == values_.end() ? std::vector<std::string>{} : it->second;
}

absl::StatusOr<int64_t> Flags::GetInt(absl::string_view name, int64_t fallback, int64_t min,
                                      int64_t max) const {
  std::optional<std::string> text = Get(name);
  if (!text.has_value()) return fallback;
  int64_t value = 0;
  if (!absl::SimpleAtoi(*text, &value) || value < min || value > max) {
    return absl::InvalidArgumentError(absl::StrCat("flag --", name, ": expected an integer in [",
                                                   min, ", ", max, "], got '", *text, "'"));
  }
  return value;
}

}  // namespace shardrt::cli
