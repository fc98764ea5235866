#include "llama/tokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <unicode/bytestream.h>
#include <unicode/normalizer2.h>
#include <unicode/stringpiece.h>
#include <unicode/utypes.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <queue>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "llama/gguf.h"
#include "llama/utf8.h"
#include "shardrt/base/status_macros.h"

namespace shardrt::llama {
namespace {

using utf8::FindInvalidUtf8;
using utf8::IsContinuation;
using utf8::SequenceLength;
using utf8::ValidSequencePrefix;

constexpr int64_t kMaxVocabSize = int64_t{1} << 24;

// ---------------------------------------------------------------------------------------------
// UTF-8

void AppendUtf8(uint32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

// ---------------------------------------------------------------------------------------------
// GPT-2's byte-to-unicode alphabet: printable Latin-1 bytes stand for themselves, the other 68
// bytes take U+0100 onwards in byte order.

std::array<uint32_t, 256> ByteToCodepoint() {
  std::array<uint32_t, 256> map{};
  uint32_t next = 256;
  for (int b = 0; b < 256; ++b) {
    const bool printable =
        (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    map[b] = printable ? static_cast<uint32_t>(b) : next++;
  }
  return map;
}

// A token's bytes: each character of its text mapped back through the alphabet. A text with a
// character outside the alphabet (or that is not valid UTF-8) stands for its own UTF-8 bytes, as
// in the ByteLevel decoder of Hugging Face tokenizers.
std::string TokenTextToBytes(absl::string_view text,
                             const absl::flat_hash_map<uint32_t, uint8_t>& codepoint_to_byte) {
  if (FindInvalidUtf8(text) != absl::string_view::npos) return std::string(text);
  std::string out;
  out.reserve(text.size());
  size_t pos = 0;
  while (pos < text.size()) {
    const auto b = static_cast<uint8_t>(text[pos]);
    uint32_t cp;
    int n = 1;
    if (b < 0x80) {
      cp = b;
    } else {
      n = SequenceLength(b);
      cp = b & (0x7F >> n);
      for (int i = 1; i < n; ++i) cp = (cp << 6) | (static_cast<uint8_t>(text[pos + i]) & 0x3F);
    }
    auto it = codepoint_to_byte.find(cp);
    if (it == codepoint_to_byte.end()) return std::string(text);
    out.push_back(static_cast<char>(it->second));
    pos += n;
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// NFC (the "qwen2" pre-tokenizer's normalizer), by ICU: its Normalizer2 singleton is immutable
// and thread-safe. ICU 72 (Debian 12) has Unicode 15.0 tables; tokenizers' NFC has older ones,
// which differ only on characters added since (none of which compose).

absl::Status AppendNfc(absl::string_view text, std::string* out) {
  UErrorCode status = U_ZERO_ERROR;
  const icu::Normalizer2* nfc = icu::Normalizer2::getNFCInstance(status);
  if (U_FAILURE(status)) {
    return absl::InternalError(
        absl::StrCat("tokenizer: ICU's NFC normalizer is unavailable: ", u_errorName(status)));
  }
  const icu::StringPiece piece(text.data(), static_cast<int32_t>(text.size()));
  if (nfc->isNormalizedUTF8(piece, status) && U_SUCCESS(status)) {
    out->append(text.data(), text.size());
    return absl::OkStatus();
  }
  status = U_ZERO_ERROR;
  icu::StringByteSink<std::string> sink(out);
  nfc->normalizeUTF8(0, piece, sink, nullptr, status);
  if (U_FAILURE(status)) {
    return absl::InternalError(
        absl::StrCat("tokenizer: NFC normalization failed: ", u_errorName(status)));
  }
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------------------------
// PCRE2

struct CodeDeleter {
  void operator()(pcre2_code* code) const { pcre2_code_free(code); }
};
struct MatchDataDeleter {
  void operator()(pcre2_match_data* data) const { pcre2_match_data_free(data); }
};
using MatchDataPtr = std::unique_ptr<pcre2_match_data, MatchDataDeleter>;

std::string Pcre2Message(int code) {
  std::array<PCRE2_UCHAR, 256> buffer{};
  if (pcre2_get_error_message(code, buffer.data(), buffer.size()) < 0) {
    return absl::StrCat("PCRE2 error ", code);
  }
  return std::string(reinterpret_cast<const char*>(buffer.data()));
}

// A compiled, Unicode-aware pattern; immutable, so usable from several threads at once (each
// with its own match data).
class Regex {
 public:
  static absl::StatusOr<Regex> Compile(const std::string& pattern) {
    int error = 0;
    PCRE2_SIZE error_offset = 0;
    pcre2_code* code =
        pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                      PCRE2_UTF | PCRE2_UCP, &error, &error_offset, nullptr);
    if (code == nullptr) {
      return absl::InternalError(absl::StrCat("pre-tokenizer pattern \"", pattern,
                                              "\" does not compile at offset ", error_offset,
                                              ": ", Pcre2Message(error)));
    }
    Regex regex;
    regex.code_.reset(code);
    // JIT is an optimisation only: where it is unavailable (or fails) pcre2_match interprets.
    (void)pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
    return regex;
  }

  MatchDataPtr NewMatchData() const {
    return MatchDataPtr(pcre2_match_data_create_from_pattern(code_.get(), nullptr));
  }

  // Splits `piece` into the pattern's matches and the text between them, all kept, in order
  // (Hugging Face's "isolated" split). `piece` is valid UTF-8, cut at character boundaries.
  absl::Status Split(absl::string_view piece, pcre2_match_data* match_data,
                     const std::function<absl::Status(absl::string_view)>& emit) const {
    const auto* subject = reinterpret_cast<PCRE2_SPTR>(piece.data());
    size_t offset = 0;
    while (offset < piece.size()) {
      int rc = pcre2_match(code_.get(), subject, piece.size(), offset, PCRE2_NO_UTF_CHECK,
                           match_data, nullptr);
      if (rc == PCRE2_ERROR_JIT_STACKLIMIT) {  // retry interpreted, which uses the heap
        rc = pcre2_match(code_.get(), subject, piece.size(), offset,
                         PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT, match_data, nullptr);
      }
      if (rc == PCRE2_ERROR_NOMATCH) break;
      if (rc < 0) {
        return absl::ResourceExhaustedError(
            absl::StrCat("pre-tokenizer match failed: ", Pcre2Message(rc)));
      }
      const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(match_data);
      const size_t begin = ovector[0];
      const size_t end = ovector[1];
      if (end <= begin || begin < offset) {  // the patterns never match empty text
        return absl::InternalError("pre-tokenizer pattern matched empty text");
      }
      if (begin > offset) SHARDRT_RETURN_IF_ERROR(emit(piece.substr(offset, begin - offset)));
      SHARDRT_RETURN_IF_ERROR(emit(piece.substr(begin, end - begin)));
      offset = end;
    }
    if (offset < piece.size()) SHARDRT_RETURN_IF_ERROR(emit(piece.substr(offset)));
    return absl::OkStatus();
  }

 private:
  Regex() = default;
  std::unique_ptr<pcre2_code, CodeDeleter> code_;
};

// The pre-tokenizers: patterns applied in sequence, each splitting every piece the previous
// one produced (Hugging Face's "isolated" split: matches and the text between them all kept).
//
// "gpt2" (and "default") is the ByteLevel pre-tokenizer of Hugging Face tokenizers. Its regex
// keeps the trailing `|\s+` alternative that llama.cpp's copy drops; with the text between
// matches kept, the two split every string alike (tested). "smollm" first isolates every
// numeric character (tokenizers' Digits(individual_digits=True)) and then applies the same
// regex to each piece. "llama-bpe" is the Split regex of Llama 3's tokenizer.json
//   (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*
//   |\s*[\r\n]+|\s+(?!\S)|\s+
// and "qwen2" the same with \p{N} instead of \p{N}{1,3} (Qwen2's tokenizer.json, after NFC);
// both are followed by ByteLevel without its regex, i.e. nothing more.
//
// Character classes follow the engines tokenizers 0.21.1 uses, checked code point by code point:
//  - \s is Oniguruma's Unicode \s: TAB..CR, NEL and the separators \p{Z}. PCRE2's own \s also
//    takes U+180E MONGOLIAN VOWEL SEPARATOR (a format character since Unicode 6.3), so every \s
//    and \S is spelled out as that class.
//  - \p{L} and \p{N} in the regexes are Oniguruma's, of Unicode 14.0, as are PCRE2 10.42's
//    (Debian 12). A PCRE2 of a later Unicode version would also take the letters added since
//    (model_tokenizer compares some of them).
//  - (?i:...) folds case by Unicode in both engines ('S, and 'ſ U+017F LONG S, match 's).
//  - Digits tests Rust's char::is_numeric, of Unicode 16.0: \p{N} plus the ranges of numeric
//    characters added in Unicode 15.0 and 16.0, spelled out.
#define SHARDRT_SPACE R"(\t-\r\x{85}\p{Z})"
constexpr char kByteLevelPattern[] =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^)" SHARDRT_SPACE R"(\p{L}\p{N}]+)"
    R"(|[)" SHARDRT_SPACE R"(]+(?![^)" SHARDRT_SPACE R"(])|[)" SHARDRT_SPACE R"(]+)";
// Llama 3's and Qwen2's regex around their one difference, the numbers' alternative.
constexpr char kLlama3PatternHead[] = R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|)";
constexpr char kLlama3PatternTail[] =
    R"(| ?[^)" SHARDRT_SPACE R"(\p{L}\p{N}]+[\r\n]*|[)" SHARDRT_SPACE R"(]*[\r\n]+)"
    R"(|[)" SHARDRT_SPACE R"(]+(?![^)" SHARDRT_SPACE R"(])|[)" SHARDRT_SPACE R"(]+)";
#undef SHARDRT_SPACE
constexpr char kDigitPattern[] =
    R"([\p{N}\x{10D40}-\x{10D49}\x{116D0}-\x{116E3}\x{11BF0}-\x{11BF9}\x{11F50}-\x{11F59})"
    R"(\x{16130}-\x{16139}\x{16D70}-\x{16D79}\x{1CCF0}-\x{1CCF9}\x{1D2C0}-\x{1D2D3})"
    R"(\x{1E4F0}-\x{1E4F9}\x{1E5F1}-\x{1E5FA}])";

// A pre-tokenizer: whether the text is NFC-normalized first, its patterns, and whether a
// piece that is a token as a whole is taken as it is, unmerged (the BPE model's ignore_merges,
// set in Llama 3's tokenizer.json and by llama.cpp for its pre-tokenizer).
struct PreTokenizerSpec {
  bool nfc = false;
  std::vector<std::string> patterns;
  bool ignore_merges = false;
};

absl::StatusOr<PreTokenizerSpec> FindPreTokenizer(const std::string& name) {
  if (name == "gpt2" || name == "default") return PreTokenizerSpec{false, {kByteLevelPattern}};
  if (name == "smollm") return PreTokenizerSpec{false, {kDigitPattern, kByteLevelPattern}};
  // llama.cpp names Llama 3's pre-tokenizer all three ways.
  if (name == "llama-bpe" || name == "llama3" || name == "llama-v3") {
    return PreTokenizerSpec{
        false, {absl::StrCat(kLlama3PatternHead, R"(\p{N}{1,3})", kLlama3PatternTail)}, true};
  }
  if (name == "qwen2") {
    return PreTokenizerSpec{true, {absl::StrCat(kLlama3PatternHead, R"(\p{N})",
                                                kLlama3PatternTail)}};
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown pre-tokenizer \"", name,
      "\" (supported: \"default\", \"gpt2\", \"smollm\", \"llama-bpe\" (or \"llama3\", "
      "\"llama-v3\"), \"qwen2\")"));
}

// "▁" (U+2581 LOWER ONE EIGHTH BLOCK), SentencePiece's stand-in for a space.
constexpr char kSpmSpace[] = "\xE2\x96\x81";

// The byte of a byte-fallback token "<0xXX>" (either case of hex digits, as tokenizers'
// ByteFallback decoder reads them), or -1.
int ByteFallbackValue(absl::string_view text) {
  if (text.size() != 6 || text.substr(0, 3) != "<0x" || text[5] != '>') return -1;
  int value = 0;
  for (char c : text.substr(3, 2)) {
    int digit;
    if (c >= '0' && c <= '9') {
      digit = c - '0';
    } else if (c >= 'A' && c <= 'F') {
      digit = c - 'A' + 10;
    } else if (c >= 'a' && c <= 'f') {
      digit = c - 'a' + 10;
    } else {
      return -1;
    }
    value = value * 16 + digit;
  }
  return value;
}

// A merge rule: two tokens and the token they make, by id.
struct Merge {
  int32_t left;
  int32_t right;
  int32_t result;
};

// The merges of a vocabulary that has scores but no merges, exactly as transformers' GGUF
// conversion (GGUFTokenizerSkeleton) builds them: for each token in id order, every split into
// two pieces that are both tokens, those of one token ordered by the pieces' scores (left, then
// right; highest first; ties keep the split order); then all of them ordered by the token's
// score, highest first, ties keeping that order. Returns them highest priority first.
std::vector<Merge> MergesFromScores(const std::vector<std::string>& tokens,
                                    const std::vector<float>& scores,
                                    const absl::flat_hash_map<std::string, int32_t>& ids) {
  std::vector<Merge> merges;
  std::vector<Merge> local;
  for (int32_t id = 0; id < static_cast<int32_t>(tokens.size()); ++id) {
    const absl::string_view text = tokens[id];
    local.clear();
    // Splits at character boundaries (Python slices strings by code point).
    for (size_t i = 1; i < text.size(); ++i) {
      if (IsContinuation(static_cast<uint8_t>(text[i]))) continue;
      auto left = ids.find(text.substr(0, i));
      if (left == ids.end()) continue;
      auto right = ids.find(text.substr(i));
      if (right == ids.end()) continue;
      local.push_back({left->second, right->second, id});
    }
    std::stable_sort(local.begin(), local.end(), [&](const Merge& a, const Merge& b) {
      if (scores[a.left] != scores[b.left]) return scores[a.left] > scores[b.left];
      return scores[a.right] > scores[b.right];
    });
    merges.insert(merges.end(), local.begin(), local.end());
  }
  std::stable_sort(merges.begin(), merges.end(), [&](const Merge& a, const Merge& b) {
    return scores[a.result] > scores[b.result];
  });
  return merges;
}

uint64_t PairKey(int32_t left, int32_t right) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) |
         static_cast<uint32_t>(right);
}

