"""Metrics (PyTorch/XLA style) and Chrome traces of shardrt's spans, through Python."""

import json
import os
import threading

import numpy as np
import pytest

import shardrt
from _util import WAIT_S, random_array

ROWS = "{devices=[8,1]<=[8]}"


@pytest.fixture(scope="module")
def add_one(rt, testdata):
    return rt.compile(open(f"{testdata}/donate_add_one.mlir").read())


def test_metrics_after_a_call(rt, add_one):
    x = rt.put(random_array((16, 4), np.float32), ROWS)
    before = shardrt.metrics()
    add_one(x)[0].to_numpy()
    m = shardrt.metrics()
    assert isinstance(m, dict) and set(m) >= {"metrics", "counters"}
    execute = m["metrics"]["ExecuteReplicatedTime"]
    assert execute["repr"] == "time"
    old = before["metrics"].get("ExecuteReplicatedTime", {}).get("total_samples", 0)
    assert execute["total_samples"] == old + 1
    assert execute["accumulator"] > 0
    assert set(execute["percentiles"]) >= {"50", "90", "99"}
    assert "TransferToDeviceTime" in m["metrics"]
    report = shardrt.metrics_report()
    assert isinstance(report, str)
    assert "Metric: ExecuteReplicatedTime" in report
    assert "TotalSamples:" in report


def test_metrics_reset_and_counts(rt, add_one):
    rt.synchronize()  # no earlier call_async still running into the metrics
    shardrt.metrics_reset()
    assert shardrt.metrics() == {"metrics": {}, "counters": {}}
    assert "ExecuteReplicatedTime" not in shardrt.metrics_report()
    x = rt.put(random_array((16, 4), np.float32), ROWS)
    for _ in range(5):
        (x,) = add_one(x)
    x.to_numpy()
    m = shardrt.metrics()
    assert m["metrics"]["ExecuteReplicatedTime"]["total_samples"] == 5
    assert m["metrics"]["TransferToDeviceTime"]["total_samples"] == 1
    assert m["metrics"]["InboundData"]["accumulator"] == 16 * 4 * 4
    # Compiling a program again hits the compile cache.
    rt.compile(open(os.path.join(os.path.dirname(__file__), "..", "..", "..", "tests",
                                 "testdata", "donate_add_one.mlir")).read())
    assert shardrt.metrics()["counters"].get("CachedCompile", 0) >= 1


def test_trace_writes_chrome_json(rt, add_one, tmp_path):
    path = tmp_path / "trace.json"
    x = rt.put(random_array((16, 4), np.float32), ROWS)
    with rt.trace(path):
        (y,) = add_one(x)
        y.to_numpy()
        (z,) = add_one.call_async(y)
        z.block_until_ready(timeout=WAIT_S)
    data = json.loads(path.read_text())
    events = data["traceEvents"] if isinstance(data, dict) else data
    names = {e.get("name") for e in events}
    assert "ExecuteReplicated" in names
    assert "TransferFromDevice" in names
    spans = [e for e in events if e.get("name") == "ExecuteReplicated"]
    assert len(spans) >= 2  # the direct call and the executor's
    for e in spans:
        assert e["ph"] in ("X", "B", "E") and "ts" in e and "pid" in e and "tid" in e
    # Nothing is recorded outside the block.
    add_one(z)
    assert json.loads(path.read_text()) == data


def test_trace_accepts_str_paths_and_threads(rt, tmp_path):
    path = str(tmp_path / "threads.json")
    a = random_array((8, 8), np.float32)

    def work():
        for _ in range(5):
            rt.put(a, ROWS).to_numpy()

    with rt.trace(path):
        threads = [threading.Thread(target=work) for _ in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=300)
        assert not any(t.is_alive() for t in threads), "a thread did not finish"
    events = json.load(open(path))["traceEvents"]
    assert sum(e.get("name") == "TransferToDevice" for e in events) >= 15


def test_trace_to_an_unwritable_path_raises(rt, tmp_path):
    with pytest.raises(RuntimeError, match="cannot write trace file"):
        with rt.trace(tmp_path / "no" / "such" / "dir" / "t.json"):
            rt.put(np.zeros(4, np.float32)).to_numpy()
