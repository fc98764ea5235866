#include "llama/tokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <algorithm>
#include <array>
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
// "gpt2" is the ByteLevel pre-tokenizer of Hugging Face tokenizers. Its regex keeps the
// trailing `|\s+` alternative that llama.cpp's copy drops; with the text between matches kept,
// the two split every string alike (tested). "smollm" first isolates every numeric character
// (tokenizers' Digits(individual_digits=True)) and then applies the same regex to each piece.
//
// Character classes follow the engines tokenizers 0.21.1 uses, checked code point by code point:
//  - \s is Oniguruma's Unicode \s: TAB..CR, NEL and the separators \p{Z}. PCRE2's own \s also
//    takes U+180E MONGOLIAN VOWEL SEPARATOR (a format character since Unicode 6.3).
//  - \p{L} and \p{N} in the ByteLevel regex are Oniguruma's, of Unicode 14.0, as are PCRE2
//    10.42's (Debian 12). A PCRE2 of a later Unicode version would also take the letters added
//    since (model_tokenizer compares some of them).
//  - Digits tests Rust's char::is_numeric, of Unicode 16.0: \p{N} plus the ranges of numeric
//    characters added in Unicode 15.0 and 16.0, spelled out.
#define SHARDRT_SPACE R"(\t-\r\x{85}\p{Z})"
constexpr char kByteLevelPattern[] =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^)" SHARDRT_SPACE R"(\p{L}\p{N}]+)"
    R"(|[)" SHARDRT_SPACE R"(]+(?![^)" SHARDRT_SPACE R"(])|[)" SHARDRT_SPACE R"(]+)";
#undef SHARDRT_SPACE
constexpr char kDigitPattern[] =
    R"([\p{N}\x{10D40}-\x{10D49}\x{116D0}-\x{116E3}\x{11BF0}-\x{11BF9}\x{11F50}-\x{11F59})"
    R"(\x{16130}-\x{16139}\x{16D70}-\x{16D79}\x{1CCF0}-\x{1CCF9}\x{1D2C0}-\x{1D2D3})"
    R"(\x{1E4F0}-\x{1E4F9}\x{1E5F1}-\x{1E5FA}])";

absl::StatusOr<std::vector<std::string>> PreTokenizerPatterns(const std::string& name) {
  if (name == "gpt2") return std::vector<std::string>{kByteLevelPattern};
  if (name == "smollm") return std::vector<std::string>{kDigitPattern, kByteLevelPattern};
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown pre-tokenizer \"", name, "\" (supported: \"gpt2\", \"smollm\")"));
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

}  // namespace

struct Tokenizer::Impl {
  std::vector<std::string> tokens;       // id -> text
  std::vector<std::string> token_bytes;  // id -> decoded bytes
  absl::flat_hash_map<std::string, int32_t> token_ids;
  absl::flat_hash_map<uint64_t, MergeInfo> merges;
  std::array<int32_t, 256> byte_token{};  // byte -> id of its one-character token, or -1
  // Control tokens by first byte, longest first.
  std::array<std::vector<SpecialToken>, 256> specials;
  std::vector<Regex> pre;
  int32_t bos_id = -1;
  int32_t eos_id = -1;

  // Appends the BPE ids of one pre-tokenized word (raw bytes).
  void EncodeWord(absl::string_view word, std::vector<int32_t>* out) const;
  // Pre-tokenizes text without control tokens with patterns pre[level..] and encodes it.
  absl::Status EncodeSegment(absl::string_view text, size_t level,
                             std::vector<MatchDataPtr>& match_data,
                             std::vector<int32_t>* out) const;
};

