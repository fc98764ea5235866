#!/usr/bin/env python3
"""The shardrt-from-Python peer of bench/execute_bench: the same `x + 1` program on k sharded
arguments, called through the Python package (bindings/python) instead of from C++.

The program is the StableHLO text of bench/bench_util.h's AddOneProgram, built the same way here:
k arguments and k outputs f32[8 * D, 128] with sharding {devices=[D,1]<=[D]} ({replicated} for
D = 1), compiled with `rt.compile` for D partitions on a `shardrt.Runtime(devices=D)` (the
installed xla-cpu-pjrt plugin, or $SHARDRT_PJRT_PLUGIN). Argument i holds i everywhere, uploaded
with `rt.put`; output i must hold i + 1 (checked once, then 10 warm-up calls). One timed call is
`out = f(*xs); out[0].block_until_ready(); shardrt.release(out)`: like the C++ arms and the
JAX peer it waits on output 0 (all of its shards; on the CPU plugin all outputs of one launch
become ready together), then drops the outputs together, as the C++ shardrt arm does
(shardrt.release is Data::ReleaseAll; --shardrt-drop-each makes this peer `del out` instead,
which frees them one output after another, as the C++ arm then does too).

So against the C++ shardrt arm this measures what the Python layer adds per call: argument
unwrapping, k Array wrappers for the outputs, the wait and the release through the binding.

Threads: the runtime is the C++ library's, with its defaults (host pool one thread per core);
the plugin's pools are sized from PJRT_NPROC, which bench/run passes every process alike.

Run it with bindings/python/.venv's python (bindings/python/setup_venv.sh makes it).

Standalone:  python shardrt_py_peer.py --devices 8 --args 1,10,100 [--calls 200]
             prints one JSON line per k with the median and p90 in microseconds.
Driven:      python shardrt_py_peer.py --serve --devices 8
             the line protocol of bench/run (same as execute_bench --serve):
             setup K | run K shardrt-py N | free K | info | threads | quit
"""

import argparse
import json
import time

import numpy as np

import protocol
import shardrt

ROWS, COLS = 8, 128  # per-device shard shape, as in bench/bench_util.h
ARM = "shardrt-py"


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--devices", type=int, default=8)
    p.add_argument("--serve", action="store_true")
    p.add_argument("--args", default="1,10,100")
    p.add_argument("--calls", type=int, default=200)
    p.add_argument("--shardrt-drop-each", action="store_true",
                   help="drop the outputs with `del out` (one at a time), not shardrt.release")
    return p.parse_args()


def sharding_text(devices):
    return "{replicated}" if devices == 1 else f"{{devices=[{devices},1]<=[{devices}]}}"


def add_one_program(devices, k):
    """StableHLO text of main(x_0 .. x_{k-1}) -> (x_0 + 1, ..., x_{k-1} + 1), character for
    character what bench_util.h's AddOneProgram(devices, k) builds."""
    ty = f"tensor<{ROWS * devices}x{COLS}xf32>"
    attr = f' {{mhlo.sharding = "{sharding_text(devices)}"}}'
    text = (f"module @add_one_{k} attributes {{mhlo.num_partitions = {devices} : i32, "
            f"mhlo.num_replicas = 1 : i32}} {{\n  func.func public @main(")
    text += ", ".join(f"%arg{i}: {ty}{attr}" for i in range(k))
    text += ") -> ("
    text += ", ".join(f"{ty}{attr}" for _ in range(k))
    text += f") {{\n    %one = stablehlo.constant dense<1.0> : {ty}\n"
    text += "".join(f"    %r{i} = stablehlo.add %arg{i}, %one : {ty}\n" for i in range(k))
    text += "    return " + ", ".join(f"%r{i}" for i in range(k))
    text += " : " + ", ".join(ty for _ in range(k))
    text += "\n  }\n}\n"
    return text


class Case:
    """One k: the compiled program and its k uploaded arguments."""

    drop_each = False  # --shardrt-drop-each

    def __init__(self, rt, devices, k):
        sharding = shardrt.Sharding(sharding_text(devices))
        t0 = time.perf_counter()
        self.f = rt.compile(add_one_program(devices, k), name=f"add_one_{k}", devices=devices)
        self.compile_s = time.perf_counter() - t0
        self.xs = [rt.put(np.full((ROWS * devices, COLS), i, np.float32), sharding)
                   for i in range(k)]
        out = self.f(*self.xs)
        if len(out) != k:
            raise RuntimeError(f"shardrt-py: {len(out)} outputs, expected {k}")
        for i, y in enumerate(out):
            if y.sharding != sharding or not np.all(y.to_numpy() == i + 1):
                raise RuntimeError(f"shardrt-py output {i} is wrong")
        del out
        for _ in range(10):  # warm-up
            out = self.f(*self.xs)
            out[0].block_until_ready()
            del out

    def run(self, n):
        f, xs = self.f, self.xs
        samples = []
        clock = time.perf_counter_ns
        release = None if self.drop_each else shardrt.release
        for _ in range(n):
            t0 = clock()
            out = f(*xs)
            out[0].block_until_ready()  # output 0, as every arm (see the top of this file)
            if release is not None:
                release(out)
            del out
            samples.append(clock() - t0)
        return samples


def main():
    args = parse_args()
    Case.drop_each = args.shardrt_drop_each
    rt = shardrt.Runtime(devices=args.devices)
    if args.serve:
        protocol.serve_cases(
            ARM,
            lambda: {"shardrt": shardrt.__version__, "platform": rt.platform,
                     "devices": len(rt.devices)},
            lambda k: Case(rt, args.devices, k),
            lambda case, n: {"samples_ns": case.run(n)})
        return
    for k in [int(a) for a in args.args.split(",")]:
        samples = sorted(Case(rt, args.devices, k).run(args.calls))
        print(json.dumps({
            "arm": ARM, "devices": args.devices, "args": k,
            "median_us": samples[len(samples) // 2] / 1e3,
            "p90_us": samples[min(len(samples) - 1, int(0.9 * len(samples)))] / 1e3,
        }))


if __name__ == "__main__":
    main()
