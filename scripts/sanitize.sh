#!/usr/bin/env bash
# Builds the integration tests with sanitizers and runs them on the real plugin:
#   address  AddressSanitizer + LeakSanitizer + UndefinedBehaviorSanitizer (build-address/):
#            every integration test binary (the CLI and decoder tests run the instrumented
#            shardrt and decoder_demo) and the model code's unit tests (GGUF reader, tokenizer,
#            emitter)
#   thread   ThreadSanitizer (build-thread/): the client, runtime and executor tests (not the
#            model's: the plugin's JIT-compiled collectives copy between its own threads in
#            code TSan cannot see, which it reports as races with no frame to suppress by)
# The plugin itself is not instrumented: tests/tsan.supp hides reports that come from inside it,
# so what remains are shardrt's own. Any report fails the run. The test binaries of a kind run
# $(nproc) at a time (as CTest runs the tests), the longest first; each one's output is printed
# once all have ended, in that order, with the exit status of any that failed.
#   usage: scripts/sanitize.sh [address|thread]...   (default: both)
set -euo pipefail
cd "$(dirname "$0")/.."
export TF_CPP_MIN_LOG_LEVEL=2
kinds=("$@")
[ ${#kinds[@]} -gt 0 ] || kinds=(address thread)
for kind in "${kinds[@]}"; do
  case "$kind" in
    address)
      flags="address,undefined"
      # Test binaries, the longest-running first (they start in this order).
      tests=(shardrt_llama_integration_tests shardrt_cli_integration_tests
             shardrt_decoder_integration_tests shardrt_client_integration_tests
             shardrt_llama_tests shardrt_runtime_integration_tests
             shardrt_executor_integration_tests shardrt_pjrt_integration_tests)
      # And what the CLI and decoder tests run.
      programs=(shardrt_bin decoder_demo) ;;
    thread)
      flags="thread"
      tests=(shardrt_client_integration_tests shardrt_runtime_integration_tests
             shardrt_executor_integration_tests)
      programs=() ;;
    *) echo "usage: scripts/sanitize.sh [address|thread]..." >&2; exit 2 ;;
  esac
  dir="build-$kind"
  cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSHARDRT_SANITIZE="$flags" \
    -DSHARDRT_BUILD_BENCH=OFF > /dev/null
  cmake --build "$dir" --target "${tests[@]}" "${programs[@]}"
  logs="$dir/sanitize-logs"
  rm -rf "$logs"
  mkdir -p "$logs"
  export ASAN_OPTIONS=detect_leaks=1
  export LSAN_OPTIONS="suppressions=$PWD/tests/lsan.supp"
  export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
  export TSAN_OPTIONS="suppressions=$PWD/tests/tsan.supp report_signal_unsafe=0 halt_on_error=1"
  printf '%s\n' "${tests[@]}" | xargs -P "$(nproc)" -I{} sh -c \
    '"$1/tests/$2" --gtest_brief=1 > "$3/$2.log" 2>&1; echo $? > "$3/$2.status"' \
    sh "$dir" {} "$logs"
  failed=()
  for t in "${tests[@]}"; do
    echo "== $kind ($flags): $t"
    cat "$logs/$t.log"
    status=$(cat "$logs/$t.status" 2> /dev/null || echo "none (it did not run)")
    if [ "$status" != 0 ]; then
      echo "FAIL: $t ($kind): exit status $status"
      failed+=("$t")
    fi
  done
  if [ ${#failed[@]} -gt 0 ]; then
    echo "sanitize: $kind: ${failed[*]} failed" >&2
    exit 1
  fi
done
