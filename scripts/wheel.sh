#!/usr/bin/env bash
# Builds the Python package's distributions into dist/ and prints the wheel's path:
#   - dist/shardrt-VERSION-cp311-cp311-PLATFORM.whl, a binary wheel that carries its native
#     dependencies: `pip wheel .` over the CMake build in $SHARDRT_WHEEL_BUILD_DIR (default
#     build/python, the one bindings/python/setup_venv.sh keeps, so when that is up to date this
#     only packages), then `auditwheel repair`: it copies the system's shared libraries that the
#     extension, libshardrt and libshardrt_llm load (Abseil, protobuf, libcrypto, ...) into
#     shardrt.libs/, rewrites the run paths (patchelf), and tags the wheel with the oldest
#     manylinux policy that the symbol versions allow (glibc, libstdc++);
#   - dist/shardrt-VERSION.tar.gz, the sdist: in a git checkout, the files git tracks as they are
#     in the working tree (untracked files never ship); elsewhere the folder, less what
#     pyproject.toml's sdist.exclude leaves out (.cache/, the build folders, dist/; dist/.gitignore
#     keeps dist/ out of git).
# The build runs with bindings/python/.venv's python (pinned scikit-build-core and nanobind; the
# environment is made if missing) or $SHARDRT_WHEEL_PYTHON; auditwheel and patchelf come from
# scripts/wheel-requirements.txt, in an environment of their own: $SHARDRT_WHEEL_TOOLS_VENV
# (default build/wheel-venv). Paths are relative to the repository root. Idempotent: replaces
# the previous distributions of the package.
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${SHARDRT_WHEEL_BUILD_DIR:-build/python}
tools=${SHARDRT_WHEEL_TOOLS_VENV:-build/wheel-venv}
scripts/pinned_venv.sh "$tools" scripts/wheel-requirements.txt
if [ -n "${SHARDRT_WHEEL_PYTHON:-}" ]; then
  python=$SHARDRT_WHEEL_PYTHON
else
  venv=bindings/python/.venv
  scripts/pinned_venv.sh "$venv" bindings/python/requirements.txt
  python=$venv/bin/python
  # One builder at a time in the shared build folder (setup_venv.sh's `pip install .` too).
  exec 9>"$venv.lock"
  flock 9
fi
# An absolute path (the sdist is built from another folder); a bare command name stays one.
[[ "$python" != */* || "$python" == /* ]] || python=$PWD/$python
version=$("$python" -c \
  'import tomllib; print(tomllib.load(open("pyproject.toml", "rb"))["project"]["version"])')

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p dist
echo '*' > dist/.gitignore  # build output: neither in git nor in the sdist

start=$SECONDS
echo "wheel: pip wheel . (build in $build_dir/)" >&2
"$python" -m pip wheel -q --disable-pip-version-check --no-build-isolation --no-deps \
  --config-settings=build-dir="$build_dir" -w "$tmp/raw" . >&2
raw=$(ls "$tmp"/raw/shardrt-"$version"-*.whl)
echo "wheel: auditwheel repair $(basename "$raw")" >&2
# auditwheel finds patchelf on PATH.
PATH="$(cd "$tools/bin" && pwd):$PATH" "$tools/bin/auditwheel" repair -w "$tmp/repaired" "$raw" \
  > "$tmp/repair.log" 2>&1 || { cat "$tmp/repair.log" >&2; exit 1; }
wheel=$(ls "$tmp"/repaired/shardrt-"$version"-*.whl)

echo "wheel: sdist" >&2
# In a git checkout the sdist is made from a copy of the files git tracks, as they are in the
# working tree: an untracked file lying in the checkout does not ship.
sdist_source=.
if git rev-parse --git-dir > /dev/null 2>&1; then
  sdist_source=$tmp/source
  "$python" - "$sdist_source" <<'EOF'
import os, shutil, subprocess, sys
tracked = subprocess.run(["git", "ls-files", "-z"], capture_output=True, check=True).stdout
for path in tracked.decode().split("\0"):
    if path and os.path.lexists(path) and not os.path.isdir(path):  # not deleted, no submodule
        target = os.path.join(sys.argv[1], path)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        shutil.copy2(path, target, follow_symlinks=False)
EOF
fi
# scikit-build-core's PEP 517 hook, in the same environment (no build isolation).
(cd "$sdist_source" &&
  "$python" -c 'import sys, scikit_build_core.build as b; b.build_sdist(sys.argv[1])' \
    "$tmp/sdist") > "$tmp/sdist.log" 2>&1 || { cat "$tmp/sdist.log" >&2; exit 1; }
sdist=$tmp/sdist/shardrt-$version.tar.gz
tar -tzf "$sdist" > /dev/null

rm -f dist/shardrt-*.whl dist/shardrt-*.tar.gz
mv "$wheel" "$sdist" dist/
wheel=dist/$(basename "$wheel")
sdist=dist/$(basename "$sdist")
echo "wheel: $wheel ($(du -h "$wheel" | cut -f1)), $sdist ($(du -h "$sdist" | cut -f1))," \
     "$((SECONDS - start)) s" >&2
echo "$wheel"
