// StopText against a direct reading of its contract: for every way of cutting a text into
// pieces, the released parts concatenate to the text cut before the first stop string, nothing
// released could still begin a stop string, and once stopped nothing more is added.
#include "llama/stop_text.h"

#include <algorithm>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace shardrt::llama {
namespace {

// The answer a stop list makes of `full`: `full` up to the earliest occurrence of any stop.
std::string CutAtFirstStop(const std::string& full, const std::vector<std::string>& stops) {
  size_t first = std::string::npos;
  for (const std::string& s : stops) first = std::min(first, full.find(s));
  return first == std::string::npos ? full : full.substr(0, first);
}

TEST(StopTextTest, EveryCutReleasesTheTextBeforeTheFirstStop) {
  const std::vector<std::string> texts = {"Hello, world! The end.", "abcabcabd", "no stop here",
                                          "xx<|im_end|>yy", "aaaa"};
  const std::vector<std::vector<std::string>> stop_lists = {
      {}, {"end"}, {"abd", "ca"}, {"<|im_end|>"}, {"aab"}, {"world", "o, w"}, {"zzz"}};
  for (const std::string& full : texts) {
    for (const auto& stops : stop_lists) {
      // Every split of `full` into two cut points (three pieces).
      for (size_t a = 0; a <= full.size(); ++a) {
        for (size_t b = a; b <= full.size(); ++b) {
          StopText text(stops);
          std::string released;
          for (const std::string piece : {full.substr(0, a), full.substr(a, b - a), full.substr(b)}) {
            text.Append(piece);
            released += text.Release(/*flush=*/false);
            // Nothing released could still begin a stop: every tail of the text so far that
            // is a proper prefix of a stop starts after what was released (unless stopped).
            const std::string& whole = text.text();
            if (!text.stopped()) {
              for (const std::string& s : stops) {
                for (size_t k = 1; k < s.size() && k <= whole.size(); ++k) {
                  if (whole.substr(whole.size() - k) == s.substr(0, k)) {
                    EXPECT_GE(whole.size() - k, released.size()) << full << " " << s;
                  }
                }
              }
            }
          }
          released += text.Release(/*flush=*/true);
          const std::string expected = CutAtFirstStop(full, stops);
          EXPECT_EQ(released, expected) << "'" << full << "' cut at " << a << "," << b;
          EXPECT_EQ(text.text(), expected);
          EXPECT_EQ(text.stopped(), expected.size() != full.size());
        }
      }
    }
  }
}

TEST(StopTextTest, NothingIsAddedOnceStopped) {
  StopText text({"END"});
  text.Append("abcEN");
  EXPECT_EQ(text.Release(false), "abc");
  text.Append("Dxyz");
  EXPECT_TRUE(text.stopped());
  EXPECT_EQ(text.Release(false), "");
  text.Append("more");
  EXPECT_EQ(text.text(), "abc");
}

}  // namespace
}  // namespace shardrt::llama
