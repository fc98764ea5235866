#!/usr/bin/env python3
"""Checks the library's layering from its #include lines (run by CTest as `layering`).

Rules:
  1. A layer includes only itself and the layers below it:
       base -> {pjrt, sharding} -> program -> data -> client -> executor -> runtime
         -> llm (models/, public headers include/shardrt/llm/) -> tools (tools/cli)
     (pjrt and sharding do not include each other).
  2. Public headers (include/shardrt/) include only public headers ("shardrt/...").
  3. Only src/pjrt/ includes the plugin's pjrt_c_api.h, and only src/ includes generated
     protobuf headers (*.pb.h).
  4. The bindings (bindings/) sit on top and use the library through its public headers only.
  5. The models (models/) use the library through its public headers only; the tools (tools/)
     use public headers and their own, never a model's private headers; no other folder checked
     here includes the tools' headers. bench/ and tests/ are not checked: they may include
     private headers (bench/decoder_demo.cc runs the small decoder of models/decoder/, a fixture
     that is not installed, on the CLI's library).
  6. The umbrella include/shardrt/shardrt.h includes every public header of libshardrt (all of
     include/shardrt/ but llm/, libshardrt_llm's, and base/export.h, the export macro).
Prints every violation as FILE:LINE: message and exits 1 if there is one.
"""
import os
import re
import sys

RANKS = {"base": 0, "pjrt": 1, "sharding": 1, "program": 2, "data": 3, "client": 4,
         "executor": 5, "runtime": 6, "llm": 7, "cli": 8}
# The private header folders of the layers above the library: who may include them.
PRIVATE_ABOVE = {"llama": ("models",), "decoder": ("models",), "cli": ("tools",)}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def sources(root, top):
    """The .h and .cc files under root/top, sorted."""
    found = []
    for dirpath, _, names in os.walk(os.path.join(root, top)):
        if ".venv" in dirpath.split(os.sep):
            continue
        found += [os.path.join(dirpath, n) for n in names if n.endswith((".h", ".cc"))]
    return sorted(found)


def includes(path):
    """(line number, quoted include) of each #include "..." in `path`."""
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            m = INCLUDE.match(line)
            if m:
                yield number, m.group(1)


def layer_of_include(path):
    """The layer an include names: "shardrt/<layer>/x.h" (public) or "<layer>/x.h" (private)."""
    parts = path.split("/")
    if parts[0] == "shardrt" and len(parts) > 2:
        parts = parts[1:]
    return parts[0] if len(parts) > 1 and parts[0] in RANKS else None


def main(root):
    problems = []
    files = []
    for top in ("src", os.path.join("include", "shardrt")):
        files += sources(root, top)
    if not files:
        print("check_layering: no sources found under", root)
        return 1
    for path in sorted(files):
        rel = os.path.relpath(path, root)
        parts = rel.split(os.sep)
        public = parts[0] == "include"
        layer = parts[2] if public else parts[1]
        if layer not in RANKS:
            if not (public and len(parts) == 3):  # include/shardrt/shardrt.h, the umbrella
                problems.append(f"{rel}: not in a known layer folder ({', '.join(RANKS)})")
            continue
        for number, inc in includes(path):
            where = f"{rel}:{number}"
            if inc == "pjrt_c_api.h" and (public or layer != "pjrt"):
                problems.append(f"{where}: only src/pjrt/ may include pjrt_c_api.h")
            if inc.endswith(".pb.h") and public:
                problems.append(f"{where}: a public header includes generated {inc}")
            if public and not inc.startswith(("shardrt/", "absl/")):
                problems.append(f"{where}: a public header includes private \"{inc}\"")
            target = layer_of_include(inc)
            if target is None or target == layer:
                continue
            if RANKS[target] >= RANKS[layer]:
                problems.append(f"{where}: layer {layer} includes {inc} from layer {target}"
                                " (imports must point down)")
    # The umbrella: every public header of libshardrt.
    umbrella = os.path.join(root, "include", "shardrt", "shardrt.h")
    listed = {inc for _, inc in includes(umbrella)} if os.path.isfile(umbrella) else set()
    for path in files:
        rel = os.path.relpath(path, os.path.join(root, "include"))
        parts = rel.split(os.sep)
        if (parts[0] == "shardrt" and len(parts) == 3 and parts[1] != "llm"
                and path.endswith(".h") and rel != os.path.join("shardrt", "base", "export.h")
                and rel.replace(os.sep, "/") not in listed):
            problems.append(f"include/shardrt/shardrt.h: the umbrella does not include \"{rel}\"")
    # models/ and tools/: public headers of the library, and their own.
    for top in ("models", "tools"):
        for path in sources(root, top):
            files.append(path)
            rel = os.path.relpath(path, root)
            for number, inc in includes(path):
                first = inc.split("/")[0]
                if inc == "pjrt_c_api.h" or inc.endswith(".pb.h") or (
                        first in RANKS and first != "cli"):
                    problems.append(f"{rel}:{number}: {top}/ includes \"{inc}\"; it uses the "
                                    "library's public headers only")
                elif first in PRIVATE_ABOVE and top not in PRIVATE_ABOVE[first]:
                    problems.append(f"{rel}:{number}: {top}/ includes \"{inc}\" "
                                    "(imports must point down)")
    # The bindings: public headers only.
    for path in sources(root, "bindings"):
        files.append(path)
        for number, inc in includes(path):
            if inc == "pjrt_c_api.h" or inc.endswith(".pb.h") or (
                    layer_of_include(inc) is not None and not inc.startswith("shardrt/")):
                problems.append(f"{os.path.relpath(path, root)}:{number}: the bindings include "
                                f"\"{inc}\"; they use public headers only")
    for p in problems:
        print(p)
    print(f"check_layering: {len(files)} files, {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..")))
