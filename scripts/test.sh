#!/usr/bin/env bash
# Set up, build, and run the whole test suite: unit and integration tests (real CPU plugin,
# 8 devices) through CTest, the integration tests again under AddressSanitizer and
# ThreadSanitizer, then the sharding-text fuzzer for a bounded time.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh
ctest --test-dir build --output-on-failure -j 2 --timeout 900
scripts/sanitize.sh address thread
scripts/fuzz.sh "${SHARDRT_FUZZ_SECONDS:-30}" sharding_text_fuzz
