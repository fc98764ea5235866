// tokenize_tool: shardrt's tokenizer on the command line, for tests/model/test_tokenizer.py and
// test_tokenizers.py to compare with Hugging Face tokenizers and transformers. Texts travel as
// records "LENGTH\n" followed by LENGTH bytes, so that any byte, NUL included, may appear in
// them.
//
//   tokenize_tool MODEL            stdin: text records; stdout: one line per record, its ids
//                                  separated by spaces, or "error: MESSAGE" when Encode fails.
//   tokenize_tool --decode MODEL   stdin: lines of space-separated ids; stdout: one text record
//                                  per line, the decoded bytes.
//   tokenize_tool --stream MODEL   stdin: as --decode; feeds each line's ids one at a time to a
//                                  StreamDecoder; stdout: one line per input line, "ok PIECES"
//                                  when the pieces concatenate to Decode's bytes and every piece
//                                  is valid UTF-8 where Decode's bytes are, else "mismatch ...".
//   tokenize_tool --info MODEL     stdout: one line "model=gpt2|llama vocab=N bos=ID eos=ID
//                                  unk=ID add_bos=0|1" (ids -1 where there is none).
//
// Exit status: 0 when every record was processed (an Encode error is a result, not a failure),
// 1 on a bad command line, a model that does not load, or malformed input.
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "llama/gguf.h"
#include "llama/tokenizer.h"

namespace {

using shardrt::llama::GgufFile;
using shardrt::llama::StreamDecoder;
using shardrt::llama::Tokenizer;

bool IsValidUtf8(absl::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto b = static_cast<uint8_t>(s[i]);
    int n;
    uint32_t min;
    if (b < 0x80) {
      ++i;
      continue;
    } else if (b >= 0xC2 && b <= 0xDF) {
      n = 2, min = 0x80;
    } else if (b >= 0xE0 && b <= 0xEF) {
      n = 3, min = 0x800;
    } else if (b >= 0xF0 && b <= 0xF4) {
      n = 4, min = 0x10000;
    } else {
      return false;
    }
    if (i + n > s.size()) return false;
    uint32_t cp = b & (0x7F >> n);
    for (int k = 1; k < n; ++k) {
      const auto c = static_cast<uint8_t>(s[i + k]);
      if ((c & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (c & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += n;
  }
  return true;
}

bool ParseIds(absl::string_view line, std::vector<int32_t>* ids) {
  ids->clear();
  for (absl::string_view field : absl::StrSplit(line, ' ', absl::SkipEmpty())) {
    int32_t id;
    if (!absl::SimpleAtoi(field, &id)) return false;
    ids->push_back(id);
  }
  return true;
}

int Encode(const Tokenizer& tokenizer) {
  const std::string input((std::istreambuf_iterator<char>(std::cin)),
                          std::istreambuf_iterator<char>());
  size_t pos = 0;
  std::string out;
  for (int64_t number = 1; pos < input.size(); ++number) {
    const size_t newline = input.find('\n', pos);
    size_t length;
    if (newline == std::string::npos ||
        !absl::SimpleAtoi(absl::string_view(input).substr(pos, newline - pos), &length) ||
        length > input.size() - newline - 1) {
      std::cerr << "tokenize_tool: record " << number << ": bad length line\n";
      return 1;
    }
    auto ids = tokenizer.Encode(absl::string_view(input).substr(newline + 1, length));
    if (ids.ok()) {
      for (size_t i = 0; i < ids->size(); ++i) {
        if (i > 0) out += ' ';
        out += std::to_string((*ids)[i]);
      }
    } else {
      out += "error: ";
      out += std::string(ids.status().message());
    }
    out += '\n';
    pos = newline + 1 + length;
  }
  std::fwrite(out.data(), 1, out.size(), stdout);
  return 0;
}

int Decode(const Tokenizer& tokenizer, bool stream) {
  std::string line;
  std::vector<int32_t> ids;
  std::string out;
  for (int64_t number = 1; std::getline(std::cin, line); ++number) {
    if (!ParseIds(line, &ids)) {
      std::cerr << "tokenize_tool: line " << number << ": not a list of ids\n";
      return 1;
    }
    auto whole = tokenizer.Decode(ids);
    if (!whole.ok()) {
      std::cerr << "tokenize_tool: line " << number << ": " << whole.status() << "\n";
      return 1;
    }
    if (!stream) {
      out += std::to_string(whole->size()) + "\n" + *whole;
      continue;
    }
    StreamDecoder decoder(tokenizer);
    std::string joined;
    bool pieces_valid = true;
    int64_t pieces = 0;
    auto take = [&](const std::string& piece) {
      if (piece.empty()) return;
      ++pieces;
      pieces_valid = pieces_valid && IsValidUtf8(piece);
      joined += piece;
    };
    for (int32_t id : ids) {
      auto piece = decoder.Push(id);
      if (!piece.ok()) {
        std::cerr << "tokenize_tool: line " << number << ": " << piece.status() << "\n";
        return 1;
      }
      take(*piece);
    }
    take(decoder.Finish());
    if (joined != *whole) {
      out += "mismatch: the pieces differ from Decode\n";
    } else if (IsValidUtf8(*whole) && !pieces_valid) {
      out += "mismatch: a piece is not valid UTF-8\n";
    } else {
      out += "ok " + std::to_string(pieces) + "\n";
    }
  }
  std::fwrite(out.data(), 1, out.size(), stdout);
  return 0;
}

// Prints the tokenizer's metadata (--info).
int Info(const Tokenizer& tokenizer) {
  std::printf("model=%s vocab=%lld bos=%d eos=%d unk=%d add_bos=%d\n",
              tokenizer.model() == shardrt::llama::TokenizerModel::kLlama ? "llama" : "gpt2",
              static_cast<long long>(tokenizer.vocab_size()), tokenizer.bos_id(),
              tokenizer.eos_id(), tokenizer.unk_id(), tokenizer.add_bos() ? 1 : 0);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  std::string mode = "encode";
  if (!args.empty() && (args[0] == "--decode" || args[0] == "--stream" || args[0] == "--info")) {
    mode = args[0].substr(2);
    args.erase(args.begin());
  }
  if (args.size() != 1) {
    std::cerr << "usage: tokenize_tool [--decode | --stream | --info] MODEL.gguf\n";
    return 1;
  }
  auto file = GgufFile::Open(args[0]);
  if (!file.ok()) {
    std::cerr << "tokenize_tool: " << file.status() << "\n";
    return 1;
  }
  auto tokenizer = Tokenizer::FromGguf(**file);
  if (!tokenizer.ok()) {
    std::cerr << "tokenize_tool: " << tokenizer.status() << "\n";
    return 1;
  }
  if (mode == "encode") return Encode(**tokenizer);
  if (mode == "info") return Info(**tokenizer);
  return Decode(**tokenizer, mode == "stream");
}
