"""call_async: placeholder arrays, chains of 1,000 dependent steps (each output feeds the next)
with the value NumPy computes, rt.synchronize(), block_until_ready(), and errors that surface
through a chain's outputs and through synchronize."""

import os

import numpy as np
import pytest

import shardrt
from _util import TESTDATA, WAIT_S, module, random_array

TILE = "{devices=[4,2]<=[8]}"
ROWS = "{devices=[8,1]<=[8]}"

ADD_ONE = module("add_one", [("x", "tensor<8x6xf32>", TILE)], [("tensor<8x6xf32>", TILE)], """
    %one = stablehlo.constant dense<1.0> : tensor<8x6xf32>
    %y = stablehlo.add %x, %one : tensor<8x6xf32>
    return %y : tensor<8x6xf32>
""")

# y = 0.5 x + c, uneven rows, c replicated: a contraction towards 2c.
AFFINE = module("affine", [("x", "tensor<13x3xf64>", ROWS), ("c", "tensor<13x3xf64>", "{replicated}")],
                [("tensor<13x3xf64>", ROWS)], """
    %half = stablehlo.constant dense<0.5> : tensor<13x3xf64>
    %h = stablehlo.multiply %x, %half : tensor<13x3xf64>
    %y = stablehlo.add %h, %c : tensor<13x3xf64>
    return %y : tensor<13x3xf64>
""")

ADD = module("add2", [("x", "tensor<8x6xf32>", TILE), ("y", "tensor<8x6xf32>", TILE)],
             [("tensor<8x6xf32>", TILE)], """
    %z = stablehlo.add %x, %y : tensor<8x6xf32>
    return %z : tensor<8x6xf32>
""")


def add_one_ref(a, steps):
    ref = a.copy()
    for _ in range(steps):
        ref = ref + np.float32(1)
    return ref


def test_chain_of_1000_steps(rt):
    f = rt.compile(ADD_ONE)
    a = random_array((8, 6), np.float32, 41)
    x0 = rt.put(a, TILE)
    x = x0
    states = []
    outputs = []
    for _ in range(1000):
        (x,) = f.call_async(x)
        states.append(x.state)
        outputs.append(x)
    assert set(states) <= {"pending", "ready"}
    # Each step waits for the one before it: right after scheduling, some are still pending.
    assert "pending" in states
    for o in outputs[::97]:
        assert o.is_ready == (o.state != "pending")
    assert x.block_until_ready(timeout=WAIT_S) is x
    assert x.state == "ready" and x.is_ready
    np.testing.assert_array_equal(x.to_numpy(), add_one_ref(a, 1000))
    rt.synchronize()
    assert all(o.state == "ready" for o in outputs)
    np.testing.assert_array_equal(outputs[499].to_numpy(), add_one_ref(a, 500))
    np.testing.assert_array_equal(x0.to_numpy(), a)  # not donated


def test_donating_chain_of_1000_steps(rt, testdata):
    f = rt.compile(open(f"{testdata}/donate_add_one.mlir").read())
    a = random_array((16, 4), np.float32, 42)
    x0 = rt.put(a, ROWS)
    x = x0
    for _ in range(1000):
        (x,) = f.call_async(x)
    np.testing.assert_array_equal(x.to_numpy(), add_one_ref(a, 1000))
    rt.synchronize()
    assert x0.state == "donated"


def test_uneven_chain_with_two_arguments(rt):
    f = rt.compile(AFFINE)
    a = random_array((13, 3), np.float64, 43)
    c = random_array((13, 3), np.float64, 44)
    x, cc = rt.put(a, ROWS), rt.put(c)
    ref = a.copy()
    for _ in range(300):
        (x,) = f.call_async(x, cc)
        ref = ref * 0.5 + c
    rt.synchronize()
    assert x.state == "ready"
    np.testing.assert_allclose(x.to_numpy(), ref, rtol=1e-12)


