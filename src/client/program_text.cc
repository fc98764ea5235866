#include "client/program_text.h"

#include <cctype>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "shardrt/base/status_macros.h"
#include "shardrt/base/element_type.h"

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
absl::StatusOr<ArrayShape> ParseTensorType(absl::string_view text, absl::string_view what) {
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
  ArrayShape shape;
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
    SHARDRT_ASSIGN_OR_RETURN(ArrayShape shape,
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
    SHARDRT_ASSIGN_OR_RETURN(ArrayShape shape,
                             ParseTensorType(results[i], absl::StrCat("@main result ", i)));
    sig.results.push_back(std::move(shape));
  }
  return std::optional<ProgramSignature>(std::move(sig));
}

namespace {

constexpr absl::string_view kBytecodeMagic("ML\xefR", 4);

// Where `needle` occurs at or after `from` outside `//` comments, or npos.
size_t FindOutsideComments(absl::string_view text, absl::string_view needle, size_t from = 0) {
  for (size_t at = text.find(needle, from); at != absl::string_view::npos;
       at = text.find(needle, at + 1)) {
    const size_t line = text.rfind('\n', at);
    const size_t begin = line == absl::string_view::npos ? 0 : line + 1;
    if (text.substr(begin, at - begin).find("//") == absl::string_view::npos) return at;
  }
  return absl::string_view::npos;
}

// The value of `name = <digits>` in module attributes (the first one outside comments).
absl::StatusOr<std::optional<int64_t>> DeclaredCount(absl::string_view text,
                                                     absl::string_view name) {
  const size_t at = FindOutsideComments(text, name);
  if (at == absl::string_view::npos) return std::optional<int64_t>();
  size_t i = at + name.size();
  auto skip_spaces = [&] {
    while (i < text.size() && (text[i] == ' ' || text[i] == '\t' || text[i] == '\n' ||
                               text[i] == '\r')) {
      ++i;
    }
  };
  skip_spaces();
  if (i >= text.size() || text[i] != '=') return std::optional<int64_t>();
  ++i;
  skip_spaces();
  size_t end = i;
  while (end < text.size() && end - i < 20 && absl::ascii_isdigit(text[end])) ++end;
  int64_t value = 0;
  if (end == i || !absl::SimpleAtoi(text.substr(i, end - i), &value) ||
      (end < text.size() && absl::ascii_isdigit(text[end]))) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the program declares ", name, " = ", text.substr(i, std::min<size_t>(end - i, 24)),
        (end - i > 24 ? "..." : ""), ": expected a number that fits in int64"));
  }
  return std::optional<int64_t>(value);
}

}  // namespace

bool IsMlirBytecode(absl::string_view program) {
  return absl::StartsWith(program, kBytecodeMagic);
}

absl::StatusOr<ProgramInfo> InspectProgram(absl::string_view program) {
  ProgramInfo info;
  info.is_text = !IsMlirBytecode(program);
  if (!info.is_text) {
    // Attribute names live in the bytecode's string table.
    info.uses_shardy = program.find("sdy.") != absl::string_view::npos;
    return info;
  }
  info.uses_shardy = FindOutsideComments(program, "sdy.") != absl::string_view::npos;
  SHARDRT_ASSIGN_OR_RETURN(info.declared_partitions,
                           DeclaredCount(program, "mhlo.num_partitions"));
  SHARDRT_ASSIGN_OR_RETURN(info.declared_replicas, DeclaredCount(program, "mhlo.num_replicas"));
  SHARDRT_ASSIGN_OR_RETURN(info.signature, ParseProgramSignature(program));
  return info;
}

std::string MlirTensorType(const ArrayShape& shape) {
  std::string type = "tensor<";
  for (int64_t d : shape.dims) absl::StrAppend(&type, d, "x");
  const absl::string_view name = ElementTypeName(shape.type);
  if (shape.type == ElementType::kPred) {
    absl::StrAppend(&type, "i1");
  } else if (absl::StartsWith(name, "s")) {
    absl::StrAppend(&type, "i", name.substr(1));
  } else if (absl::StartsWith(name, "u")) {
    absl::StrAppend(&type, "ui", name.substr(1));
  } else {
    absl::StrAppend(&type, name);
  }
  return absl::StrCat(type, ">");
}

std::string ReshardProgram(const ArrayShape& shape, const Sharding& from, const Sharding& to,
                           int64_t partitions) {
  const std::string tensor = MlirTensorType(shape);
  return absl::StrCat(
      "module @reshard attributes {mhlo.num_partitions = ", partitions,
      " : i32, mhlo.num_replicas = 1 : i32} {\n"
      "  func.func public @main(%arg0: ", tensor, " {mhlo.sharding = \"", from.ToString(),
      "\"}) -> (", tensor, " {mhlo.sharding = \"", to.ToString(), "\"}) {\n    return %arg0 : ",
      tensor, "\n  }\n}\n");
}

}  // namespace shardrt
