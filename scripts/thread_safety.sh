#!/usr/bin/env bash
# Clang's thread-safety analysis over shardrt's own code: every translation unit of
# build/compile_commands.json under src/, tools/, models/ or bindings/ (folders that do not exist
# are skipped) is parsed once with clang++ -fsyntax-only -Wthread-safety -Wthread-safety-beta
# -Werror=thread-safety, with its entry's own flags (less warning flags, output and dependency
# flags and the GCC-only flags Clang rejects), in parallel. Members are annotated ABSL_GUARDED_BY
# (include/shardrt/base/mutex.h), so an access without the lock is an error here, although GCC
# builds the library.
# Prints "thread-safety: N files checked, clean" and exits 0, or prints every diagnostic and
# exits 1. Run scripts/build.sh first (the compile database, the generated protobuf headers).
#   usage: scripts/thread_safety.sh [DIR|FILE...]   (default: src tools models bindings; e.g.
#          scripts/thread_safety.sh tests bench checks the tests and benchmarks instead)
#   SHARDRT_CLANGXX: the clang++ to run (default: clang++)
set -euo pipefail
cd "$(dirname "$0")/.."
db=build/compile_commands.json
clang="${SHARDRT_CLANGXX:-clang++}"
dirs=("$@")
[ ${#dirs[@]} -gt 0 ] || dirs=(src tools models bindings)
if [ ! -f "$db" ]; then
  echo "thread-safety: $db not found: run scripts/build.sh first" >&2
  exit 2
fi
if ! command -v "$clang" > /dev/null; then
  echo "thread-safety: $clang not found (apt-get install clang)" >&2
  exit 2
fi
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# One shell script per translation unit: $work/NNNN.sh.
python3 - "$db" "$PWD" "$work" "$clang" "${dirs[@]}" << 'PY'
import json, os, shlex, sys

db, root, work, clang, *dirs = sys.argv[1:]
# Flags that take the next argument and only name outputs or dependency files.
DROP_WITH_VALUE = {"-o", "-MF", "-MT", "-MQ"}
DROP = {"-c", "-MD", "-MMD", "-M", "-MM", "-MP"}
# GCC-only flags that clang++ rejects, and colour (plain diagnostics in logs); prefixes.
GCC_ONLY = ("-fconcepts-diagnostics-depth=", "-fmax-errors=", "-fno-gnu-unique",
            "-fno-canonical-system-headers", "-fanalyzer", "-fdiagnostics-color",
            "-fcolor-diagnostics")
LAUNCHERS = {"ccache", "sccache", "distcc"}
count = 0
for entry in sorted(json.load(open(db)), key=lambda e: e["file"]):
    path = os.path.normpath(os.path.join(entry["directory"], entry["file"]))
    rel = os.path.relpath(path, root)
    if not any(rel == d or rel.startswith(d.rstrip("/") + "/") for d in dirs):
        continue
    args = entry.get("arguments") or shlex.split(entry["command"])
    while args and os.path.basename(args[0]) in LAUNCHERS:
        args = args[1:]
    args = args[1:]  # the compiler
    flags, skip = [], False
    for a in args:
        if skip:
            skip = False
        elif a in DROP_WITH_VALUE:
            skip = True
        elif a in DROP or a.startswith(("-W", "-o")) and not a.startswith("-Wa,") \
                or a.startswith(GCC_ONLY) or a == entry["file"] or a == path:
            continue
        else:
            flags.append(a)
    # GCC has sized deallocation on by default in C++14 and later; clang 14 needs the flag.
    cmd = [clang, *flags, "-fsized-deallocation", "-fsyntax-only", "-Wthread-safety",
           "-Wthread-safety-beta", "-Werror=thread-safety", path]
    with open(os.path.join(work, f"{count:04d}.sh"), "w") as f:
        f.write(f"cd {shlex.quote(entry['directory'])} && exec {shlex.join(cmd)}\n")
    count += 1
PY

shopt -s nullglob
units=("$work"/*.sh)
if [ ${#units[@]} -gt 0 ]; then
  # Each unit writes its diagnostics to NNNN.log; a failing one also leaves NNNN.failed.
  printf '%s\n' "${units[@]}" |
    xargs -P "$(nproc)" -n 1 sh -c 'sh "$1" > "${1%.sh}.log" 2>&1 || : > "${1%.sh}.failed"' sh
fi
# A unit is dirty when clang failed or printed anything.
dirty=0
for unit in "${units[@]}"; do
  if [ -e "${unit%.sh}.failed" ] || [ -s "${unit%.sh}.log" ]; then
    cat "${unit%.sh}.log"
    dirty=$((dirty + 1))
  fi
done
if [ "$dirty" -gt 0 ]; then
  echo "thread-safety: ${#units[@]} files checked, $dirty with diagnostics (above)" >&2
  exit 1
fi
echo "thread-safety: ${#units[@]} files checked, clean"
