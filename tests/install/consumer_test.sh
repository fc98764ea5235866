#!/usr/bin/env bash
# The installed package, as a user meets it (CTest `install_consumer`):
#   1. `cmake --install BUILD --prefix TMP` into a temporary folder;
#   2. nothing installed names a path of the source or build tree;
#   3. the README's C++ quick-start commands run as written (TMP for /opt/shardrt):
#      examples/consumer builds with find_package(shardrt CONFIG REQUIRED) against TMP only, and
#      with the pkg-config line of its comment, nothing added; both runs (8 CPU devices, the
#      plugin found next to the installed library) print a checked result (the README's copy of
#      main.cc is checked by tests/readme/readme_test.py);
#   4. the installed CLI runs from the prefix;
#   5. examples/llm_consumer (a 20-line program over llm::Session, shardrt::llm) builds against
#      TMP only and generates text with the real model, when MODEL is given and exists; its
#      answer is compared with the installed CLI's for the same prompt (greedy, same tokens).
#   usage: consumer_test.sh SOURCE_DIR BUILD_DIR [MODEL.gguf]
set -euo pipefail
src=$(cd "$1" && pwd)
build=$(cd "$2" && pwd)
prefix=$(mktemp -d /tmp/shardrt-install.XXXXXX)
trap 'rm -rf "$prefix"' EXIT
unset SHARDRT_PJRT_PLUGIN  # the installed default must be found on its own

echo "== cmake --install $build --prefix $prefix"
cmake --install "$build" --prefix "$prefix" > "$prefix.log" 2>&1 || { cat "$prefix.log"; exit 1; }
rm -f "$prefix.log"
ls "$prefix/include/shardrt/shardrt.h" "$prefix/lib/cmake/shardrt/shardrtConfig.cmake" \
   "$prefix/lib/pkgconfig/shardrt.pc" "$prefix/lib/shardrt/plugins/xla_cpu_pjrt.so" > /dev/null

echo "== no path of the source or build tree in the install"
for tree in "$src" "$build"; do
  if hits=$(grep -rlaF "$tree" "$prefix"); then
    echo "FAIL: these installed files contain '$tree':"; echo "$hits"; exit 1
  fi
done
if find "$prefix" -name '*.pb.h' -o -name 'pjrt_c_api.h' | grep -q .; then
  echo "FAIL: private headers were installed"; exit 1
fi

echo "== the README's quick-start commands, as written"
# The block after '<!-- runs in: tests/install/consumer_test.sh -->', run in a folder whose
# build/ and examples/ are this tree's, with this test's prefix for /opt/shardrt: install,
# find_package(shardrt CONFIG REQUIRED) and a CMake build of examples/consumer, and the pkg-config
# line of its comment, with nothing added (the module's Libs carry the run path, so the program
# starts without LD_LIBRARY_PATH). Both programs run 8 CPU devices and check their results.
block=$(awk '/<!-- runs in: tests\/install\/consumer_test.sh -->/{f=1; next}
             f && /^```sh/{next} f && /^```/{exit} f' "$src/README.md")
grep -q "cmake --install build --prefix /opt/shardrt" <<< "$block"
grep -q "^# or: c++ examples/consumer/main.cc " <<< "$block"
work="$prefix/readme"
mkdir -p "$work"
ln -s "$build" "$work/build"
ln -s "$src/examples" "$work/examples"
commands=$(sed -e "s|/opt/shardrt|$prefix|g" -e 's|^# or: c++ |c++ |' <<< "$block")
out=$(cd "$work" && env -u LD_LIBRARY_PATH bash -euo pipefail -c "$commands" 2>&1) ||
  { echo "$out"; echo "FAIL: the README's commands"; exit 1; }
grep -q "on 8 'cpu' devices" <<< "$out" || { echo "$out"; exit 1; }
grep -q ": correct$" <<< "$out" || { echo "$out"; exit 1; }
out=$(env -u LD_LIBRARY_PATH "$work/a.out")
echo "$out"
grep -q ": correct$" <<< "$out"
echo "CMake and pkg-config builds: ok"
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"

echo "== every installed header compiles on its own"
(cd "$prefix/include" && find shardrt -name '*.h' | sort) |
  xargs -P 2 -I{} sh -c 'printf "#include \"%s\"\n" "$1" |
    c++ -std=c++20 -fsyntax-only -x c++ - $2 || { echo "FAIL: $1 does not compile alone"; exit 255; }' \
    _ {} "$(pkg-config --cflags shardrt)"
echo "$(cd "$prefix/include" && find shardrt -name '*.h' | wc -l) headers: ok"

echo "== the installed CLI"
"$prefix/bin/shardrt" devices --devices 2 | head -1

model=${3:-}
if [ -n "$model" ] && [ -f "$model" ]; then
  echo "== examples/llm_consumer: find_package(shardrt), shardrt::llm"
  cmake -S "$src/examples/llm_consumer" -B "$prefix/llm-build" -DCMAKE_PREFIX_PATH="$prefix" \
        -DCMAKE_BUILD_TYPE=Release > "$prefix/llm-configure.log" 2>&1 ||
    { cat "$prefix/llm-configure.log"; exit 1; }
  cmake --build "$prefix/llm-build" > "$prefix/llm-build.log" 2>&1 ||
    { cat "$prefix/llm-build.log"; exit 1; }
  prompt="The capital of France is"
  out=$("$prefix/llm-build/llm_consumer" "$model" "$prompt")
  echo "$out"
  # The same 16 greedy tokens through the installed CLI (2 devices, no compile cache).
  cli=$("$prefix/bin/shardrt" generate --model "$model" --prompt "$prompt" --devices 2 \
        --max-tokens 16 --compile-cache off 2>/dev/null)
  text=$(head -n -1 <<< "$out")
  if [ "$text" != "$cli" ]; then
    echo "FAIL: llm_consumer answered '$text', the CLI '$cli'"; exit 1
  fi
  grep -Eq "^[0-9]+ tokens \((max_tokens|stop_token)\)$" <<< "$(tail -n 1 <<< "$out")"
  echo "llm_consumer: the same answer as the CLI"
else
  echo "== examples/llm_consumer: skipped (no model file)"
fi

echo "install_consumer: passed"
