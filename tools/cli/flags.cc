#include "cli/flags.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "shardrt/base/file_kind.h"
#include "cli/file_io.h"

namespace shardrt::cli {
namespace {

// Argument text as an error message shows it: C-escaped (so a message stays one line; UTF-8
// passes through) and cut after 64 bytes, at a character boundary, with "..." when cut.
std::string Shown(absl::string_view text) {
  constexpr size_t kMax = 64;
  if (text.size() <= kMax) return absl::Utf8SafeCHexEscape(text);
  size_t cut = kMax;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
  return absl::StrCat(absl::Utf8SafeCHexEscape(text.substr(0, cut)), "...");
}

// The entry of `table` named `name`, or nullptr.
const FlagDef* FindDef(std::span<const FlagDef> table, absl::string_view name) {
  for (const FlagDef& def : table) {
    if (def.name == name) return &def;
  }
  return nullptr;
}

// `text` as the value of kInteger flag `def`. Error: not a decimal integer in its range.
absl::StatusOr<int64_t> ParseInt(const FlagDef& def, const std::string& text) {
  int64_t value = 0;
  if (!absl::SimpleAtoi(text, &value) || value < def.int_min || value > def.int_max) {
    return absl::InvalidArgumentError(absl::StrCat("flag --", Shown(def.name),
                                                   ": expected an integer in [", def.int_min,
                                                   ", ", def.int_max, "], got '", Shown(text),
                                                   "'"));
  }
  return value;
}


// The error for a default the table does not state as a number.
absl::Status NoDefault(const FlagDef& def) {
  return absl::InternalError(absl::StrCat("flag --", def.name, " has no numeric default ('",
                                          def.default_text, "'); the command must give one"));
}

}  // namespace

absl::StatusOr<Flags> Flags::Parse(const std::vector<std::string>& args,
                                   std::span<const FlagDef> table) {
  Flags flags;
  flags.table_ = table;
  // The first error; the words after it are still read, for --help.
  absl::Status error;
  auto fail = [&error](std::string message) {
    if (error.ok()) error = absl::InvalidArgumentError(message);
  };
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--help" || arg == "-h") {
      flags.help_ = true;
      continue;
    }
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
    const FlagDef* def = FindDef(table, name);
    if (def == nullptr || def->type == FlagType::kBoolean) {
      if (def == nullptr && name != "help") {
        fail(absl::StrCat("unknown flag --", Shown(name)));
      } else if (value.has_value()) {  // a value for a boolean flag, or --help=
        fail(absl::StrCat("flag --", Shown(name), " takes no value"));
      } else {
        flags.present_.insert(name);
      }
      continue;
    }
    if (!value.has_value()) {
      if (i + 1 >= args.size()) {
        fail(absl::StrCat("flag --", Shown(name), " needs a value"));
        continue;
      }
      value = args[++i];
    }
    flags.present_.insert(name);
    flags.values_[name].push_back(*value);
  }
  if (!flags.help_ && !error.ok()) return error;
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

absl::StatusOr<const FlagDef*> Flags::Find(absl::string_view name, FlagType type) const {
  const FlagDef* def = FindDef(table_, name);
  if (def == nullptr || def->type != type) {
    return absl::InternalError(absl::StrCat("flag --", name, " is not ",
                                            type == FlagType::kInteger ? "an integer" : "a number",
                                            " flag of this command"));
  }
  return def;
}

absl::StatusOr<int64_t> Flags::GetInt(absl::string_view name) const {
  absl::StatusOr<const FlagDef*> def = Find(name, FlagType::kInteger);
  if (!def.ok()) return def.status();
  if (std::optional<std::string> text = Get(name)) return ParseInt(**def, *text);
  int64_t fallback = 0;
  if (!absl::SimpleAtoi((*def)->default_text, &fallback)) return NoDefault(**def);
  return fallback;
}

absl::StatusOr<int64_t> Flags::GetInt(absl::string_view name, int64_t fallback) const {
  absl::StatusOr<const FlagDef*> def = Find(name, FlagType::kInteger);
  if (!def.ok()) return def.status();
  if (std::optional<std::string> text = Get(name)) return ParseInt(**def, *text);
  return fallback;
}

absl::StatusOr<double> Flags::GetDouble(absl::string_view name) const {
  absl::StatusOr<const FlagDef*> def = Find(name, FlagType::kNumber);
  if (!def.ok()) return def.status();
  const FlagDef& d = **def;
  double value = 0;
  std::optional<std::string> text = Get(name);
  if (!text.has_value()) {
    if (!absl::SimpleAtod(d.default_text, &value)) return NoDefault(d);
    return value;
  }
  if (!absl::SimpleAtod(*text, &value) || !(value >= d.number_min && value <= d.number_max)) {
    return absl::InvalidArgumentError(absl::StrCat("flag --", Shown(name),
                                                   ": expected a number in [", d.number_min, ", ",
                                                   d.number_max, "], got '", Shown(*text), "'"));
  }
  return value;
}

absl::Status CheckOutputFile(absl::string_view flag, const std::string& path) {
  const std::string prefix = absl::StrCat("flag --", Shown(flag), ": ");
  if (path.empty()) return absl::InvalidArgumentError(absl::StrCat(prefix, "empty path"));
  auto fail = [&](absl::string_view what) {
    return absl::InvalidArgumentError(absl::StrCat(prefix, path, ": ", what));
  };
  struct stat info;
  if (::stat(path.c_str(), &info) == 0) {
    if (!S_ISREG(info.st_mode)) {
      return fail(absl::StrCat("expected a regular file, got ", FileKind(info.st_mode)));
    }
    if (::access(path.c_str(), W_OK) != 0) {
      return fail(absl::StrCat("cannot write: ", std::strerror(errno)));
    }
    return absl::OkStatus();
  }
  if (errno != ENOENT) return fail(absl::StrCat("cannot write: ", std::strerror(errno)));
  std::string folder = std::filesystem::path(path).parent_path().string();
  if (folder.empty()) folder = ".";
  if (::stat(folder.c_str(), &info) != 0) {
    return fail(absl::StrCat("no folder ", folder, " to write it in (", std::strerror(errno),
                             ")"));
  }
  if (!S_ISDIR(info.st_mode)) return fail(absl::StrCat(folder, " is not a folder"));
  if (::access(folder.c_str(), W_OK | X_OK) != 0) {
    return fail(absl::StrCat("cannot write in folder ", folder, ": ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

}  // namespace shardrt::cli
