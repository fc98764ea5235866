#!/usr/bin/env bash
# Builds the sharding-text fuzzer (clang, libFuzzer + AddressSanitizer) in build-fuzz/ and runs
# it for a bounded time, starting from the seeds in fuzz/corpus/ (left unchanged; new inputs go
# to build-fuzz/corpus/, crash reproducers to build-fuzz/artifacts/).
#   usage: scripts/fuzz.sh [SECONDS]     (default 60)
# Exits 0 when the time runs out without a finding; non-zero if the build fails or the fuzzer
# finds a crash, a sanitizer report, a leak or a timeout.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds="${1:-60}"
if ! [[ "$seconds" =~ ^[0-9]+$ ]] || [ "$seconds" -lt 1 ]; then
  echo "usage: scripts/fuzz.sh [SECONDS]" >&2
  exit 2
fi

generator=()
if command -v ninja > /dev/null; then generator=(-G Ninja); fi
if [ ! -f build-fuzz/CMakeCache.txt ]; then
  cmake -S . -B build-fuzz "${generator[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_CXX_COMPILER=clang++ -DSHARDRT_FUZZ_ONLY=ON
fi
cmake --build build-fuzz --target sharding_text_fuzz

mkdir -p build-fuzz/corpus build-fuzz/artifacts
build-fuzz/fuzz/sharding_text_fuzz \
  -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=1024 \
  -dict=fuzz/sharding.dict -artifact_prefix=build-fuzz/artifacts/ -print_final_stats=1 \
  build-fuzz/corpus fuzz/corpus
