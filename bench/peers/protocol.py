"""The line protocol the bench peers serve their driver with: one request per line on stdin,
one JSON reply per line on stdout, until `quit` or the end of input. A reply is a dict with
"ok"; a request that fails or that the peer does not know gets {"ok": false, "error": ...},
which the driver reports before it stops."""

import json
import os
import sys


def serve(handle):
    """Answers stdin's requests. handle(words) returns the reply to the request split into
    words, or None when it does not know the request; an exception becomes an error reply."""
    for line in sys.stdin:
        words = line.split()
        if not words:
            continue
        if words[0] == "quit":
            break
        try:
            reply = handle(words)
            if reply is None:
                reply = {"ok": False, "error": f"bad request: {line.strip()}"}
        except Exception as e:  # reported to the driver, which stops
            reply = {"ok": False, "error": repr(e)}
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()


def serve_cases(arm, info, make_case, run):
    """bench/run's requests for a peer of the add-one family, one case per argument count K:
    `info` (the reply holds info()'s fields), `threads` (this process's OS threads now),
    `setup K` (builds the case, make_case(K), once; replies its compile_s), `free K`,
    `run K ARM N` (N timed calls of the case: run(case, N) gives the reply's fields)."""
    cases = {}

    def case(k):
        if k not in cases:
            cases[k] = make_case(k)
        return cases[k]

    def handle(words):
        if words[0] == "info":
            return {"ok": True, **info()}
        if words[0] == "threads":
            return {"ok": True, "threads": len(os.listdir("/proc/self/task"))}
        if words[0] == "setup":
            return {"ok": True, "compile_s": case(int(words[1])).compile_s}
        if words[0] == "free":
            cases.pop(int(words[1]), None)
            return {"ok": True}
        if words[0] == "run" and words[2] == arm:
            return {"ok": True, **run(case(int(words[1])), int(words[3]))}
        return None

    serve(handle)
