// A small command-line parser for the CLI's subcommands: `--name value`, `--name=value`,
// boolean `--name`, repeated flags, positional arguments and `--help` / `-h`. Each command
// describes its flags once, in a table of FlagDef; that table is what Parse accepts, what the
// getters take limits and defaults from, and what the command's help lists (cli/help.h), so the
// help cannot say something the parser does not do. Strings stay at the CLI boundary; commands
// turn them into typed option structs. Error messages are one line: the text of an argument
// they quote is C-escaped (UTF-8 kept) and cut after 64 bytes.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace shardrt::cli {

// What a flag holds.
enum class FlagType {
  kBoolean,  // given or not; takes no value
  kText,     // any text
  kInteger,  // a decimal integer in [int_min, int_max]
  kNumber,   // a decimal number in [number_min, number_max]; NaN is refused
};

// One flag of a command, as its table states it. A constant: tables are static arrays of them.
struct FlagDef {
  absl::string_view name;  // without the dashes, e.g. "devices"; never "help"
  FlagType type = FlagType::kText;
  absl::string_view value_name;   // what help shows after the name, e.g. "N"; empty for kBoolean
  absl::string_view description;  // one line, lower case, no final period
  // The default. For a kInteger or kNumber flag whose default is a constant, that value as it
  // would be typed ("8", "0.5"): GetInt and GetDouble read it when the flag is absent. Else
  // words for help ("$SHARDRT_MODEL", "256, or devices x 32"); empty when there is none.
  absl::string_view default_text;
  int64_t int_min = 0;  // kInteger: the accepted range
  int64_t int_max = 0;
  double number_min = 0;  // kNumber: the accepted range
  double number_max = 0;
  bool repeated = false;  // help says so; every value is kept in any case (GetAll)
};

// Parsed command line of one subcommand. Owns copies of the arguments and refers to the table
// it was parsed with, which must outlive it (tables are static). Not thread-safe to use while
// another thread mutates it (every method but Parse is const). Owned by the command.
class Flags {
 public:
  // Parses `args` (without the program and subcommand names) against the flags of `table`.
  // "--help" and "-h" ask for help (help()); any other argument of three or more characters
  // starting with "--" is a flag; any other (including "-x", "--" and "") is positional. A flag
  // with a value takes it after '=' or from the next argument, whatever that holds (so
  // `--prompt --help` is a prompt). Thread-safe (pure).
  // Errors (InvalidArgument): "unknown flag --NAME", "flag --NAME needs a value" (the last
  // argument), "flag --NAME takes no value" (a boolean flag, or --help, given '='). Help wins:
  // when --help or -h is there, the result is OK with help() true whatever else is wrong.
  [[nodiscard]] static absl::StatusOr<Flags> Parse(const std::vector<std::string>& args,
                                                   std::span<const FlagDef> table);

  // Whether --help or -h was given (as a flag, not as a flag's value). When it is, the rest of
  // the parse is not meaningful.
  bool help() const { return help_; }
  // Whether flag `name` was given at least once (a boolean one, or one with a value).
  bool Has(absl::string_view name) const;
  // The last value given for `name`, if any (never for a boolean flag). A copy.
  std::optional<std::string> Get(absl::string_view name) const;
  // Every value given for a repeated flag, in order; empty when none. A copy.
  std::vector<std::string> GetAll(absl::string_view name) const;
  // The last value of kInteger flag `name`, in the table's range; the table's default when the
  // flag is absent (not checked against the range).
  // Errors: InvalidArgument "flag --NAME: expected an integer in [MIN, MAX], got 'TEXT'";
  // Internal when `name` is not a kInteger flag of the table or its default is not a number
  // (a computed default: use the overload with a fallback).
  [[nodiscard]] absl::StatusOr<int64_t> GetInt(absl::string_view name) const;
  // As GetInt(name), with `fallback` as the default (a default the command computes).
  [[nodiscard]] absl::StatusOr<int64_t> GetInt(absl::string_view name, int64_t fallback) const;
  // The last value of kNumber flag `name`, in the table's range; the table's default when the
  // flag is absent. Errors: InvalidArgument "flag --NAME: expected a number in [MIN, MAX], got
  // 'TEXT'"; Internal as for GetInt.
  [[nodiscard]] absl::StatusOr<double> GetDouble(absl::string_view name) const;
  // The positional arguments, in order. Valid as long as this object.
  const std::vector<std::string>& positional() const { return positional_; }

 private:
  // The table's entry for `name` of type `type`. Error: Internal when there is none.
  absl::StatusOr<const FlagDef*> Find(absl::string_view name, FlagType type) const;

  std::span<const FlagDef> table_;
  bool help_ = false;
  absl::flat_hash_map<std::string, std::vector<std::string>> values_;
  absl::flat_hash_set<std::string> present_;
  std::vector<std::string> positional_;
};

// Checks the path `path` that flag --`flag` names for a file the command writes (at its end,
// or as it goes), before the command does any work: the file is not created or changed. OK
// when it is a regular file that can be written, or when it does not exist and its folder does
// and can be written in. Errors (InvalidArgument, each "flag --FLAG: PATH: ..."): an empty
// path ("flag --FLAG: empty path"); "expected a regular file, got a directory" (a FIFO, a
// character device, ...); "no folder DIR to write it in"; "DIR is not a folder"; "cannot write
// in folder DIR: REASON"; "cannot write: REASON" (the system's reason). Thread-compatible
// (looks at the file system only).
[[nodiscard]] absl::Status CheckOutputFile(absl::string_view flag, const std::string& path);

}  // namespace shardrt::cli
