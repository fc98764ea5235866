#include "llama/stop_text.h"

#include <algorithm>

namespace shardrt::llama {

void StopText::Append(std::string_view piece) {
  if (stopped_ || piece.empty()) return;
  text_.append(piece);
  // A match cannot start in the released text: its possible beginnings were held back.
  size_t first = std::string::npos;
  for (const std::string& stop : stops_) first = std::min(first, text_.find(stop, released_));
  if (first != std::string::npos) {
    text_.resize(first);
    stopped_ = true;
  }
}

std::string StopText::Release(bool flush) {
  size_t end = text_.size();
  if (!flush && !stopped_) {
    size_t hold = 0;
    for (const std::string& stop : stops_) {
      const size_t longest = std::min(stop.size() - 1, text_.size() - released_);
      for (size_t k = longest; k > hold; --k) {
        if (std::string_view(text_).substr(text_.size() - k) == std::string_view(stop).substr(0, k)) {
          hold = k;
          break;
        }
      }
    }
    end -= hold;
  }
  std::string out = text_.substr(released_, end - released_);
  released_ = end;
  return out;
}

}  // namespace shardrt::llama
