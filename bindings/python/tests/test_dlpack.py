"""DLPack both ways: a shard's device memory as a zero-copy view (NumPy and JAX read it; the view
keeps the data alive), host tensors of NumPy and JAX into one-device arrays (rt.from_dlpack),
and per-device tensors into one sharded array (rt.put_shards)."""

import gc

import numpy as np
import pytest

import shardrt
from _util import DTYPES, expected_shards, random_array, valid_part

jax = pytest.importorskip("jax")
jnp = jax.numpy

SHARDINGS = ["{devices=[8,1]<=[8]}", "{devices=[4,2]<=[8]}", "{devices=[2,4]<=[4,2]T(1,0)}",
             "{devices=[4,1,2]<=[8] last_tile_dim_replicate}", "{replicated}"]
NUMPY_DLPACK = [d for d in DTYPES if np.dtype(d).name != "bfloat16"]  # NumPy has no bfloat16 DLPack


@pytest.mark.parametrize("text", SHARDINGS)
@pytest.mark.parametrize("dtype", NUMPY_DLPACK, ids=lambda d: np.dtype(d).name)
def test_numpy_views_of_shards(rt, dtype, text):
    a = random_array((13, 6), dtype, 61)
    x = rt.put(a, text)
    for shard in x.shards:
        assert shard.__dlpack_device__() == (1, 0)
        view = np.from_dlpack(shard)
        copy = shard.to_numpy()
        assert view.dtype == a.dtype and view.shape == shard.shape
        np.testing.assert_array_equal(view, copy)
        np.testing.assert_array_equal(valid_part(view, shard.index), a[shard.index])
        # Zero-copy: two views of one shard are the same memory.
        again = np.from_dlpack(shard)
        assert again.ctypes.data == view.ctypes.data
        assert not np.shares_memory(view, copy)


def test_views_of_different_shards_are_different_memory(rt):
    x = rt.put(random_array((16, 4), np.float32), "{devices=[8,1]<=[8]}")
    pointers = {np.from_dlpack(s).ctypes.data for s in x.shards}
    assert len(pointers) == 8


def test_view_outlives_the_array(rt):
    a = random_array((13, 5), np.float32, 62)
    x = rt.put(a, "{devices=[8,1]<=[8]}")
    views = [np.from_dlpack(s) for s in x.shards]
    expected = [s.to_numpy() for s in x.shards]
    del x
    gc.collect()
    for v, e in zip(views, expected):
        np.testing.assert_array_equal(v, e)
    y = rt.put(a, "{devices=[4,2]<=[8]}")
    view = np.from_dlpack(y.shards[5])
    saved = view.copy()
    y.delete()
    shardrt.release([y])
    gc.collect()
    # Other arrays come and go meanwhile; the view's memory is not reused.
    junk = [rt.put(np.full((13, 5), 7.0, np.float32), "{devices=[4,2]<=[8]}") for _ in range(20)]
    del junk
    np.testing.assert_array_equal(view, saved)


def test_view_survives_donation(rt, testdata):
    f = rt.compile(open(f"{testdata}/donate_add_one.mlir").read())
    a = random_array((16, 4), np.float32, 63)
    x = rt.put(a, "{devices=[8,1]<=[8]}")
    view = np.from_dlpack(x.shards[0])
    (y,) = f(x)  # donates x; the live view makes the call copy instead of reusing its memory
    assert x.state == "donated"
    np.testing.assert_array_equal(view, a[0:2])
    np.testing.assert_array_equal(y.to_numpy(), a + 1)
    (z,) = f(y)
    np.testing.assert_array_equal(view, a[0:2])
    np.testing.assert_array_equal(z.to_numpy(), (a + 1) + 1)


def test_view_of_a_padding_only_shard(rt):
    x = rt.put(np.arange(3 * 2, dtype=np.int32).reshape(3, 2), "{devices=[8,1]<=[8]}")
    last = x.shards[7]
    assert last.index == (slice(3, 3), slice(0, 2))
    view = np.from_dlpack(last)
    assert view.shape == (1, 2)
    assert valid_part(view, last.index).size == 0


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_jax_reads_shards(rt, dtype):
    a = random_array((8, 6), dtype, 64)
    x = rt.put(a, "{devices=[4,2]<=[8]}")
    for i, shard in enumerate(x.shards):
        j = jnp.from_dlpack(shard) if i % 2 else jax.dlpack.from_dlpack(shard)
        # Without jax_enable_x64 JAX takes 64-bit types as 32-bit ones.
        canonical = jax.dtypes.canonicalize_dtype(a.dtype)
        assert j.dtype == canonical and j.shape == shard.shape
        np.testing.assert_array_equal(np.asarray(j), shard.to_numpy().astype(canonical))
        np.testing.assert_array_equal(np.asarray(j), a[shard.index].astype(canonical))
    # JAX computes on it.
    j = jnp.from_dlpack(x.shards[3])
    if a.dtype.kind == "f":
        np.testing.assert_allclose(np.asarray(j * 2).astype(np.float64),
                                   (a[x.shards[3].index] * 2).astype(np.float64))


