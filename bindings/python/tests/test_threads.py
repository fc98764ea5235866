"""Python threads sharing one runtime, its arrays and computations (each thread checks its own
values against NumPy), and calls that release the GIL: another thread runs Python code while
one is inside a long device call. No timing is asserted."""

import threading

import numpy as np

from _util import module, random_array

TILE = "{devices=[4,2]<=[8]}"
ROWS = "{devices=[8,1]<=[8]}"

# z = x * w + b (elementwise), all 4x2 tiles; b is shared by every thread.
AXPB = module("axpb", [("x", "tensor<8x6xf32>", TILE), ("w", "tensor<8x6xf32>", TILE),
                      ("b", "tensor<8x6xf32>", TILE)],
              [("tensor<8x6xf32>", TILE), ("tensor<f32>", "{replicated}")], """
    %m = stablehlo.multiply %x, %w : tensor<8x6xf32>
    %z = stablehlo.add %m, %b : tensor<8x6xf32>
    %zero = stablehlo.constant dense<0.0> : tensor<f32>
    %s = stablehlo.reduce(%z init: %zero) applies stablehlo.add across dimensions = [0, 1]
        : (tensor<8x6xf32>, tensor<f32>) -> tensor<f32>
    return %z, %s : tensor<8x6xf32>, tensor<f32>
""")

# A loop of n steps (n given at run time, so it cannot be folded): acc = acc / 2 + x, and the
# step count. Long device work for the GIL test.
SPIN = module("spin", [("x", "tensor<8x64xf32>", ROWS), ("n", "tensor<i32>", "{replicated}")],
              [("tensor<8x64xf32>", ROWS), ("tensor<i32>", "{replicated}")], """
    %zero = stablehlo.constant dense<0> : tensor<i32>
    %r:3 = stablehlo.while(%i = %zero, %acc = %x, %k = %zero) : tensor<i32>, tensor<8x64xf32>, tensor<i32>
      cond {
        %lt = stablehlo.compare LT, %i, %n : (tensor<i32>, tensor<i32>) -> tensor<i1>
        stablehlo.return %lt : tensor<i1>
      } do {
        %one = stablehlo.constant dense<1> : tensor<i32>
        %half = stablehlo.constant dense<0.5> : tensor<8x64xf32>
        %i1 = stablehlo.add %i, %one : tensor<i32>
        %h = stablehlo.multiply %acc, %half : tensor<8x64xf32>
        %a1 = stablehlo.add %h, %x : tensor<8x64xf32>
        %k1 = stablehlo.add %k, %one : tensor<i32>
        stablehlo.return %i1, %a1, %k1 : tensor<i32>, tensor<8x64xf32>, tensor<i32>
      }
    return %r#1, %r#2 : tensor<8x64xf32>, tensor<i32>
""")


