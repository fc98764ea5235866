#!/usr/bin/env bash
# Makes the Python package's virtual environment bindings/python/.venv from
# bindings/python/requirements.txt (pinned versions; remade only when they change) and installs
# shardrt into it with `pip install .` (the CMake build is kept in build/python/, so a rebuild
# after a change is incremental). Needs scripts/bootstrap.sh's packages and .cache/ (the pinned
# plugin wheel). Idempotent. Prints the environment's python.
set -euo pipefail
cd "$(dirname "$0")/../.."
venv=bindings/python/.venv
scripts/pinned_venv.sh "$venv" bindings/python/requirements.txt
# The package itself, after the environment (one installer at a time).
exec 9>"$venv.lock"
flock 9
wheel=$(ls .cache/wheels/xla_cpu_pjrt-0.0.1-*.whl)
if ! "$venv/bin/python" -c "import xla_plugins.xla_cpu_pjrt" 2>/dev/null; then
  "$venv/bin/python" -m pip install -q --disable-pip-version-check --no-deps "$wheel"
fi
echo "setup_venv: pip install . (build in build/python/)" >&2
"$venv/bin/python" -m pip install -q --disable-pip-version-check --no-build-isolation --no-deps \
  --config-settings=build-dir=build/python .
echo "$venv/bin/python"