@pytest.mark.parametrize("dtype", NUMPY_DLPACK, ids=lambda d: np.dtype(d).name)
def test_from_dlpack_of_numpy(rt, dtype):
    a = random_array((5, 7), dtype, 65)
    x = rt.from_dlpack(a)
    assert x.device_ids == [0] and x.sharding.is_replicated
    assert x.dtype == a.dtype and x.shape == a.shape
    np.testing.assert_array_equal(x.to_numpy(), a)
    y = rt.from_dlpack(a, device=5)
    assert y.device_ids == [5] and y.shards[0].device_id == 5
    np.testing.assert_array_equal(y.to_numpy(), a)


def test_from_dlpack_of_strided_numpy(rt):
    a = random_array((6, 8), np.float32, 66)
    for v in (a[::2], a.T, a[:, 1::3]):
        np.testing.assert_array_equal(rt.from_dlpack(v).to_numpy(), v)


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.int32, jnp.bfloat16, jnp.float16, jnp.bool_,
                                   jnp.uint8], ids=lambda d: np.dtype(d).name)
def test_from_dlpack_of_jax(rt, dtype):
    host = random_array((4, 9), np.dtype(dtype), 67)
    j = jnp.asarray(host)
    x = rt.from_dlpack(j)
    assert x.device_ids == [0]
    assert x.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(x.to_numpy(), host)
    np.testing.assert_array_equal(rt.from_dlpack(j, device=7).to_numpy(), np.asarray(j))


def test_from_dlpack_feeds_a_one_device_program(rt, testdata):
    f = rt.compile(open(f"{testdata}/single_device_axpy.mlir").read())
    a, x, b = jnp.float32(2.0), jnp.arange(6, dtype=jnp.float32), jnp.ones(6, jnp.float32)
    (y,) = f(rt.from_dlpack(a), rt.from_dlpack(x), rt.from_dlpack(b))
    np.testing.assert_allclose(y.to_numpy(), np.asarray(a * x + b))


def test_put_shards_from_jax_sharded_array(rt):
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

    mesh = Mesh(np.array(jax.devices()[:8]).reshape(4, 2), ("x", "y"))
    host = random_array((8, 8), np.float32, 68)
    # (A spec gives the rank: P(("x", "y"), None), not JAX's shorthand P(("x", "y")).)
    for spec in (P("x", "y"), P("y", None), P(None, "x"), P(("x", "y"), None)):
        ga = jax.device_put(host, NamedSharding(mesh, spec))
        parts = {s.device.id: s.data for s in ga.addressable_shards}
        sharding = shardrt.Mesh({"x": 4, "y": 2}).sharding(spec)
        x = rt.put_shards([parts[d] for d in range(8)], host.shape, sharding)
        assert x.sharding == sharding
        np.testing.assert_array_equal(x.to_numpy(), host)
        for s in x.shards:  # each shardrt device holds what the JAX device of its id holds
            np.testing.assert_array_equal(s.to_numpy(), np.asarray(parts[s.device_id]))


def test_put_shards_from_numpy_and_jax_uneven(rt):
    a = random_array((13, 5), np.float64, 69)
    text = "{devices=[8,1]<=[8]}"
    numpy_parts, jax_parts = [], []
    for index, padded in expected_shards(text, a.shape):
        p = np.zeros(padded, np.float64)
        p[tuple(slice(0, s.stop - s.start) for s in index)] = a[index]
        numpy_parts.append(p)
        jax_parts.append(jnp.asarray(p.astype(np.float32)))
    x = rt.put_shards(numpy_parts, a.shape, text)
    np.testing.assert_array_equal(x.to_numpy(), a)
    y = rt.put_shards(jax_parts, a.shape, text)
    assert y.dtype == np.float32
    np.testing.assert_array_equal(y.to_numpy(), a.astype(np.float32))
    # On chosen devices.
    z = rt.put_shards(numpy_parts[:4], (8, 5), "{devices=[4,1]<=[4]}", devices=[6, 4, 2, 0])
    assert z.device_ids == [6, 4, 2, 0]
    np.testing.assert_array_equal(z.to_numpy(), a[:8])


def test_put_shards_bfloat16(rt):
    ml_dtypes = pytest.importorskip("ml_dtypes")
    a = random_array((8, 4), ml_dtypes.bfloat16, 70)
    parts = [a[2 * i:2 * i + 2] for i in range(4)]
    x = rt.put_shards(parts, a.shape, "{devices=[4,1]<=[4]}")
    assert x.dtype == a.dtype
    np.testing.assert_array_equal(x.to_numpy(), a)
    assert x.shards[1].to_numpy().dtype == a.dtype
    np.testing.assert_array_equal(x.shards[1].to_numpy(), a[2:4])


def test_array_dlpack_where_one_buffer_holds_it(rt):
    # Replicated, or on one device: the whole array, zero-copy (the first device's copy).
    a = np.arange(64, dtype=np.float32).reshape(16, 4)
    for x in (rt.put(a, "{replicated}"), rt.put(a, devices=[3])):
        view = np.from_dlpack(x)
        np.testing.assert_array_equal(view, a)
        assert x.__dlpack_device__() == (1, 0)
        assert np.shares_memory(view, np.from_dlpack(x.shards[0]))
    # Split: no one buffer holds it; the error says what to use instead.
    split = rt.put(a, "{devices=[8,1]<=[8]}")
    with pytest.raises(BufferError, match=r"split over 8 devices .*use \.shards\[i\]"):
        np.from_dlpack(split)
