#include "shardrt/program/program_text.h"

#include <algorithm>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "program/mlir_bytecode.h"
#include "program/mlir_lexer.h"
#include "shardrt/base/element_type.h"
#include "shardrt/base/limits.h"
#include "shardrt/base/status_macros.h"
#include "shardrt/sharding/shape.h"

namespace shardrt {
namespace {

constexpr absl::string_view kBytecodeMagic("ML\xefR", 4);
using Kind = MlirToken::Kind;

// A name of the Shardy dialect: `sdy.sharding`, `#sdy.sharding<...>`, `sdy.mesh`.
bool IsShardyToken(const MlirToken& token) {
  return (token.kind == Kind::kBareId || token.kind == Kind::kHashId) &&
         absl::StrContains(token.text, "sdy.");
}

// At most this much of a piece of program text is quoted in a message.
constexpr size_t kQuoted = 60;

std::string Quote(absl::string_view text) {
  return absl::StrCat("'", text.substr(0, kQuoted), text.size() > kQuoted ? "...'" : "'");
}

// One pass over the tokens of a program, collecting ProgramInfo. Iterative throughout: no
// recursion, so no input can exhaust the stack; work is linear in the text.
class Inspector {
 public:
  explicit Inspector(absl::string_view text) : lexer_(text) {}

  absl::StatusOr<ProgramInfo> Run() {
    ProgramInfo info;
    Advance();
    while (token_.kind != Kind::kEnd) {
      if (IsShardyToken(token_)) info.uses_shardy = true;
      if (token_.Is(Kind::kBareId, "tensor")) {
        SHARDRT_ASSIGN_OR_RETURN(std::optional<ArrayShape> shape, TensorType("a tensor type"));
        (void)shape;
        continue;
      }
      if (token_.Is(Kind::kBareId, "mhlo.num_partitions") && !info.declared_partitions) {
        SHARDRT_ASSIGN_OR_RETURN(info.declared_partitions, DeclaredCount());
        continue;
      }
      if (token_.Is(Kind::kBareId, "mhlo.num_replicas") && !info.declared_replicas) {
        SHARDRT_ASSIGN_OR_RETURN(info.declared_replicas, DeclaredCount());
        continue;
      }
      if (token_.Is(Kind::kBareId, "func.func") && !info.signature) {
        SHARDRT_ASSIGN_OR_RETURN(info.signature, Function());
        continue;
      }
      Advance();
    }
    return info;
  }

 private:
  void Advance() { token_ = lexer_.Next(); }

  std::string Where(size_t offset) const { return absl::StrCat("line ", lexer_.LineOf(offset)); }

  absl::Status Unexpected(absl::string_view what, absl::string_view expected) const {
    return absl::InvalidArgumentError(absl::StrCat(
        what, " at ", Where(token_.offset), ": expected ", expected, ", got ",
        token_.kind == Kind::kEnd ? "the end of the program" : Quote(token_.text)));
  }

  // At an opening bracket: skips to just past its partner, balancing (), [], {} and <>.
  absl::Status SkipBalanced(absl::string_view what) {
    const size_t start = token_.offset;
    int64_t depth = 0;
    do {
      if (token_.kind == Kind::kEnd) {
        return absl::InvalidArgumentError(
            absl::StrCat(what, " opened at ", Where(start), " is never closed"));
      }
      if (token_.kind == Kind::kPunct) {
        const char c = token_.text[0];
        if (c == '(' || c == '[' || c == '{' || c == '<') ++depth;
        if (c == ')' || c == ']' || c == '}' || c == '>') --depth;
      }
      Advance();
    } while (depth > 0);
    return absl::OkStatus();
  }

  // At `mhlo.num_partitions` / `mhlo.num_replicas`: reads `= <integer>`; nullopt when the name
  // is not followed by `=` (e.g. a mention in an attribute value).
  absl::StatusOr<std::optional<int64_t>> DeclaredCount() {
    const absl::string_view name = token_.text;
    Advance();
    if (!token_.IsPunct('=')) return std::optional<int64_t>();
    Advance();
    int64_t value = 0;
    if (token_.kind != Kind::kInteger || !absl::SimpleAtoi(token_.text, &value) || value < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the program declares ", name, " = ", Quote(token_.text), " at ", Where(token_.offset),
          ": expected a number that fits in int64"));
    }
    Advance();
    return std::optional<int64_t>(value);
  }

