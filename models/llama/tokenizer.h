// Tokenizer: the tokenizers of Llama-family GGUF files, each equal to what Hugging Face
// `tokenizers` (0.21.1) does with the file's vocabulary, with special tokens split out first and
// exact, streaming-safe decoding. Two models (`tokenizer.ggml.model`):
//
//  - "gpt2": GPT-2's byte-level BPE (SmolLM2, Llama 3, Qwen2 files). The text is split by the
//    pre-tokenizer the file names (`tokenizer.ggml.pre`), each piece is mapped to GPT-2's
//    byte-to-unicode alphabet and merged by the merges' rank. Pre-tokenizers:
//      "gpt2", "default"      ByteLevel's GPT-2 regex;
//      "smollm"               every numeric character alone (Digits(individual_digits)), then
//                             the GPT-2 regex (SmolLM2's tokenizer.json);
//      "llama-bpe" ("llama3", "llama-v3")
//                             Llama 3's tokenizer.json: its Split regex (case-insensitive
//                             contractions, letters with one leading non-letter, numbers of up
//                             to 3 digits, ...), then ByteLevel without a regex; a piece that
//                             is a token as a whole is that token (ignore_merges);
//      "qwen2"                Qwen2's tokenizer.json: NFC normalization (ICU), then the same
//                             regex with single digits, then ByteLevel without a regex.
//    A byte whose one-character token is missing from the vocabulary (e.g. 0x04 in SmolLM2's)
//    is left out, as tokenizers' BPE without an unknown token does. Decoding maps the alphabet
//    back to bytes.
//  - "llama": a SentencePiece-style vocabulary (Llama 2, TinyLlama, Mistral files) with a score
//    per token and byte tokens <0x00>..<0xFF>, loaded as transformers' GGUF conversion does
//    (GGUFLlamaConverter): when the file has no merges they are derived from the scores (every
//    split of every token into two tokens; by the token's score, highest first, then by the
//    scores of the two halves), and BPE runs with byte fallback and fused unknowns. Each text
//    between special tokens becomes "▁" + the text with every space replaced by "▁"
//    (`tokenizer.ggml.add_space_prefix`, default true; without it no "▁" is prepended), and is
//    merged whole (no pre-tokenizer). A character without a token becomes the byte tokens of
//    its UTF-8 bytes; where one of those is missing too, the unknown token (consecutive ones
//    fused into one). Decoding: byte tokens give their byte, every "▁" a space, and with
//    add_space_prefix one leading space of the whole text is dropped.
//
// Special tokens: the control tokens (type 3), and for "llama" also the unknown, BOS and EOS
// tokens (transformers adds those as special tokens), are matched literally in the text (the
// longest at the leftmost position) and never merged with their neighbours.
//
// Decoding returns the tokens' bytes as they are (possibly ending in, or containing, an
// incomplete UTF-8 sequence, where tokenizers would print U+FFFD); StreamDecoder holds back an
// incomplete trailing sequence so that text printed piece by piece is exactly the text of all
// tokens at once.
//
// Thread safety: a Tokenizer is immutable after creation; Encode and Decode may be called from
// several threads at once. A StreamDecoder is used by one thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace shardrt::llama {

class GgufFile;

// The tokenizer model (GGUF `tokenizer.ggml.model`).
enum class TokenizerModel {
  kGpt2,   // "gpt2": byte-level BPE with merges and a pre-tokenizer
  kLlama,  // "llama": SentencePiece-style vocabulary with scores and byte fallback
};

// What a tokenizer is made of (the GGUF `tokenizer.ggml.*` metadata).
struct TokenizerData {
  TokenizerModel model = TokenizerModel::kGpt2;
  std::vector<std::string> tokens;   // id -> token text (gpt2: in the byte-to-unicode alphabet)
  std::vector<int64_t> token_types;  // id -> 1 normal, 2 unknown, 3 control, 4 user-defined,
                                     // 5 unused, 6 byte (empty: all normal)
  std::vector<std::string> merges;   // "left right", highest priority first (llama: optional,
                                     // derived from the scores when empty)
  std::vector<float> scores;         // llama: id -> score (needed when there are no merges)
  std::string pre = "smollm";        // gpt2: the pre-tokenizer's name; llama: unused
  bool add_space_prefix = true;      // llama: prepend "▁" to each text between special tokens
  bool add_bos = false;              // whether a prompt starts with BOS (for the caller)
  int32_t bos_id = -1;               // -1: none
  int32_t eos_id = -1;
  int32_t unk_id = -1;               // llama: the unknown token; -1: none
};

