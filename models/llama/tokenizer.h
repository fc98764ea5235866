// Tokenizer: the byte-level BPE of GPT-2-style GGUF models (`tokenizer.ggml.model = gpt2`), with
// the pre-tokenizer the file names (`tokenizer.ggml.pre`; `smollm` for SmolLM2), special tokens
// split out first, and exact, streaming-safe decoding.
//
// Encoding: special (control) tokens such as <|im_start|> are matched literally and never
// merged; the text between them is split by the pre-tokenizer's regular expressions (PCRE2,
// Unicode-aware), each piece is mapped to GPT-2's byte-to-unicode alphabet and merged by rank.
// The result equals Hugging Face `tokenizers` configured as the model's tokenizer.json
// (BPE without an unknown token, so a byte whose one-character token is missing from the
// vocabulary, e.g. 0x04 in SmolLM2's, is left out, as tokenizers does).
//
// Decoding: tokens map back to bytes; Decode returns those bytes as they are (possibly ending in
// an incomplete UTF-8 sequence); StreamDecoder holds back an incomplete trailing sequence so
// that text printed piece by piece is exactly the text of all tokens at once.
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

// What a tokenizer is made of (the GGUF `tokenizer.ggml.*` metadata).
struct TokenizerData {
  std::vector<std::string> tokens;   // id -> token text (in the byte-to-unicode alphabet)
  std::vector<int64_t> token_types;  // id -> 1 normal, 3 control, ... (empty: all normal)
  std::vector<std::string> merges;   // "left right", highest priority first
  std::string pre = "smollm";        // pre-tokenizer name: "smollm" or "gpt2"
  int32_t bos_id = -1;               // -1: none
  int32_t eos_id = -1;
};

class Tokenizer {
 public:
  // The longest text Encode accepts.
  static constexpr size_t kMaxInputBytes = size_t{16} << 20;

  // Control tokens (type 3) are the ones split out of the text; merges rank by position (a
  // repeated pair keeps its first rank). Errors: InvalidArgument for an unknown pre-tokenizer,
  // an empty or oversized vocabulary, token types not one per token, a merge that is not two
  // known tokens separated by one space or whose concatenation is not a token, a duplicate
  // token, an id out of range.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<Tokenizer>> Create(TokenizerData data);
  // Reads TokenizerData from the file's tokenizer.ggml.* metadata (model must be "gpt2").
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<Tokenizer>> FromGguf(const GgufFile& file);
  ~Tokenizer();

  // Token ids of `text` (UTF-8). No BOS is added. Invalid UTF-8 is an InvalidArgument error
  // naming the byte offset; so is a text longer than kMaxInputBytes.
  [[nodiscard]] absl::StatusOr<std::vector<int32_t>> Encode(absl::string_view text) const;

  // The bytes of `ids` concatenated. Error: InvalidArgument for an id out of range.
  [[nodiscard]] absl::StatusOr<std::string> Decode(absl::Span<const int32_t> ids) const;

  int64_t vocab_size() const;
  int32_t bos_id() const;
  int32_t eos_id() const;
  // The id of a token's exact text (e.g. "<|im_end|>"), or -1.
  int32_t TokenId(absl::string_view token) const;

 private:
  struct Impl;
  explicit Tokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Turns a stream of token ids into text pieces that are always complete UTF-8: Push returns the
// text that became complete (possibly empty), Finish what is left (an incomplete sequence at the
// very end comes out as its raw bytes). The concatenation of every piece equals
// tokenizer.Decode(all ids).
class StreamDecoder {
 public:
  explicit StreamDecoder(const Tokenizer& tokenizer) : tokenizer_(tokenizer) {}
  // Error: InvalidArgument for an id out of range.
  [[nodiscard]] absl::StatusOr<std::string> Push(int32_t id);
  std::string Finish();

 private:
  const Tokenizer& tokenizer_;
  std::string pending_;  // bytes of an incomplete UTF-8 sequence
};

}  // namespace shardrt::llama