def run_threads(target, n):
    errors = []

    def wrapped(i):
        try:
            target(i)
        except BaseException as e:  # reported by the main thread
            errors.append((i, e))

    threads = [threading.Thread(target=wrapped, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert not any(t.is_alive() for t in threads), "a thread did not finish"
    if errors:
        raise AssertionError(f"thread {errors[0][0]} failed: {errors[0][1]!r}") from errors[0][1]


def test_threads_share_runtime_arrays_and_computation(rt):
    f = rt.compile(AXPB)
    b_host = random_array((8, 6), np.float32, 51)
    b = rt.put(b_host, TILE)  # shared by all threads

    def work(i):
        rng = np.random.default_rng(100 + i)
        for k in range(40):
            a = rng.standard_normal((8, 6)).astype(np.float32)
            w = rng.standard_normal((8, 6)).astype(np.float32)
            x, ww = rt.put(a, TILE), rt.put(w, TILE)
            if k % 2:
                z, s = f(x, ww, b)
            else:
                z, s = f.call_async(x, ww, b)
            ref = a * w + b_host
            # (XLA may fuse x * w + b into one rounding: not bit-equal to NumPy's two.)
            np.testing.assert_allclose(z.to_numpy(), ref, rtol=1e-6, atol=1e-6)
            np.testing.assert_allclose(s.to_numpy(), ref.sum(dtype=np.float64), rtol=1e-4,
                                       atol=1e-4)
            shard = z.shards[(i + k) % 8]
            np.testing.assert_allclose(shard.to_numpy(), ref[shard.index], rtol=1e-6, atol=1e-6)
        np.testing.assert_array_equal(b.to_numpy(), b_host)

    run_threads(work, 8)


def test_threads_compile_and_chain_concurrently(rt):
    def work(i):
        # Each thread compiles its own program (the constant differs) and the shared one.
        c = float(i + 1)
        text = module(f"add_{i}", [("x", "tensor<16xf32>", "{devices=[8]<=[8]}")],
                      [("tensor<16xf32>", "{devices=[8]<=[8]}")], f"""
            %c = stablehlo.constant dense<{c}> : tensor<16xf32>
            %y = stablehlo.add %x, %c : tensor<16xf32>
            return %y : tensor<16xf32>
        """)
        f = rt.compile(text)
        a = np.arange(16, dtype=np.float32) * (i + 1)
        x = rt.put(a, "{devices=[8]<=[8]}")
        ref = a.copy()
        for _ in range(100):
            (x,) = f.call_async(x)
            ref = ref + np.float32(c)
        np.testing.assert_array_equal(x.to_numpy(), ref)

    run_threads(work, 8)
    rt.synchronize()


def test_threads_share_one_placeholder_chain(rt):
    f = rt.compile(module("inc", [("x", "tensor<8x6xf32>", TILE)], [("tensor<8x6xf32>", TILE)], """
        %one = stablehlo.constant dense<1.0> : tensor<8x6xf32>
        %y = stablehlo.add %x, %one : tensor<8x6xf32>
        return %y : tensor<8x6xf32>
    """))
    a = random_array((8, 6), np.float32, 52)
    x = rt.put(a, TILE)
    for _ in range(300):
        (x,) = f.call_async(x)
    ref = a.copy()
    for _ in range(300):
        ref = ref + np.float32(1)
    results = [None] * 8

    def wait(i):  # all threads wait on (and read) the same placeholder
        results[i] = x.block_until_ready().to_numpy()

    run_threads(wait, 8)
    for r in results:
        np.testing.assert_array_equal(r, ref)


def test_threads_delete_and_read_the_same_array(rt):
    # delete() racing reads: every read either succeeds with the right values or says deleted.
    a = random_array((16, 8), np.float32, 53)
    for _ in range(5):
        x = rt.put(a, ROWS)

        def use(i):
            if i == 0:
                x.delete()
                return
            for _ in range(20):
                try:
                    np.testing.assert_array_equal(x.to_numpy(), a)
                except ValueError as e:
                    assert "deleted" in str(e)

        run_threads(use, 4)
        assert x.is_deleted


def main_thread_progress_during(call):
    """Runs `call` (long device work) repeatedly in a worker thread while this thread loops,
    yielding the GIL every iteration (time.sleep(0)), and counts its iterations during each
    call. Were the GIL held for a call, this thread could only run between calls (a handful of
    iterations per call); with it released it runs throughout. The worker stops once a call saw
    100 iterations, or after 30 calls. Returns the counts per call."""
    import time

    state = {"call": 0, "returned": 0, "stop": False}
    during = {}
    errors = []

    def worker():
        try:
            for k in range(1, 31):
                if state["stop"]:
                    break
                state["call"] = k
                call()
                state["returned"] = k
        except BaseException as e:
            errors.append(e)
            state["returned"] = state["call"]

    t = threading.Thread(target=worker)
    t.start()
    deadline = time.monotonic() + 300  # 30 calls take seconds; a hung call fails the test
    while t.is_alive() and time.monotonic() < deadline:
        call_now, returned = state["call"], state["returned"]
        if call_now != returned:  # inside call `call_now`
            during[call_now] = during.get(call_now, 0) + 1
            if during[call_now] >= 100:
                state["stop"] = True
        time.sleep(0)
    state["stop"] = True
    t.join(timeout=60)
    assert not t.is_alive(), "the worker thread did not finish"
    if errors:
        raise errors[0]
    return during


def test_calls_and_waits_release_the_gil(rt):
    f = rt.compile(SPIN)
    x = rt.put(np.ones((8, 64), np.float32), ROWS)
    n = rt.put(np.int32(10_000_000))
    results = []

    def call():  # the launch returns before the device is done: the call and its wait
        acc, count = f(x, n)
        results.append((acc.block_until_ready(), count))

    during = main_thread_progress_during(call)
    assert max(during.values(), default=0) >= 100, during
    for acc, count in results:  # and the work itself is right
        assert count.to_numpy() == 10_000_000
        np.testing.assert_allclose(acc.to_numpy(), 2.0, rtol=1e-6)


def test_waits_release_the_gil(rt):
    # The long part is the wait: call_async returns at once, to_numpy waits for the result.
    f = rt.compile(SPIN)
    x = rt.put(np.ones((8, 64), np.float32), ROWS)
    n = rt.put(np.int32(10_000_000))
    counts = []

    def call():
        (acc, count) = f.call_async(x, n)
        counts.append(count.to_numpy())

    during = main_thread_progress_during(call)
    assert max(during.values(), default=0) >= 100, during
    assert all(c == 10_000_000 for c in counts)