  // At `tensor`: reads `tensor<dims x type[, encoding]>`. Every tensor type in the program is
  // checked: its element count and byte size must fit in int64 (the compiler aborts on ones that
  // do not). Returns the shape when it is static and of a supported element type, else nullopt
  // (dynamic or unsupported types are an error only where a signature needs them: see
  // SignatureType).
  absl::StatusOr<std::optional<ArrayShape>> TensorType(absl::string_view what) {
    const size_t at = token_.offset;
    Advance();
    if (!token_.IsPunct('<')) return std::optional<ArrayShape>();  // the word, not the type
    const size_t open = token_.offset;
    SHARDRT_RETURN_IF_ERROR(SkipBalanced("tensor type"));
    // The body between the brackets, as written (the lexer would split `10x3xf32` oddly).
    absl::string_view body = lexer_.text().substr(open + 1, token_.offset - open - 1);
    body = absl::StripAsciiWhitespace(body.substr(0, body.rfind('>')));
    int64_t depth = 0;
    for (size_t i = 0; i < body.size(); ++i) {  // drop an encoding: `, #enc` at depth 0
      if (body[i] == '<') ++depth;
      if (body[i] == '>') --depth;
      if (body[i] == ',' && depth == 0) {
        body = absl::StripAsciiWhitespace(body.substr(0, i));
        break;
      }
    }
    ArrayShape shape;
    bool is_static = true;
    absl::string_view rest = body;
    while (true) {  // leading `<dim>x` groups
      size_t n = 0;
      while (n < rest.size() && (absl::ascii_isdigit(rest[n]) || rest[n] == '?')) ++n;
      if (n == 0 || n >= rest.size() || rest[n] != 'x') break;
      int64_t dim = 0;
      if (rest.substr(0, n) == "?") {
        is_static = false;
      } else if (!absl::SimpleAtoi(rest.substr(0, n), &dim)) {
        return absl::InvalidArgumentError(absl::StrCat(
            what, " at ", Where(at), ": dimension ", Quote(rest.substr(0, n)),
            " does not fit in int64"));
      } else {
        shape.dims.push_back(dim);
      }
      rest = rest.substr(n + 1);
      if (static_cast<int64_t>(shape.dims.size()) > limits::kMaxRank) {
        return absl::InvalidArgumentError(absl::StrCat(what, " at ", Where(at), ": rank above ",
                                                       limits::kMaxRank));
      }
    }
    absl::StatusOr<ElementType> type = ParseElementType(rest);
    if (is_static) {
      absl::StatusOr<int64_t> elements = NumElements(shape.dims, absl::StrCat("tensor<", body, ">"));
      int64_t bytes = 0;
      if (!elements.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat(what, " at ", Where(at), ": ", elements.status().message()));
      }
      if (type.ok() && !CheckedMul(*elements, ElementSizeInBytes(*type), &bytes)) {
        return absl::InvalidArgumentError(absl::StrCat(what, " at ", Where(at), ": tensor<",
                                                       body, "> has more bytes than fit in int64"));
      }
    }
    if (!is_static || !type.ok()) {
      last_unsupported_ = absl::StrCat(
          !is_static ? "has a dynamic dimension ('?'); only static shapes are supported"
                     : absl::StrCat("has element type ", Quote(rest),
                                    ", which shardrt does not support"),
          ": tensor<", body, ">");
      return std::optional<ArrayShape>();
    }
    shape.type = *type;
    return std::optional<ArrayShape>(std::move(shape));
  }

  // A type in @main's signature: a static tensor of a supported type, within the limits.
  absl::StatusOr<ArrayShape> SignatureType(const std::string& what) {
    if (!token_.Is(Kind::kBareId, "tensor")) {
      return Unexpected(what, "a tensor type (shardrt runs programs on arrays)");
    }
    last_unsupported_.clear();
    SHARDRT_ASSIGN_OR_RETURN(std::optional<ArrayShape> shape, TensorType(what));
    if (!shape.has_value()) {
      return absl::InvalidArgumentError(absl::StrCat(
          what, " ", last_unsupported_.empty() ? "is not a tensor type" : last_unsupported_));
    }
    int64_t bytes = 0;
    const int64_t elements = *NumElements(shape->dims);
    if (!CheckedMul(elements, ElementSizeInBytes(shape->type), &bytes) ||
        bytes > limits::kMaxArrayBytes) {
      return absl::InvalidArgumentError(absl::StrCat(
          what, " ", ShapeToString(*shape), " is larger than the limit of ",
          limits::kMaxArrayBytes, " bytes per array"));
    }
    return *shape;
  }

  // Skips what may follow a type in an argument or result: an attribute dictionary, `loc(...)`.
  absl::Status SkipDecorations() {
    while (true) {
      if (token_.IsPunct('{')) {
        SHARDRT_RETURN_IF_ERROR(SkipBalanced("an attribute dictionary"));
      } else if (token_.Is(Kind::kBareId, "loc")) {
        Advance();
        if (token_.IsPunct('(')) SHARDRT_RETURN_IF_ERROR(SkipBalanced("a location"));
      } else {
        return absl::OkStatus();
      }
    }
  }

  // At `func.func`: if it is @main, reads its signature; else nullopt (and the scan goes on).
  absl::StatusOr<std::optional<ProgramSignature>> Function() {
    Advance();
    if (token_.Is(Kind::kBareId, "public") || token_.Is(Kind::kBareId, "private") ||
        token_.Is(Kind::kBareId, "nested")) {
      Advance();
    }
    if (!(token_.Is(Kind::kAtId, "@main") || token_.Is(Kind::kAtId, "@\"main\""))) {
      return std::optional<ProgramSignature>();
    }
    Advance();
    if (!token_.IsPunct('(')) return Unexpected("@main", "'(' opening its arguments");
    Advance();
    ProgramSignature sig;
    while (!token_.IsPunct(')')) {
      const std::string what = absl::StrCat("@main argument ", sig.parameters.size());
      if (!sig.parameters.empty()) {
        if (!token_.IsPunct(',')) return Unexpected(what, "',' or ')'");
        Advance();
      }
      if (token_.kind == Kind::kPercentId) {  // `%name :` (a declaration has no names)
        Advance();
        if (!token_.IsPunct(':')) return Unexpected(what, "':' before its type");
        Advance();
      }
      SHARDRT_ASSIGN_OR_RETURN(ArrayShape shape, SignatureType(what));
      sig.parameters.push_back(std::move(shape));
      SHARDRT_RETURN_IF_ERROR(SkipDecorations());
    }
    Advance();  // ')'
    if (token_.kind != Kind::kArrow) return std::optional<ProgramSignature>(std::move(sig));
    Advance();
    if (!token_.IsPunct('(')) {  // one result, without parentheses
      SHARDRT_ASSIGN_OR_RETURN(ArrayShape shape, SignatureType("@main result 0"));
      sig.results.push_back(std::move(shape));
      return std::optional<ProgramSignature>(std::move(sig));
    }
    Advance();
    while (!token_.IsPunct(')')) {
      const std::string what = absl::StrCat("@main result ", sig.results.size());
      if (!sig.results.empty()) {
        if (!token_.IsPunct(',')) return Unexpected(what, "',' or ')'");
        Advance();
      }
      SHARDRT_ASSIGN_OR_RETURN(ArrayShape shape, SignatureType(what));
      sig.results.push_back(std::move(shape));
      SHARDRT_RETURN_IF_ERROR(SkipDecorations());
    }
    Advance();
    return std::optional<ProgramSignature>(std::move(sig));
  }

  MlirLexer lexer_;
  MlirToken token_;
  std::string last_unsupported_;  // why the last TensorType gave nullopt
};

}  // namespace

