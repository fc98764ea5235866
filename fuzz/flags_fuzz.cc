// libFuzzer target for the CLI's flag parser. The input is split on NUL bytes into argument
// words (newlines and any other bytes stay inside words), parsed with a fixed table of
// boolean, text, integer and number flags, then read back with help, Has, Get, GetAll, GetInt
// and GetDouble under the table's ranges and defaults. For any input: no crash; every error is
// a one-line InvalidArgument; what is read back agrees with itself, with the ranges and with
// the words given. Any violation aborts.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "cli/flags.h"
#include "fuzz_util.h"

namespace {

using shardrt::cli::FlagDef;
using shardrt::cli::Flags;
using shardrt::cli::FlagType;

constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

// Integer flags over the whole range, the CLI's own ranges, one value, negatives and an empty
// range; one computed default; text, number and boolean flags, one repeated.
constexpr FlagDef kTable[] = {
    {.name = "devices", .type = FlagType::kInteger, .value_name = "N", .description = "d",
     .default_text = "8", .int_min = 1, .int_max = 4096},
    {.name = "seed", .type = FlagType::kInteger, .value_name = "S", .description = "s",
     .default_text = "0", .int_min = 0, .int_max = kMax},
    {.name = "repeat", .type = FlagType::kInteger, .value_name = "K", .description = "r",
     .default_text = "1", .int_min = 1, .int_max = 1'000'000},
    {.name = "any", .type = FlagType::kInteger, .value_name = "I", .description = "a",
     .default_text = "-7", .int_min = kMin, .int_max = kMax},
    {.name = "zero", .type = FlagType::kInteger, .value_name = "Z", .description = "z",
     .default_text = "0", .int_min = 0, .int_max = 0},
    {.name = "neg", .type = FlagType::kInteger, .value_name = "M", .description = "m",
     .default_text = "-1", .int_min = kMin, .int_max = -1},
    {.name = "empty", .type = FlagType::kInteger, .value_name = "E", .description = "e",
     .default_text = "4", .int_min = 5, .int_max = 3},
    {.name = "block", .type = FlagType::kInteger, .value_name = "B", .description = "b",
     .default_text = "computed", .int_min = -10, .int_max = 10},
    {.name = "top-p", .type = FlagType::kNumber, .value_name = "P", .description = "p",
     .default_text = "1", .number_min = 1e-6, .number_max = 1},
    {.name = "arg", .value_name = "FILE", .description = "a", .repeated = true},
    {.name = "out", .value_name = "DIR", .description = "o"},
    {.name = "plugin", .value_name = "PATH", .description = "p"},
    {.name = "json", .type = FlagType::kBoolean, .description = "j", .default_text = "off"},
    {.name = "metrics", .type = FlagType::kBoolean, .description = "m", .default_text = "off"},
};

[[noreturn]] void Fail(const char* what, absl::string_view input, const std::string& detail) {
  shardrt::fuzz::Fail("flags_fuzz", what, input, detail);
}

// Aborts unless `status` is an InvalidArgument with one non-empty line of printable text
// (UTF-8 bytes allowed).
void CheckError(const absl::Status& status, absl::string_view input) {
  if (status.code() != absl::StatusCode::kInvalidArgument ||
      !shardrt::fuzz::OneLine(status.message())) {
    Fail("error not a one-line InvalidArgument", input, status.ToString());
  }
}

// Checks GetInt of `def` against the last value given (`last`) and the table.
void CheckInt(const Flags& flags, const FlagDef& def, const std::optional<std::string>& last,
              absl::string_view input) {
  const bool computed = def.name == "block";
  absl::StatusOr<int64_t> value = computed ? flags.GetInt(def.name, 99) : flags.GetInt(def.name);
  if (!last.has_value()) {
    int64_t fallback = 99;
    if (!computed) (void)absl::SimpleAtoi(def.default_text, &fallback);
    if (!value.ok() || *value != fallback) Fail("GetInt of an absent flag", input, std::string(def.name));
    if (computed && flags.GetInt(def.name).status().code() != absl::StatusCode::kInternal) {
      Fail("a computed default was read from the table", input, "");
    }
    return;
  }
  int64_t parsed = 0;
  const bool fits = absl::SimpleAtoi(*last, &parsed) && parsed >= def.int_min &&
                    parsed <= def.int_max;
  if (!value.ok()) {
    CheckError(value.status(), input);
    if (fits) Fail("GetInt refused a value in range", input, *last);
    return;
  }
  if (!fits || *value != parsed) Fail("GetInt out of range or not the value", input, *last);
}

// Checks GetDouble of `def` against the last value given and the table.
void CheckNumber(const Flags& flags, const FlagDef& def, const std::optional<std::string>& last,
                 absl::string_view input) {
  absl::StatusOr<double> value = flags.GetDouble(def.name);
  if (!last.has_value()) {
    if (!value.ok() || *value != 1.0) Fail("GetDouble of an absent flag", input, "");
    return;
  }
  double parsed = 0;
  const bool fits = absl::SimpleAtod(*last, &parsed) && parsed >= def.number_min &&
                    parsed <= def.number_max;  // false for NaN
  if (!value.ok()) {
    CheckError(value.status(), input);
    if (fits) Fail("GetDouble refused a value in range", input, *last);
    return;
  }
  if (!fits || *value != parsed) Fail("GetDouble out of range or not the value", input, *last);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view input(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> args;
  if (!input.empty()) args = absl::StrSplit(input, absl::ByChar('\0'));

  absl::StatusOr<Flags> flags = Flags::Parse(args, kTable);
  if (!flags.ok()) {
    CheckError(flags.status(), input);
    return 0;
  }
  const size_t help_words = std::count_if(args.begin(), args.end(), [](const std::string& w) {
    return w == "--help" || w == "-h";
  });
  if (flags->help() && help_words == 0) Fail("help without --help or -h", input, "");

  // Positionals are words that are neither flags nor help.
  for (const std::string& word : flags->positional()) {
    if ((word.size() >= 3 && absl::string_view(word).substr(0, 2) == "--") || word == "-h") {
      Fail("a flag kept as positional", input, word);
    }
  }
  size_t consumed = flags->positional().size();
  size_t help_values = 0;
  for (const FlagDef& def : kTable) {
    if (def.type == FlagType::kBoolean) {
      if (flags->Get(def.name).has_value() || !flags->GetAll(def.name).empty()) {
        Fail("a boolean flag has a value", input, std::string(def.name));
      }
      if (flags->Has(def.name)) ++consumed;  // at least one word
      continue;
    }
    const std::vector<std::string> all = flags->GetAll(def.name);
    const std::optional<std::string> last = flags->Get(def.name);
    consumed += all.size();
    help_values += std::count_if(all.begin(), all.end(), [](const std::string& w) {
      return w == "--help" || w == "-h";
    });
    if (flags->Has(def.name) != !all.empty() || last.has_value() != !all.empty() ||
        (last.has_value() && *last != all.back())) {
      Fail("Has, Get and GetAll disagree", input, std::string(def.name));
    }
    if (def.type == FlagType::kInteger) CheckInt(*flags, def, last, input);
    if (def.type == FlagType::kNumber) CheckNumber(*flags, def, last, input);
  }
  // Without help, every --help and -h was a flag's value.
  if (!flags->help() && help_values < help_words) Fail("--help or -h lost", input, "");
  if (flags->Has("nope") || flags->Get("nope").has_value()) Fail("unknown name found", input, "");
  if (flags->GetInt("nope", 1).status().code() != absl::StatusCode::kInternal ||
      flags->GetInt("out").status().code() != absl::StatusCode::kInternal) {
    Fail("GetInt of a name that is not an integer flag", input, "");
  }
  // Every word is help, a positional, a boolean flag, or one of a value flag's one or two words.
  if (consumed + (flags->help() ? 1 : 0) > args.size()) {
    Fail("more values than words", input, absl::StrCat(consumed, " > ", args.size()));
  }
  return 0;
}
