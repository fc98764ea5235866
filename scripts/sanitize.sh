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
# so what remains are shardrt's own. Any report fails the run.
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
      targets=(shardrt_pjrt_integration_tests shardrt_client_integration_tests
               shardrt_runtime_integration_tests shardrt_executor_integration_tests
               shardrt_cli_integration_tests shardrt_decoder_integration_tests
               shardrt_llama_integration_tests shardrt_llama_tests shardrt_bin decoder_demo) ;;
    thread)
      flags="thread"
      targets=(shardrt_client_integration_tests shardrt_runtime_integration_tests
               shardrt_executor_integration_tests) ;;
    *) echo "usage: scripts/sanitize.sh [address|thread]..." >&2; exit 2 ;;
  esac
  dir="build-$kind"
  cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSHARDRT_SANITIZE="$flags" \
    -DSHARDRT_BUILD_BENCH=OFF > /dev/null
  cmake --build "$dir" --target "${targets[@]}"
  for t in "${targets[@]}"; do
    case "$t" in shardrt_bin | decoder_demo) continue ;; esac
    echo "== $kind ($flags): $t"
    ASAN_OPTIONS=detect_leaks=1 \
    LSAN_OPTIONS="suppressions=$PWD/tests/lsan.supp" \
    UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    TSAN_OPTIONS="suppressions=$PWD/tests/tsan.supp report_signal_unsafe=0 halt_on_error=1" \
      "$dir/tests/$t" --gtest_brief=1
  done
done
