"""Bad input is a Python exception with the library's message (ValueError for bad arguments,
TypeError for wrong Python types, RuntimeError for the plugin's failures), never a crash. The
rows of docs/errors.md that apply to Python are checked through Python. Inputs that could bring
down the interpreter run in subprocesses, which must exit normally."""

import json
import os
import textwrap

import numpy as np
import pytest

import shardrt
from _util import TESTDATA, module, random_array, run_python

ROWS = "{devices=[8,1]<=[8]}"


@pytest.fixture(scope="module")
def add_one(rt, testdata):
    return rt.compile(open(f"{testdata}/donate_add_one.mlir").read())


# --- calls ------------------------------------------------------------------------------------

def test_wrong_argument_count(rt, add_one):
    x = rt.put(np.zeros((16, 4), np.float32), ROWS)
    with pytest.raises(ValueError, match="main: got 0 arguments, expected 1"):
        add_one()
    with pytest.raises(ValueError, match="main: got 2 arguments, expected 1"):
        add_one(x, x, donate=False)
    assert x.state == "ready"


@pytest.mark.parametrize("arg", [np.zeros((16, 4), np.float32), 1.0, None, "x", [1, 2]],
                         ids=["ndarray", "float", "None", "str", "list"])
def test_wrong_argument_type(add_one, arg):
    with pytest.raises(TypeError, match="argument 0 is a .*, expected shardrt.Array"):
        add_one(arg)


@pytest.mark.parametrize("shape,dtype,sharding,got", [
    ((8, 4), np.float32, ROWS, r"f32\[8,4\] \{devices=\[8,1\]<=\[8\]\} on 8 devices"),
    ((16, 4), np.float64, ROWS, r"f64\[16,4\]"),
    ((16, 4), np.int32, ROWS, r"s32\[16,4\]"),
    ((16, 4), np.float32, "{devices=[4,2]<=[8]}", r"f32\[16,4\] \{devices=\[4,2\]<=\[8\]\}"),
    ((16, 4), np.float32, "{replicated}", r"f32\[16,4\] \{replicated\}"),
    ((16, 4), np.float32, "{devices=[4,1]<=[4]}", r"on 4 devices"),
    ((4, 16), np.float32, ROWS, r"f32\[4,16\]"),
])
def test_wrong_shape_type_or_sharding_names_expected_and_got(rt, add_one, shape, dtype,
                                                             sharding, got):
    x = rt.put(np.zeros(shape, dtype), sharding)
    expected = r"main: argument 0 expected f32\[16,4\] \{devices=\[8,1\]<=\[8\]\} on 8 devices, got "
    with pytest.raises(ValueError, match=expected + ".*" + got):
        add_one(x)
    assert x.state == "ready"  # refused before anything ran


def test_same_sharding_on_other_devices_is_refused(rt, add_one):
    x = rt.put(np.zeros((16, 4), np.float32), ROWS, devices=list(range(7, -1, -1)))
    with pytest.raises(ValueError, match="argument 0 expected"):
        add_one(x)


def test_call_keywords(rt, add_one):
    x = rt.put(np.zeros((16, 4), np.float32), ROWS)
    with pytest.raises(TypeError):
        add_one(x=x)
    with pytest.raises(TypeError):
        add_one(x, reshard="yes please")


# --- arrays and shardings -----------------------------------------------------------------------

@pytest.mark.parametrize("text,message", [
    ("{devices=[8,1]<=[8", "position 18: expected ',' or ']'"),
    ("{garbage}", "expected 'replicated', 'maximal', 'manual' or 'devices'"),
    ("", "expected '{'"),
    ("{devices=[-1]<=[1]}", "must not be negative"),
    ("{devices=[0]<=[0]}", "tile dim must be positive"),
    ("{devices=[2]0,0}", "duplicate device id 0"),
    ("{devices=[2]0,9}", r"device id 9 out of range \[0, 2\)"),
    ("{devices=[2]<=[3]}", "hold 3 devices but tile dims"),
    ("{devices=[4,2]<=[2,4]T(0,0)}", "not a permutation"),
    ("{devices=[99999999999999999999]<=[1]}", "does not fit in int64"),
    ("{devices=[1048577]<=[1048577]}", "need more than 1048576 devices"),
    ("{devices=[" + ",".join(["1"] * 70) + "]<=[1]}", "the limit is 66"),
])
def test_bad_sharding_text(text, message):
    with pytest.raises(ValueError, match=message):
        shardrt.Sharding(text)


