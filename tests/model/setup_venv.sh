#!/usr/bin/env bash
# Makes the model tests' virtual environment tests/.venv from tests/model/requirements.txt
# (pinned versions), once: it is remade only when the requirements change. Idempotent.
set -euo pipefail
cd "$(dirname "$0")/../.."
venv=tests/.venv
stamp="$venv/.requirements"
# One maker at a time (tests running in parallel may all ask for it).
mkdir -p tests
exec 9>tests/.venv.lock
flock 9
if [ -x "$venv/bin/python" ] && [ -f "$stamp" ] && cmp -s "$stamp" tests/model/requirements.txt; then
  exit 0
fi
echo "setup_venv: making $venv" >&2
rm -rf "$venv"
python3 -m venv "$venv"
"$venv/bin/python" -m pip install -q --disable-pip-version-check --no-deps \
  -r tests/model/requirements.txt
cp tests/model/requirements.txt "$stamp"
