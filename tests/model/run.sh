#!/usr/bin/env bash
# Runs a model test script with the model tests' virtual environment (made on first use).
#   usage: tests/model/run.sh SCRIPT [ARGS...]    SCRIPT is a file name in tests/model/
# The scripts are plain programs (not pytest), bounded by CTest's TIMEOUT (tests/CMakeLists.txt),
# which kills without a word. So that a hang still says where it is, Python's faulthandler is on
# (a crash prints every thread's stack) and, once the script has run SHARDRT_MODEL_TEST_DUMP_S
# seconds (default 540, before the shortest of those timeouts, 600 s), it prints every thread's
# stack to stderr once and lets the script go on.
set -euo pipefail
cd "$(dirname "$0")/../.."
tests/model/setup_venv.sh
exec tests/.venv/bin/python -X faulthandler -c '
import faulthandler, os, runpy, sys
faulthandler.dump_traceback_later(float(sys.argv[1]))
sys.argv = sys.argv[2:]
sys.path.insert(0, os.path.dirname(os.path.abspath(sys.argv[0])))
runpy.run_path(sys.argv[0], run_name="__main__")
' "${SHARDRT_MODEL_TEST_DUMP_S:-540}" tests/model/"$1" "${@:2}"
