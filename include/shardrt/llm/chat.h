// A chat conversation, as the model's chat template turns it into a prompt
// (Session::ApplyChatTemplate).
#pragma once

#include <string>

#include "shardrt/base/export.h"

namespace shardrt::llm {

// One turn of a conversation. role: "system", "user" or "assistant" (others are refused);
// content: the turn's text as it is (UTF-8).
struct SHARDRT_EXPORT ChatMessage {
  std::string role;
  std::string content;
};

}  // namespace shardrt::llm
