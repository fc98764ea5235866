// A small command-line parser for the CLI's subcommands: `--name value`, `--name=value`,
// boolean `--name`, repeated flags and positional arguments. Strings stay at the CLI boundary;
// commands turn them into typed option structs. Error messages are one line: the text of an
// argument they quote is C-escaped (UTF-8 kept) and cut after 64 bytes.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace shardrt::cli {

// The flags one subcommand accepts. A plain value.
struct FlagSpec {
  std::vector<std::string> with_value;  // e.g. "devices", "plugin"
  std::vector<std::string> boolean;     // e.g. "json"
};

// Parsed command line of one subcommand. Owns copies of the arguments; not thread-safe to use
// while another thread mutates it (every method but Parse is const). Owned by the command.
class Flags {
 public:
  // Parses `args` (without the program and subcommand names). An argument of three or more
  // characters starting with "--" is a flag; any other (including "-x", "--" and "") is
  // positional. A flag with a value takes it after '=' or from the next argument, whatever that
  // holds. Thread-safe (pure).
  // Errors (InvalidArgument): "unknown flag --NAME", "flag --NAME needs a value" (the last
  // argument), "flag --NAME takes no value" (a boolean flag given '=').
  [[nodiscard]] static absl::StatusOr<Flags> Parse(const std::vector<std::string>& args,
                                                   const FlagSpec& spec);

  // Whether flag `name` was given at least once (a boolean one, or one with a value).
  bool Has(absl::string_view name) const;
  // The last value given for `name`, if any (never for a boolean flag). A copy.
  std::optional<std::string> Get(absl::string_view name) const;
  // Every value given for a repeated flag, in order; empty when none. A copy.
  std::vector<std::string> GetAll(absl::string_view name) const;
  // Parses the last value of `name` as a decimal integer in [min, max]; `fallback` when the
  // flag is absent (the fallback is not checked against the bounds).
  // Error (InvalidArgument): "flag --NAME: expected an integer in [MIN, MAX], got 'TEXT'".
  [[nodiscard]] absl::StatusOr<int64_t> GetInt(absl::string_view name, int64_t fallback,
                                               int64_t min, int64_t max) const;
  // Parses the last value of `name` as a decimal number in [min, max] (NaN is refused);
  // `fallback` when the flag is absent.
  // Error (InvalidArgument): "flag --NAME: expected a number in [MIN, MAX], got 'TEXT'".
  [[nodiscard]] absl::StatusOr<double> GetDouble(absl::string_view name, double fallback,
                                                 double min, double max) const;
  // The positional arguments, in order. Valid as long as this object.
  const std::vector<std::string>& positional() const { return positional_; }

 private:
  absl::flat_hash_map<std::string, std::vector<std::string>> values_;
  absl::flat_hash_set<std::string> present_;
  std::vector<std::string> positional_;
};

}  // namespace shardrt::cli