def test_sharding_text_length_limit():
    with pytest.raises(ValueError, match="the limit is 16777216"):
        shardrt.Sharding("{replicated}" + " " * (16 << 20))


@pytest.mark.parametrize("text,message", [
    ("{devices=[8,1,1]<=[8]}", "sharding has rank 3 but the array has rank 2"),
    ("{devices=[8]<=[8]}", "sharding has rank 1 but the array has rank 2"),
    ("{devices=[16,1]<=[16]}", "asked for 16 devices, the client has 8"),
    ("{maximal device=9}", r"maximal device 9 out of range \[0, 8\)"),
    ("{manual}", "data cannot have a manual sharding"),
    # docs/errors.md: a partially manual sharding (XLA aborted on it)
    ("{devices=[2,1,2]<=[4] last_tile_dims={manual}}", "data cannot have a manual sharding or manual subgroups"),
])
def test_sharding_that_does_not_fit(rt, text, message):
    with pytest.raises(ValueError, match=message):
        rt.put(np.zeros((13, 5), np.float32), text)


def test_device_ids(rt):
    a = np.zeros((4, 4), np.float32)
    with pytest.raises(ValueError, match="device id 9 is not one of the runtime's 8 devices"):
        rt.put(a, "{devices=[2,1]<=[2]}", devices=[0, 9])
    with pytest.raises(ValueError, match="device id -1 is not one of"):
        rt.put(a, "{devices=[2,1]<=[2]}", devices=[-1, 0])
    with pytest.raises(ValueError, match="the sharding uses 2 devices but the device count is 3"):
        rt.put(a, "{devices=[2,1]<=[2]}", devices=[0, 1, 2])
    with pytest.raises(ValueError, match="device id 8 is not one of"):
        rt.from_dlpack(a, device=8)
    with pytest.raises(TypeError):
        rt.put(a, "{devices=[2,1]<=[2]}", devices=["a", "b"])


def test_device_listed_twice(rt):
    a = np.zeros((4, 4), np.float32)
    with pytest.raises(ValueError, match=r"data layout lists device 0 more than once \(devices 0,0\)"):
        rt.put(a, "{devices=[2,1]<=[2]}", devices=[0, 0])
    np.testing.assert_array_equal(rt.put(a, "{devices=[2,1]<=[2]}", devices=[1, 0]).to_numpy(), a)


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
def test_unsupported_dtype(rt, dtype):
    with pytest.raises(ValueError, match="unsupported element type"):
        rt.put(np.zeros((4, 4), dtype))


@pytest.mark.parametrize("value", [np.array(["ab", "cd"]), np.array([object(), 1]),
                                   np.zeros(2, dtype=[("a", np.int32)]), np.zeros(2, "V4"),
                                   np.array(["2026-12-02"], "datetime64[D]")],
                         ids=["str", "object", "structured", "void", "datetime"])
def test_non_numeric_arrays(rt, value):
    # One line naming the dtype, not the extension's signature.
    with pytest.raises(TypeError, match=r"^expected an array of numbers or booleans, got dtype "
                                        r".+ \(.+\), which has no device element type$"):
        rt.put(value)


def test_sharding_argument_type(rt):
    with pytest.raises(TypeError, match="expected a shardrt.Sharding, sharding text or None"):
        rt.put(np.zeros(4), 5)
    with pytest.raises(TypeError):
        shardrt.Sharding(None)


def test_put_shards_errors(rt):
    p = np.zeros((2, 5), np.float32)
    with pytest.raises(ValueError, match="put_shards: no shards"):
        rt.put_shards([], (13, 5), ROWS)
    with pytest.raises(ValueError, match="got 7 shards for 8 devices"):
        rt.put_shards([p] * 7, (13, 5), ROWS)
    with pytest.raises(ValueError, match=r"shard for device 0 has 60 bytes, expected 40 \(f32\[2,5\]\)"):
        rt.put_shards([np.zeros((3, 5), np.float32)] * 8, (13, 5), ROWS)
    with pytest.raises(ValueError, match="shard 7 has another element type than shard 0"):
        rt.put_shards([p] * 7 + [p.astype(np.float64)], (13, 5), ROWS)
    with pytest.raises(ValueError, match="negative"):
        rt.put_shards([p] * 8, (-13, 5), ROWS)
    with pytest.raises(ValueError, match="overflows int64"):
        rt.put_shards([p] * 8, (2**62, 2**62), ROWS)


