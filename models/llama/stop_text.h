// StopText: a generation's answer text as it streams, cut at the first stop string.
//
// Text is appended piece by piece; Release hands out what may be shown now: everything but a
// tail that could still turn out to begin a stop string (held back until the next piece decides
// it). Once a stop string appears, the text ends before it and nothing more is added. Pieces
// are whole UTF-8 characters, and so are the released parts (a held-back tail begins a stop
// string, so it starts at a character).
//
// Thread safety: one generation's; not shared.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace shardrt::llama {

class StopText {
 public:
  // `stops`: the stop strings (none empty).
  explicit StopText(std::vector<std::string> stops) : stops_(std::move(stops)) {}

  // Adds a piece; nothing once stopped.
  void Append(std::string_view piece);
  // Whether a stop string has appeared (the text ends before it).
  bool stopped() const { return stopped_; }
  // The text not handed out yet that may be shown now: all of it when `flush` or stopped,
  // else all but the longest tail that is a proper prefix of a stop string.
  std::string Release(bool flush);
  // The answer so far (cut before a stop string), released or not.
  const std::string& text() const { return text_; }

 private:
  std::vector<std::string> stops_;
  std::string text_;
  size_t released_ = 0;
  bool stopped_ = false;
};

}  // namespace shardrt::llama