struct MergeInfo {
  int32_t rank;
  int32_t result;  // the id of the merged token
};

struct SpecialToken {
  std::string text;
  int32_t id;
};

// One symbol of a word being merged: a doubly linked list over the word's tokens.
struct Symbol {
  int32_t id;  // -1: merged into its left neighbour
  int32_t prev;
  int32_t next;
};

// Parses merges "left right" into ids (the result is the concatenation's token).
absl::StatusOr<std::vector<Merge>> ParseMerges(
    const std::vector<std::string>& merges,
    const absl::flat_hash_map<std::string, int32_t>& token_ids) {
  std::vector<Merge> out;
  out.reserve(merges.size());
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const std::string& merge = merges[rank];
    const size_t space = merge.find(' ');
    if (space == std::string::npos || merge.find(' ', space + 1) != std::string::npos) {
      return absl::InvalidArgumentError(absl::StrCat(
          "tokenizer: merge ", rank, " \"", merge, "\" is not two tokens separated by a space"));
    }
    const absl::string_view view(merge);
    int32_t ids[3];
    const std::string parts[3] = {std::string(view.substr(0, space)),
                                  std::string(view.substr(space + 1)),
                                  absl::StrCat(view.substr(0, space), view.substr(space + 1))};
    for (int i = 0; i < 3; ++i) {
      auto it = token_ids.find(parts[i]);
      if (it == token_ids.end()) {
        return absl::InvalidArgumentError(absl::StrCat("tokenizer: merge ", rank, " \"", merge,
                                                       "\": \"", parts[i],
                                                       "\" is not a token"));
      }
      ids[i] = it->second;
    }
    out.push_back({ids[0], ids[1], ids[2]});
  }
  return out;
}

}  // namespace

