// Greedy token ids of SmolLM2-135M-Instruct (.cache/models/SmolLM2-135M-Instruct.Q4_1.gguf) for
// fixed prompts, from references independent of shardrt: the prompt ids from Hugging Face
// tokenizers configured from the GGUF, the generated ids from the NumPy model
// tests/model/reference.py (f32 on the gguf package's dequantized weights), generation ending
// after a stop token (0 or 2). Generated, do not edit; made from the repository root by the
// command (one line):
//   tests/.venv/bin/python tests/testdata/golden_smollm2_greedy.py
//       .cache/models/SmolLM2-135M-Instruct.Q4_1.gguf > tests/testdata/golden_smollm2_greedy.h
#pragma once

#include <cstdint>
#include <vector>

namespace shardrt::golden {

struct GreedyCase {
  const char* prompt;               // the prompt as `shardrt generate --prompt` takes it
  bool chat;                        // in the chat template (`--chat`, default system turn)
  std::vector<int32_t> prompt_ids;  // its token ids (with the template when chat)
  std::vector<int32_t> tokens;      // the greedy tokens after it
};

// ', the city of Nova Haven was a thriving metropolis, with'
inline const GreedyCase kOnceUponATime = {
    "Once upon a time", false,
    {6403, 1980, 253, 655},
    {28, 260, 2240, 282, 23324, 27108, 436, 253, 15114, 39228, 28, 351}};

// 'The capital of France is Paris.'
inline const GreedyCase kCapitalOfFrance = {
    "What is the capital of France?", true,
    {1, 9690, 198, 2683, 359, 253, 5356, 5646, 11173, 3365, 3511, 308, 34519, 28, 7018, 411,
     407, 19712, 8182, 2, 198, 1, 4093, 198, 1780, 314, 260, 3575, 282, 4649, 47, 2, 198, 1,
     520, 9531, 198},
    {504, 3575, 282, 4649, 314, 7042, 30, 2}};

}  // namespace shardrt::golden