def test_diamond_of_placeholders(rt):
    f, g = rt.compile(ADD_ONE), rt.compile(ADD)
    a = random_array((8, 6), np.float32, 45)
    x = rt.put(a, TILE)
    (p,) = f.call_async(x)
    (q,) = f.call_async(p)
    (r,) = g.call_async(p, q)     # two placeholders in
    (s,) = g.call_async(r, r)     # the same placeholder twice (nothing donated)
    p1 = a + np.float32(1)
    q1 = p1 + np.float32(1)
    np.testing.assert_array_equal(s.to_numpy(), (p1 + q1) + (p1 + q1))
    # Placeholders mix with synchronous calls.
    (t,) = f(s)
    np.testing.assert_array_equal(t.to_numpy(), (p1 + q1) * 2 + np.float32(1))


def test_block_until_ready_with_timeout(rt):
    f = rt.compile(ADD_ONE)
    a = random_array((8, 6), np.float32, 46)
    x = rt.put(a, TILE)
    assert x.block_until_ready(timeout=60) is x  # a ready array returns at once
    for _ in range(200):
        (x,) = f.call_async(x)
    try:
        x.block_until_ready(timeout=0)  # maybe done already: either is right
    except TimeoutError as e:
        assert "pending" in str(e)
    assert x.block_until_ready(timeout=120) is x
    np.testing.assert_array_equal(x.to_numpy(), add_one_ref(a, 200))


def test_outputs_of_call_async_are_usable_everywhere(rt):
    f = rt.compile(ADD_ONE)
    a = random_array((8, 6), np.float32, 47)
    (y,) = f.call_async(rt.put(a, TILE))
    ref = a + np.float32(1)
    # Without an explicit wait: shards, downloads, reshard all wait for the placeholder.
    np.testing.assert_array_equal(np.asarray(y), ref)
    (y2,) = f.call_async(rt.put(a, TILE))
    out = np.empty_like(a)
    y2.download_into(out)
    np.testing.assert_array_equal(out, ref)
    (y3,) = f.call_async(rt.put(a, TILE))
    shard = y3.shards[5]
    np.testing.assert_array_equal(shard.to_numpy(), ref[shard.index])
    (y4,) = f.call_async(rt.put(a, TILE))
    np.testing.assert_array_equal(rt.reshard(y4, ROWS).to_numpy(), ref)
    (y5,) = f.call_async(rt.put(a, TILE))
    np.testing.assert_array_equal(np.from_dlpack(y5.shards[0]), ref[y5.shards[0].index])


def test_executor_counts(rt):
    f = rt.compile(ADD_ONE)
    rt.synchronize()
    before = rt.executor_stats()
    assert set(before) >= {"scheduled", "dispatched", "failed", "in_flight", "device_pending"}
    x = rt.put(np.zeros((8, 6), np.float32), TILE)
    for _ in range(50):
        (x,) = f.call_async(x)
    rt.synchronize()
    after = rt.executor_stats()
    assert after["scheduled"] - before["scheduled"] == 50
    assert after["dispatched"] - before["dispatched"] == 50
    assert after["failed"] == before["failed"]
    assert after["in_flight"] == 0


def test_small_in_flight_limit():
    rt = shardrt.Runtime(devices=8, max_in_flight=1, compile_cache="")
    f = rt.compile(ADD_ONE)
    a = random_array((8, 6), np.float32, 48)
    x = rt.put(a, TILE)
    for _ in range(100):
        (x,) = f.call_async(x)
    np.testing.assert_array_equal(x.to_numpy(), add_one_ref(a, 100))
    rt.synchronize()


