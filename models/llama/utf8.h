// UTF-8 validity, as the tokenizer and the text the CLI prints need it: which bytes form valid
// sequences (no overlong forms, surrogates or code points beyond U+10FFFF). Pure functions,
// thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"

namespace shardrt::llama::utf8 {

// The length of the UTF-8 sequence a lead byte starts (2..4), or 0 if `b` cannot start a
// multi-byte sequence (ASCII, a continuation byte, or a byte never valid in UTF-8).
int SequenceLength(uint8_t b);

// Whether `c` is a continuation byte (10xxxxxx).
inline bool IsContinuation(uint8_t c) { return (c & 0xC0) == 0x80; }

// Whether s[pos..pos+n) is a complete, valid sequence (n = SequenceLength(s[pos]) >= 2) or, if
// it is cut short by the end of `s`, a valid prefix of one. Returns the number of valid bytes
// (n when complete; fewer when `s` ends inside it); 0 when the bytes cannot form a sequence.
size_t ValidSequencePrefix(absl::string_view s, size_t pos, int n);

// The offset of the first byte that does not belong to a valid UTF-8 sequence, or npos.
size_t FindInvalidUtf8(absl::string_view s);

// `s` with each maximal invalid subpart (a byte that starts no sequence, or a lead byte and
// the bytes after it that begin its sequence validly but do not complete it) replaced by one
// U+FFFD: Unicode's recommended practice, as Python's and Rust's lossy decoders (and so Hugging
// Face tokenizers' decode) do.
std::string ReplaceInvalidUtf8(absl::string_view s);

}  // namespace shardrt::llama::utf8
