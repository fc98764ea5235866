#!/usr/bin/env bash
# Builds a fuzzer (clang, libFuzzer + AddressSanitizer) in build-fuzz/ and runs it for a bounded
# time, starting from its seeds in fuzz/ (left unchanged; new inputs go to build-fuzz/corpus-*/,
# crash reproducers to build-fuzz/artifacts/).
#   usage: scripts/fuzz.sh [SECONDS] [TARGET]
#     SECONDS  default 60
#     TARGET   sharding_text_fuzz (default; seeds fuzz/corpus/) or sharding_proto_fuzz
# Exits 0 when the time runs out without a finding; non-zero if the build fails or the fuzzer
# finds a crash, a sanitizer report, a leak or a timeout.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds="${1:-60}"
target="${2:-sharding_text_fuzz}"
if ! [[ "$seconds" =~ ^[0-9]+$ ]] || [ "$seconds" -lt 1 ] ||
   [[ "$target" != sharding_text_fuzz && "$target" != sharding_proto_fuzz ]]; then
  echo "usage: scripts/fuzz.sh [SECONDS] [sharding_text_fuzz|sharding_proto_fuzz]" >&2
  exit 2
fi

generator=()
if command -v ninja > /dev/null; then generator=(-G Ninja); fi
if [ ! -f build-fuzz/CMakeCache.txt ]; then
  cmake -S . -B build-fuzz "${generator[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_CXX_COMPILER=clang++ -DSHARDRT_FUZZ_ONLY=ON
fi
cmake --build build-fuzz --target "$target"

corpus="build-fuzz/corpus-${target%_fuzz}"
mkdir -p "$corpus" build-fuzz/artifacts
args=(-max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=1024
      -artifact_prefix=build-fuzz/artifacts/ -print_final_stats=1 "$corpus")
if [ "$target" = sharding_text_fuzz ]; then args+=(-dict=fuzz/sharding.dict fuzz/corpus); fi
"build-fuzz/fuzz/$target" "${args[@]}"