def test_runtime_arguments():
    with pytest.raises(ValueError, match="^Runtime: devices must be >= 0, got -1$"):
        shardrt.Runtime(devices=-1)
    with pytest.raises(ValueError, match="^Runtime: devices is 5000; the limit is 1024$"):
        shardrt.Runtime(devices=5000)
    with pytest.raises(ValueError, match="^Runtime: host_threads must be >= 0, got -2$"):
        shardrt.Runtime(host_threads=-2)
    with pytest.raises(ValueError, match="no PJRT plugin found.*'/nonexistent.so' \\(no such file\\)"):
        shardrt.Runtime(plugin="/nonexistent.so")
    with pytest.raises(ValueError, match="is not a loadable PJRT plugin"):
        shardrt.Runtime(plugin=__file__)
    with pytest.raises(ValueError, match="max_in_flight must be >= 0, got -1"):
        shardrt.Runtime(devices=8, max_in_flight=-1)
    with pytest.raises(ValueError, match="host_threads must be >= 0"):
        shardrt.Runtime(devices=1, host_threads=-1)


def test_plugin_from_the_environment(monkeypatch):
    monkeypatch.setenv("SHARDRT_PJRT_PLUGIN", "/nope/plugin.so")
    assert shardrt.default_plugin() == "/nope/plugin.so"
    with pytest.raises(ValueError, match="/nope/plugin.so"):
        shardrt.Runtime(devices=1)


# --- programs -----------------------------------------------------------------------------------

def test_compile_types(rt):
    with pytest.raises(TypeError, match="compile takes StableHLO text"):
        rt.compile(123)
    with pytest.raises(TypeError):
        rt.compile(None)
    with pytest.raises(ValueError, match="the program is empty"):
        rt.compile("")


def test_bad_program_text(rt):
    with pytest.raises(RuntimeError, match="error"):
        rt.compile("hello world")
    with pytest.raises(RuntimeError, match="error"):
        rt.compile(b"\x00\x01\x02garbage")


def test_declared_partitions_against_devices(rt, testdata):
    text = open(f"{testdata}/donate_add_one.mlir").read()
    with pytest.raises(ValueError, match="declares mhlo.num_partitions = 8 but is compiled for 4 partitions"):
        rt.compile(text, devices=4)
    with pytest.raises(ValueError, match="asked for 16 devices, the client has 8"):
        rt.compile(text.replace("num_partitions = 8", "num_partitions = 16"))
    # Declares 4 partitions, its shardings need 8: the plugin says so.
    with pytest.raises(ValueError, match="should have 4 devices but has 8"):
        rt.compile(text.replace("num_partitions = 8", "num_partitions = 4")
                   .replace("donate_add_one", "four_of_eight"))


def sig_module(sig_in, sig_out, body, partitions=1):
    return (f"module @m attributes {{mhlo.num_partitions = {partitions} : i32, "
            f"mhlo.num_replicas = 1 : i32}} {{\n  func.func public @main({sig_in}) -> ({sig_out}) {{\n"
            f"{textwrap.indent(textwrap.dedent(body).strip(), '    ')}\n  }}\n}}\n")


