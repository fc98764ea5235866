#!/usr/bin/env bash
# The binary wheel as a user meets it, on a machine without a compiler (scripts/test.sh runs it
# on what scripts/wheel.sh built):
#   1. `auditwheel show` finds the wheel consistent with its own platform tag (the oldest that
#      its symbol versions allow) and needing no shared library from outside but those its
#      manylinux policy allows; the wheel holds the extension, libshardrt, libshardrt_llm and
#      the vendored libraries (shardrt.libs/: Abseil, protobuf, libcrypto, ...);
#   2. the sdist beside it holds what a build needs (every file git tracks, and in a checkout
#      nothing else), and none of .cache/, the build folders, dist/ or a virtual environment;
#   3. a fresh virtual environment, under a PATH that has python3 only (no gcc, c++ or cc:
#      checked) and no CC/CXX, gets the wheel and its dependencies from local files with
#      `pip install --no-index` (timed): NumPy's pinned wheel (fetched into .cache/wheels/ when
#      missing) and the CPU plugin's wheel (scripts/bootstrap.sh's);
#   4. ldd: every shared library of the installed package resolves to the package itself
#      (shardrt/, shardrt.libs/) or to a system library that the policy allows (glibc's,
#      libstdc++, libgcc_s, libz: the manylinux policy's list, from auditwheel);
#   5. the first ```python block of bindings/python/README.md runs as it stands, in a temporary
#      folder (so it imports the installed package, not the repository's).
#   usage: tests/wheel/wheel_test.sh dist/shardrt-VERSION-TAGS.whl
set -euo pipefail
cd "$(dirname "$0")/../.."
wheel=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
tools=${SHARDRT_WHEEL_TOOLS_VENV:-build/wheel-venv}
numpy_file=numpy-2.4.6-cp311-cp311-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl
numpy_sha256=89cd468399cfd2504718f0ba50e410dca55a170b61a02ad92bb18c8a65186e93
plugin=$PWD/.cache/wheels/xla_cpu_pjrt-0.0.1-py3-none-manylinux_2_27_x86_64.whl
tmp=$(mktemp -d /tmp/shardrt-wheel.XXXXXX)
trap 'rm -rf "$tmp"' EXIT

