#include "cli/help.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

namespace shardrt::cli {
namespace {

// The widest left column help pads to; a longer entry is followed by two spaces.
constexpr size_t kMaxColumn = 30;

// "--name VALUE" (or "--name" for a boolean flag).
std::string FlagColumn(const FlagDef& def) {
  if (def.type == FlagType::kBoolean) return absl::StrCat("--", def.name);
  return absl::StrCat("--", def.name, " ", def.value_name);
}

// The description with the accepted range and the default, e.g. "tokens to generate; an
// integer in [1, 8192] (default: 128)".
std::string FlagText(const FlagDef& def) {
  std::string text(def.description);
  if (def.type == FlagType::kInteger) {
    if (def.int_max == std::numeric_limits<int64_t>::max()) {
      absl::StrAppend(&text, "; an integer >= ", def.int_min);
    } else {
      absl::StrAppend(&text, "; an integer in [", def.int_min, ", ", def.int_max, "]");
    }
  } else if (def.type == FlagType::kNumber) {
    absl::StrAppend(&text, "; a number in [", def.number_min, ", ", def.number_max, "]");
  }
  absl::StrAppend(&text, " (", def.repeated ? "repeatable; " : "", "default: ",
                  def.default_text.empty() ? "none" : def.default_text, ")");
  return text;
}

using Rows = std::vector<std::pair<std::string, std::string>>;

// The width of the first column of `rows`: the widest entry of at most kMaxColumn characters.
size_t ColumnWidth(const Rows& rows) {
  size_t width = 0;
  for (const auto& [left, right] : rows) {
    if (left.size() <= kMaxColumn) width = std::max(width, left.size());
  }
  return width;
}

// One line per row, indented by two spaces, the first column padded to `width` and followed by
// two spaces.
std::string Columns(const Rows& rows, size_t width) {
  std::string out;
  for (const auto& [left, right] : rows) {
    const size_t pad = left.size() < width ? width - left.size() : 0;
    absl::StrAppend(&out, "  ", left, std::string(pad + 2, ' '), right, "\n");
  }
  return out;
}

}  // namespace

std::string CommandHelp(const CommandDef& command) {
  return CommandHelp(command, absl::StrCat("shardrt ", command.name));
}

std::string CommandHelp(const CommandDef& command, absl::string_view invocation) {
  Rows own;
  for (const FlagDef& def : command.flags) own.emplace_back(FlagColumn(def), FlagText(def));
  const Rows common = {{FlagColumn(kTimeoutFlag), FlagText(kTimeoutFlag)},
                       {"-h, --help", "print this help and exit"}};
  const size_t width = std::max(ColumnWidth(own), ColumnWidth(common));
  return absl::StrCat("usage: ", invocation, " ", command.usage, "\n\n",
                      command.summary, "\n\nflags:\n", Columns(own, width),
                      "\nflags of every command:\n", Columns(common, width));
}

std::string OverviewHelp() {
  Rows rows;
  for (const CommandDef* command : Commands()) {
    rows.emplace_back(std::string(command->name), std::string(command->summary));
  }
  return absl::StrCat(
      "usage: shardrt COMMAND [flags]\n\ncommands:\n", Columns(rows, ColumnWidth(rows)),
      "\n`shardrt help COMMAND` or `shardrt COMMAND --help` lists a command's flags; every "
      "command takes --timeout SECONDS.\n");
}

}  // namespace shardrt::cli
