#!/usr/bin/env python3
"""Every code block of README.md and bindings/python/README.md runs, or is the file it shows.

A block is a fenced block with a language: sh, python, cpp, mlir or text. The comment line right
before its fence, when there is one, says who checks it:
  <!-- runs in: PATH ... -->     another test runs it (PATH must exist; bindings/python/tests/
                                 test_readme.py runs the Python blocks);
  <!-- file: PATH -->            the block is the file PATH, byte for byte;
  <!-- excerpt of: PATH -->      every line of the block but blank lines and // comments is in
                                 PATH (stripped of indentation).
An unmarked sh block of README.md runs here as written, with bash -euo pipefail, in a new folder
whose build/, .cache/, tests/ and examples/ are the repository's, with a compile cache of its own
and neither TF_CPP_MIN_LOG_LEVEL nor SHARDRT_LOG set: it must exit 0 and print none of the
plugin's log lines on stderr. `text` blocks are synopses and output; cpp and mlir blocks must be
marked. The first block's scripts/demo.sh runs here too (the test command is the other line):
its stdout must be the answer alone, Paris, and its stderr the build's lines, then shardrt's own
three.
  usage: tests/readme/readme_test.py   (after the build and the model are in place)
"""

import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
READMES = ["README.md", "bindings/python/README.md"]
LANGUAGES = {"sh", "python", "cpp", "mlir", "text"}
# A line of Abseil's log format, as the plugin writes them.
PLUGIN_LOG_LINE = re.compile(r"^[IWEF]\d{4} \d\d:\d\d:\d\d\.\d+ +\d+ [^ ]+:\d+\] |InitializeLog", re.M)
FENCE = re.compile(r"(?:^<!-- (?P<marker>.*?) -->\n)?^```(?P<lang>[a-z]*)\n(?P<body>.*?)^```$",
                   re.M | re.S)

failures = []


def fail(message):
    failures.append(message)
    print("FAIL:", message, flush=True)


def blocks(readme):
    with open(os.path.join(ROOT, readme), encoding="utf-8") as f:
        text = f.read()
    for m in FENCE.finditer(text):
        line = text.count("\n", 0, m.start("lang")) + 1
        yield line, m.group("lang"), m.group("marker"), m.group("body")


def run_shell(where, body):
    with tempfile.TemporaryDirectory(prefix="shardrt-readme-") as work:
        for name in ("build", ".cache", "tests", "examples"):
            os.symlink(os.path.join(ROOT, name), os.path.join(work, name))
        env = {k: v for k, v in os.environ.items() if k not in ("TF_CPP_MIN_LOG_LEVEL", "SHARDRT_LOG")}
        env["SHARDRT_COMPILE_CACHE"] = os.path.join(work, "compile-cache")
        try:
            done = subprocess.run(["bash", "-euo", "pipefail", "-c", body], cwd=work, env=env,
                                  capture_output=True, text=True, timeout=600)
        except subprocess.TimeoutExpired:
            return fail(f"{where}: did not finish in 600 s")
        if done.returncode != 0:
            return fail(f"{where}: exit {done.returncode}\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
        if PLUGIN_LOG_LINE.search(done.stderr):
            return fail(f"{where}: the plugin's log lines on stderr:\n{done.stderr[-2000:]}")
        print(f"ok: {where} ran ({len(body.splitlines())} lines)", flush=True)


def check_demo():
    env = {k: v for k, v in os.environ.items() if k not in ("TF_CPP_MIN_LOG_LEVEL", "SHARDRT_LOG")}
    done = subprocess.run([os.path.join(ROOT, "scripts/demo.sh")], env=env, capture_output=True,
                          text=True, timeout=900)
    if done.returncode != 0 or "Paris" not in done.stdout:
        return fail(f"scripts/demo.sh: exit {done.returncode}: {done.stdout!r} {done.stderr[-2000:]}")
    # stdout is the answer alone (set-up and build lines go to stderr).
    if len(done.stdout.strip().splitlines()) != 1:
        return fail(f"scripts/demo.sh: stdout holds more than the answer: {done.stdout!r}")
    # The build step's lines, then shardrt's own: nothing of the plugin's.
    answer = [l for l in done.stderr.splitlines()
              if not l.startswith(("bootstrap:", "build:", "ninja:", "[", "-- "))]
    own = ("compiled in ", "prefill: ", "decoded ")
    if PLUGIN_LOG_LINE.search(done.stderr) or not all(l.startswith(own) for l in answer[-3:]):
        return fail(f"scripts/demo.sh: stderr holds more than shardrt's lines:\n{done.stderr[-2000:]}")
    print(f"ok: scripts/demo.sh answered {done.stdout.strip()!r}; stderr ends {answer[-3:]}", flush=True)


def main():
    count = 0
    for readme in READMES:
        for line, lang, marker, body in blocks(readme):
            count += 1
            where = f"{readme}:{line} ({lang or 'no language'})"
            if lang not in LANGUAGES:
                fail(f"{where}: a block needs one of the languages {sorted(LANGUAGES)}")
                continue
            if marker and (m := re.match(r"(runs in|file|excerpt of): (\S+)", marker)):
                kind, path = m.groups()
                full = os.path.join(ROOT, path)
                if not os.path.isfile(full):
                    fail(f"{where}: '{path}' does not exist")
                    continue
                with open(full, encoding="utf-8") as f:
                    content = f.read()
                if kind == "file" and body != content:
                    fail(f"{where}: the block is not {path} as it stands")
                elif kind == "excerpt of":
                    lines = [l.strip() for l in content.splitlines()]
                    for l in body.splitlines():
                        s = l.strip()
                        if s and not s.startswith("//") and not any(s in x for x in lines):
                            fail(f"{where}: not in {path}: {s}")
                elif kind == "runs in" and path == "tests/readme/readme_test.py":
                    check_demo()
                else:
                    print(f"ok: {where} is {kind} {path}", flush=True)
                continue
            if marker:
                fail(f"{where}: unknown marker <!-- {marker} -->")
            elif lang in ("cpp", "mlir"):
                fail(f"{where}: a {lang} block must be a file or an excerpt of one")
            elif lang == "sh" and readme == "README.md":
                run_shell(where, body)
            elif lang == "sh":
                fail(f"{where}: sh blocks of this README are not run: mark who runs it")
    if failures:
        sys.exit(f"readme_test: {len(failures)} of {count} blocks failed")
    print(f"readme_test: {count} blocks: ok")


if __name__ == "__main__":
    main()