def test_an_error_in_a_chain_surfaces(testdata):
    # A runtime of its own: synchronize() reports the errors of every call_async since the last.
    rt = shardrt.Runtime(devices=8, compile_cache="")
    f = rt.compile(open(f"{testdata}/donate_add_one.mlir").read())
    a = random_array((16, 4), np.float32, 49)
    x0 = rt.put(a, ROWS)
    (good,) = f.call_async(x0)          # donates x0 when it runs
    (bad,) = f.call_async(x0)           # x0 is (or will be) donated: this step fails
    chain = [bad]
    for _ in range(5):                  # and every step after it fails with it
        (nxt,) = f.call_async(chain[-1])
        chain.append(nxt)
    with pytest.raises(ValueError, match="donated"):
        chain[-1].block_until_ready(timeout=WAIT_S)
    for c in chain:
        with pytest.raises(ValueError, match="donated"):
            c.to_numpy()
        assert c.state == "failed" and c.is_ready
    with pytest.raises(ValueError, match="donated"):
        rt.synchronize()
    rt.synchronize()  # reported once
    assert rt.executor_stats()["failed"] >= 1
    # The good branch and the runtime are fine.
    np.testing.assert_array_equal(good.to_numpy(), a + 1)
    y = good
    for _ in range(10):
        (y,) = f.call_async(y)
    np.testing.assert_array_equal(y.to_numpy(), add_one_ref(a + 1, 10))
    rt.synchronize()


def test_a_mismatching_argument_fails_its_outputs():
    rt = shardrt.Runtime(devices=8, compile_cache="")
    f = rt.compile(ADD_ONE)
    wrong = rt.put(np.zeros((8, 6), np.float32), ROWS)  # another sharding
    (y,) = f.call_async(wrong)
    with pytest.raises(ValueError, match=r"expected f32\[8,6\]"):
        y.block_until_ready(timeout=WAIT_S)
    assert y.state == "failed"
    with pytest.raises(ValueError, match=r"expected f32\[8,6\]"):
        rt.synchronize()
    with pytest.raises(ValueError, match="got 0 arguments"):
        f.call_async()
    with pytest.raises(TypeError, match="expected shardrt.Array"):
        f.call_async(np.zeros((8, 6), np.float32))


# Needs a 128 GiB temporary per device (the C++ execution-failure test's program too).
OUT_OF_MEMORY = open(os.path.join(TESTDATA, "out_of_memory.mlir")).read()


def _huge_allocations_fail():
    """Linux refuses a 128 GiB allocation here (overcommit heuristic or strict, and far less
    memory than that): the out-of-memory program then fails at once instead of running."""
    try:
        mode = int(open("/proc/sys/vm/overcommit_memory").read())
        info = dict(line.split(":", 1) for line in open("/proc/meminfo"))
        kib = int(info["MemTotal"].split()[0]) + int(info["SwapTotal"].split()[0])
    except (OSError, ValueError, KeyError):
        return False
    return mode in (0, 2) and kib < 64 * 1024 * 1024


@pytest.mark.skipif(not _huge_allocations_fail(), reason="a 128 GiB allocation might succeed")
def test_a_plugin_failure_in_a_chain_surfaces():
    # docs/errors.md: a program that fails while it runs (the plugin cannot allocate its
    # 128 GiB temporary) is an error with the plugin's message, and the runtime goes on.
    rt = shardrt.Runtime(devices=8, compile_cache="")
    oom = rt.compile(OUT_OF_MEMORY)
    triple = rt.compile(module("triple", [("x", "tensor<f32>", "{replicated}")],
                               [("tensor<f32>", "{replicated}")], """
        %three = stablehlo.constant dense<3.0> : tensor<f32>
        %y = stablehlo.multiply %x, %three : tensor<f32>
        return %y : tensor<f32>
    """))
    x = rt.put(np.float32(2))
    (failed,) = oom.call_async(x)
    (after,) = triple.call_async(failed)  # depends on the failed output: fails with it
    with pytest.raises(RuntimeError, match="Out of memory"):
        after.block_until_ready(timeout=WAIT_S)
    with pytest.raises(RuntimeError, match="Out of memory"):
        failed.to_numpy()
    with pytest.raises(RuntimeError, match="Out of memory"):
        rt.synchronize()
    with pytest.raises(RuntimeError, match="Out of memory"):
        oom(x)[0].to_numpy()
    (good,) = triple.call_async(x)
    assert good.to_numpy() == np.float32(6)
    rt.synchronize()
