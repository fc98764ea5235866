#!/usr/bin/env bash
# Set up, build, and run the whole test suite (unit + integration on 8 CPU devices).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh
ctest --test-dir build --output-on-failure -j 2 --timeout 900
