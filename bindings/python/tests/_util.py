"""Helpers of the shardrt test suite: an independent reading of XLA sharding text (what each
device should hold), random host data per dtype, and small StableHLO program builders."""

from __future__ import annotations

import math
import os
import re
import subprocess
import sys
import textwrap

import numpy as np

try:
    import ml_dtypes
except ImportError:  # pragma: no cover - ml_dtypes comes with jax
    ml_dtypes = None

# Seconds a test waits for an array at most (block_until_ready(timeout=WAIT_S)): a wait that
# never ends raises TimeoutError instead of hanging the suite.
WAIT_S = 300

# dtypes the package maps to XLA element types, bf16 where ml_dtypes is importable.
DTYPES = [np.float32, np.float64, np.int32, np.int64, np.uint8, np.bool_, np.float16]
if ml_dtypes is not None:
    DTYPES.append(ml_dtypes.bfloat16)

XLA_NAMES = {
    "float32": "f32", "float64": "f64", "int32": "s32", "int64": "s64", "uint8": "u8",
    "bool": "pred", "float16": "f16", "bfloat16": "bf16",
}

# The C++ tests' programs, shared with these tests.
TESTDATA = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))), "tests", "testdata")


def random_array(shape, dtype, seed=0) -> np.ndarray:
    """Reproducible data of `dtype`: small integers, booleans or normal floats."""
    rng = np.random.default_rng(seed)
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return rng.random(shape) < 0.5
    if dtype.kind in "iu":
        return rng.integers(0, 100, size=shape).astype(dtype)
    return rng.standard_normal(shape).astype(np.float32).astype(dtype)


_TILED = re.compile(
    r"^\{devices=\[([\d,]+)\](?:<=\[([\d,]+)\](?:T\(([\d,]+)\))?|([\d,]+))"
    r"(\s+last_tile_dim_replicate)?\}$")


def tile_devices(text: str) -> tuple[np.ndarray, bool] | None:
    """The tile assignment of XLA sharding `text` as an array of (logical) device indices with
    the tile dims as its shape, and whether its last dim replicates; None for {replicated}.
    Handles the forms the tests use: iota (<=[dims] with an optional T(perm)) and explicit
    device lists."""
    text = text.strip()
    if text == "{replicated}":
        return None
    m = _TILED.match(text)
    if m is None:
        raise ValueError(f"the test helper does not read {text!r}")
    dims = [int(d) for d in m.group(1).split(",")]
    if m.group(4) is not None:
        devices = np.array([int(d) for d in m.group(4).split(",")]).reshape(dims)
    else:
        reshape = [int(d) for d in m.group(2).split(",")]
        devices = np.arange(math.prod(reshape)).reshape(reshape)
        if m.group(3) is not None:
            devices = devices.transpose([int(p) for p in m.group(3).split(",")])
        devices = devices.reshape(dims)
    return devices, m.group(5) is not None


def expected_shards(text: str, shape) -> list[tuple[tuple[slice, ...], tuple[int, ...]]]:
    """Per logical device (the array's shard order): the slices of the global array it holds
    and its padded shard shape, from the XLA rule (shard size ceil(n / tiles); the last tiles
    hold less or only padding)."""
    shape = tuple(shape)
    tiles = tile_devices(text)
    if tiles is None:
        return [(tuple(slice(0, n) for n in shape), shape)] * 8
    devices, replicate_last = tiles
    data_tiles = devices.shape[:-1] if replicate_last else devices.shape
    assert len(data_tiles) == len(shape), (text, shape)
    sizes = tuple(-(-n // t) for n, t in zip(shape, data_tiles))
    out = []
    for d in range(devices.size):
        coords = [int(c[0]) for c in np.nonzero(devices == d)][:len(shape)]
        slices = []
        for c, size, n in zip(coords, sizes, shape):
            start = min(c * size, n)
            slices.append(slice(start, min(start + size, n)))
        out.append((tuple(slices), sizes))
    return out


def valid_part(shard_data: np.ndarray, index: tuple[slice, ...]) -> np.ndarray:
    """The part of a padded shard buffer that holds data (without the padding)."""
    return shard_data[tuple(slice(0, s.stop - s.start) for s in index)]


def tensor(shape, type_name: str) -> str:
    """MLIR tensor type: tensor<16x4xf32>, tensor<i1> for a pred scalar."""
    element = "i1" if type_name == "pred" else {
        "s32": "i32", "s64": "i64", "u8": "ui8"}.get(type_name, type_name)
    return "tensor<" + "".join(f"{d}x" for d in shape) + element + ">"


def module(name: str, params: list[tuple[str, str, str]], results: list[tuple[str, str]],
           body: str, partitions: int = 8, attrs: dict[int, str] | None = None) -> str:
    """A StableHLO module in the style of tests/testdata: params are (name, tensor type,
    sharding), results (tensor type, sharding); `body` ends with its return; attrs adds
    argument attributes (e.g. {0: 'tf.aliasing_output = 0 : i32'})."""
    attrs = attrs or {}
    args = []
    for i, (n, t, s) in enumerate(params):
        extra = f", {attrs[i]}" if i in attrs else ""
        args.append(f'%{n}: {t} {{mhlo.sharding = "{s}"{extra}}}')
    outs = ", ".join(f'{t} {{mhlo.sharding = "{s}"}}' for t, s in results)
    body = textwrap.indent(textwrap.dedent(body).strip(), "    ")
    return (f"module @{name} attributes {{mhlo.num_partitions = {partitions} : i32, "
            f"mhlo.num_replicas = 1 : i32}} {{\n"
            f"  func.func public @main({', '.join(args)})\n"
            f"      -> ({outs}) {{\n{body}\n  }}\n}}\n")


def run_python(code: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """Runs `code` in a fresh interpreter (this one's, so the same venv); output captured. It
    runs in this folder, so that `python -c` (which imports from its working directory) gets
    the installed shardrt even when the suite was started in bindings/python."""
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, timeout=timeout, cwd=os.path.dirname(os.path.abspath(__file__)))
