// MlirLexer: the tokens of MLIR's textual form (LangRef "Lexical structure"), one at a time.
//
// Identifiers (bare `func.func`, and `@sym`, `@"quoted sym"`, `%value`, `#attr`, `!type`,
// `^block`), string literals with escapes, integers and floats, `->`, and single-character
// punctuation. `//` comments and whitespace are skipped. The lexer never allocates per token
// and never recurses: a token is a view into the text. Used by program_text.cc; not thread-safe
// (one owner), the text must outlive it.
#pragma once

#include <cstddef>
#include <cstdint>

#include "absl/strings/string_view.h"

namespace shardrt {

struct MlirToken {
  enum class Kind {
    kBareId,     // func.func, tensor, mhlo.num_partitions, x3xf32, ...
    kAtId,       // @main, @"main"
    kPercentId,  // %arg0
    kHashId,     // #sdy.sharding
    kBangId,     // !stablehlo.token
    kCaretId,    // ^bb0
    kString,     // "..." (text includes the quotes)
    kInteger,    // 42, 0x2A
    kFloat,      // 1.5, 2.0e-3
    kArrow,      // ->
    kPunct,      // one character: ( ) { } [ ] < > : , = ? * + - . | ...
    kError,      // an unterminated string, a lone @ or %, a character MLIR does not allow
    kEnd,        // end of the text
  };
  Kind kind = Kind::kEnd;
  absl::string_view text;  // a view into the lexed text
  size_t offset = 0;       // where `text` starts

  bool Is(Kind k, absl::string_view t) const { return kind == k && text == t; }
  bool IsPunct(char c) const { return kind == Kind::kPunct && text.size() == 1 && text[0] == c; }
};

class MlirLexer {
 public:
  explicit MlirLexer(absl::string_view text) : text_(text) {}

  // The next token (kEnd at and after the end; kError for what cannot be lexed, after which
  // lexing goes on at the next character).
  MlirToken Next();
  // The 1-based line of `offset` in the text, for messages.
  int64_t LineOf(size_t offset) const;
  absl::string_view text() const { return text_; }

 private:
  void SkipSpaceAndComments();
  absl::string_view text_;
  size_t pos_ = 0;
};

}  // namespace shardrt
