#!/usr/bin/env bash
# Builds a fuzzer (clang, libFuzzer + AddressSanitizer) in build-fuzz/ and runs it for a bounded
# time. The targets are the files fuzz/*_fuzz.cc; target NAME_fuzz starts from its seeds in
# fuzz/corpus-NAME/ and in the files that fuzz/NAME.seeds lists (inputs kept elsewhere, such as
# the test programs in tests/testdata, one path from the repository root a line, '#' starts a
# comment), and uses the dictionary fuzz/NAME.dict, each when present (all left unchanged; new
# inputs go to build-fuzz/corpus-NAME/, crash reproducers to build-fuzz/artifacts/).
#   usage: scripts/fuzz.sh [SECONDS] [TARGET]
#     SECONDS  default 60
#     TARGET   default sharding_text_fuzz; `scripts/fuzz.sh --list` prints them all
#   scripts/fuzz.sh --build builds every target (in parallel) and runs none.
# Exits 0 when the time runs out without a finding; non-zero if the build fails or the fuzzer
# finds a crash, a sanitizer report, a leak or a timeout.
set -euo pipefail
cd "$(dirname "$0")/.."

targets=()
shopt -s nullglob
for source in fuzz/*_fuzz.cc; do targets+=("$(basename "$source" .cc)"); done
shopt -u nullglob
if [ "${1:-}" = --list ]; then
  printf '%s\n' "${targets[@]}"
  exit 0
fi

configure() {
  local generator=()
  if command -v ninja > /dev/null; then generator=(-G Ninja); fi
  if [ ! -f build-fuzz/CMakeCache.txt ]; then
    cmake -S . -B build-fuzz "${generator[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DCMAKE_CXX_COMPILER=clang++ -DSHARDRT_FUZZ_ONLY=ON
  fi
}
if [ "${1:-}" = --build ]; then
  configure
  cmake --build build-fuzz --target "${targets[@]}"
  exit 0
fi

seconds="${1:-60}"
target="${2:-sharding_text_fuzz}"
known=0
for t in "${targets[@]}"; do [ "$t" = "$target" ] && known=1; done
if ! [[ "$seconds" =~ ^[0-9]+$ ]] || [ "$seconds" -lt 1 ] || [ "$known" -ne 1 ]; then
  echo "usage: scripts/fuzz.sh [SECONDS] [TARGET] (SECONDS >= 1; TARGET one of:" \
       "${targets[*]})" >&2
  exit 2
fi

configure
cmake --build build-fuzz --target "$target"

name="${target%_fuzz}"
corpus="build-fuzz/corpus-$name"
mkdir -p "$corpus" build-fuzz/artifacts
args=(-max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=1024
      -artifact_prefix=build-fuzz/artifacts/ -print_final_stats=1)
if [ -f "fuzz/$name.dict" ]; then args+=(-dict="fuzz/$name.dict"); fi
if [ -f "fuzz/$name.seeds" ]; then
  seeds=()
  while IFS= read -r line || [ -n "$line" ]; do
    line="${line%%#*}"
    line="${line#"${line%%[![:space:]]*}"}"
    line="${line%"${line##*[![:space:]]}"}"
    [ -n "$line" ] || continue
    # -seed_inputs takes a comma-separated list.
    if [ ! -f "$line" ] || [[ "$line" == *,* ]]; then
      echo "fuzz.sh: fuzz/$name.seeds: '$line' is not a file (or has a comma in its name)" >&2
      exit 2
    fi
    seeds+=("$line")
  done < "fuzz/$name.seeds"
  if [ "${#seeds[@]}" -gt 0 ]; then
    args+=(-seed_inputs="$(IFS=,; echo "${seeds[*]}")")
  fi
fi
args+=("$corpus")
if [ -d "fuzz/corpus-$name" ]; then args+=("fuzz/corpus-$name"); fi
echo "fuzz.sh: $target for ${seconds} s" >&2
"build-fuzz/fuzz/$target" "${args[@]}"
