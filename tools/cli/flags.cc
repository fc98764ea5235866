#include "cli/flags.h"

#include <algorithm>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace shardrt::cli {
namespace {

// Whether `v` holds `s`.
bool Contains(const std::vector<std::string>& v, absl::string_view s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

// Argument text as an error message shows it: C-escaped (so a message stays one line; UTF-8
// passes through) and cut after 64 bytes, at a character boundary, with "..." when cut.
std::string Shown(absl::string_view text) {
  constexpr size_t kMax = 64;
  if (text.size() <= kMax) return absl::Utf8SafeCHexEscape(text);
  size_t cut = kMax;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
  return absl::StrCat(absl::Utf8SafeCHexEscape(text.substr(0, cut)), "...");
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
        return absl::InvalidArgumentError(
            absl::StrCat("flag --", Shown(name), " takes no value"));
      }
      flags.present_.insert(name);
      continue;
    }
    if (!Contains(spec.with_value, name)) {
      return absl::InvalidArgumentError(absl::StrCat("unknown flag --", Shown(name)));
    }
    if (!value.has_value()) {
      if (i + 1 >= args.size()) {
        return absl::InvalidArgumentError(
            absl::StrCat("flag --", Shown(name), " needs a value"));
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
    return absl::InvalidArgumentError(absl::StrCat("flag --", Shown(name),
                                                   ": expected an integer in [", min, ", ", max,
                                                   "], got '", Shown(*text), "'"));
  }
  return value;
}

absl::StatusOr<double> Flags::GetDouble(absl::string_view name, double fallback, double min,
                                        double max) const {
  std::optional<std::string> text = Get(name);
  if (!text.has_value()) return fallback;
  double value = 0;
  if (!absl::SimpleAtod(*text, &value) || !(value >= min && value <= max)) {
    return absl::InvalidArgumentError(absl::StrCat("flag --", Shown(name),
                                                   ": expected a number in [", min, ", ", max,
                                                   "], got '", Shown(*text), "'"));
  }
  return value;
}

}  // namespace shardrt::cli
