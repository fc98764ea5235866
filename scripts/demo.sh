#!/usr/bin/env bash
# The main job: set up, build, and run SmolLM2-135M-Instruct (fetched by scripts/bootstrap.sh)
# tensor-parallel on 8 CPU devices, answering a prompt through its chat template.
#   usage: scripts/demo.sh ["PROMPT"] [more `shardrt generate` flags, e.g. --max-tokens 200]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh >&2  # set-up and build lines on stderr: stdout holds only the answer
prompt="What is the capital of France?"
if [ $# -gt 0 ] && [[ "$1" != --* ]]; then
  prompt="$1"
  shift
fi
exec build/shardrt generate --model .cache/models/SmolLM2-135M-Instruct.Q4_1.gguf --devices 8 \
  --chat --prompt "$prompt" "$@"