# Programs docs/errors.md lists (and more): (id, program, exception, message fragment).
BAD_PROGRAMS = [
    ("overflowing parameter",
     sig_module("%x: tensor<4294967296x4294967296xf32>", "tensor<f32>", """
        %z = stablehlo.constant dense<0.0> : tensor<f32>
        return %z : tensor<f32>"""),
     "ValueError", "@main argument 0 at line 2: the element count of tensor<4294967296x4294967296xf32>"),
    ("overflowing intermediate",
     sig_module("%x: tensor<f32>", "tensor<f32>", """
        %i = stablehlo.iota dim = 0 : tensor<4294967296x4294967296xf32>
        return %x : tensor<f32>"""),
     "ValueError", "a tensor type at line 3: the element count of tensor<"),
    ("bytes overflow",
     sig_module("%x: tensor<2305843009213693952xf64>", "tensor<f32>", """
        %z = stablehlo.constant dense<0.0> : tensor<f32>
        return %z : tensor<f32>"""),
     "ValueError", "has more bytes than fit in int64"),
    ("complex result",
     sig_module("%x: tensor<4xf32>", "tensor<4xcomplex<f32>>", """
        %c = stablehlo.complex %x, %x : tensor<4xcomplex<f32>>
        return %c : tensor<4xcomplex<f32>>"""),
     "ValueError", "@main result 0 has element type 'complex<f32>', which shardrt does not support"),
    ("dynamic dimension",
     sig_module("%x: tensor<?x4xf32>", "tensor<?x4xf32>", "return %x : tensor<?x4xf32>"),
     "ValueError", "@main argument 0 has a dynamic dimension ('?')"),
    ("non-tensor parameter",
     sig_module("%x: i32", "i32", "return %x : i32"),
     "ValueError", "expected a tensor type"),
    ("huge declared partitions",
     sig_module("%x: tensor<f32>", "tensor<f32>", "return %x : tensor<f32>",
                partitions="9" * 50_000),
     "ValueError", "expected a number that fits in int64"),
    ("declared replicas",
     sig_module("%x: tensor<f32>", "tensor<f32>", "return %x : tensor<f32>").replace(
         "num_replicas = 1", "num_replicas = 2"),
     "ValueError", "declares mhlo.num_replicas = 2 but is compiled for 1 replicas"),
    ("zero partitions",
     sig_module("%x: tensor<f32>", "tensor<f32>", "return %x : tensor<f32>", partitions=0),
     "ValueError", "num_partitions must be >= 1"),
    ("unterminated attribute dictionary",
     "module @m attributes {mhlo.num_partitions = 1 : i32\n func.func @main() {",
     "Error", ""),
    ("unterminated string", 'module @m attributes {mhlo.num_partitions = 1 : i32, x = "abc',
     "Error", ""),
    ("no main",
     "module @m {\n func.func public @other(%x: tensor<f32>) -> tensor<f32> {\n"
     "  return %x : tensor<f32>\n }\n}",
     "RuntimeError", "main"),
    ("type mismatch",
     sig_module("%x: tensor<4xf32>", "tensor<4xf32>", """
        %y = stablehlo.add %x, %x : tensor<4xi32>
        return %y : tensor<4xf32>"""),
     "RuntimeError", "expects different type"),
    ("nul bytes", "\x00" * 100, "RuntimeError", "error"),
    # Refused by shardrt's own reading of the bytecode's frames, before the plugin.
    ("bytecode magic and garbage", b"ML\xefR" + b"\x00\xff" * 50, "ValueError",
     "malformed MLIR bytecode: unknown section id 127"),
    ("sharding for more devices than partitions",
     sig_module('%x: tensor<4xf32> {mhlo.sharding = "{devices=[8]<=[8]}"}', "tensor<4xf32>",
                "return %x : tensor<4xf32>", partitions=4),
     "ValueError", "should have 4 devices but has 8"),
    ("manual argument sharding",
     sig_module('%x: tensor<4x4xf32> {mhlo.sharding = "{devices=[2,1,2]<=[4] last_tile_dims={manual}}"}',
                "tensor<4x4xf32>", "return %x : tensor<4x4xf32>", partitions=4),
     "Error", ""),
]

RUNNER = r"""
import json, sys, traceback
import numpy as np
import shardrt
rt = shardrt.Runtime(devices=8, compile_cache="")
def report(name, fn):
    print("START " + name, flush=True)
    try:
        r = fn()
        out = {"name": name, "exc": None, "msg": repr(r)[:300]}
    except BaseException as e:
        out = {"name": name, "exc": type(e).__name__, "msg": str(e)[:2000]}
    print("RESULT " + json.dumps(out), flush=True)
"""


def run_cases(body: str, timeout: float = 120) -> dict:
    """Runs RUNNER + body in a subprocess; checks it exited normally; returns name -> result."""
    result = run_python(RUNNER + textwrap.dedent(body) + '\nprint("ALL DONE", flush=True)\n',
                        timeout=timeout)
    started = [ln[6:] for ln in result.stdout.splitlines() if ln.startswith("START ")]
    assert result.returncode == 0, (
        f"the interpreter died (exit {result.returncode}) in case {started[-1:]}: "
        f"{result.stderr[-3000:]}")
    assert "ALL DONE" in result.stdout, result.stderr[-3000:]
    return {r["name"]: r for r in (json.loads(ln[7:]) for ln in result.stdout.splitlines()
                                   if ln.startswith("RESULT "))}