struct Tokenizer::Impl {
  TokenizerModel model = TokenizerModel::kGpt2;
  std::vector<std::string> tokens;       // id -> text
  std::vector<std::string> token_bytes;  // id -> decoded bytes
  absl::flat_hash_map<std::string, int32_t> token_ids;
  absl::flat_hash_map<uint64_t, MergeInfo> merges;
  // gpt2: byte -> id of its one-character token; llama: byte -> id of "<0xXX>"; -1: none.
  std::array<int32_t, 256> byte_token{};
  // Special tokens by first byte, longest first.
  std::array<std::vector<SpecialToken>, 256> specials;
  bool nfc = false;  // gpt2: NFC-normalize before pre-tokenizing
  std::vector<Regex> pre;
  bool ignore_merges = false;             // gpt2: a word that is a token is that token
  std::array<std::string, 256> byte_char;  // gpt2: byte -> its alphabet character (UTF-8)
  bool add_space_prefix = true;
  bool add_bos = false;
  int32_t bos_id = -1;
  int32_t eos_id = -1;
  int32_t unk_id = -1;

  // Merges `symbols` (each linked to its neighbours, the last one's next -1) by rank and appends
  // the resulting ids.
  void MergeSymbols(std::vector<Symbol>& symbols, std::vector<int32_t>* out) const;
  // gpt2: appends the BPE ids of one pre-tokenized word (raw bytes).
  void EncodeWord(absl::string_view word, std::vector<int32_t>* out) const;
  // gpt2: pre-tokenizes text without special tokens with patterns pre[level..] and encodes it.
  absl::Status EncodeSegment(absl::string_view text, size_t level,
                             std::vector<MatchDataPtr>& match_data,
                             std::vector<int32_t>* out) const;
  // llama: appends the ids of text without special tokens ("▁"-normalized here).
  void EncodeSpm(absl::string_view text, std::vector<int32_t>* out) const;
};

