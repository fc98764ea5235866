#!/usr/bin/env bash
# Makes the model tests' virtual environment tests/.venv from tests/model/requirements.txt
# (pinned versions), once: it is remade only when the requirements change. Idempotent.
set -euo pipefail
cd "$(dirname "$0")/../.."
exec scripts/pinned_venv.sh tests/.venv tests/model/requirements.txt