OK_PROGRAM = module("ok", [("x", "tensor<16xf32>", "{devices=[8]<=[8]}")],
                    [("tensor<16xf32>", "{devices=[8]<=[8]}")], """
    %y = stablehlo.add %x, %x : tensor<16xf32>
    return %y : tensor<16xf32>
""")


def test_bad_programs_in_a_subprocess():
    cases = {name: program for name, program, _, _ in BAD_PROGRAMS}
    body = f"""
cases = {cases!r}
for name, program in cases.items():
    report(name, lambda: rt.compile(program))
# The runtime still works after all that.
f = rt.compile({OK_PROGRAM!r})
x = rt.put(np.arange(16, dtype=np.float32), "{{devices=[8]<=[8]}}")
report("still works", lambda: f(x)[0].to_numpy().tolist())
"""
    results = run_cases(body)
    for name, _, exc, fragment in BAD_PROGRAMS:
        r = results[name]
        assert r["exc"] is not None, f"{name}: compiled"
        if exc == "Error":
            assert r["exc"] in ("ValueError", "RuntimeError"), (name, r)
        else:
            assert r["exc"] == exc, (name, r)
        assert fragment in r["msg"], (name, r)
        assert r["msg"].strip(), (name, r)
    assert results["still works"]["msg"] == repr([2.0 * i for i in range(16)])


