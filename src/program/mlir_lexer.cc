#include "program/mlir_lexer.h"

#include <algorithm>

namespace shardrt {
namespace {

bool IsLetter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsHexDigit(char c) { return IsDigit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }
// bare-id continues with letters, digits, '_', '$' and '.'.
bool IsBareIdChar(char c) { return IsLetter(c) || IsDigit(c) || c == '_' || c == '$' || c == '.'; }
// suffix-id (after @ % # ! ^) continues with letters, digits and '$', '.', '_', '-'.
bool IsSuffixIdChar(char c) { return IsBareIdChar(c) || c == '-'; }

}  // namespace

void MlirLexer::SkipSpaceAndComments() {
  while (pos_ < text_.size()) {
    const char c = text_[pos_];
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v') {
      ++pos_;
    } else if (c == '/' && pos_ + 1 < text_.size() && text_[pos_ + 1] == '/') {
      const size_t eol = text_.find('\n', pos_);
      pos_ = eol == absl::string_view::npos ? text_.size() : eol + 1;
    } else {
      return;
    }
  }
}

MlirToken MlirLexer::Next() {
  SkipSpaceAndComments();
  MlirToken token;
  token.offset = pos_;
  if (pos_ >= text_.size()) {
    token.kind = MlirToken::Kind::kEnd;
    return token;
  }
  const size_t start = pos_;
  const char c = text_[pos_];
  auto finish = [&](MlirToken::Kind kind) {
    token.kind = kind;
    token.text = text_.substr(start, pos_ - start);
    return token;
  };
  auto scan_string = [&]() -> bool {  // at a '"': true when it closes
    ++pos_;
    while (pos_ < text_.size() && text_[pos_] != '"' && text_[pos_] != '\n') {
      pos_ += (text_[pos_] == '\\' && pos_ + 1 < text_.size()) ? 2 : 1;
    }
    if (pos_ >= text_.size() || text_[pos_] != '"') return false;
    ++pos_;
    return true;
  };
  if (IsLetter(c) || c == '_') {
    while (pos_ < text_.size() && IsBareIdChar(text_[pos_])) ++pos_;
    return finish(MlirToken::Kind::kBareId);
  }
  if (c == '"') return finish(scan_string() ? MlirToken::Kind::kString : MlirToken::Kind::kError);
  if (c == '@' || c == '%' || c == '#' || c == '!' || c == '^') {
    ++pos_;
    MlirToken::Kind kind = c == '@'   ? MlirToken::Kind::kAtId
                           : c == '%' ? MlirToken::Kind::kPercentId
                           : c == '#' ? MlirToken::Kind::kHashId
                           : c == '!' ? MlirToken::Kind::kBangId
                                      : MlirToken::Kind::kCaretId;
    if (c == '@' && pos_ < text_.size() && text_[pos_] == '"') {
      return finish(scan_string() ? kind : MlirToken::Kind::kError);
    }
    const size_t body = pos_;
    while (pos_ < text_.size() && IsSuffixIdChar(text_[pos_])) ++pos_;
    return finish(pos_ > body ? kind : MlirToken::Kind::kError);
  }
  if (IsDigit(c)) {
    if (c == '0' && pos_ + 1 < text_.size() && text_[pos_ + 1] == 'x' && pos_ + 2 < text_.size() &&
        IsHexDigit(text_[pos_ + 2])) {
      pos_ += 2;
      while (pos_ < text_.size() && IsHexDigit(text_[pos_])) ++pos_;
      return finish(MlirToken::Kind::kInteger);
    }
    while (pos_ < text_.size() && IsDigit(text_[pos_])) ++pos_;
    if (pos_ < text_.size() && text_[pos_] == '.') {
      ++pos_;
      while (pos_ < text_.size() && IsDigit(text_[pos_])) ++pos_;
      if (pos_ < text_.size() && (text_[pos_] == 'e' || text_[pos_] == 'E')) {
        size_t exp = pos_ + 1;
        if (exp < text_.size() && (text_[exp] == '+' || text_[exp] == '-')) ++exp;
        if (exp < text_.size() && IsDigit(text_[exp])) {
          pos_ = exp;
          while (pos_ < text_.size() && IsDigit(text_[pos_])) ++pos_;
        }
      }
      return finish(MlirToken::Kind::kFloat);
    }
    return finish(MlirToken::Kind::kInteger);
  }
  if (c == '-' && pos_ + 1 < text_.size() && text_[pos_ + 1] == '>') {
    pos_ += 2;
    return finish(MlirToken::Kind::kArrow);
  }
  ++pos_;
  if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) {
    return finish(MlirToken::Kind::kError);
  }
  return finish(MlirToken::Kind::kPunct);
}

int64_t MlirLexer::LineOf(size_t offset) const {
  offset = std::min(offset, text_.size());
  return 1 + std::count(text_.begin(), text_.begin() + static_cast<std::ptrdiff_t>(offset), '\n');
}

}  // namespace shardrt
