// A small command-line parser for the CLI's subcommands: `--name value`, `--name=value`,
// boolean `--name`, repeated flags and positional arguments. Strings stay at the CLI boundary;
// commands turn them into typed option structs.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include "absl/strings/string_view.h"
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"

namespace shardrt::cli {

// The flags one subcommand accepts.
struct FlagSpec {
  std::vector<std::string> with_value;  // e.g. "devices", "plugin"
  std::vector<std::string> boolean;     // e.g. "json"
};

// Parsed command line of one subcommand. Not thread-safe; owned by the command.
class Flags {
 public:
  // Parses `args` (without the program and subcommand names).
  // Error: InvalidArgument for an unknown flag or a flag missing its value.
  [[nodiscard]] static absl::StatusOr<Flags> Parse(const std::vector<std::string>& args,
                                                   const FlagSpec& spec);

  bool Has(absl::string_view name) const;
  // The last value given for `name`, if any.
  std::optional<std::string> Get(absl::string_view name) const;
  // Every value given for a repeated flag, in order.
  std::vector<std::string> GetAll(absl::string_view name) const;
  // Parses the value of `name` as an integer in [min, max]; `fallback` when absent.
  // Error: InvalidArgument naming the flag when the value is not such an integer.
  [[nodiscard]] absl::StatusOr<int64_t> GetInt(absl::string_view name, int64_t fallback,
                                               int64_t min, int64_t max) const;
  const std::vector<std::string>& positional() const { return positional_; }

 private:
  absl::flat_hash_map<std::string, std::vector<std::string>> values_;
  absl::flat_hash_set<std::string> present_;
  std::vector<std::string> positional_;
};

}  // namespace shardrt::cli