void Tokenizer::Impl::MergeSymbols(std::vector<Symbol>& symbols,
                                   std::vector<int32_t>* out) const {
  if (symbols.empty()) return;
  if (symbols.size() == 1) {
    out->push_back(symbols[0].id);
    return;
  }
  // Merge candidates ordered by rank, then by position (leftmost first): exactly the order of
  // tokenizers' Word::merge_all. Entries that went stale are skipped when popped.
  auto entry = [](int32_t rank, int32_t pos) {
    return (static_cast<uint64_t>(rank) << 32) | static_cast<uint32_t>(pos);
  };
  std::vector<uint64_t> heap_storage;
  heap_storage.reserve(symbols.size());
  std::priority_queue<uint64_t, std::vector<uint64_t>, std::greater<>> queue(
      std::greater<>(), std::move(heap_storage));
  auto find = [this](int32_t left, int32_t right) -> const MergeInfo* {
    auto it = merges.find(PairKey(left, right));
    return it == merges.end() ? nullptr : &it->second;
  };
  for (size_t i = 0; i + 1 < symbols.size(); ++i) {
    if (const MergeInfo* m = find(symbols[i].id, symbols[i + 1].id)) {
      queue.push(entry(m->rank, static_cast<int32_t>(i)));
    }
  }
  while (!queue.empty()) {
    const uint64_t top = queue.top();
    queue.pop();
    const auto rank = static_cast<int32_t>(top >> 32);
    const auto pos = static_cast<int32_t>(top & 0xFFFFFFFFu);
    Symbol& left = symbols[pos];
    if (left.id < 0 || left.next < 0) continue;
    Symbol& right = symbols[left.next];
    const MergeInfo* m = find(left.id, right.id);
    if (m == nullptr || m->rank != rank) continue;  // the pair changed since it was queued
    left.id = m->result;
    right.id = -1;
    const int32_t after = right.next;
    left.next = after;
    if (after >= 0) symbols[after].prev = pos;
    if (left.prev >= 0) {
      if (const MergeInfo* p = find(symbols[left.prev].id, left.id)) {
        queue.push(entry(p->rank, left.prev));
      }
    }
    if (after >= 0) {
      if (const MergeInfo* n = find(left.id, symbols[after].id)) queue.push(entry(n->rank, pos));
    }
  }
  for (int32_t i = 0; i >= 0; i = symbols[i].next) out->push_back(symbols[i].id);
}

