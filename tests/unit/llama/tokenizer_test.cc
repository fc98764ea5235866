#include "llama/tokenizer.h"

#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "llama/gguf.h"

namespace shardrt::llama {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// GPT-2's byte-to-unicode alphabet, written out here independently of the tokenizer: printable
// Latin-1 bytes stand for themselves, the other 68 take U+0100 onwards in byte order.
std::string ByteChar(uint8_t byte) {
  uint32_t cp = byte;
  const auto printable = [](int b) {
    return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
  };
  if (!printable(byte)) {
    cp = 256;
    for (int b = 0; b < byte; ++b) cp += printable(b) ? 0 : 1;
  }
  std::string out;
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
  return out;
}

// Token text of raw bytes: each byte's alphabet character.
std::string Text(const std::string& bytes) {
  std::string out;
  for (char c : bytes) out += ByteChar(static_cast<uint8_t>(c));
  return out;
}

// A vocabulary: ids 0..255 the single bytes (id == byte value, except those in `without`),
// then the merges' results in order, then the control tokens. Merges are given as raw byte
// strings, e.g. {" ", "b"}.
struct Vocab {
  std::vector<std::pair<std::string, std::string>> merges;
  std::vector<std::string> controls;
  std::vector<std::string> normals;  // extra normal tokens (raw text, not byte-mapped)
  std::vector<int> without;          // bytes that get no token
  std::string pre = "smollm";
};

TokenizerData MakeData(const Vocab& v) {
  TokenizerData data;
  for (int b = 0; b < 256; ++b) {
    bool skip = false;
    for (int w : v.without) skip = skip || w == b;
    // A stand-in text keeps ids equal to byte values where a byte has no token.
    data.tokens.push_back(skip ? "<missing " + std::to_string(b) + ">"
                               : ByteChar(static_cast<uint8_t>(b)));
  }
  for (const auto& [left, right] : v.merges) {
    data.merges.push_back(Text(left) + " " + Text(right));
    const std::string merged = Text(left + right);
    bool known = false;
    for (const std::string& t : data.tokens) known = known || t == merged;
    if (!known) data.tokens.push_back(merged);
  }
  data.token_types.assign(data.tokens.size(), 1);
  for (const std::string& n : v.normals) {
    data.tokens.push_back(n);
    data.token_types.push_back(1);
  }
  for (const std::string& c : v.controls) {
    data.tokens.push_back(c);
    data.token_types.push_back(3);
  }
  data.pre = v.pre;
  return data;
}

std::unique_ptr<Tokenizer> Make(const Vocab& v) {
  auto tokenizer = Tokenizer::Create(MakeData(v));
  EXPECT_TRUE(tokenizer.ok()) << tokenizer.status();
  return tokenizer.ok() ? std::move(*tokenizer) : nullptr;
}

// The tokens of `text` as raw byte strings, for readable expectations.
std::vector<std::string> Pieces(const Tokenizer& tokenizer, const std::string& text) {
  auto ids = tokenizer.Encode(text);
  EXPECT_TRUE(ids.ok()) << ids.status();
  std::vector<std::string> out;
  if (!ids.ok()) return out;
  for (int32_t id : *ids) {
    const int32_t one[1] = {id};
    out.push_back(*tokenizer.Decode(one));
  }
  return out;
}

TEST(TokenizerTest, ByteAlphabetIsGpt2s) {
  EXPECT_EQ(ByteChar(' '), "\xC4\xA0");     // Ġ U+0120
  EXPECT_EQ(ByteChar('\n'), "\xC4\x8A");    // Ċ U+010A
  EXPECT_EQ(ByteChar(0x00), "\xC4\x80");    // Ā U+0100
  EXPECT_EQ(ByteChar(0x7F), "\xC4\xA1");    // ġ U+0121
  EXPECT_EQ(ByteChar(0xAD), "\xC5\x83");    // Ń U+0143
  EXPECT_EQ(ByteChar(0xE9), "\xC3\xA9");    // é stands for itself
  auto tokenizer = Make({});
  ASSERT_NE(tokenizer, nullptr);
  EXPECT_EQ(tokenizer->vocab_size(), 256);
  EXPECT_EQ(tokenizer->TokenId("\xC4\xA0"), ' ');
  EXPECT_EQ(tokenizer->TokenId("nope"), -1);
  // Without merges every byte is its own token, and decoding maps the alphabet back.
  const std::string text = "a b\n\x01\xC3\xA9\xF0\x9F\x98\x80";
  auto ids = tokenizer->Encode(text);
  ASSERT_TRUE(ids.ok()) << ids.status();
  std::vector<int32_t> bytes;
  for (char c : text) bytes.push_back(static_cast<uint8_t>(c));
  EXPECT_EQ(*ids, bytes);
  EXPECT_EQ(*tokenizer->Decode(*ids), text);
  EXPECT_THAT(*tokenizer->Encode(""), IsEmpty());
  EXPECT_EQ(*tokenizer->Decode({}), "");
}

TEST(TokenizerTest, MergesApplyByRank) {
  auto bc_first = Make({.merges = {{"b", "c"}, {"a", "b"}, {"a", "bc"}}});
  EXPECT_THAT(Pieces(*bc_first, "abc"), ElementsAre("abc"));
  EXPECT_THAT(Pieces(*bc_first, "abd"), ElementsAre("ab", "d"));
  auto ab_first = Make({.merges = {{"a", "b"}, {"b", "c"}}});
  EXPECT_THAT(Pieces(*ab_first, "abc"), ElementsAre("ab", "c"));
  auto bc_only_first = Make({.merges = {{"b", "c"}, {"a", "b"}}});
  EXPECT_THAT(Pieces(*bc_only_first, "abc"), ElementsAre("a", "bc"));
  // The same pair several times: leftmost first, then the merged tokens merge by their rank.
  auto aa = Make({.merges = {{"a", "a"}, {"aa", "aa"}}});
  EXPECT_THAT(Pieces(*aa, "aaa"), ElementsAre("aa", "a"));
  EXPECT_THAT(Pieces(*aa, "aaaaa"), ElementsAre("aaaa", "a"));
  EXPECT_THAT(Pieces(*aa, "aaaaaaaa"), ElementsAre("aaaa", "aaaa"));
  // A longer word: merges need not start at the left.
  auto word = Make({.merges = {{"l", "o"}, {"w", "e"}, {"lo", "we"}, {"lowe", "r"}}});
  EXPECT_THAT(Pieces(*word, "lower"), ElementsAre("lower"));
  EXPECT_THAT(Pieces(*word, "slowest"), ElementsAre("s", "lowe", "s", "t"));
}

TEST(TokenizerTest, MergesNeverCrossPreTokenizerPieces) {
  auto tokenizer = Make({.merges = {{"a", " "}, {" ", "b"}, {"t", "'"}, {"'", "s"}, {"'", "S"}}});
  EXPECT_THAT(Pieces(*tokenizer, "a b"), ElementsAre("a", " b"));
  // Contractions are their own pieces, lowercase only.
  EXPECT_THAT(Pieces(*tokenizer, "it's"), ElementsAre("i", "t", "'s"));
  EXPECT_THAT(Pieces(*tokenizer, "IT'S"), ElementsAre("I", "T", "'", "S"));
  EXPECT_THAT(Pieces(*tokenizer, "'s's"), ElementsAre("'s", "'s"));
}

TEST(TokenizerTest, DigitsAreSplitOneByOne) {
  auto tokenizer = Make({.merges = {{"1", "2"}, {" ", "1"}, {"a", "1"}, {"\xD9", "\xA1"}}});
  EXPECT_THAT(Pieces(*tokenizer, "123"), ElementsAre("1", "2", "3"));
  EXPECT_THAT(Pieces(*tokenizer, " 12"), ElementsAre(" ", "1", "2"));
  EXPECT_THAT(Pieces(*tokenizer, "a1"), ElementsAre("a", "1"));
  // Any \p{N}: Arabic-Indic one (U+0661) stays whole but alone.
  EXPECT_THAT(Pieces(*tokenizer, "a\xD9\xA1\xD9\xA1"), ElementsAre("a", "\xD9\xA1", "\xD9\xA1"));
  // As in Rust's char::is_numeric, numerics newer than PCRE2's tables count too: U+1CCF0
  // OUTLINED DIGIT ZERO (Unicode 16) is split off from the letter before it.
  auto outlined = Make({.merges = {{"a", "\xF0"}}});
  EXPECT_THAT(Pieces(*outlined, "a\xF0\x9C\xB3\xB0"),
              ElementsAre("a", "\xF0", "\x9C", "\xB3", "\xB0"));
  // A letter of the same shape, U+10400 DESERET CAPITAL LETTER LONG I, joins the "a".
  EXPECT_THAT(Pieces(*outlined, "a\xF0\x90\x90\x80"), ElementsAre("a\xF0", "\x90", "\x90", "\x80"));
  // The "gpt2" pre-tokenizer keeps runs of digits together.
  auto gpt2 = Make({.merges = {{"1", "2"}, {" ", "12"}}, .pre = "gpt2"});
  EXPECT_THAT(Pieces(*gpt2, "a 123"), ElementsAre("a", " 12", "3"));
}

TEST(TokenizerTest, WhitespaceRuns) {
  auto tokenizer = Make({.merges = {{" ", " "}, {" ", "b"}, {"\n", "\n"}, {"\t", "\t"},
                                    {" ", "\xE1"}, {" ", "\xC2"}}});
  // A run before a word leaves its last space to the word.
  EXPECT_THAT(Pieces(*tokenizer, "a  b"), ElementsAre("a", " ", " b"));
  EXPECT_THAT(Pieces(*tokenizer, "a   b"), ElementsAre("a", "  ", " b"));
  // At the end of the text the run stays whole.
  EXPECT_THAT(Pieces(*tokenizer, "a  "), ElementsAre("a", "  "));
  EXPECT_THAT(Pieces(*tokenizer, "a\n\n"), ElementsAre("a", "\n\n"));
  // Newlines before a word: all but the last, then the last alone (no space to lead a word).
  EXPECT_THAT(Pieces(*tokenizer, "a\n\nb"), ElementsAre("a", "\n", "\n", "b"));
  EXPECT_THAT(Pieces(*tokenizer, "\t\t\tx"), ElementsAre("\t\t", "\t", "x"));
  // U+180E MONGOLIAN VOWEL SEPARATOR is not whitespace (as in Oniguruma, unlike PCRE2's \s):
  // it joins the space before it.
  EXPECT_THAT(Pieces(*tokenizer, "a \xE1\xA0\x8E"), ElementsAre("a", " \xE1", "\xA0", "\x8E"));
  // NEL (U+0085) and NO-BREAK SPACE (U+00A0) are whitespace: the space stays apart.
  EXPECT_THAT(Pieces(*tokenizer, "a \xC2\x85" "b"), ElementsAre("a", " ", "\xC2", "\x85", "b"));
  EXPECT_THAT(Pieces(*tokenizer, "a \xC2\xA0" "b"), ElementsAre("a", " ", "\xC2", "\xA0", "b"));
  EXPECT_THAT(Pieces(*tokenizer, "a \xC2\xA9" "b"), ElementsAre("a", " \xC2", "\xA9", "b"));
}

TEST(TokenizerTest, ControlTokensAreSplitOutFirst) {
  auto tokenizer = Make({.merges = {{"<", "|"}, {"a", "<"}, {">", "b"}},
                         .controls = {"<s>", "<s>x", "<|im_start|>", "<|im_end|>"},
                         .normals = {"<n>"}});
  const int32_t s = tokenizer->TokenId("<s>");
  const int32_t sx = tokenizer->TokenId("<s>x");
  const int32_t start = tokenizer->TokenId("<|im_start|>");
  const int32_t end = tokenizer->TokenId("<|im_end|>");
  ASSERT_GE(s, 256);
  EXPECT_THAT(*tokenizer->Encode("<s>"), ElementsAre(s));
  // The longest control token at a position wins.
  EXPECT_THAT(*tokenizer->Encode("<s>xy"), ElementsAre(sx, 'y'));
  // Never merged with their neighbours.
  EXPECT_THAT(*tokenizer->Encode("a<s>b"), ElementsAre('a', s, 'b'));
  EXPECT_THAT(*tokenizer->Encode("<|im_start|>user\nhi<|im_end|>\n"),
              ElementsAre(start, 'u', 's', 'e', 'r', '\n', 'h', 'i', end, '\n'));
  EXPECT_THAT(*tokenizer->Encode("<|im_start|><|im_end|>"), ElementsAre(start, end));
  // Incomplete ones are ordinary text, and so are normal tokens that look like them.
  EXPECT_THAT(Pieces(*tokenizer, "<|im_start"),
              ElementsAre("<|", "i", "m", "_", "s", "t", "a", "r", "t"));
  EXPECT_THAT(Pieces(*tokenizer, "<n>"), ElementsAre("<", "n", ">"));
  // Control tokens decode to their text.
  EXPECT_EQ(*tokenizer->Decode({start, 'h', end}), "<|im_start|>h<|im_end|>");
}

TEST(TokenizerTest, BytesWithoutTokenAreLeftOut) {
  // As tokenizers' BPE without an unknown token does; the bytes around still merge.
  auto tokenizer = Make({.merges = {{"!", "?"}}, .without = {0x04}});
  EXPECT_THAT(Pieces(*tokenizer, "!\x04?"), ElementsAre("!?"));  // one pre-tokenizer piece
  EXPECT_THAT(*tokenizer->Encode("\x04"), IsEmpty());
}

TEST(TokenizerTest, DecodeOfTextOutsideTheAlphabetIsItsBytes) {
  auto tokenizer = Make({.normals = {"\xE2\x82\xAC"}});  // "€" is no alphabet character
  const int32_t euro = tokenizer->TokenId("\xE2\x82\xAC");
  EXPECT_EQ(*tokenizer->Decode({euro}), "\xE2\x82\xAC");
}

TEST(TokenizerTest, InvalidInput) {
  auto tokenizer = Make({});
  for (const auto& [text, offset] : std::vector<std::pair<std::string, int>>{
           {"abc\xFF", 3},             // never valid
           {"\xC3", 0},                // truncated
           {"ok \xE2\x82", 3},         // truncated 3-byte sequence
           {"\xC0\xAF", 0},            // overlong
           {"x\xE0\x80\xAF", 1},       // overlong
           {"\xED\xA0\x80", 0},        // surrogate
           {"\xF4\x90\x80\x80", 0},    // beyond U+10FFFF
           {"ab\x80", 2},              // stray continuation byte
           {"\xC3\xA9\xC3(", 2}}) {    // lead byte without its continuation
    auto ids = tokenizer->Encode(text);
    ASSERT_FALSE(ids.ok()) << text;
    EXPECT_EQ(ids.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(ids.status().message(), HasSubstr("byte offset " + std::to_string(offset)));
  }
  auto too_long = tokenizer->Encode(std::string(Tokenizer::kMaxInputBytes + 1, 'a'));
  EXPECT_EQ(too_long.status().code(), absl::StatusCode::kInvalidArgument);
  auto bad_id = tokenizer->Decode({1, 256});
  EXPECT_EQ(bad_id.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad_id.status().message(), HasSubstr("256"));
  EXPECT_EQ(tokenizer->Decode({-1}).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(TokenizerTest, LongInputs) {
  auto tokenizer = Make({.merges = {{"a", "a"}, {" ", " "}}});
  // One long word, one long whitespace run: linear-time splitting and merging.
  const std::string word(1 << 20, 'a');
  auto ids = tokenizer->Encode(word);
  ASSERT_TRUE(ids.ok()) << ids.status();
  EXPECT_EQ(ids->size(), size_t{1} << 19);
  const std::string spaces = std::string(1 << 20, ' ') + "x";
  ids = tokenizer->Encode(spaces);
  ASSERT_TRUE(ids.ok()) << ids.status();
  EXPECT_EQ(*tokenizer->Decode(*ids), spaces);
}

TEST(TokenizerTest, CreateErrors) {
  auto error = [](TokenizerData data) {
    auto tokenizer = Tokenizer::Create(std::move(data));
    return tokenizer.ok() ? absl::OkStatus() : tokenizer.status();
  };
  EXPECT_EQ(error({}).code(), absl::StatusCode::kInvalidArgument);  // empty
  // Every pre-tokenizer name this tokenizer knows.
  for (const char* pre : {"default", "gpt2", "smollm", "llama-bpe", "llama3", "llama-v3",
                          "qwen2"}) {
    TokenizerData data = MakeData({.merges = {{"a", "b"}}});
    data.pre = pre;
    EXPECT_TRUE(error(std::move(data)).ok()) << pre;
  }
  auto with = [](auto change) {
    TokenizerData data = MakeData({.merges = {{"a", "b"}}});
    change(data);
    return data;
  };
  EXPECT_TRUE(error(with([](TokenizerData&) {})).ok());
  for (auto [what, data] : std::vector<std::pair<std::string, TokenizerData>>{
           {"pre-tokenizer", with([](TokenizerData& d) { d.pre = "llama4"; })},
           {"\"qwen2\"", with([](TokenizerData& d) { d.pre = "qwen"; })},  // lists them
           {"scores", with([](TokenizerData& d) { d.scores = {1.0f}; })},
           {"finite", with([](TokenizerData& d) {
              d.scores.assign(d.tokens.size(), 0.0f);
              d.scores[3] = std::nanf("");
            })},
           {"unk", with([](TokenizerData& d) { d.unk_id = 100000; })},
           {"neither", with([](TokenizerData& d) {
              d.model = TokenizerModel::kLlama;
              d.merges.clear();
            })},
           {"duplicates", with([](TokenizerData& d) {
              d.tokens.push_back("a");
              d.token_types.push_back(1);
            })},
           {"token types", with([](TokenizerData& d) { d.token_types.pop_back(); })},
           {"separated by a space", with([](TokenizerData& d) { d.merges.push_back("ab"); })},
           {"separated by a space", with([](TokenizerData& d) { d.merges.push_back("a b c"); })},
           {"is not a token", with([](TokenizerData& d) { d.merges.push_back("a zz"); })},
           {"is not a token", with([](TokenizerData& d) { d.merges.push_back("b a"); })},
           {"bos", with([](TokenizerData& d) { d.bos_id = 100000; })},
           {"eos", with([](TokenizerData& d) { d.eos_id = -2; })}}) {
    absl::Status status = error(std::move(data));
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << what;
    EXPECT_THAT(status.message(), HasSubstr(what));
  }
}

TEST(TokenizerTest, LlamaBpeTakesWholeTokensAndGroupsDigits) {
  // ignore_merges: "abc" is a token no merge makes; as a whole piece it is taken as it is.
  auto tokenizer = Make({.merges = {{"a", "b"}, {"1", "2"}, {"12", "3"}},
                         .normals = {"abc"}, .pre = "llama-bpe"});
  const int32_t abc = tokenizer->TokenId("abc");
  EXPECT_THAT(*tokenizer->Encode("abc"), ElementsAre(abc));
  EXPECT_THAT(Pieces(*tokenizer, "abcd"), ElementsAre("ab", "c", "d"));
  // Numbers in groups of up to three digits; contractions of any case; a leading non-letter
  // joins the word.
  EXPECT_THAT(Pieces(*tokenizer, "12345"), ElementsAre("123", "4", "5"));
  EXPECT_THAT(Pieces(*tokenizer, "X'S"), ElementsAre("X", "'", "S"));
  auto smollm = Make({.merges = {{"1", "2"}, {"12", "3"}}, .normals = {"abc"}});
  EXPECT_THAT(Pieces(*smollm, "abc"), ElementsAre("a", "b", "c"));
}

TEST(TokenizerTest, Qwen2NormalizesToNfc) {
  // "e" + U+0301 COMBINING ACUTE is "é" (U+00E9) after NFC; single digits.
  auto qwen = Make({.merges = {{"\xC3", "\xA9"}}, .pre = "qwen2"});
  EXPECT_THAT(Pieces(*qwen, "e\xCC\x81"), ElementsAre("\xC3\xA9"));
  EXPECT_THAT(Pieces(*qwen, "123"), ElementsAre("1", "2", "3"));
  auto gpt2 = Make({.merges = {{"\xC3", "\xA9"}}, .pre = "gpt2"});
  EXPECT_THAT(Pieces(*gpt2, "e\xCC\x81"), ElementsAre("e", "\xCC", "\x81"));
}

// ---------------------------------------------------------------------------------------------
// SentencePiece-style ("llama") vocabularies

// A small vocabulary: <unk> <s> </s> (ids 0..2), the byte tokens <0x00>..<0xFF> (ids 3..258,
// so byte b is id 3 + b) unless `bytes` is false, then "▁" "a" "b" "▁a" "ab" "▁ab" with
// scores -1 .. -6.
constexpr char kSp[] = "\xE2\x96\x81";  // "▁"

TokenizerData SpmData(bool bytes = true, bool add_space_prefix = true) {
  TokenizerData data;
  data.model = TokenizerModel::kLlama;
  data.tokens = {"<unk>", "<s>", "</s>"};
  data.token_types = {2, 3, 3};
  data.scores = {0, 0, 0};
  if (bytes) {
    for (int b = 0; b < 256; ++b) {
      data.tokens.push_back(absl::StrFormat("<0x%02X>", b));
      data.token_types.push_back(6);
      data.scores.push_back(0);
    }
  }
  float score = -1;
  for (const std::string& t : {std::string(kSp), std::string("a"), std::string("b"),
                               absl::StrCat(kSp, "a"), std::string("ab"),
                               absl::StrCat(kSp, "ab")}) {
    data.tokens.push_back(t);
    data.token_types.push_back(1);
    data.scores.push_back(score--);
  }
  data.unk_id = 0;
  data.bos_id = 1;
  data.eos_id = 2;
  data.add_space_prefix = add_space_prefix;
  data.add_bos = true;
  return data;
}

std::unique_ptr<Tokenizer> MakeSpm(TokenizerData data) {
  auto tokenizer = Tokenizer::Create(std::move(data));
  EXPECT_TRUE(tokenizer.ok()) << tokenizer.status();
  return tokenizer.ok() ? std::move(*tokenizer) : nullptr;
}

TEST(SpmTokenizerTest, MergesFromScores) {
  auto tokenizer = MakeSpm(SpmData());
  ASSERT_NE(tokenizer, nullptr);
  EXPECT_EQ(tokenizer->model(), TokenizerModel::kLlama);
  EXPECT_TRUE(tokenizer->add_bos());
  EXPECT_EQ(tokenizer->unk_id(), 0);
  // Ids: "▁" 259, "a" 260, "b" 261, "▁a" 262, "ab" 263, "▁ab" 264. The merges derived from
  // the scores, by the merged token's score: "▁ a" (-4), "a b" (-5), then the two splits of
  // "▁ab" (-6): "▁ ab" before "▁a b" (the left pieces' scores -1 > -4). So:
  //  - "ab" is "▁ab" after the prefix: symbols ▁ a b; "▁ a" (rank 0) beats "a b" (rank 1),
  //    then "▁a b" (rank 3) makes "▁ab": 264.
  EXPECT_THAT(*tokenizer->Encode("ab"), ElementsAre(264));
  //  - "ba": no merge applies to ▁ b a.
  EXPECT_THAT(*tokenizer->Encode("ba"), ElementsAre(259, 261, 260));
  //  - "a b" is "▁a▁b": ▁a, then nothing merges "▁a ▁" or "▁ b".
  EXPECT_THAT(*tokenizer->Encode("a b"), ElementsAre(262, 259, 261));
  //  - "c" has no token: byte fallback, <0x63> is 3 + 0x63 = 102; "é" is C3 A9: 198 172.
  EXPECT_THAT(*tokenizer->Encode("c"), ElementsAre(259, 102));
  EXPECT_THAT(*tokenizer->Encode("\xC3\xA9"), ElementsAre(259, 198, 172));
  //  - special tokens split out first, each text between them gets its own "▁"; the unknown
  //    token is special too; empty text has no tokens.
  EXPECT_THAT(*tokenizer->Encode("<s>ab</s>"), ElementsAre(1, 264, 2));
  EXPECT_THAT(*tokenizer->Encode("<unk>"), ElementsAre(0));
  EXPECT_THAT(*tokenizer->Encode(""), IsEmpty());
  // Decoding: "▁" is a space, byte tokens their bytes, one leading space of the text dropped.
  EXPECT_EQ(*tokenizer->Decode({264}), "ab");
  EXPECT_EQ(*tokenizer->Decode({259, 198, 172}), "\xC3\xA9");
  EXPECT_EQ(*tokenizer->Decode({262, 262}), "a a");
  EXPECT_EQ(*tokenizer->Decode({1, 264}), "<s> ab");
  // Byte tokens that spell "▁" (E2 96 81) decode to a space too, and are dropped when first.
  EXPECT_EQ(*tokenizer->Decode({260, 3 + 0xE2, 3 + 0x96, 3 + 0x81, 260}), "a a");
  EXPECT_EQ(*tokenizer->Decode({3 + 0xE2, 3 + 0x96, 3 + 0x81, 260}), "a");
  // StreamDecoder: the same text, the leading space dropped once.
  StreamDecoder decoder(*tokenizer);
  EXPECT_EQ(*decoder.Push(264), "ab");
  EXPECT_EQ(*decoder.Push(262), " a");
  EXPECT_EQ(*decoder.Push(3 + 0xC3), "");
  EXPECT_EQ(*decoder.Push(3 + 0xA9), "\xC3\xA9");
  EXPECT_EQ(decoder.Finish(), "");
}

TEST(SpmTokenizerTest, WithoutSpacePrefix) {
  auto tokenizer = MakeSpm(SpmData(/*bytes=*/true, /*add_space_prefix=*/false));
  // "ab": symbols a b, "a b" makes 263; " ab" is "▁ab": 264, decoded with its space.
  EXPECT_THAT(*tokenizer->Encode("ab"), ElementsAre(263));
  EXPECT_THAT(*tokenizer->Encode(" ab"), ElementsAre(264));
  EXPECT_EQ(*tokenizer->Decode({264}), " ab");
}

TEST(SpmTokenizerTest, UnknownCharactersFuse) {
  // Without byte tokens: ids "▁" 3, "a" 4, "b" 5, ...; "cd" is ▁ then one <unk> for both.
  auto tokenizer = MakeSpm(SpmData(/*bytes=*/false));
  EXPECT_THAT(*tokenizer->Encode("cd"), ElementsAre(3, 0));
  EXPECT_THAT(*tokenizer->Encode("cda"), ElementsAre(3, 0, 4));
  EXPECT_THAT(*tokenizer->Encode("c a"), ElementsAre(3, 0, 6));
  // Without an unknown token such characters are left out.
  TokenizerData data = SpmData(/*bytes=*/false);
  data.unk_id = -1;
  auto no_unk = MakeSpm(std::move(data));
  EXPECT_THAT(*no_unk->Encode("cda"), ElementsAre(6));  // "▁" "a" merge to "▁a"
}

// A GGUF file with the given metadata (keys only), written by hand; returns its path.
class MiniGguf {
 public:
  MiniGguf& String(const std::string& key, const std::string& value) {
    return Key(key, 8, Str(value));
  }
  MiniGguf& Bool(const std::string& key, bool value) {
    return Key(key, 7, std::string(1, value ? '\1' : '\0'));
  }
  MiniGguf& U32(const std::string& key, uint32_t value) { return Key(key, 4, Raw(value)); }
  MiniGguf& Strings(const std::string& key, const std::vector<std::string>& values) {
    std::string payload = Raw<uint32_t>(8) + Raw<uint64_t>(values.size());
    for (const std::string& v : values) payload += Str(v);
    return Key(key, 9, payload);
  }
  MiniGguf& Floats(const std::string& key, const std::vector<float>& values) {
    std::string payload = Raw<uint32_t>(6) + Raw<uint64_t>(values.size());
    for (float v : values) payload += Raw(v);
    return Key(key, 9, payload);
  }
  MiniGguf& Ints(const std::string& key, const std::vector<int64_t>& values) {
    std::string payload = Raw<uint32_t>(5) + Raw<uint64_t>(values.size());
    for (int64_t v : values) payload += Raw(static_cast<int32_t>(v));
    return Key(key, 9, payload);
  }
  absl::StatusOr<std::unique_ptr<Tokenizer>> Load() const {
    const std::string path =
        absl::StrCat(::testing::TempDir(), "/tokenizer_test_", ::getpid(), ".gguf");
    {
      std::ofstream file(path, std::ios::binary | std::ios::trunc);
      const std::string bytes =
          "GGUF" + Raw<uint32_t>(3) + Raw<uint64_t>(0) + Raw<uint64_t>(keys_) + metadata_;
      file.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    }
    auto file = GgufFile::Open(path);
    std::filesystem::remove(path);
    if (!file.ok()) return file.status();
    return Tokenizer::FromGguf(**file);
  }

 private:
  template <typename T>
  static std::string Raw(T value) {
    std::string bytes(sizeof(T), '\0');
    std::memcpy(bytes.data(), &value, sizeof(T));
    return bytes;
  }
  static std::string Str(const std::string& s) { return Raw<uint64_t>(s.size()) + s; }
  MiniGguf& Key(const std::string& key, uint32_t type, const std::string& payload) {
    metadata_ += Str(key) + Raw(type) + payload;
    ++keys_;
    return *this;
  }
  std::string metadata_;
  uint64_t keys_ = 0;
};

MiniGguf SpmGguf() {
  const TokenizerData data = SpmData();
  MiniGguf gguf;
  gguf.String("tokenizer.ggml.model", "llama")
      .Strings("tokenizer.ggml.tokens", data.tokens)
      .Floats("tokenizer.ggml.scores", data.scores)
      .Ints("tokenizer.ggml.token_type", data.token_types)
      .U32("tokenizer.ggml.unknown_token_id", 0)
      .U32("tokenizer.ggml.bos_token_id", 1)
      .U32("tokenizer.ggml.eos_token_id", 2);
  return gguf;
}

TEST(SpmTokenizerTest, FromGguf) {
  auto tokenizer = SpmGguf().Load();
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  EXPECT_TRUE((*tokenizer)->add_bos());  // the default for "llama"
  EXPECT_THAT(*(*tokenizer)->Encode("ab a"), ElementsAre(264, 262));
  auto no_prefix = SpmGguf()
                       .Bool("tokenizer.ggml.add_space_prefix", false)
                       .Bool("tokenizer.ggml.add_bos_token", false)
                       .Load();
  ASSERT_TRUE(no_prefix.ok()) << no_prefix.status();
  EXPECT_FALSE((*no_prefix)->add_bos());
  EXPECT_THAT(*(*no_prefix)->Encode("ab"), ElementsAre(263));
}

TEST(SpmTokenizerTest, FromGgufErrors) {
  const TokenizerData data = SpmData();
  struct Case {
    std::string what;
    MiniGguf gguf;
  };
  std::vector<Case> cases;
  cases.push_back({"expected one of \"gpt2\"", MiniGguf()
                                                   .String("tokenizer.ggml.model", "bert")
                                                   .Strings("tokenizer.ggml.tokens", {"a"})});
  cases.push_back({"scores for", MiniGguf()
                                     .String("tokenizer.ggml.model", "llama")
                                     .Strings("tokenizer.ggml.tokens", data.tokens)
                                     .Floats("tokenizer.ggml.scores", {1, 2, 3})});
  cases.push_back({"neither", MiniGguf()
                                  .String("tokenizer.ggml.model", "llama")
                                  .Strings("tokenizer.ggml.tokens", data.tokens)});
  cases.push_back({"tokenizer.ggml.unknown_token_id 9999",
                   MiniGguf()
                       .String("tokenizer.ggml.model", "llama")
                       .Strings("tokenizer.ggml.tokens", data.tokens)
                       .Floats("tokenizer.ggml.scores", data.scores)
                       .U32("tokenizer.ggml.unknown_token_id", 9999)});
  cases.push_back({"unknown pre-tokenizer \"llama4\"",
                   MiniGguf()
                       .String("tokenizer.ggml.model", "gpt2")
                       .String("tokenizer.ggml.pre", "llama4")
                       .Strings("tokenizer.ggml.tokens", {"a", "aa"})
                       .Strings("tokenizer.ggml.merges", {"a a"})});
  cases.push_back({"tokenizer.ggml.merges is empty",
                   MiniGguf()
                       .String("tokenizer.ggml.model", "gpt2")
                       .String("tokenizer.ggml.pre", "default")
                       .Strings("tokenizer.ggml.tokens", {"a"})
                       .Strings("tokenizer.ggml.merges", {})});
  cases.push_back({"tokenizer.ggml.scores", MiniGguf()
                                                .String("tokenizer.ggml.model", "llama")
                                                .Strings("tokenizer.ggml.tokens", data.tokens)
                                                .Ints("tokenizer.ggml.scores", {1})});
  for (const Case& c : cases) {
    auto tokenizer = c.gguf.Load();
    ASSERT_FALSE(tokenizer.ok()) << c.what;
    EXPECT_EQ(tokenizer.status().code(), absl::StatusCode::kInvalidArgument) << c.what;
    EXPECT_THAT(tokenizer.status().message(), HasSubstr(c.what));
  }
}

// ---------------------------------------------------------------------------------------------
// StreamDecoder

std::vector<std::string> Stream(const Tokenizer& tokenizer, const std::string& bytes) {
  StreamDecoder decoder(tokenizer);
  std::vector<std::string> pieces;
  for (char c : bytes) {
    auto piece = decoder.Push(static_cast<uint8_t>(c));
    EXPECT_TRUE(piece.ok()) << piece.status();
    pieces.push_back(piece.ok() ? *piece : "?");
  }
  pieces.push_back(decoder.Finish());
  return pieces;
}

TEST(StreamDecoderTest, HoldsBackIncompleteSequences) {
  auto tokenizer = Make({});
  // An emoji whose four bytes are four tokens comes out whole with the last one.
  EXPECT_THAT(Stream(*tokenizer, "a\xF0\x9F\x98\x80!"),
              ElementsAre("a", "", "", "", "\xF0\x9F\x98\x80", "!", ""));
  EXPECT_THAT(Stream(*tokenizer, "\xC3\xA9\xE2\x82\xAC"),
              ElementsAre("", "\xC3\xA9", "", "", "\xE2\x82\xAC", ""));
  // A ZWJ sequence: each code point as soon as it is complete.
  EXPECT_THAT(Stream(*tokenizer, "\xE2\x80\x8D"), ElementsAre("", "", "\xE2\x80\x8D", ""));
}

TEST(StreamDecoderTest, InvalidSequencesPassThrough) {
  auto tokenizer = Make({});
  // Bytes that never start a sequence, a lead byte whose next byte is no continuation, a second
  // byte outside the lead's range (overlong, surrogate, beyond U+10FFFF): passed on at once.
  EXPECT_THAT(Stream(*tokenizer, "\xFF"), ElementsAre("\xFF", ""));
  EXPECT_THAT(Stream(*tokenizer, "\x80"), ElementsAre("\x80", ""));
  EXPECT_THAT(Stream(*tokenizer, "\xE2" "a"), ElementsAre("", "\xE2" "a", ""));
  EXPECT_THAT(Stream(*tokenizer, "\xE0\x80"), ElementsAre("", "\xE0\x80", ""));
  EXPECT_THAT(Stream(*tokenizer, "\xED\xA0"), ElementsAre("", "\xED\xA0", ""));
  EXPECT_THAT(Stream(*tokenizer, "\xF4\x90"), ElementsAre("", "\xF4\x90", ""));
  // A sequence cut off by the end comes out of Finish.
  EXPECT_THAT(Stream(*tokenizer, "x\xE2\x82"), ElementsAre("x", "", "", "\xE2\x82"));
  StreamDecoder decoder(*tokenizer);
  EXPECT_EQ(decoder.Push(256).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(StreamDecoderTest, PiecesConcatenateToDecode) {
  // Multi-byte tokens that split characters at every place, on random byte strings.
  auto tokenizer = Make({.merges = {{"\xF0", "\x9F"}, {"\x98", "\x80"}, {"\x80", "a"},
                                    {"\xE2", "\x82"}, {"\xAC", "\xC3"}}});
  std::mt19937 rng(7);
  const std::string alphabet = "a\xF0\x9F\x98\x80\xE2\x82\xAC\xC3\xA9\xFF\xED\xA0";
  for (int round = 0; round < 2000; ++round) {
    std::vector<int32_t> ids;
    const int n = static_cast<int>(rng() % 12);
    for (int i = 0; i < n; ++i) {
      // Single bytes and merged tokens.
      ids.push_back(rng() % 4 == 0 ? 256 + static_cast<int32_t>(rng() % 5)
                                   : static_cast<uint8_t>(alphabet[rng() % alphabet.size()]));
    }
    StreamDecoder decoder(*tokenizer);
    std::string joined;
    for (int32_t id : ids) joined += *decoder.Push(id);
    joined += decoder.Finish();
    EXPECT_EQ(joined, *tokenizer->Decode(ids));
  }
}

TEST(TokenizerTest, ConcurrentEncodes) {
  auto tokenizer = Make({.merges = {{"a", "b"}, {" ", "ab"}}, .controls = {"<s>"}});
  const std::string text = "ab ab<s>abc 123 ab\n\n";
  const std::vector<int32_t> expected = *tokenizer->Encode(text);
  std::vector<std::thread> threads;
  std::vector<int> mismatches(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 500; ++i) {
        auto ids = tokenizer->Encode(text);
        if (!ids.ok() || *ids != expected) ++mismatches[t];
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_THAT(mismatches, ElementsAre(0, 0, 0, 0));
}

// ---------------------------------------------------------------------------------------------
// The real model (skipped without the file). Expected ids are Hugging Face tokenizers' for
// SmolLM2's tokenizer.json; tests/model/test_tokenizer.py compares a few hundred more.

#ifdef SHARDRT_MODEL_PATH
constexpr char kModelPath[] = SHARDRT_MODEL_PATH;
#else
constexpr char kModelPath[] = "";
#endif

class ModelTokenizerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!std::filesystem::exists(kModelPath)) return;
    auto file = GgufFile::Open(kModelPath);
    ASSERT_TRUE(file.ok()) << file.status();
    auto tokenizer = Tokenizer::FromGguf(**file);
    ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
    tokenizer_ = std::move(*tokenizer).release();
  }
  static void TearDownTestSuite() {
    delete tokenizer_;
    tokenizer_ = nullptr;
  }
  void SetUp() override {
    if (tokenizer_ == nullptr) GTEST_SKIP() << "model file not found: " << kModelPath;
  }
  static Tokenizer* tokenizer_;
};
Tokenizer* ModelTokenizerTest::tokenizer_ = nullptr;

TEST_F(ModelTokenizerTest, Metadata) {
  EXPECT_EQ(tokenizer_->vocab_size(), 49152);
  EXPECT_EQ(tokenizer_->bos_id(), 1);
  EXPECT_EQ(tokenizer_->eos_id(), 2);
  EXPECT_EQ(tokenizer_->TokenId("<|im_start|>"), 1);
  EXPECT_EQ(tokenizer_->TokenId("<|im_end|>"), 2);
  EXPECT_EQ(tokenizer_->TokenId("<|endoftext|>"), 0);
}

TEST_F(ModelTokenizerTest, KnownEncodings) {
  EXPECT_THAT(*tokenizer_->Encode("Hello world"), ElementsAre(19556, 905));
  EXPECT_THAT(*tokenizer_->Encode("The year 2024 had 366 days."),
              ElementsAre(504, 713, 216, 34, 32, 34, 36, 761, 216, 35, 38, 38, 2009, 30));
  EXPECT_THAT(*tokenizer_->Encode("it's DON'T they're"),
              ElementsAre(269, 506, 422, 2154, 23, 68, 502, 2316));
  EXPECT_THAT(*tokenizer_->Encode("a  b\n\n"), ElementsAre(81, 216, 278, 1116));
  EXPECT_THAT(*tokenizer_->Encode("<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
                                  "<|im_start|>user\nHi!<|im_end|>\n<|im_start|>assistant\n"),
              ElementsAre(1, 9690, 198, 2683, 359, 253, 5356, 11173, 30, 2, 198, 1, 4093, 198,
                          26843, 17, 2, 198, 1, 520, 9531, 198));
  EXPECT_THAT(*tokenizer_->Encode("caf\xC3\xA9 \xF0\x9F\x98\x80 \xF0\x9F\x91\x8D\xF0\x9F\x8F\xBD"),
              ElementsAre(83, 1939, 2756, 40303, 218, 15107, 235, 231, 10813, 233, 138));
}

TEST_F(ModelTokenizerTest, RoundTrips) {
  for (const std::string text : {
           "Hello, world!", "  leading and trailing  \n", "def f(x):\n\treturn x ** 2\n",
           "1234567890 3.14159 1,000,000", "caf\xC3\xA9 na\xC3\xAFve",
           "\xCE\x95\xCE\xBB\xCE\xBB\xCE\xB7\xCE\xBD\xCE\xB9\xCE\xBA\xCE\xAC",
           "\xD0\x9F\xD1\x80\xD0\xB8\xD0\xB2\xD0\xB5\xD1\x82", "\xE4\xBD\xA0\xE5\xA5\xBD",
           "\xF0\x9F\x91\xA8\xE2\x80\x8D\xF0\x9F\x91\xA9\xE2\x80\x8D\xF0\x9F\x91\xA7",
           "e\xCC\x81", "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n",
           "x<|endoftext|>y", "\n\n\n\t\t  "}) {
    auto ids = tokenizer_->Encode(text);
    ASSERT_TRUE(ids.ok()) << ids.status();
    EXPECT_EQ(*tokenizer_->Decode(*ids), text);
    StreamDecoder decoder(*tokenizer_);
    std::string streamed;
    for (int32_t id : *ids) streamed += *decoder.Push(id);
    streamed += decoder.Finish();
    EXPECT_EQ(streamed, text);
  }
}

TEST_F(ModelTokenizerTest, StreamDecoderJoinsAnEmojiSplitAcrossTokens) {
  // " 😀" is tokens 40303 (space and the emoji's first three bytes) and 218 (its last byte).
  StreamDecoder decoder(*tokenizer_);
  EXPECT_EQ(*decoder.Push(40303), " ");
  EXPECT_EQ(*decoder.Push(218), "\xF0\x9F\x98\x80");
  EXPECT_EQ(decoder.Finish(), "");
}

}  // namespace
}  // namespace shardrt::llama
