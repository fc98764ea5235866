#include "client/program_signature.h"

#include <cctype>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/status_macros.h"

namespace shardrt {
namespace {

// Index of the quote that closes the string literal opening at `open` (or s.size()).
size_t SkipString(absl::string_view s, size_t open) {
  size_t i = open + 1;
  for (; i < s.size() && s[i] != '"'; ++i) {
    if (s[i] == '\\') ++i;
  }
  return i;
}

// Index just past the bracket that closes the one at `open` (balancing (), [], {}, <> and
// skipping string literals), or npos.
size_t MatchClose(absl::string_view s, size_t open) {
  int depth = 0;
  for (size_t i = open; i < s.size(); ++i) {
    char c = s[i];
    if (c == '"') {
      i = SkipString(s, i);
      continue;
    }
    if (c == '(' || c == '[' || c == '{' || c == '<') ++depth;
    if (c == ')' || c == ']' || c == '}' || (c == '>' && (i == 0 || s[i - 1] != '-'))) {
      if (--depth == 0) return i + 1;
    }
  }
  return absl::string_view::npos;
}

// Splits at commas outside brackets and strings.
std::vector<absl::string_view> SplitTopLevel(absl::string_view s) {
  std::vector<absl::string_view> parts;
  int depth = 0;
  size_t start = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (c == '"') {
      i = SkipString(s, i);
      continue;
    }
    if (c == '(' || c == '[' || c == '{' || c == '<') ++depth;
    if (c == ')' || c == ']' || c == '}' || (c == '>' && s[i - 1] != '-')) --depth;
    if (c == ',' && depth == 0) {
      parts.push_back(s.substr(start, i - start));
      start = i + 1;
    }
  }
  if (start < s.size()) parts.push_back(s.substr(start));
  return parts;
}

// Parses the first `tensor<...>` in `text` (outside attribute dictionaries).
absl::StatusOr<pjrt::ArrayShape> ParseTensorType(absl::string_view text, absl::string_view what) {
  size_t brace = text.find('{');
  size_t pos = text.find("tensor<");
  if (pos == absl::string_view::npos || (brace != absl::string_view::npos && brace < pos)) {
    return absl::InvalidArgumentError(absl::StrCat(what, " is not a tensor: '", text, "'"));
  }
  size_t end = MatchClose(text, pos + 6);
  if (end == absl::string_view::npos) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": unterminated tensor type"));
  }
  absl::string_view body = text.substr(pos + 7, end - pos - 8);
  body = body.substr(0, body.find(','));  // drop an encoding
  std::vector<absl::string_view> pieces = absl::StrSplit(body, 'x');
  pjrt::ArrayShape shape;
  for (size_t i = 0; i + 1 < pieces.size(); ++i) {
    int64_t dim = 0;
    if (!absl::SimpleAtoi(pieces[i], &dim) || dim < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          what, ": dimension '", pieces[i], "' is not static (only static shapes are supported)"));
    }
    shape.dims.push_back(dim);
  }
  absl::StatusOr<ElementType> type = ParseElementType(pieces.back());
  if (!type.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": ", type.status().message()));
  }
  shape.type = *type;
  return shape;
}

}  // namespace

absl::StatusOr<std::optional<ProgramSignature>> ParseProgramSignature(absl::string_view program) {
  size_t at = program.find("@main(");
  if (at == absl::string_view::npos || program.find("func.func") == absl::string_view::npos) {
    return std::optional<ProgramSignature>();
  }
  const size_t open = at + 5;
  const size_t close = MatchClose(program, open);
  if (close == absl::string_view::npos) return std::optional<ProgramSignature>();
  ProgramSignature sig;
  absl::string_view args = program.substr(open + 1, close - open - 2);
  int index = 0;
  for (absl::string_view arg : SplitTopLevel(args)) {
    size_t colon = arg.find(':');
    if (colon == absl::string_view::npos) continue;
    SHARDRT_ASSIGN_OR_RETURN(pjrt::ArrayShape shape,
                             ParseTensorType(arg.substr(colon + 1),
                                             absl::StrCat("@main argument ", index)));
    sig.parameters.push_back(std::move(shape));
    ++index;
  }
  absl::string_view rest = program.substr(close);
  size_t arrow = rest.find_first_not_of(" \t\r\n");
  if (arrow == absl::string_view::npos || rest.substr(arrow, 2) != "->") {
    return std::optional<ProgramSignature>(std::move(sig));  // no results
  }
  rest = rest.substr(arrow + 2);
  size_t first = rest.find_first_not_of(" \t\r\n");
  if (first == absl::string_view::npos) return absl::InvalidArgumentError("@main: no result type");
  std::vector<absl::string_view> results;
  if (rest[first] == '(') {
    size_t end = MatchClose(rest, first);
    if (end == absl::string_view::npos) return absl::InvalidArgumentError("@main: bad results");
    results = SplitTopLevel(rest.substr(first + 1, end - first - 2));
  } else {
    size_t end = MatchClose(rest, first + 6);
    if (end == absl::string_view::npos) return absl::InvalidArgumentError("@main: bad result");
    results.push_back(rest.substr(first, end - first));
  }
  for (size_t i = 0; i < results.size(); ++i) {
    SHARDRT_ASSIGN_OR_RETURN(pjrt::ArrayShape shape,
                             ParseTensorType(results[i], absl::StrCat("@main result ", i)));
    sig.results.push_back(std::move(shape));
  }
  return std::optional<ProgramSignature>(std::move(sig));
}

}  // namespace shardrt