namespace {

// Brackets open at once, at most limits::kMaxProgramNesting (strings and comments are tokens
// the lexer skips whole, so brackets in them do not count). `where` names the text in the
// message ("the program", "attribute 3 of the bytecode"). Error: InvalidArgument naming the
// line of `text` where the limit is passed.
absl::Status CheckNesting(absl::string_view text, absl::string_view where) {
  MlirLexer lexer(text);
  int64_t depth = 0;
  for (MlirToken token = lexer.Next(); token.kind != Kind::kEnd; token = lexer.Next()) {
    if (token.kind != Kind::kPunct || token.text.size() != 1) continue;
    const char c = token.text[0];
    if (c == '(' || c == '[' || c == '{' || c == '<') {
      if (++depth > limits::kMaxProgramNesting) {
        return absl::InvalidArgumentError(absl::StrCat(
            where, " nests brackets more than ", limits::kMaxProgramNesting, " deep at line ",
            lexer.LineOf(token.offset),
            " (limits::kMaxProgramNesting: deeper text would overflow the compiler's parser)"));
      }
    } else if (c == ')' || c == ']' || c == '}' || c == '>') {
      depth = std::max<int64_t>(depth - 1, 0);
    }
  }
  return absl::OkStatus();
}

// The attributes and types that MLIR bytecode stores as text go to the same recursive parser
// as a text program: their nesting has the same bound. (Entries of a dialect's own encoding are
// read by the bytecode reader from a worklist, not by recursion.)
absl::Status CheckBytecodeNesting(absl::string_view program) {
  SHARDRT_ASSIGN_OR_RETURN(std::vector<MlirBytecodeAsmEntry> entries,
                           MlirBytecodeAsmEntries(program));
  for (const MlirBytecodeAsmEntry& entry : entries) {
    SHARDRT_RETURN_IF_ERROR(CheckNesting(
        entry.text,
        absl::StrCat("the bytecode's ",
                     entry.kind == MlirBytecodeAsmEntry::Kind::kType ? "type " : "attribute ",
                     entry.index, " (in assembly form)")));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ProgramInfo> InspectProgram(absl::string_view program) {
  ProgramInfo info;
  info.is_text = !IsMlirBytecode(program);
  if (!info.is_text) {
    // Attribute names live in the bytecode's string table.
    info.uses_shardy = UsesShardy(program);
    SHARDRT_RETURN_IF_ERROR(CheckBytecodeNesting(program));
    return info;
  }
  SHARDRT_RETURN_IF_ERROR(CheckNesting(program, "the program"));
  return Inspector(program).Run();
}

absl::StatusOr<std::optional<ProgramSignature>> ReadProgramSignature(absl::string_view program) {
  if (IsMlirBytecode(program)) return std::optional<ProgramSignature>();
  SHARDRT_ASSIGN_OR_RETURN(ProgramInfo info, InspectProgram(program));
  return std::move(info.signature);
}

absl::StatusOr<std::optional<int64_t>> DeclaredPartitions(absl::string_view program) {
  if (IsMlirBytecode(program)) return std::optional<int64_t>();
  SHARDRT_ASSIGN_OR_RETURN(ProgramInfo info, InspectProgram(program));
  return info.declared_partitions;
}

bool UsesShardy(absl::string_view program) {
  // Bytecode holds the names in its string table; text is lexed, so comments do not count.
  if (IsMlirBytecode(program)) return program.find("sdy.") != absl::string_view::npos;
  MlirLexer lexer(program);
  for (MlirToken token = lexer.Next(); token.kind != Kind::kEnd; token = lexer.Next()) {
    if (IsShardyToken(token)) return true;
  }
  return false;
}

bool IsMlirBytecode(absl::string_view program) {
  return absl::StartsWith(program, kBytecodeMagic);
}

absl::StatusOr<std::string> MlirTensorType(const ArrayShape& shape) {
  const absl::string_view element = ElementTypeMlirName(shape.type);
  if (element.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cannot write the MLIR type of ", ShapeToString(shape), ": element type ",
        static_cast<int32_t>(shape.type), " has no MLIR name"));
  }
  if (static_cast<int64_t>(shape.dims.size()) > limits::kMaxRank) {
    return absl::InvalidArgumentError(absl::StrCat("cannot write the MLIR type of ",
                                                   ShapeToString(shape), ": rank ",
                                                   shape.dims.size(), " is above ",
                                                   limits::kMaxRank));
  }
  SHARDRT_ASSIGN_OR_RETURN(const int64_t elements,
                           NumElements(shape.dims, absl::StrCat("the ", element, " tensor")));
  int64_t bytes = 0;
  if (!CheckedMul(elements, ElementSizeInBytes(shape.type), &bytes)) {
    return absl::InvalidArgumentError(absl::StrCat("cannot write the MLIR type of ",
                                                   ShapeToString(shape),
                                                   ": its byte size overflows int64"));
  }
  std::string type = "tensor<";
  for (int64_t d : shape.dims) absl::StrAppend(&type, d, "x");
  absl::StrAppend(&type, element, ">");
  return type;
}

}  // namespace shardrt