def test_crash_prone_inputs_in_a_subprocess(testdata):
    body = f"""
add_one = rt.compile(open({os.path.join(testdata, "donate_add_one.mlir")!r}).read())
a = np.arange(65, dtype=np.float32).reshape(13, 5)
x = rt.put(a, "{{devices=[8,1]<=[8]}}")
report("rank 64", lambda: rt.put(np.zeros((1,) * 64, np.float32)).shape)
report("rank 64 split", lambda: rt.put(np.zeros((8,) + (1,) * 63, np.float32), "{{devices=[8" + ",1" * 63 + "]<=[8]}}").to_numpy().shape)
report("zero-size split", lambda: rt.put(np.zeros((0, 5), np.float32), "{{devices=[8,1]<=[8]}}").to_numpy().shape)
report("zero-size shard dlpack", lambda: np.from_dlpack(rt.put(np.zeros((0, 5), np.float32), "{{devices=[8,1]<=[8]}}").shards[3]).shape)
report("padding-only shard", lambda: (x.shards[7].index, x.shards[7].to_numpy().shape, np.from_dlpack(x.shards[7]).shape))
report("scalar split", lambda: rt.put(np.float32(1), "{{devices=[8]<=[8]}}"))
report("1-element over 8", lambda: rt.put(np.ones(1, np.float32), "{{devices=[8]<=[8]}}").to_numpy().tolist())
report("from_dlpack object", lambda: rt.from_dlpack(object()))
report("from_dlpack list", lambda: rt.from_dlpack([1, 2, 3]).to_numpy().tolist())
report("put_shards objects", lambda: rt.put_shards([object()] * 8, (16, 5), "{{devices=[8,1]<=[8]}}"))
report("put_shards str shape", lambda: rt.put_shards([np.zeros((2, 5), np.float32)] * 8, "ab", "{{devices=[8,1]<=[8]}}"))
report("download_into too small", lambda: x.download_into(np.zeros(3, np.float32)))
report("download_into non-array", lambda: x.download_into([0.0] * 65))
report("block timeout negative", lambda: x.block_until_ready(timeout=-1).shape)
report("block timeout nan", lambda: x.block_until_ready(timeout=float("nan")).shape)
report("block timeout inf", lambda: x.block_until_ready(timeout=float("inf")).shape)
report("many arguments", lambda: add_one(*([x] * 10000)))
report("donate generator", lambda: add_one(rt.put(np.zeros((16, 4), np.float32), "{{devices=[8,1]<=[8]}}"), donate=(i for i in [0]))[0].to_numpy().sum())
report("donate huge index", lambda: add_one(x, donate=[2**70]))
report("reshard to nonsense", lambda: rt.reshard(x, "{{devices=[3,1]<=[3]}}"))
report("reshard uneven", lambda: rt.reshard(x, "{{devices=[2,4]<=[4,2]T(1,0)}}").to_numpy().sum())
report("mesh zero axis", lambda: shardrt.Mesh({{"x": 0}}).sharding("x"))
report("mesh huge axis", lambda: shardrt.Mesh({{"x": 2**40}}).sharding("x"))
report("mesh bad ids", lambda: shardrt.Mesh({{"x": 4}}, device_ids=[0, 1, 2, 9]).sharding("x"))
report("named no axes", lambda: shardrt.Sharding.named([], [], []))
report("private put None", lambda: shardrt._shardrt._put(None, np.zeros(3), shardrt.Sharding.replicated(), None, None))
report("private put bad type name", lambda: shardrt._shardrt._put(rt._rt, np.zeros(3, np.float32), shardrt.Sharding.replicated(), None, "bogus"))
report("private put wrong bits", lambda: shardrt._shardrt._put(rt._rt, np.zeros(3, np.float32), shardrt.Sharding.replicated(), None, "f64"))
"""
    r = run_cases(body)
    ok = lambda name: r[name]["exc"] is None  # noqa: E731
    assert ok("rank 64") and ok("rank 64 split") and ok("zero-size split")
    assert ok("padding-only shard"), r["padding-only shard"]
    assert ok("1-element over 8") and r["1-element over 8"]["msg"] == "[1.0]"
    assert r["from_dlpack list"]["exc"] == "TypeError"  # no __dlpack__: not a tensor
    assert ok("block timeout negative") and ok("block timeout inf")
    assert ok("reshard uneven") and ok("donate generator")
    assert r["scalar split"]["exc"] == "ValueError"
    assert r["from_dlpack object"]["exc"] == "TypeError"
    assert r["put_shards objects"]["exc"] == "TypeError"
    assert r["put_shards str shape"]["exc"] in ("TypeError", "ValueError")
    assert r["download_into too small"]["exc"] == "ValueError"
    assert r["download_into non-array"]["exc"] == "TypeError"
    assert r["many arguments"]["exc"] == "ValueError"
    assert "got 10000 arguments, expected 1" in r["many arguments"]["msg"]
    assert r["donate huge index"]["exc"] == "ValueError"
    assert r["reshard to nonsense"]["exc"] == "ValueError"
    for name in ("mesh zero axis", "mesh huge axis", "mesh bad ids", "named no axes",
                 "private put bad type name", "private put wrong bits"):
        assert r[name]["exc"] == "ValueError", (name, r[name])
    assert r["private put None"]["exc"] == "TypeError"
    for name, res in r.items():  # whatever was refused said why
        assert res["exc"] is None or res["msg"].strip(), (name, res)


def test_lifetimes_in_a_subprocess(testdata):
    # Arrays, shards, views and computations outlive the Runtime object; the interpreter exits
    # cleanly with work in flight and with objects left at exit.
    body = f"""
import gc
add_one = rt.compile(open({os.path.join(testdata, "donate_add_one.mlir")!r}).read())
a = np.arange(64, dtype=np.float32).reshape(16, 4)
x = rt.put(a, "{{devices=[8,1]<=[8]}}")
shard = x.shards[3]
view = np.from_dlpack(rt.put(a, "{{devices=[8,1]<=[8]}}").shards[2])
pending = x
for _ in range(200):
    (pending,) = add_one.call_async(pending, donate=False)
del rt
gc.collect()
report("array after runtime", lambda: float(x.to_numpy().sum()))
report("shard after runtime", lambda: shard.to_numpy().tolist())
report("view after runtime", lambda: view.tolist())
report("call after runtime", lambda: float(add_one(x, donate=False)[0].to_numpy().sum()))
report("pending after runtime", lambda: float(pending.to_numpy().sum()))
del x
gc.collect()
report("shard after array", lambda: shard.to_numpy().tolist())
# Leave work in flight and objects alive at exit.
rt2 = shardrt.Runtime(devices=8, compile_cache="")
g = rt2.compile({open(os.path.join(testdata, "donate_add_one.mlir")).read()!r})
z = rt2.put(a, "{{devices=[8,1]<=[8]}}")
for _ in range(300):
    (z,) = g.call_async(z)
report("another client's array", lambda: g(add_one(rt2.put(a, "{{devices=[8,1]<=[8]}}"))[0]))
"""
    r = run_cases(body)
    assert r["array after runtime"]["msg"] == repr(float(np.arange(64).sum()))
    assert r["shard after runtime"]["msg"] == repr([[24.0, 25.0, 26.0, 27.0], [28.0, 29.0, 30.0, 31.0]])
    assert r["view after runtime"]["msg"] == repr([[16.0, 17.0, 18.0, 19.0], [20.0, 21.0, 22.0, 23.0]])
    assert r["call after runtime"]["msg"] == repr(float(np.arange(64).sum() + 64))
    assert r["pending after runtime"]["msg"] == repr(float(np.arange(64).sum() + 200 * 64))
    assert r["shard after array"]["exc"] is None
    assert r["another client's array"]["exc"] == "ValueError"
    assert "another client" in r["another client's array"]["msg"], r