void Tokenizer::Impl::EncodeWord(absl::string_view word, std::vector<int32_t>* out) const {
  if (ignore_merges) {
    std::string text;
    text.reserve(word.size() * 2);
    for (char c : word) text += byte_char[static_cast<uint8_t>(c)];
    if (auto it = token_ids.find(text); it != token_ids.end()) {
      out->push_back(it->second);
      return;
    }
  }
  // The word's initial one-byte tokens. A byte whose character is not in the vocabulary is left
  // out, as tokenizers' BPE does without an unknown token.
  std::vector<Symbol> symbols;
  symbols.reserve(word.size());
  for (char c : word) {
    const int32_t id = byte_token[static_cast<uint8_t>(c)];
    if (id < 0) continue;
    const auto index = static_cast<int32_t>(symbols.size());
    symbols.push_back({id, index - 1, index + 1});
  }
  if (!symbols.empty()) symbols.back().next = -1;
  MergeSymbols(symbols, out);
}

absl::Status Tokenizer::Impl::EncodeSegment(absl::string_view text, size_t level,
                                            std::vector<MatchDataPtr>& match_data,
                                            std::vector<int32_t>* out) const {
  if (level == pre.size()) {
    EncodeWord(text, out);
    return absl::OkStatus();
  }
  return pre[level].Split(text, match_data[level].get(), [&](absl::string_view piece) {
    return EncodeSegment(piece, level + 1, match_data, out);
  });
}

void Tokenizer::Impl::EncodeSpm(absl::string_view text, std::vector<int32_t>* out) const {
  // The normalizer: Prepend("▁") (only to non-empty text), Replace(" ", "▁").
  if (text.empty()) return;
  std::string normalized;
  normalized.reserve(text.size() + text.size() / 2 + 3);
  if (add_space_prefix) normalized.append(kSpmSpace);
  for (char c : text) {
    if (c == ' ') {
      normalized.append(kSpmSpace);
    } else {
      normalized.push_back(c);
    }
  }
  // The initial symbols, as tokenizers' BPE::merge_word with byte_fallback and fuse_unk: each
  // character's token; else the byte tokens of all its bytes; else the unknown token, one for a
  // run of such characters. (As there, a pending unknown token is emitted only before the next
  // character that has a token, or at the end, so it follows byte tokens that came between.)
  std::vector<Symbol> symbols;
  symbols.reserve(normalized.size());
  auto add = [&symbols](int32_t id) {
    const auto index = static_cast<int32_t>(symbols.size());
    symbols.push_back({id, index - 1, index + 1});
  };
  bool unk_pending = false;
  size_t pos = 0;
  while (pos < normalized.size()) {
    const auto lead = static_cast<uint8_t>(normalized[pos]);
    const int n = lead < 0x80 ? 1 : SequenceLength(lead);  // valid UTF-8: n >= 1
    const absl::string_view ch = absl::string_view(normalized).substr(pos, n);
    pos += n;
    if (auto it = token_ids.find(ch); it != token_ids.end()) {
      if (unk_pending) add(unk_id);
      unk_pending = false;
      add(it->second);
      continue;
    }
    bool all_bytes = true;
    for (char c : ch) all_bytes = all_bytes && byte_token[static_cast<uint8_t>(c)] >= 0;
    if (all_bytes) {
      for (char c : ch) add(byte_token[static_cast<uint8_t>(c)]);
      continue;
    }
    if (unk_id >= 0) unk_pending = true;  // else the character is left out
  }
  if (unk_pending) add(unk_id);
  if (!symbols.empty()) symbols.back().next = -1;
  MergeSymbols(symbols, out);
}

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::~Tokenizer() = default;

