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

TEST(Utf8Test, ReplacesEachInvalidByteAndKeepsTheRest) {
  EXPECT_EQ(ReplaceInvalidUtf8("ok \xC3\xA9"), "ok \xC3\xA9");
  EXPECT_EQ(ReplaceInvalidUtf8("a\xFF" "b"), "a\xEF\xBF\xBD" "b");
  EXPECT_EQ(ReplaceInvalidUtf8("x\xE2\x82"), "x\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(ReplaceInvalidUtf8(""), "");
}

}  // namespace
}  // namespace shardrt::llama::utf8
