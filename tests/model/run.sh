#!/usr/bin/env bash
# Runs a model test script with the model tests' virtual environment (made on first use).
#   usage: tests/model/run.sh SCRIPT [ARGS...]    SCRIPT is a file name in tests/model/
set -euo pipefail
cd "$(dirname "$0")/../.."
tests/model/setup_venv.sh
exec tests/.venv/bin/python tests/model/"$1" "${@:2}"