absl::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::Create(TokenizerData data) {
  const auto n = static_cast<int64_t>(data.tokens.size());
  const bool llama = data.model == TokenizerModel::kLlama;
  if (n == 0) return absl::InvalidArgumentError("tokenizer: the vocabulary is empty");
  if (n > kMaxVocabSize) {
    return absl::InvalidArgumentError(absl::StrCat("tokenizer: vocabulary of ", n,
                                                   " tokens exceeds the limit ", kMaxVocabSize));
  }
  if (!data.token_types.empty() && static_cast<int64_t>(data.token_types.size()) != n) {
    return absl::InvalidArgumentError(absl::StrCat("tokenizer: ", data.token_types.size(),
                                                   " token types for ", n, " tokens"));
  }
  if (!data.scores.empty() && static_cast<int64_t>(data.scores.size()) != n) {
    return absl::InvalidArgumentError(
        absl::StrCat("tokenizer: ", data.scores.size(), " scores for ", n, " tokens"));
  }
  for (size_t i = 0; i < data.scores.size(); ++i) {
    if (!std::isfinite(data.scores[i])) {
      return absl::InvalidArgumentError(absl::StrCat("tokenizer: score of token ", i, " is ",
                                                     data.scores[i], ", expected a finite "
                                                     "number"));
    }
  }
  if (llama && data.merges.empty() && data.scores.empty()) {
    return absl::InvalidArgumentError(
        "tokenizer: a \"llama\" vocabulary needs scores (to derive merges from) or merges; it "
        "has neither");
  }
  for (auto [name, id] : {std::pair<const char*, int32_t>{"bos", data.bos_id},
                          std::pair<const char*, int32_t>{"eos", data.eos_id},
                          std::pair<const char*, int32_t>{"unk", data.unk_id}}) {
    if (id < -1 || id >= n) {
      return absl::InvalidArgumentError(
          absl::StrCat("tokenizer: ", name, " id ", id, " out of range [0, ", n, ")"));
    }
  }

  auto impl = std::make_unique<Impl>();
  impl->model = data.model;
  impl->bos_id = data.bos_id;
  impl->eos_id = data.eos_id;
  impl->unk_id = llama ? data.unk_id : -1;
  impl->add_space_prefix = data.add_space_prefix;
  impl->add_bos = data.add_bos;
  if (!llama) {
    SHARDRT_ASSIGN_OR_RETURN(PreTokenizerSpec spec, FindPreTokenizer(data.pre));
    impl->nfc = spec.nfc;
    impl->ignore_merges = spec.ignore_merges;
    for (const std::string& pattern : spec.patterns) {
      SHARDRT_ASSIGN_OR_RETURN(Regex regex, Regex::Compile(pattern));
      impl->pre.push_back(std::move(regex));
    }
  }

  const std::array<uint32_t, 256> byte_to_cp = ByteToCodepoint();
  absl::flat_hash_map<uint32_t, uint8_t> cp_to_byte;
  for (int b = 0; b < 256; ++b) cp_to_byte[byte_to_cp[b]] = static_cast<uint8_t>(b);

  impl->token_ids.reserve(n);
  impl->token_bytes.reserve(n);
  for (int32_t id = 0; id < n; ++id) {
    const std::string& text = data.tokens[id];
    auto [it, inserted] = impl->token_ids.emplace(text, id);
    if (!inserted) {
      return absl::InvalidArgumentError(absl::StrCat("tokenizer: token ", id, " \"", text,
                                                     "\" duplicates token ", it->second));
    }
    // Special tokens: control tokens; for llama also the unknown, BOS and EOS tokens, which
    // transformers registers as special tokens too.
    const bool special = (!data.token_types.empty() && data.token_types[id] == 3) ||
                         (llama && (id == data.unk_id || id == data.bos_id ||
                                    id == data.eos_id));
    if (special && !text.empty()) {
      impl->specials[static_cast<uint8_t>(text[0])].push_back({text, id});
    }
    if (llama) {
      // tokenizers' decoders ByteFallback and Replace("▁", " ") act on every token.
      const int byte = ByteFallbackValue(text);
      impl->token_bytes.push_back(byte >= 0 ? std::string(1, static_cast<char>(byte))
                                            : absl::StrReplaceAll(text, {{kSpmSpace, " "}}));
    } else if (special) {
      impl->token_bytes.push_back(text);
    } else {
      impl->token_bytes.push_back(TokenTextToBytes(text, cp_to_byte));
    }
  }
  for (auto& list : impl->specials) {
    std::stable_sort(list.begin(), list.end(), [](const SpecialToken& a, const SpecialToken& b) {
      return a.text.size() > b.text.size();
    });
  }
  for (int b = 0; b < 256; ++b) {
    std::string text;
    if (llama) {
      text = absl::StrFormat("<0x%02X>", b);  // as tokenizers' BPE looks byte tokens up
    } else {
      AppendUtf8(byte_to_cp[b], &text);
      impl->byte_char[b] = text;
    }
    auto it = impl->token_ids.find(text);
    impl->byte_token[b] = it == impl->token_ids.end() ? -1 : it->second;
  }

  std::vector<Merge> merges;
  if (llama && data.merges.empty()) {
    merges = MergesFromScores(data.tokens, data.scores, impl->token_ids);
  } else {
    SHARDRT_ASSIGN_OR_RETURN(merges, ParseMerges(data.merges, impl->token_ids));
  }
  if (merges.size() > static_cast<size_t>(INT32_MAX)) {
    return absl::InvalidArgumentError(
        absl::StrCat("tokenizer: ", merges.size(), " merges exceed the limit ", INT32_MAX));
  }
  impl->merges.reserve(merges.size());
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const Merge& m = merges[rank];
    // A repeated pair keeps its first (highest-priority) rank.
    impl->merges.try_emplace(PairKey(m.left, m.right),
                             MergeInfo{static_cast<int32_t>(rank), m.result});
  }
  impl->tokens = std::move(data.tokens);
  return std::unique_ptr<Tokenizer>(new Tokenizer(std::move(impl)));
}

