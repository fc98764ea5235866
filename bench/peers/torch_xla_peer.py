#!/usr/bin/env python3
"""The PyTorch/XLA peer of bench/execute_bench: the same `x + 1` family in SPMD mode.

PyTorch/XLA is where shardrt's ComputationClient design comes from. This runs it on its own CPU
client (PJRT_DEVICE=CPU, CPU_NUM_DEVICES=D) in SPMD mode (`xr.use_spmd()`): a 1-D mesh over the
D CPU devices, k f32[8 * D, 128] tensors on the XLA device, each with
`xs.mark_sharding(t, mesh, ("x", None))` (split on dim 0: one f32[8, 128] shard per device, as in
the C++ arms and the JAX peer).

One timed step is what a PyTorch/XLA user writes:

    ys = [x + 1 for x in xs]      # trace: k lazy adds (IR nodes)
    torch_xla.sync()              # sync: hash the graph, hit the compile cache, and run it
                                  #   (ExecuteReplicated on a PyTorch/XLA worker thread)
    xm.wait_device_ops()          # wait: until the launch has completed
    del ys                        # the outputs are freed

The step time covers all four. In SPMD mode `wait_device_ops` returns when device 0's part of the
launch is done (PyTorch/XLA waits on that one future, taking the devices to finish together): the
counterpart of the other arms' wait on output 0, and there is no user API to wait on less.
Each `run` also returns the batch's samples of PyTorch/XLA's own ExecuteReplicatedTime metric. Its
timed section opens when PjRtComputationClient::ExecuteReplicated starts (argument handles,
PJRT Execute, wrapping the outputs) and closes when both that call has returned and device 0's
execution future is ready: it includes the execution, unlike shardrt's metric of the same name
(entry to return). It excludes tracing, graph hashing, the compile-cache lookup and the
scheduling of the worker-thread closure.

Threads: the CPU client is XLA's PJRT CPU client, which sizes its pools from PJRT_NPROC, the
same variable as the C++ arms' plugin; bench/run passes every process the same value.

Standalone:  python torch_xla_peer.py --devices 8 --args 1,10,100 [--calls 100]
Driven:      python torch_xla_peer.py --serve --devices 8
             the line protocol of bench/run: setup K | run K torch-xla N | free K | info |
             threads | quit
"""

import argparse
import json
import os
import statistics
import time

import protocol

ROWS, COLS = 8, 128  # per-device shard shape, as in bench/bench_util.h


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--devices", type=int, default=8)
    p.add_argument("--serve", action="store_true")
    p.add_argument("--args", default="1,10,100")
    p.add_argument("--calls", type=int, default=100)
    return p.parse_args()


ARGS = parse_args()
# Must be set before torch_xla creates its runtime client.
os.environ["PJRT_DEVICE"] = "CPU"
os.environ["CPU_NUM_DEVICES"] = str(ARGS.devices)
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch_xla  # noqa: E402
import torch_xla.core.xla_model as xm  # noqa: E402
import torch_xla.debug.metrics as met  # noqa: E402
import torch_xla.distributed.spmd as xs  # noqa: E402
import torch_xla.runtime as xr  # noqa: E402

xr.use_spmd()
DEVICE = torch_xla.device()
MESH = xs.Mesh(np.arange(xr.global_runtime_device_count()), (xr.global_runtime_device_count(),),
               ("x",))


def execute_replicated_ns():
    """The retained samples of PyTorch/XLA's ExecuteReplicatedTime metric, in ns."""
    data = met.metric_data("ExecuteReplicatedTime")
    return [int(v) for _, v in data[2]] if data else []


class Case:
    """One k: k sharded device tensors."""

    def __init__(self, devices, k):
        if xr.global_runtime_device_count() != devices:
            raise RuntimeError(f"{xr.global_runtime_device_count()} devices, not {devices}")
        self.xs = []
        for i in range(k):
            t = torch.full((ROWS * devices, COLS), float(i), dtype=torch.float32).to(DEVICE)
            xs.mark_sharding(t, MESH, ("x", None))
            self.xs.append(t)
        torch_xla.sync()
        xm.wait_device_ops()
        t0 = time.perf_counter()
        ys = self.step_outputs()
        self.compile_s = time.perf_counter() - t0
        want = torch_xla._XLAC._get_xla_sharding_spec(self.xs[0])
        for i, y in enumerate(ys):
            if torch_xla._XLAC._get_xla_sharding_spec(y) != want:
                raise RuntimeError(f"torch-xla output {i} has sharding "
                                   f"{torch_xla._XLAC._get_xla_sharding_spec(y)}, not {want}")
            if not bool(torch.all(y.cpu() == i + 1)):
                raise RuntimeError(f"torch-xla output {i} is wrong")
        del ys
        for _ in range(10):  # warm-up
            self.step_outputs()
        # Every timed step must hit the compile cache.
        self.uncached = met.counter_value("UncachedCompile") or 0

    def step_outputs(self):
        ys = [x + 1 for x in self.xs]
        torch_xla.sync()
        xm.wait_device_ops()
        return ys

    def run(self, n):
        xs_, clock = self.xs, time.perf_counter_ns
        met.clear_metrics()
        samples, phases = [], {"trace_ns": [], "sync_ns": [], "wait_ns": []}
        for _ in range(n):
            t0 = clock()
            ys = [x + 1 for x in xs_]
            t1 = clock()
            torch_xla.sync()
            t2 = clock()
            xm.wait_device_ops()
            del ys
            t3 = clock()
            samples.append(t3 - t0)
            phases["trace_ns"].append(t1 - t0)
            phases["sync_ns"].append(t2 - t1)
            phases["wait_ns"].append(t3 - t2)
        if (met.counter_value("UncachedCompile") or 0) != self.uncached:
            raise RuntimeError("a timed step compiled")
        return samples, phases


def serve(devices):
    def run(case, n):
        samples, phases = case.run(n)
        return {"samples_ns": samples, "execute_replicated_ns": execute_replicated_ns(), **phases}

    protocol.serve_cases(
        "torch-xla",
        lambda: {"torch": torch.__version__, "torch_xla": torch_xla.__version__,
                 "devices": xr.global_runtime_device_count(), "device_type": xr.device_type()},
        lambda k: Case(devices, k), run)


def main():
    if ARGS.serve:
        serve(ARGS.devices)
        return
    for k in [int(a) for a in ARGS.args.split(",")]:
        samples, phases = Case(ARGS.devices, k).run(ARGS.calls)
        metric = execute_replicated_ns()
        print(json.dumps({
            "arm": "torch-xla", "devices": ARGS.devices, "args": k,
            "median_us": statistics.median(samples) / 1e3,
            **{p[:-3] + "_median_us": statistics.median(v) / 1e3 for p, v in phases.items()},
            "execute_replicated_median_us": statistics.median(metric) / 1e3 if metric else None,
        }))


if __name__ == "__main__":
    main()