name=$(basename "$wheel" .whl)         # shardrt-VERSION-cp311-cp311-PLATFORM
version=$(cut -d- -f2 <<< "$name")
platform=${name##*-}
echo "== auditwheel show $(basename "$wheel")"
scripts/pinned_venv.sh "$tools" scripts/wheel-requirements.txt
# (--json: the same analysis as the text report, which does not say all of it.) The policy it
# finds (overall_tag) must be the wheel's tag, and no library be left to vendor even under the
# most permissive policy (external_libs).
"$tools/bin/auditwheel" show --json "$wheel" | python3 -c '
import json, re, sys
show, platform = json.load(sys.stdin), sys.argv[1]
tag, sym_tag, external = show["overall_tag"], show["sym_tag"], sorted(show["external_libs"])
def newest(versions):  # the newest of each family: GLIBC_2.34, GLIBCXX_3.4.30, CXXABI_1.3.13
    key = lambda v: [int(n) for n in re.findall(r"\d+", v)]
    families = {v.split("_")[0] for v in versions}
    return [max((v for v in versions if v.split("_")[0] == f), key=key) for f in sorted(families)]
print(f"consistent with {tag} (symbol versions: {sym_tag}); newest versioned symbols:")
for lib, versions in show["versioned_symbols"].items():
    print("  " + lib + ": " + " ".join(newest(versions)))
print("external libraries:", ", ".join(external) or "none")
if tag != platform or external or show["unsupported_isa"]:
    sys.exit(f"FAIL: auditwheel show does not agree with the tag {platform}")
' "$platform"
# What that policy lets a wheel load from the system (glibc's libraries, libstdc++, libgcc_s,
# libz, ...), for the ldd check below.
allowed=$("$tools/bin/python" -c '
import json, sys
from importlib.resources import files
policies = json.loads(files("auditwheel.policy").joinpath("manylinux-policy.json").read_text())
tag = sys.argv[1].removesuffix("_x86_64")
print(" ".join(next(p["lib_whitelist"] for p in policies if p["name"] == tag)))
' "$platform")
contents=$(python3 -m zipfile -l "$wheel")
for f in "shardrt/_shardrt.cpython-311-x86_64-linux-gnu.so" "shardrt/libshardrt.so." \
         "shardrt/libshardrt_llm.so." "shardrt/__init__.py" "shardrt/_shardrt.pyi" \
         "shardrt.libs/libabsl_" "shardrt.libs/libprotobuf" "shardrt.libs/libcrypto"; do
  grep -qF "$f" <<< "$contents" || { echo "FAIL: no $f* in the wheel"; exit 1; }
done

sdist=$(dirname "$wheel")/shardrt-$version.tar.gz
echo "== sdist $(basename "$sdist")"
listing=$(tar -tzf "$sdist")
for f in PKG-INFO pyproject.toml CMakeLists.txt cmake/ proto/ include/shardrt/ src/ models/ \
         tools/ bindings/python/CMakeLists.txt bindings/python/src/module.cc \
         bindings/python/shardrt/__init__.py bindings/python/README.md; do
  grep -q "^shardrt-$version/$f" <<< "$listing" || { echo "FAIL: no $f in the sdist"; exit 1; }
done
# Nor does it leave out a file of the repository (as a bare "build*" exclude once dropped
# include/shardrt/program/builder.h).
if git rev-parse --git-dir > /dev/null 2>&1; then
  missing=$(git ls-files | while read -r f; do if [ -e "$f" ]; then echo "shardrt-$version/$f"; fi
            done | sort | comm -23 - <(sort <<< "$listing"))
  [ -z "$missing" ] || { echo "FAIL: the sdist leaves out:"; head <<< "$missing"; exit 1; }
  # And holds nothing else: an untracked file in the checkout does not ship.
  extra=$(grep -v -e '/$' -e "^shardrt-$version/PKG-INFO$" <<< "$listing" | sort |
          comm -23 - <(git ls-files | sed "s|^|shardrt-$version/|" | sort))
  [ -z "$extra" ] || { echo "FAIL: the sdist holds files git does not track:"; head <<< "$extra"
                       exit 1; }
fi
if bad=$(grep -E "^shardrt-$version/(\.cache|build[^/]*|dist|\.git)/|/\.venv[^/]*/|__pycache__/" \
         <<< "$listing"); then
  echo "FAIL: the sdist holds build output or caches:"; head <<< "$bad"; exit 1
fi
echo "$(wc -l <<< "$listing") entries, $(du -h "$sdist" | cut -f1)"

echo "== pip install --no-index, without a compiler"
numpy=.cache/wheels/$numpy_file
if [ ! -f "$numpy" ] || ! echo "$numpy_sha256  $numpy" | sha256sum -c --status; then
  rm -f "$numpy"
  python3 -m pip download -q --disable-pip-version-check --no-deps --only-binary=:all: \
    -d .cache/wheels numpy==2.4.6
fi
echo "$numpy_sha256  $numpy" | sha256sum -c --status ||
  { echo "FAIL: $numpy does not match the pinned sha256"; exit 1; }
numpy=$PWD/$numpy
mkdir -p "$tmp/bin" "$tmp/home" "$tmp/run"
ln -s "$(python3 -c 'import os, sys; print(os.path.realpath(sys.executable))')" "$tmp/bin/python3"
bare=(env -i "PATH=$tmp/bin" "HOME=$tmp/home")  # no compiler, no CC/CXX, nothing inherited
"${bare[@]}" /bin/bash -c '
  for c in gcc g++ cc c++ clang; do ! command -v "$c" || { echo "FAIL: $c is on the PATH"; exit 1; }
  done; [ -z "${CC:-}${CXX:-}" ]'
echo "PATH=$tmp/bin ($(ls "$tmp/bin")): no gcc, g++, cc, c++ or clang; CC and CXX unset"
"${bare[@]}" python3 -m venv "$tmp/venv"
py=$tmp/venv/bin/python
start=$EPOCHREALTIME
(cd "$tmp/run" && "${bare[@]}" "$py" -m pip install -q --no-index --no-cache-dir \
   --disable-pip-version-check "$wheel" "$numpy" "$plugin")
echo "installed in $(python3 -c "print(f'{$EPOCHREALTIME - $start:.1f}')") s"

echo "== ldd of the installed package"
site=$("${bare[@]}" "$py" -c 'import sysconfig; print(sysconfig.get_paths()["platlib"])')
fail=0
system=()
for so in "$site"/shardrt/*.so* "$site"/shardrt.libs/*.so*; do
  while read -r lib path; do
    [[ "$path" == "$site"/* ]] && continue
    if [[ "$lib" == ld-linux-x86-64.so.* || " $allowed " == *" $lib "* ]]; then
      system+=("$lib")
    else
      echo "FAIL: $(basename "$so") loads $lib from ${path:-nowhere}"; fail=1
    fi
  done < <(env -u LD_LIBRARY_PATH ldd "$so" | awk '$2 == "=>" {print $1, ($3 == "not" ? "" : $3)}')
done
[ "$fail" = 0 ]
echo "$(ls "$site/shardrt.libs" | wc -l) libraries vendored in shardrt.libs/; from the system" \
     "(as $platform allows):" $(printf '%s\n' "${system[@]}" | sort -u)

echo "== bindings/python/README.md's first python block, from $tmp/run"
awk '/^```python$/ {on = 1; next} on && /^```$/ {exit} on {print}' bindings/python/README.md \
  > "$tmp/run/example.py"
[ -s "$tmp/run/example.py" ] || { echo "FAIL: no python block in the README"; exit 1; }
where=$(cd "$tmp/run" && "${bare[@]}" "$py" -c 'import shardrt; print(shardrt.__file__)')
[[ "$where" == "$site"/* ]] || { echo "FAIL: imported $where, not the installed package"; exit 1; }
(cd "$tmp/run" && "${bare[@]}" "$py" example.py) ||
  { echo "FAIL: the README's example:"; cat "$tmp/run/example.py"; exit 1; }
echo "wheel test: ok"