absl::StatusOr<TokenizerData> ReadTokenizerData(const GgufFile& file) {
  TokenizerData data;
  SHARDRT_ASSIGN_OR_RETURN(std::string model, file.GetString("tokenizer.ggml.model"));
  if (model == "gpt2") {
    data.model = TokenizerModel::kGpt2;
  } else if (model == "llama") {
    data.model = TokenizerModel::kLlama;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat(file.path(), ": tokenizer.ggml.model is \"", model,
                     "\", expected one of \"gpt2\" (byte-level BPE), \"llama\" "
                     "(SentencePiece-style)"));
  }
  const bool llama = data.model == TokenizerModel::kLlama;
  SHARDRT_ASSIGN_OR_RETURN(data.tokens, file.GetStringArray("tokenizer.ggml.tokens"));
  if (!llama || file.HasKey("tokenizer.ggml.merges")) {
    SHARDRT_ASSIGN_OR_RETURN(data.merges, file.GetStringArray("tokenizer.ggml.merges"));
    // Without merges a byte-level BPE gives one token per byte: text the model never saw.
    if (!llama && data.merges.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          file.path(), ": tokenizer.ggml.merges is empty; a gpt2 (byte-level BPE) vocabulary "
          "needs its merges"));
    }
  }
  if (llama && file.HasKey("tokenizer.ggml.scores")) {
    SHARDRT_ASSIGN_OR_RETURN(data.scores, file.GetFloatArray("tokenizer.ggml.scores"));
  }
  if (file.HasKey("tokenizer.ggml.token_type")) {
    SHARDRT_ASSIGN_OR_RETURN(data.token_types, file.GetIntArray("tokenizer.ggml.token_type"));
  }
  // Files without a pre-tokenizer name get llama.cpp's default, the GPT-2 regex.
  data.pre = "default";
  if (!llama && file.HasKey("tokenizer.ggml.pre")) {
    SHARDRT_ASSIGN_OR_RETURN(data.pre, file.GetString("tokenizer.ggml.pre"));
  }
  if (file.HasKey("tokenizer.ggml.add_space_prefix")) {
    SHARDRT_ASSIGN_OR_RETURN(data.add_space_prefix,
                             file.GetBool("tokenizer.ggml.add_space_prefix"));
  }
  // Without the key, llama.cpp's defaults: BOS for SentencePiece vocabularies and Llama 3's.
  data.add_bos = llama || data.pre == "llama-bpe" || data.pre == "llama3" ||
                 data.pre == "llama-v3";
  if (file.HasKey("tokenizer.ggml.add_bos_token")) {
    SHARDRT_ASSIGN_OR_RETURN(data.add_bos, file.GetBool("tokenizer.ggml.add_bos_token"));
  }
  for (auto [key, field] :
       {std::pair<const char*, int32_t*>{"tokenizer.ggml.bos_token_id", &data.bos_id},
        std::pair<const char*, int32_t*>{"tokenizer.ggml.eos_token_id", &data.eos_id},
        std::pair<const char*, int32_t*>{"tokenizer.ggml.unknown_token_id", &data.unk_id}}) {
    if (!file.HasKey(key)) continue;
    SHARDRT_ASSIGN_OR_RETURN(int64_t id, file.GetInt(key));
    if (id < 0 || id >= static_cast<int64_t>(data.tokens.size())) {
      return absl::InvalidArgumentError(absl::StrCat(file.path(), ": ", key, " ", id,
                                                     " out of range [0, ", data.tokens.size(),
                                                     ")"));
    }
    *field = static_cast<int32_t>(id);
  }
  return data;
}

absl::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::FromGguf(const GgufFile& file) {
  SHARDRT_ASSIGN_OR_RETURN(TokenizerData data, ReadTokenizerData(file));
  auto tokenizer = Create(std::move(data));
  if (!tokenizer.ok()) {
    return absl::Status(tokenizer.status().code(),
                        absl::StrCat(file.path(), ": ", tokenizer.status().message()));
  }
  return tokenizer;
}

