// UTF-8 validity shared by the tokenizer and the CLI's JSON text.
#include "llama/utf8.h"

#include "gtest/gtest.h"

namespace shardrt::llama::utf8 {
namespace {

TEST(Utf8Test, FindsTheFirstInvalidByte) {
  EXPECT_EQ(FindInvalidUtf8("plain \xC3\xA9 \xF0\x9F\x98\x80"), absl::string_view::npos);
  EXPECT_EQ(FindInvalidUtf8("ab\xC0\x80"), 2u);       // overlong
  EXPECT_EQ(FindInvalidUtf8("a\xED\xA0\x80"), 1u);    // surrogate
  EXPECT_EQ(FindInvalidUtf8("\xF4\x90\x80\x80"), 0u);  // beyond U+10FFFF
  EXPECT_EQ(FindInvalidUtf8("x\xE2\x82"), 1u);        // cut short
}

// Expected values as Python's bytes.decode("utf-8", "replace") gives them.
TEST(Utf8Test, ReplacesEachMaximalInvalidSubpartAndKeepsTheRest) {
  const std::string r = "\xEF\xBF\xBD";
  EXPECT_EQ(ReplaceInvalidUtf8("ok \xC3\xA9"), "ok \xC3\xA9");
  EXPECT_EQ(ReplaceInvalidUtf8("a\xFF" "b"), "a" + r + "b");
  EXPECT_EQ(ReplaceInvalidUtf8("x\xE2\x82"), "x" + r);                 // cut short: one
  EXPECT_EQ(ReplaceInvalidUtf8("\xE2\x82" "A"), r + "A");               // broken: one
  EXPECT_EQ(ReplaceInvalidUtf8("\xF0\x9F\x98" "\xE2\x82"), r + r);      // two subparts
  EXPECT_EQ(ReplaceInvalidUtf8("\xE0\x80\x80"), r + r + r);            // overlong: each byte
  EXPECT_EQ(ReplaceInvalidUtf8("\xED\xA0\x80"), r + r + r);            // surrogate: each byte
  EXPECT_EQ(ReplaceInvalidUtf8("\x80\x80"), r + r);                    // lone continuations
  EXPECT_EQ(ReplaceInvalidUtf8("\xC3\xA9\xC3"), "\xC3\xA9" + r);
  EXPECT_EQ(ReplaceInvalidUtf8(""), "");
}

}  // namespace
}  // namespace shardrt::llama::utf8
