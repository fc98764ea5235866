// What the fuzz targets share: reporting a violated property, and the one-line message check.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/strings/escaping.h"
#include "absl/strings/string_view.h"

namespace shardrt::fuzz {

// Prints "TARGET: WHAT", the input (C-escaped, its first 512 bytes) and `detail`, and aborts so
// libFuzzer saves the input.
[[noreturn]] inline void Fail(const char* target, const char* what, absl::string_view input,
                              const std::string& detail) {
  std::fprintf(stderr, "%s: %s\n  input:  %s\n  detail: %s\n", target, what,
               absl::CHexEscape(input.substr(0, 512)).c_str(), detail.c_str());
  std::abort();
}

// Whether `message` is one non-empty line with no control characters.
inline bool OneLine(absl::string_view message) {
  if (message.empty()) return false;
  for (const char c : message) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) return false;
  }
  return true;
}

}  // namespace shardrt::fuzz