void Tokenizer::Impl::EncodeWord(absl::string_view word, std::vector<int32_t>* out) const {
  // Symbols of the word: a doubly linked list over its initial one-byte tokens. A byte whose
  // character is not in the vocabulary is left out, as tokenizers' BPE does without an unknown
  // token.
  struct Symbol {
    int32_t id;  // -1: merged into its left neighbour
    int32_t prev;
    int32_t next;
  };
  std::vector<Symbol> symbols;
  symbols.reserve(word.size());
  for (char c : word) {
    const int32_t id = byte_token[static_cast<uint8_t>(c)];
    if (id < 0) continue;
    const auto index = static_cast<int32_t>(symbols.size());
    symbols.push_back({id, index - 1, index + 1});
  }
  if (symbols.empty()) return;
  symbols.back().next = -1;
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

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::~Tokenizer() = default;

absl::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::Create(TokenizerData data) {
  const auto n = static_cast<int64_t>(data.tokens.size());
  if (n == 0) return absl::InvalidArgumentError("tokenizer: the vocabulary is empty");
  if (n > kMaxVocabSize) {
    return absl::InvalidArgumentError(absl::StrCat("tokenizer: vocabulary of ", n,
                                                   " tokens exceeds the limit ", kMaxVocabSize));
  }
  if (!data.token_types.empty() && static_cast<int64_t>(data.token_types.size()) != n) {
    return absl::InvalidArgumentError(absl::StrCat("tokenizer: ", data.token_types.size(),
                                                   " token types for ", n, " tokens"));
  }
  for (auto [name, id] : {std::pair<const char*, int32_t>{"bos", data.bos_id},
                          std::pair<const char*, int32_t>{"eos", data.eos_id}}) {
    if (id < -1 || id >= n) {
      return absl::InvalidArgumentError(
          absl::StrCat("tokenizer: ", name, " id ", id, " out of range [0, ", n, ")"));
    }
  }

  auto impl = std::make_unique<Impl>();
  impl->bos_id = data.bos_id;
  impl->eos_id = data.eos_id;
  SHARDRT_ASSIGN_OR_RETURN(std::vector<std::string> patterns, PreTokenizerPatterns(data.pre));
  for (const std::string& pattern : patterns) {
    SHARDRT_ASSIGN_OR_RETURN(Regex regex, Regex::Compile(pattern));
    impl->pre.push_back(std::move(regex));
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
    const bool control = !data.token_types.empty() && data.token_types[id] == 3;
    if (control) {
      impl->token_bytes.push_back(text);
      if (!text.empty()) {
        impl->specials[static_cast<uint8_t>(text[0])].push_back({text, id});
      }
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
    AppendUtf8(byte_to_cp[b], &text);
    auto it = impl->token_ids.find(text);
    impl->byte_token[b] = it == impl->token_ids.end() ? -1 : it->second;
  }

  impl->merges.reserve(data.merges.size());
  for (size_t rank = 0; rank < data.merges.size(); ++rank) {
    const std::string& merge = data.merges[rank];
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
      auto it = impl->token_ids.find(parts[i]);
      if (it == impl->token_ids.end()) {
        return absl::InvalidArgumentError(absl::StrCat("tokenizer: merge ", rank, " \"", merge,
                                                       "\": \"", parts[i],
                                                       "\" is not a token"));
      }
      ids[i] = it->second;
    }
    // A repeated pair keeps its first (highest-priority) rank.
    impl->merges.try_emplace(PairKey(ids[0], ids[1]),
                             MergeInfo{static_cast<int32_t>(rank), ids[2]});
  }
  impl->tokens = std::move(data.tokens);
  return std::unique_ptr<Tokenizer>(new Tokenizer(std::move(impl)));
}

absl::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::FromGguf(const GgufFile& file) {
  SHARDRT_ASSIGN_OR_RETURN(std::string model, file.GetString("tokenizer.ggml.model"));
  if (model != "gpt2") {
    return absl::InvalidArgumentError(absl::StrCat(
        file.path(), ": tokenizer.ggml.model is \"", model, "\", only \"gpt2\" is supported"));
  }
  TokenizerData data;
  SHARDRT_ASSIGN_OR_RETURN(data.pre, file.GetString("tokenizer.ggml.pre"));
  SHARDRT_ASSIGN_OR_RETURN(data.tokens, file.GetStringArray("tokenizer.ggml.tokens"));
  SHARDRT_ASSIGN_OR_RETURN(data.merges, file.GetStringArray("tokenizer.ggml.merges"));
  if (file.HasKey("tokenizer.ggml.token_type")) {
    SHARDRT_ASSIGN_OR_RETURN(data.token_types, file.GetIntArray("tokenizer.ggml.token_type"));
  }
  for (auto [key, field] :
       {std::pair<const char*, int32_t*>{"tokenizer.ggml.bos_token_id", &data.bos_id},
        std::pair<const char*, int32_t*>{"tokenizer.ggml.eos_token_id", &data.eos_id}}) {
    if (!file.HasKey(key)) continue;
    SHARDRT_ASSIGN_OR_RETURN(int64_t id, file.GetInt(key));
    if (id < 0 || id >= static_cast<int64_t>(data.tokens.size())) {
      return absl::InvalidArgumentError(absl::StrCat(file.path(), ": ", key, " ", id,
                                                     " out of range [0, ", data.tokens.size(),
                                                     ")"));
    }
    *field = static_cast<int32_t>(id);
  }
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
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 1);
  // Control tokens first: at each position the longest one that starts there; the text between
  // them is pre-tokenized and merged.
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
    SHARDRT_RETURN_IF_ERROR(impl.EncodeSegment(
        text.substr(segment_begin, pos - segment_begin), 0, match_data, &ids));
    ids.push_back(found->id);
    pos += found->text.size();
    segment_begin = pos;
  }
  SHARDRT_RETURN_IF_ERROR(impl.EncodeSegment(text.substr(segment_begin), 0, match_data, &ids));
  return ids;
}

absl::StatusOr<std::string> Tokenizer::Decode(absl::Span<const int32_t> ids) const {
  std::string out;
  for (size_t i = 0; i < ids.size(); ++i) {
    const int32_t id = ids[i];
    if (id < 0 || id >= vocab_size()) {
      return absl::InvalidArgumentError(absl::StrCat("tokenizer: id ", id, " at index ", i,
                                                     " out of range [0, ", vocab_size(), ")"));
    }
    out += impl_->token_bytes[id];
  }
  return out;
}

int64_t Tokenizer::vocab_size() const { return static_cast<int64_t>(impl_->tokens.size()); }
int32_t Tokenizer::bos_id() const { return impl_->bos_id; }
int32_t Tokenizer::eos_id() const { return impl_->eos_id; }

int32_t Tokenizer::TokenId(absl::string_view token) const {
  auto it = impl_->token_ids.find(token);
  return it == impl_->token_ids.end() ? -1 : it->second;
}

absl::StatusOr<std::string> StreamDecoder::Push(int32_t id) {
  const int32_t single[1] = {id};
  SHARDRT_ASSIGN_OR_RETURN(std::string bytes, tokenizer_.Decode(single));
  pending_ += bytes;
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
  return out;
}

std::string StreamDecoder::Finish() {
  std::string out = std::move(pending_);
  pending_.clear();
  return out;
}

}  // namespace shardrt::llama