def test_exceptions_are_the_documented_types(rt):
    """ValueError for bad arguments, TypeError for wrong Python types, RuntimeError for the
    plugin's failures; all of them carry a message."""
    cases = [
        (lambda: shardrt.Sharding("{"), ValueError),
        (lambda: rt.put(np.zeros(3, np.complex64)), ValueError),
        (lambda: rt.compile(123), TypeError),
        (lambda: rt.compile("module {"), RuntimeError),
        (lambda: shardrt.Runtime(devices=-1), ValueError),
    ]
    for fn, exc in cases:
        with pytest.raises(exc) as info:
            fn()
        assert str(info.value).strip()


def test_uneven_input_errors_name_the_shape(rt):
    f = rt.compile(module("u", [("x", "tensor<13x5xf32>", ROWS)], [("tensor<13x5xf32>", ROWS)], """
        %y = stablehlo.negate %x : tensor<13x5xf32>
        return %y : tensor<13x5xf32>
    """))
    with pytest.raises(ValueError, match=r"expected f32\[13,5\].*got f32\[14,5\]"):
        f(rt.put(random_array((14, 5), np.float32), ROWS))
    (y,) = f(rt.put(random_array((13, 5), np.float32, 3), ROWS))
    np.testing.assert_array_equal(y.to_numpy(), -random_array((13, 5), np.float32, 3))


def test_bytecode_with_split_parameters_needs_global_shapes(rt, testdata):
    # docs/errors.md: MLIR bytecode does not state its global shapes, and a split parameter's
    # per-device shape does not tell it (splits may be uneven); Python cannot pass them, so the
    # text form (a JAX Lowered or Exported) is the way.
    program = open(f"{testdata}/scale_sum_jax.mlirbc", "rb").read()
    assert program.startswith(b"ML\xefR")
    with pytest.raises(ValueError, match="does not state its global shape"):
        rt.compile(program)


# A loop that never ends, on 8 partitions (the C++ CLI test's program too).
NEVER_ENDS = open(os.path.join(TESTDATA, "never_ends.mlir")).read()


def test_waits_on_a_program_that_never_finishes_time_out():
    # docs/errors.md: waiting can be bounded. block_until_ready(timeout) raises TimeoutError
    # for a direct call (launched, still running) and for a call_async placeholder. The process
    # then leaves with os._exit: the runtime cannot be torn down under a program that spins.
    code = f"""
        import os, numpy as np, shardrt
        rt = shardrt.Runtime(devices=8, compile_cache="")
        f = rt.compile({NEVER_ENDS!r})
        x = rt.put(np.float32(0))
        for name, call in (("direct", lambda: f(x)), ("async", lambda: f.call_async(x))):
            (y,) = call()
            try:
                y.block_until_ready(timeout=0.3)
                print(name, "finished?")
            except TimeoutError as e:
                print(name, "TimeoutError:", e, flush=True)
        print("DONE", flush=True)
        os._exit(0)
    """
    result = run_python(code, timeout=60)
    assert result.returncode == 0, result.stderr[-3000:]
    lines = result.stdout.splitlines()
    assert any(ln.startswith("direct TimeoutError:") for ln in lines), result.stdout
    assert any(ln.startswith("async TimeoutError:") for ln in lines), result.stdout
    assert "DONE" in lines
