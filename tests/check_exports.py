#!/usr/bin/env python3
"""Checks that the shared libraries export their public API and nothing else (CTest `exports`).

libshardrt.so and libshardrt_llm.so are built with -fvisibility=hidden; what include/shardrt/
declares is marked SHARDRT_EXPORT (shardrt/base/export.h). This reads each library's dynamic
symbol table (`nm -DC --defined-only`) and checks, for every symbol of namespace shardrt:
  1. the entity it belongs to (the first name after shardrt's namespaces: a class, struct or
     function) is declared in a public header (include/shardrt/), not only forward-declared
     there, so no private class or function of src/ or models/ leaks;
  2. and, the other way, that the library exports each entry point a user starts from.
Usage: check_exports.py SOURCE_DIR LIBRARY... Prints each problem and exits 1 if there is one.
"""
import pathlib
import re
import subprocess
import sys

# The namespaces of the public API: their names are not entities of their own.
NAMESPACES = {"shardrt", "pjrt", "stablehlo", "llm", "limits"}
PREFIXES = ("typeinfo name for ", "typeinfo for ", "vtable for ", "VTT for ",
            "non-virtual thunk to ", "virtual thunk to ", "guard variable for ")
# What a user starts from, per library (each must be exported).
ENTRY_POINTS = {
    "libshardrt.so": ("shardrt::Runtime::Create(", "shardrt::ComputationClient::ExecuteReplicated(",
                      "shardrt::ParseSharding(", "shardrt::GlobalMetrics()"),
    "libshardrt_llm.so": ("shardrt::llm::Session::Open(", "shardrt::llm::Session::Generate("),
}


def entity(symbol):
    """The first non-namespace name of a shardrt symbol, or None for other symbols."""
    for prefix in PREFIXES:
        if symbol.startswith(prefix):
            symbol = symbol[len(prefix):]
    if not symbol.startswith("shardrt::"):
        return None
    name = re.split(r"[(<\[ ]", symbol, maxsplit=1)[0]
    for part in name.split("::"):
        if part not in NAMESPACES:
            return part
    return name


def main():
    source = pathlib.Path(sys.argv[1])
    # The public headers' code, without comments (which name private classes too).
    public = "\n".join(re.sub(r"//.*", "", p.read_text())
                       for p in (source / "include" / "shardrt").rglob("*.h"))
    # Classes a public header only declares (`class PersistentCacheStore;`) stay private.
    declared_only = (set(re.findall(r"\b(?:class|struct)\s+(\w+)\s*;", public)) -
                     set(re.findall(r"\b(?:class|struct)\s+(?:\w+\s+)*?(\w+)\s*(?:final\s*)?[:{]",
                                    public)))
    problems = []
    for library in sys.argv[2:]:
        out = subprocess.run(["nm", "-DC", "--defined-only", library], check=True,
                             capture_output=True, text=True).stdout
        symbols = [line.split(" ", 2)[2] for line in out.splitlines() if line.count(" ") >= 2]
        base = pathlib.Path(library).name.split(".so")[0] + ".so"
        exported = 0
        for symbol in symbols:
            name = entity(symbol)
            if name is None:
                continue
            exported += 1
            if name == "operator<<" or (name and name not in declared_only and
                                        re.search(r"\b%s\b" % re.escape(name), public)):
                continue
            problems.append(f"{base}: exports {symbol!r}: '{name}' is not in include/shardrt/")
        for entry in ENTRY_POINTS.get(base, ()):
            if not any(s.startswith(entry) for s in symbols):
                problems.append(f"{base}: does not export {entry}...)")
        print(f"check_exports: {base}: {exported} shardrt symbols")
    for problem in problems:
        print(problem)
    print(f"check_exports: {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