// Reads TokenizerData from the file's tokenizer.ggml.* metadata: model ("gpt2" or "llama"),
// tokens, token_type, merges (required for gpt2), scores (llama), pre (gpt2; "default" when
// absent), add_space_prefix (default true), add_bos_token (default true for llama and for gpt2
// with Llama 3's pre-tokenizer, else false, as llama.cpp), bos/eos/unknown_token_id. Only
// reads: Tokenizer::Create checks the rest. Errors: InvalidArgument naming the file and the key
// for an unknown model (listing the supported ones), an empty gpt2 merge list, a key of the
// wrong type, an id out of range; NotFound for a missing required key (tokens, model; merges
// for gpt2).
[[nodiscard]] absl::StatusOr<TokenizerData> ReadTokenizerData(const GgufFile& file);

class Tokenizer {
 public:
  // The longest text Encode accepts.
  static constexpr size_t kMaxInputBytes = size_t{16} << 20;

  // Builds the tokenizer described in the file comment. Merges rank by position (a repeated
  // pair keeps its first rank). Errors: InvalidArgument for an unknown pre-tokenizer (gpt2),
  // an empty or oversized vocabulary, token types or scores not one per token, a llama
  // vocabulary with neither merges nor scores, a non-finite score, a merge that is not two
  // known tokens separated by one space or whose concatenation is not a token, a duplicate
  // token, a bos/eos/unk id out of range.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<Tokenizer>> Create(TokenizerData data);
  // ReadTokenizerData, then Create; Create's errors are prefixed with the file's path.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<Tokenizer>> FromGguf(const GgufFile& file);
  ~Tokenizer();

  // Token ids of `text` (UTF-8). No BOS is added. Invalid UTF-8 is an InvalidArgument error
  // naming the byte offset; so is a text longer than kMaxInputBytes.
  [[nodiscard]] absl::StatusOr<std::vector<int32_t>> Encode(absl::string_view text) const;

  // The text of `ids`: their bytes concatenated (llama: with "▁" as spaces and, with
  // add_space_prefix, one leading space dropped, as tokenizers decodes `ids` on their own).
  // Error: InvalidArgument for an id out of range.
  [[nodiscard]] absl::StatusOr<std::string> Decode(absl::Span<const int32_t> ids) const;

  TokenizerModel model() const;
  int64_t vocab_size() const;
  int32_t bos_id() const;
  int32_t eos_id() const;
  // The unknown token (llama), or -1.
  int32_t unk_id() const;
  // Whether a prompt should start with bos_id() (GGUF tokenizer.ggml.add_bos_token).
  bool add_bos() const;
  // The id of a token's exact text (e.g. "<|im_end|>"), or -1.
  int32_t TokenId(absl::string_view token) const;

 private:
  friend class StreamDecoder;
  struct Impl;
  explicit Tokenizer(std::unique_ptr<Impl> impl);
  // Appends the bytes of `ids` to `out` as Decode does, without dropping a leading space.
  absl::Status AppendBytes(absl::Span<const int32_t> ids, std::string* out) const;
  // Decode's last steps on complete text: "▁" made of byte tokens becomes a space (llama), and
  // when `at_start`, one leading space is dropped (llama with add_space_prefix).
  void FinishText(std::string* text, bool at_start) const;
  std::unique_ptr<Impl> impl_;
};

// Turns a stream of token ids into text pieces that are always complete UTF-8: Push returns the
// text that became complete (possibly empty), Finish what is left (an incomplete sequence at the
// very end comes out as its raw bytes). The concatenation of every piece equals
// tokenizer.Decode(all ids).
class StreamDecoder {
 public:
  // Where the decoded ids stand in their text. kStart: they begin it, so Decode's rule for a
  // leading space (llama, add_space_prefix: one dropped) applies to the first piece.
  // kContinuation: they continue a text already written (a prompt's), so a leading space is
  // kept, as the prompt and its continuation decoded together have it.
  enum class Position { kStart, kContinuation };
  explicit StreamDecoder(const Tokenizer& tokenizer, Position position = Position::kStart)
      : tokenizer_(tokenizer), started_(position == Position::kContinuation) {}
  // Error: InvalidArgument for an id out of range.
  [[nodiscard]] absl::StatusOr<std::string> Push(int32_t id);
  std::string Finish();

 private:
  // Passes `text` (complete UTF-8 sequences) through the tokenizer's FinishText.
  std::string Emit(std::string text);

  const Tokenizer& tokenizer_;
  std::string pending_;  // bytes of an incomplete UTF-8 sequence
  bool started_;  // whether text came before (a first piece keeps its leading space)
};

}  // namespace shardrt::llama
