#!/usr/bin/env bash
# Set up, build, and run the whole test suite: Clang's thread-safety analysis of the build's
# sources (scripts/thread_safety.sh); unit and integration tests (real CPU plugin,
# 8 devices) and the model tests (SmolLM2-135M against the gguf package, Hugging Face tokenizers
# and a NumPy reference, in tests/.venv) through CTest; the Python package (pip install . into
# bindings/python/.venv, then its pytest suite: NumPy references, JAX interop); its binary wheel
# (scripts/wheel.sh), installed in a fresh environment without a compiler (tests/wheel/); every
# code block of the READMEs (tests/readme/readme_test.py, bindings/python/tests/test_readme.py); the
# integration tests again under AddressSanitizer and ThreadSanitizer, then every fuzz target
# (fuzz/*_fuzz.cc) for a bounded time each (SHARDRT_FUZZ_SECONDS, default 10 s).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh
scripts/thread_safety.sh  # Clang's -Wthread-safety over the annotated code (base/mutex.h)
tests/model/setup_venv.sh  # the model tests' references (gguf, tokenizers, NumPy)
# The CLI runs of the tests share one persistent compile cache in the build folder (not the
# user's), emptied first so each run compiles everything once.
export SHARDRT_COMPILE_CACHE="$PWD/build/test-compile-cache"
rm -rf "$SHARDRT_COMPILE_CACHE"
ctest --test-dir build --output-on-failure -j 2 --timeout 900
tests/readme/readme_test.py  # the README's shell blocks and scripts/demo.sh, as written
python="$(bindings/python/setup_venv.sh)"  # pinned build and test requirements, pip install .
"$python" -m pytest -q -p no:cacheprovider bindings/python
# The binary wheel (auditwheel-repaired, over the same build) and the sdist into dist/, then the
# wheel installed without a compiler and the README's example run from it.
wheel="$(scripts/wheel.sh)"
tests/wheel/wheel_test.sh "$wheel"
scripts/sanitize.sh address thread
scripts/fuzz.sh --build  # every target at once (the runs below then only check the build)
fuzz_targets="$(scripts/fuzz.sh --list)"
for target in $fuzz_targets; do
  scripts/fuzz.sh "${SHARDRT_FUZZ_SECONDS:-10}" "$target"
done
