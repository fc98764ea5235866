"""The Runtime object: what it reports about the plugin and its devices, its options (device
count, host threads, persistent compile cache), and several runtimes in one process."""

import os

import numpy as np
import pytest

import shardrt
from _util import random_array


def test_what_the_runtime_reports(rt):
    assert rt.platform == "cpu"
    assert [d.id for d in rt.devices] == list(range(8))
    assert all(d.kind == "cpu" for d in rt.devices)
    assert all(isinstance(d, shardrt.Device) for d in rt.devices)
    assert os.path.isfile(rt.plugin_path)
    assert os.path.samefile(rt.plugin_path, shardrt.default_plugin())
    assert rt.host_threads >= 1
    assert rt.plugin_threads >= 0
    assert rt.has_compile_cache is False  # compile_cache="" in conftest
    assert shardrt.__version__
    for name in shardrt.__all__:
        assert hasattr(shardrt, name), name


def test_public_functions_have_docstrings():
    for obj in (shardrt.Runtime, shardrt.Mesh, shardrt.Array, shardrt.Computation,
                shardrt.Sharding, shardrt.Shard, shardrt.metrics, shardrt.metrics_report,
                shardrt.metrics_reset, shardrt.release, shardrt.default_plugin):
        assert obj.__doc__, obj
    for name in ("put", "put_shards", "from_dlpack", "reshard", "replicate", "compile",
                 "synchronize", "trace"):
        assert getattr(shardrt.Runtime, name).__doc__, name
    for name in ("to_numpy", "download_into", "block_until_ready", "delete"):
        assert getattr(shardrt.Array, name).__doc__, name
    assert shardrt.Shard.to_numpy.__doc__


def test_runtime_options():
    small = shardrt.Runtime(devices=2, host_threads=1, compile_cache="")
    assert len(small.devices) == 2 and small.host_threads == 1
    a = random_array((6, 4), np.float32)
    x = small.put(a, "{devices=[2,1]<=[2]}")
    np.testing.assert_array_equal(x.to_numpy(), a)
    assert "2 devices" in repr(small)


def test_persistent_compile_cache(tmp_path, testdata):
    program = open(f"{testdata}/donate_add_one.mlir").read()
    first = shardrt.Runtime(devices=8, compile_cache=tmp_path)
    assert first.has_compile_cache
    first.compile(program)
    assert any(tmp_path.iterdir())  # an entry was written
    before = shardrt.metrics()["counters"].get("PersistentCacheHit", 0)
    second = shardrt.Runtime(devices=8, compile_cache=str(tmp_path))
    f = second.compile(program)  # loaded, not compiled
    assert shardrt.metrics()["counters"].get("PersistentCacheHit", 0) == before + 1
    a = random_array((16, 4), np.float32, 7)
    (y,) = f(second.put(a, "{devices=[8,1]<=[8]}"))
    np.testing.assert_array_equal(y.to_numpy(), a + 1)


def test_arrays_of_two_runtimes_do_not_mix(rt, testdata):
    other = shardrt.Runtime(devices=8, compile_cache="")
    f = rt.compile(open(f"{testdata}/donate_add_one.mlir").read())
    x = other.put(np.zeros((16, 4), np.float32), "{devices=[8,1]<=[8]}")
    with pytest.raises(ValueError, match="another client"):
        f(x)
    assert x.state == "ready"
