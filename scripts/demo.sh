#!/usr/bin/env bash
# The main job: set up, build, and run the demo on 8 CPU devices.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh
exec build/shardrt demo --devices 8 "$@"
