#include "llama/utf8.h"

namespace shardrt::llama::utf8 {
namespace {

// Whether `c` may follow `lead` as the second byte of a sequence (the ranges that exclude
// overlong forms, surrogates and code points beyond U+10FFFF).
bool ValidSecondByte(uint8_t lead, uint8_t c) {
  switch (lead) {
    case 0xE0: return c >= 0xA0 && c <= 0xBF;
    case 0xED: return c >= 0x80 && c <= 0x9F;
    case 0xF0: return c >= 0x90 && c <= 0xBF;
    case 0xF4: return c >= 0x80 && c <= 0x8F;
    default: return c >= 0x80 && c <= 0xBF;
  }
}

}  // namespace

// The length of the UTF-8 sequence a lead byte starts (2..4), or 0 if `b` cannot start a
// multi-byte sequence (ASCII, a continuation byte, or a byte never valid in UTF-8).
int SequenceLength(uint8_t b) {
  if (b >= 0xC2 && b <= 0xDF) return 2;
  if (b >= 0xE0 && b <= 0xEF) return 3;
  if (b >= 0xF0 && b <= 0xF4) return 4;
  return 0;
}

// Whether s[pos..pos+n) is a complete, valid sequence (n = SequenceLength(s[pos]) >= 2) or, if
// it is cut short by the end of `s`, a valid prefix of one. Returns the number of valid bytes
// (n when complete; fewer when `s` ends inside it); 0 when the bytes cannot form a sequence.
size_t ValidSequencePrefix(absl::string_view s, size_t pos, int n) {
  const auto lead = static_cast<uint8_t>(s[pos]);
  size_t i = 1;
  for (; i < static_cast<size_t>(n) && pos + i < s.size(); ++i) {
    const auto c = static_cast<uint8_t>(s[pos + i]);
    if (i == 1 ? !ValidSecondByte(lead, c) : !IsContinuation(c)) return 0;
  }
  return i;
}

// The offset of the first byte that does not belong to a valid UTF-8 sequence, or npos.
size_t FindInvalidUtf8(absl::string_view s) {
  size_t pos = 0;
  while (pos < s.size()) {
    const auto b = static_cast<uint8_t>(s[pos]);
    if (b < 0x80) {
      ++pos;
      continue;
    }
    const int n = SequenceLength(b);
    if (n == 0 || pos + n > s.size() || ValidSequencePrefix(s, pos, n) != static_cast<size_t>(n)) {
      return pos;
    }
    pos += n;
  }
  return absl::string_view::npos;
}

std::string ReplaceInvalidUtf8(absl::string_view s) {
  std::string out;
  for (size_t bad = FindInvalidUtf8(s); bad != absl::string_view::npos;
       bad = FindInvalidUtf8(s)) {
    out.append(s.data(), bad);
    out.append("\xEF\xBF\xBD");
    // The maximal subpart: a lead byte and the bytes after it that could still continue its
    // sequence (Unicode's recommended practice, as Python's and Rust's lossy decoders).
    const auto lead = static_cast<uint8_t>(s[bad]);
    const int n = SequenceLength(lead);
    size_t length = 1;
    while (n >= 2 && length < static_cast<size_t>(n) && bad + length < s.size()) {
      const auto c = static_cast<uint8_t>(s[bad + length]);
      if (length == 1 ? !ValidSecondByte(lead, c) : !IsContinuation(c)) break;
      ++length;
    }
    s.remove_prefix(bad + length);
  }
  out.append(s.data(), s.size());
  return out;
}

}  // namespace shardrt::llama::utf8
