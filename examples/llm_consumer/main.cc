// Generates text with an installed shardrt: `llm_consumer MODEL.gguf "prompt"`.
#include <cstdio>

#include "shardrt/llm/session.h"

int main(int argc, char** argv) {
  if (argc != 3) return std::fprintf(stderr, "usage: llm_consumer MODEL.gguf PROMPT\n"), 2;
  auto runtime = shardrt::Runtime::Create({.devices = 2});
  if (!runtime.ok()) return std::fprintf(stderr, "%s\n", runtime.status().ToString().c_str()), 1;
  auto session = shardrt::llm::Session::Open(**runtime, {.model_path = argv[1]});
  if (!session.ok()) return std::fprintf(stderr, "%s\n", session.status().ToString().c_str()), 1;
  shardrt::llm::GenerateRequest request{.prompt = argv[2], .max_tokens = 16};
  auto result = (*session)->Generate(request, [](const shardrt::llm::TokenEvent& event) {
    std::fwrite(event.text.data(), 1, event.text.size(), stdout);
    return shardrt::llm::StreamControl::kContinue;
  });
  if (!result.ok()) return std::fprintf(stderr, "%s\n", result.status().ToString().c_str()), 1;
  std::printf("\n%lld tokens (%s)\n", static_cast<long long>(result->tokens.size()),
              std::string(shardrt::llm::FinishReasonName(result->finish_reason)).c_str());
}
