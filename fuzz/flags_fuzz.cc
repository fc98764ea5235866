// libFuzzer target for the CLI's flag parser. The input is split on NUL bytes into argument
// words (newlines and any other bytes stay inside words), parsed with a fixed FlagSpec of value
// and boolean flags, then read back with Has, Get, GetAll and GetInt under several bounds. For
// any input: no crash; every error is a one-line InvalidArgument; what is read back agrees with
// itself and with the bounds. Any violation aborts.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "cli/flags.h"
#include "fuzz_util.h"

namespace {

using shardrt::cli::FlagSpec;
using shardrt::cli::Flags;

constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

// GetInt's bounds: the whole range, the CLI's own, one value, negatives, and an empty range.
constexpr std::pair<int64_t, int64_t> kBounds[] = {
    {kMin, kMax}, {1, 4096}, {0, kMax}, {1, 1'000'000}, {0, 0}, {-10, 10}, {kMin, -1}, {5, 3},
};

[[noreturn]] void Fail(const char* what, absl::string_view input, const std::string& detail) {
  shardrt::fuzz::Fail("flags_fuzz", what, input, detail);
}

// Aborts unless `status` is an InvalidArgument with one non-empty line of printable text
// (UTF-8 bytes allowed).
void CheckError(const absl::Status& status, absl::string_view input) {
  bool one_line = status.code() == absl::StatusCode::kInvalidArgument && !status.message().empty();
  for (const char c : status.message()) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) one_line = false;
  }
  if (!one_line) Fail("error not a one-line InvalidArgument", input, status.ToString());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view input(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> args;
  if (!input.empty()) args = absl::StrSplit(input, absl::ByChar('\0'));
  const FlagSpec spec{.with_value = {"devices", "arg", "out", "repeat", "seed", "plugin"},
                      .boolean = {"json", "metrics", "help"}};

  absl::StatusOr<Flags> flags = Flags::Parse(args, spec);
  if (!flags.ok()) {
    CheckError(flags.status(), input);
    return 0;
  }

  // Positionals are words that are not flags, in order.
  for (const std::string& word : flags->positional()) {
    if (word.size() >= 3 && absl::string_view(word).substr(0, 2) == "--") {
      Fail("a flag kept as positional", input, word);
    }
  }
  size_t consumed = flags->positional().size();
  for (const std::string& name : spec.with_value) {
    const std::vector<std::string> all = flags->GetAll(name);
    const std::optional<std::string> last = flags->Get(name);
    consumed += all.size();
    if (flags->Has(name) != !all.empty() || last.has_value() != !all.empty() ||
        (last.has_value() && *last != all.back())) {
      Fail("Has, Get and GetAll disagree", input, name);
    }
    for (const auto& [min, max] : kBounds) {
      absl::StatusOr<int64_t> value = flags->GetInt(name, -7, min, max);
      if (!value.ok()) {
        CheckError(value.status(), input);
        if (!last.has_value()) Fail("GetInt of an absent flag failed", input, name);
        int64_t parsed = 0;
        if (last.has_value() && absl::SimpleAtoi(*last, &parsed) && parsed >= min &&
            parsed <= max) {
          Fail("GetInt refused a value in bounds", input, *last);
        }
        continue;
      }
      if (!last.has_value()) {
        if (*value != -7) Fail("GetInt of an absent flag is not the fallback", input, name);
        continue;
      }
      int64_t parsed = 0;
      if (*value < min || *value > max || !absl::SimpleAtoi(*last, &parsed) || parsed != *value) {
        Fail("GetInt out of bounds or not the value", input, absl::StrCat(*value));
      }
    }
  }
  for (const std::string& name : spec.boolean) {
    if (flags->Get(name).has_value() || !flags->GetAll(name).empty()) {
      Fail("a boolean flag has a value", input, name);
    }
    if (flags->Has(name)) ++consumed;  // at least one word
  }
  if (flags->Has("nope") || flags->Get("nope").has_value()) Fail("unknown name found", input, "");
  // Every word is a positional, a boolean flag, or one of a value flag's one or two words.
  if (consumed > args.size()) {
    Fail("more values than words", input, absl::StrCat(consumed, " > ", args.size()));
  }
  return 0;
}
