"""Writes golden_smollm2_greedy.h: the greedy token ids of SmolLM2-135M-Instruct (Q4_1) for
fixed prompts, from references independent of shardrt: the prompts are tokenized by Hugging Face
tokenizers configured from the GGUF (tests/model/test_tokenizer.py's load_reference) and the
tokens come from the NumPy model (tests/model/reference.py, on the gguf package's dequantized
weights). The C++ model tests (llama_model_test.cc, generate_test.cc) check shardrt's greedy
tokens against the header.

    usage (from the repository root, with the model tests' environment, tests/model/setup_venv.sh):
    tests/.venv/bin/python tests/testdata/golden_smollm2_greedy.py \
        .cache/models/SmolLM2-135M-Instruct.Q4_1.gguf > tests/testdata/golden_smollm2_greedy.h
"""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "model"))

from reference import Reference  # noqa: E402
from test_tokenizer import load_reference  # noqa: E402

# The chat template's default system turn (tokenizer.chat_template, ChatML), as `--chat` writes
# it around the user's turn.
SYSTEM = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"
CASES = [  # (C++ name, the prompt as the CLI takes it, chat, most tokens generated)
    ("kOnceUponATime", "Once upon a time", False, 12),
    ("kCapitalOfFrance", "What is the capital of France?", True, 16),
]
STOP = (0, 2)  # <|endoftext|>, <|im_end|>

HEADER = """\
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
"""


def ids(values, indent="    "):
    """A C++ braced list of `values`, wrapped at 100 columns."""
    lines, line = [], indent + "{"
    for i, v in enumerate(values):
        item = str(v) + ("" if i == len(values) - 1 else ",")
        if len(line) + len(item) + 1 > 96:
            lines.append(line.rstrip())
            line = indent + " "
        line += item + " "
    return "\n".join(lines + [line.rstrip() + "}"])


def main(model):
    tokenizer, _, _ = load_reference(model)
    reference = Reference(model)
    print(HEADER)
    for name, prompt, chat, n in CASES:
        text = (f"<|im_start|>system\n{SYSTEM}<|im_end|>\n<|im_start|>user\n{prompt}<|im_end|>\n"
                "<|im_start|>assistant\n") if chat else prompt
        prompt_ids = tokenizer.encode(text).ids
        tokens, _ = reference.greedy(prompt_ids, n, STOP)
        answer = tokenizer.decode(tokens)
        print(f"// {answer!r}")
        print(f"inline const GreedyCase {name} = {{")
        print(f"    {json.dumps(prompt)}, {str(chat).lower()},")
        print(ids(prompt_ids) + ",")
        print(ids(tokens) + "};")
        print()
    print("}  // namespace shardrt::golden")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
