#!/usr/bin/env bash
# Usage: scripts/pinned_venv.sh VENV REQUIREMENTS
# Makes the virtual environment VENV from REQUIREMENTS (exact versions, installed without
# dependency resolution), once: it is remade only when the requirements file changes. One maker
# at a time (VENV.lock; tests running in parallel may all ask for it). Idempotent.
set -euo pipefail
venv=$1
requirements=$2
stamp="$venv/.requirements"
mkdir -p "$(dirname "$venv")"
exec 9>"$venv.lock"
flock 9
if [ -x "$venv/bin/python" ] && [ -f "$stamp" ] && cmp -s "$stamp" "$requirements"; then
  exit 0
fi
echo "pinned_venv: making $venv" >&2
rm -rf "$venv"
python3 -m venv "$venv"
"$venv/bin/python" -m pip install -q --disable-pip-version-check --no-deps -r "$requirements"
cp "$requirements" "$stamp"
