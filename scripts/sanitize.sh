#!/usr/bin/env bash
# Builds the integration tests with AddressSanitizer (+LeakSanitizer) and ThreadSanitizer and
# runs them on the real plugin. The plugin itself is not instrumented: tests/tsan.supp hides
# reports that come from inside it, so what remains are shardrt's own.
#   usage: scripts/sanitize.sh [address|thread]...   (default: both)
set -euo pipefail
cd "$(dirname "$0")/.."
export TF_CPP_MIN_LOG_LEVEL=2
kinds=("$@")
[ ${#kinds[@]} -gt 0 ] || kinds=(address thread)
for kind in "${kinds[@]}"; do
  case "$kind" in
    address) targets=(shardrt_pjrt_integration_tests shardrt_client_integration_tests
                      shardrt_runtime_integration_tests) ;;
    thread) targets=(shardrt_client_integration_tests shardrt_runtime_integration_tests) ;;
    *) echo "usage: scripts/sanitize.sh [address|thread]..." >&2; exit 2 ;;
  esac
  if [ -d src/executor ] && ls tests/integration/executor/*.cc > /dev/null 2>&1; then
    targets+=(shardrt_executor_integration_tests)
  fi
  dir="build-$kind"
  if [ ! -f "$dir/CMakeCache.txt" ]; then
    cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSHARDRT_SANITIZE="$kind" \
      -DSHARDRT_BUILD_BENCH=OFF > /dev/null
  fi
  cmake --build "$dir" --target "${targets[@]}"
  for t in "${targets[@]}"; do
    echo "== $kind: $t"
    ASAN_OPTIONS=detect_leaks=1 \
    TSAN_OPTIONS="suppressions=$PWD/tests/tsan.supp report_signal_unsafe=0 halt_on_error=1" \
      "$dir/tests/$t" --gtest_brief=1
  done
done
