// A strict JSON parser (RFC 8259) for tests that check files the runtime writes, e.g. Chrome
// traces. Small and slow; not for production use.
#pragma once

#include <cctype>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace shardrt::testing {

struct JsonValue {
  enum class Kind { kNull, kBool, kNumber, kString, kArray, kObject };
  Kind kind = Kind::kNull;
  bool boolean = false;
  double number = 0.0;
  std::string string;
  std::vector<JsonValue> array;
  std::map<std::string, JsonValue> object;  // duplicate keys: the last wins

  bool Has(const std::string& key) const {
    return kind == Kind::kObject && object.count(key) > 0;
  }
  // The member `key` (a null value when absent).
  const JsonValue& operator[](const std::string& key) const {
    static const JsonValue kNull;
    auto it = object.find(key);
    return it == object.end() ? kNull : it->second;
  }
};

class JsonParser {
 public:
  // Parses `text` as one JSON value with nothing but white space around it. On failure returns
  // false and sets `error` (with the byte offset).
  static bool Parse(const std::string& text, JsonValue* out, std::string* error) {
    JsonParser p(text);
    if (!p.Value(out, 0)) {
      *error = p.error_;
      return false;
    }
    p.Space();
    if (p.pos_ != text.size()) {
      *error = "trailing characters at offset " + std::to_string(p.pos_);
      return false;
    }
    return true;
  }

 private:
  explicit JsonParser(const std::string& text) : s_(text) {}

  bool Fail(const std::string& what) {
    if (error_.empty()) error_ = what + " at offset " + std::to_string(pos_);
    return false;
  }
  void Space() {
    while (pos_ < s_.size() &&
           (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r')) {
      ++pos_;
    }
  }
  bool Literal(const char* word) {
    size_t n = std::char_traits<char>::length(word);
    if (s_.compare(pos_, n, word) != 0) return Fail(std::string("expected ") + word);
    pos_ += n;
    return true;
  }
  bool Value(JsonValue* v, int depth) {
    if (depth > 256) return Fail("nesting too deep");
    Space();
    if (pos_ >= s_.size()) return Fail("unexpected end");
    char c = s_[pos_];
    if (c == '{') return Object(v, depth);
    if (c == '[') return Array(v, depth);
    if (c == '"') {
      v->kind = JsonValue::Kind::kString;
      return String(&v->string);
    }
    if (c == 't') {
      v->kind = JsonValue::Kind::kBool;
      v->boolean = true;
      return Literal("true");
    }
    if (c == 'f') {
      v->kind = JsonValue::Kind::kBool;
      return Literal("false");
    }
    if (c == 'n') return Literal("null");
    return Number(v);
  }
  bool Number(JsonValue* v) {
    size_t start = pos_;
    if (pos_ < s_.size() && s_[pos_] == '-') ++pos_;
    if (pos_ >= s_.size() || !isdigit(static_cast<unsigned char>(s_[pos_]))) {
      return Fail("invalid value");
    }
    if (s_[pos_] == '0') {
      ++pos_;
    } else {
      while (pos_ < s_.size() && isdigit(static_cast<unsigned char>(s_[pos_]))) ++pos_;
    }
    if (pos_ < s_.size() && s_[pos_] == '.') {
      ++pos_;
      if (pos_ >= s_.size() || !isdigit(static_cast<unsigned char>(s_[pos_]))) {
        return Fail("digit expected after '.'");
      }
      while (pos_ < s_.size() && isdigit(static_cast<unsigned char>(s_[pos_]))) ++pos_;
    }
    if (pos_ < s_.size() && (s_[pos_] == 'e' || s_[pos_] == 'E')) {
      ++pos_;
      if (pos_ < s_.size() && (s_[pos_] == '+' || s_[pos_] == '-')) ++pos_;
      if (pos_ >= s_.size() || !isdigit(static_cast<unsigned char>(s_[pos_]))) {
        return Fail("digit expected in exponent");
      }
      while (pos_ < s_.size() && isdigit(static_cast<unsigned char>(s_[pos_]))) ++pos_;
    }
    v->kind = JsonValue::Kind::kNumber;
    v->number = std::strtod(s_.substr(start, pos_ - start).c_str(), nullptr);
    return true;
  }
  bool String(std::string* out) {
    ++pos_;  // opening quote
    while (pos_ < s_.size()) {
      unsigned char c = static_cast<unsigned char>(s_[pos_++]);
      if (c == '"') return true;
      if (c < 0x20) return Fail("control character in string");
      if (c != '\\') {
        out->push_back(static_cast<char>(c));
        continue;
      }
      if (pos_ >= s_.size()) break;
      char e = s_[pos_++];
      switch (e) {
        case '"': out->push_back('"'); break;
        case '\\': out->push_back('\\'); break;
        case '/': out->push_back('/'); break;
        case 'b': out->push_back('\b'); break;
        case 'f': out->push_back('\f'); break;
        case 'n': out->push_back('\n'); break;
        case 'r': out->push_back('\r'); break;
        case 't': out->push_back('\t'); break;
        case 'u': {
          if (pos_ + 4 > s_.size()) return Fail("short \\u escape");
          unsigned code = 0;
          for (int i = 0; i < 4; ++i) {
            char h = s_[pos_++];
            code <<= 4;
            if (h >= '0' && h <= '9') code |= h - '0';
            else if (h >= 'a' && h <= 'f') code |= h - 'a' + 10;
            else if (h >= 'A' && h <= 'F') code |= h - 'A' + 10;
            else return Fail("bad hex digit in \\u escape");
          }
          // Tests only need ASCII; other code points are kept as '?'.
          out->push_back(code < 0x80 ? static_cast<char>(code) : '?');
          break;
        }
        default:
          return Fail("bad escape");
      }
    }
    return Fail("unterminated string");
  }
  bool Array(JsonValue* v, int depth) {
    ++pos_;
    v->kind = JsonValue::Kind::kArray;
    Space();
    if (pos_ < s_.size() && s_[pos_] == ']') {
      ++pos_;
      return true;
    }
    while (true) {
      v->array.emplace_back();
      if (!Value(&v->array.back(), depth + 1)) return false;
      Space();
      if (pos_ >= s_.size()) return Fail("unterminated array");
      if (s_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (s_[pos_] == ']') {
        ++pos_;
        return true;
      }
      return Fail("expected ',' or ']'");
    }
  }
  bool Object(JsonValue* v, int depth) {
    ++pos_;
    v->kind = JsonValue::Kind::kObject;
    Space();
    if (pos_ < s_.size() && s_[pos_] == '}') {
      ++pos_;
      return true;
    }
    while (true) {
      Space();
      if (pos_ >= s_.size() || s_[pos_] != '"') return Fail("expected a key");
      std::string key;
      if (!String(&key)) return false;
      Space();
      if (pos_ >= s_.size() || s_[pos_] != ':') return Fail("expected ':'");
      ++pos_;
      JsonValue member;
      if (!Value(&member, depth + 1)) return false;
      v->object[key] = std::move(member);
      Space();
      if (pos_ >= s_.size()) return Fail("unterminated object");
      if (s_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (s_[pos_] == '}') {
        ++pos_;
        return true;
      }
      return Fail("expected ',' or '}'");
    }
  }

  const std::string& s_;
  size_t pos_ = 0;
  std::string error_;
};

}  // namespace shardrt::testing
