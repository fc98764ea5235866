#!/usr/bin/env python3
"""The JAX peer of bench/execute_bench: the same `x + 1` program on k sharded arguments.

Each argument is an f32[8 * D, 128] jax.Array with NamedSharding(mesh, P("x")) on a 1-D mesh of
the D CPU devices (JAX_NUM_CPU_DEVICES=D), so every device holds one f32[8, 128] shard, exactly
as in the C++ arms. `f = jax.jit(lambda *xs: tuple(x + 1 for x in xs))` with those shardings in
and out. One timed call is `out = f(*xs); out[0].block_until_ready(); del out`: like the C++
arms it waits on output 0 (all of its shards). On JAX's CPU client all outputs of one launch
become ready together, so that is a full round trip; `jax.block_until_ready(out)` on the tuple of
k outputs would add a Python call per output (about 137 us at k = 100 even when all are ready)
that the C++ arms do not pay.

Threads: JAX's CPU client is XLA's PJRT CPU client, which sizes its worker pool from PJRT_NPROC
like the CPU plugin of the C++ arms; bench/run passes every process the same PJRT_NPROC.

Standalone:  python jax_peer.py --devices 8 --args 1,10,100 [--calls 200]
             prints one JSON line per k with the median and p90 in microseconds.
Driven:      python jax_peer.py --serve --devices 8
             the line protocol of bench/run (same as execute_bench --serve):
             setup K | run K jax N | free K | info | threads | quit
"""

import argparse
import json
import os
import time

import protocol

ROWS, COLS = 8, 128  # per-device shard shape, as in bench/bench_util.h


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--devices", type=int, default=8)
    p.add_argument("--serve", action="store_true")
    p.add_argument("--args", default="1,10,100")
    p.add_argument("--calls", type=int, default=200)
    return p.parse_args()


ARGS = parse_args()
# Must be set before jax initialises its backends.
os.environ["JAX_NUM_CPU_DEVICES"] = str(ARGS.devices)
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P  # noqa: E402


class Case:
    """One k: the jitted function and its k uploaded arguments."""

    def __init__(self, devices, k):
        mesh = Mesh(np.array(jax.devices()[:devices]), ("x",))
        sharding = NamedSharding(mesh, P("x"))
        self.f = jax.jit(
            lambda *xs: tuple(x + 1 for x in xs),
            in_shardings=(sharding,) * k,
            out_shardings=(sharding,) * k,
        )
        self.xs = [
            jax.device_put(np.full((ROWS * devices, COLS), i, np.float32), sharding)
            for i in range(k)
        ]
        t0 = time.perf_counter()
        out = self.f(*self.xs)
        jax.block_until_ready(out)
        self.compile_s = time.perf_counter() - t0
        for i, y in enumerate(out):
            if y.sharding != sharding or not np.all(np.asarray(y) == i + 1):
                raise RuntimeError(f"jax output {i} is wrong")
        del out
        for _ in range(10):  # warm-up
            jax.block_until_ready(self.f(*self.xs))

    def run(self, n):
        f, xs = self.f, self.xs
        samples = []
        clock = time.perf_counter_ns
        for _ in range(n):
            t0 = clock()
            out = f(*xs)
            out[0].block_until_ready()  # output 0, as every arm (see the top of this file)
            del out
            samples.append(clock() - t0)
        return samples


def serve(devices):
    protocol.serve_cases(
        "jax",
        lambda: {"jax": jax.__version__,
                 "jaxlib": jax.lib.__version__ if hasattr(jax.lib, "__version__") else "",
                 "devices": len(jax.devices()), "platform": jax.devices()[0].platform},
        lambda k: Case(devices, k),
        lambda case, n: {"samples_ns": case.run(n)})


def main():
    if ARGS.serve:
        serve(ARGS.devices)
        return
    for k in [int(a) for a in ARGS.args.split(",")]:
        samples = sorted(Case(ARGS.devices, k).run(ARGS.calls))
        print(json.dumps({
            "arm": "jax", "devices": ARGS.devices, "args": k,
            "median_us": samples[len(samples) // 2] / 1e3,
            "p90_us": samples[min(len(samples) - 1, int(0.9 * len(samples)))] / 1e3,
        }))


if __name__ == "__main__":
    main()