absl::StatusOr<std::vector<int32_t>> Tokenizer::Encode(absl::string_view text) const {
  if (text.size() > kMaxInputBytes) {
    return absl::InvalidArgumentError(absl::StrCat("tokenizer: input of ", text.size(),
                                                   " bytes exceeds the limit of ",
                                                   kMaxInputBytes));
  }
  if (const size_t bad = FindInvalidUtf8(text); bad != absl::string_view::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("tokenizer: input is not valid UTF-8 at byte offset ", bad));
  }
  const Impl& impl = *impl_;
  std::vector<MatchDataPtr> match_data;
  for (const Regex& regex : impl.pre) {
    match_data.push_back(regex.NewMatchData());
    if (match_data.back() == nullptr) return absl::ResourceExhaustedError("out of memory");
  }
  std::string normalized;
  auto encode_segment = [&](absl::string_view segment, std::vector<int32_t>* ids) {
    if (impl.model == TokenizerModel::kLlama) {
      impl.EncodeSpm(segment, ids);
      return absl::OkStatus();
    }
    if (impl.nfc) {
      normalized.clear();
      SHARDRT_RETURN_IF_ERROR(AppendNfc(segment, &normalized));
      segment = normalized;
    }
    return impl.EncodeSegment(segment, 0, match_data, ids);
  };
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 1);
  // Special tokens first: at each position the longest one that starts there; the text between
  // them is normalized, pre-tokenized and merged.
  size_t segment_begin = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    const SpecialToken* found = nullptr;
    for (const SpecialToken& special : impl.specials[static_cast<uint8_t>(text[pos])]) {
      if (text.substr(pos, special.text.size()) == special.text) {
        found = &special;
        break;
      }
    }
    if (found == nullptr) {
      ++pos;
      continue;
    }
    SHARDRT_RETURN_IF_ERROR(encode_segment(text.substr(segment_begin, pos - segment_begin), &ids));
    ids.push_back(found->id);
    pos += found->text.size();
    segment_begin = pos;
  }
  SHARDRT_RETURN_IF_ERROR(encode_segment(text.substr(segment_begin), &ids));
  return ids;
}

absl::Status Tokenizer::AppendBytes(absl::Span<const int32_t> ids, std::string* out) const {
  for (size_t i = 0; i < ids.size(); ++i) {
    const int32_t id = ids[i];
    if (id < 0 || id >= vocab_size()) {
      return absl::InvalidArgumentError(absl::StrCat("tokenizer: id ", id, " at index ", i,
                                                     " out of range [0, ", vocab_size(), ")"));
    }
    *out += impl_->token_bytes[id];
  }
  return absl::OkStatus();
}

void Tokenizer::FinishText(std::string* text, bool at_start) const {
  if (impl_->model != TokenizerModel::kLlama) return;
  // Byte tokens may spell "▁" (the tokens' own ones are spaces already): tokenizers' Replace
  // decoder runs after ByteFallback, so those are spaces too.
  if (text->find(kSpmSpace) != std::string::npos) {
    *text = absl::StrReplaceAll(*text, {{kSpmSpace, " "}});
  }
  // Strip(" ", 1, 0): one leading space of the whole text.
  if (at_start && impl_->add_space_prefix && !text->empty() && (*text)[0] == ' ') {
    text->erase(0, 1);
  }
}

absl::StatusOr<std::string> Tokenizer::Decode(absl::Span<const int32_t> ids) const {
  std::string out;
  SHARDRT_RETURN_IF_ERROR(AppendBytes(ids, &out));
  FinishText(&out, /*at_start=*/true);
  return out;
}

TokenizerModel Tokenizer::model() const { return impl_->model; }
int64_t Tokenizer::vocab_size() const { return static_cast<int64_t>(impl_->tokens.size()); }
int32_t Tokenizer::bos_id() const { return impl_->bos_id; }
int32_t Tokenizer::eos_id() const { return impl_->eos_id; }
int32_t Tokenizer::unk_id() const { return impl_->unk_id; }
bool Tokenizer::add_bos() const { return impl_->add_bos; }

int32_t Tokenizer::TokenId(absl::string_view token) const {
  auto it = impl_->token_ids.find(token);
  return it == impl_->token_ids.end() ? -1 : it->second;
}

absl::StatusOr<std::string> StreamDecoder::Push(int32_t id) {
  const int32_t single[1] = {id};
  SHARDRT_RETURN_IF_ERROR(tokenizer_.AppendBytes(single, &pending_));
  // Hold back the last sequence only when it is a valid but incomplete prefix: a sequence that
  // can never complete is passed on as it is.
  size_t keep_from = pending_.size();
  for (size_t back = 1; back <= 3 && back <= pending_.size(); ++back) {
    const size_t pos = pending_.size() - back;
    const auto b = static_cast<uint8_t>(pending_[pos]);
    if (IsContinuation(b)) continue;
    const int n = SequenceLength(b);
    if (n > static_cast<int>(back) && ValidSequencePrefix(pending_, pos, n) == back) {
      keep_from = pos;
    }
    break;
  }
  std::string out = pending_.substr(0, keep_from);
  pending_.erase(0, keep_from);
  return Emit(std::move(out));
}

std::string StreamDecoder::Finish() {
  std::string out = std::move(pending_);
  pending_.clear();
  return Emit(std::move(out));
}

std::string StreamDecoder::Emit(std::string text) {
  if (text.empty()) return text;
  tokenizer_.FinishText(&text, /*at_start=*/!started_);
  started_ = true;
  return text;
}

}  // namespace shardrt::llama
