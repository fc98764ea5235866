"""Arrays on 8 devices: put / to_numpy round trips for every dtype and many shardings (even and
uneven), the Array's properties, its shards (index, padded shape, content), download_into,
reshard / replicate, and the Sharding and Mesh types. Expectations come from NumPy and from an
independent reading of the sharding text (_util.expected_shards)."""

import zlib

import numpy as np
import pytest

import shardrt
from _util import DTYPES, XLA_NAMES, expected_shards, random_array, valid_part

SHARDINGS = [
    "{devices=[8,1]<=[8]}",                                   # rows over 8
    "{devices=[1,8]<=[8]}",                                   # columns over 8
    "{devices=[4,2]<=[8]}",                                   # 2-D tiling
    "{devices=[2,4]<=[8]}",
    "{devices=[2,4]<=[4,2]T(1,0)}",                           # transposed device order
    "{devices=[4,2]<=[2,2,2]T(2,1,0)}",
    "{devices=[2,2]0,3,1,2}",                                 # explicit device list (4 devices)
    "{devices=[4,1,2]<=[8] last_tile_dim_replicate}",         # partial replication
    "{devices=[1,2,4]<=[4,2]T(1,0) last_tile_dim_replicate}",
    "{replicated}",
]
SHAPES = [(16, 8), (13, 5)]  # even, and uneven for every split above (padding)


def _num_devices(text):
    return 4 if text == "{devices=[2,2]0,3,1,2}" else 8


def _dtype_id(dtype):
    return np.dtype(dtype).name


def _raw(a):
    """A destination NumPy can hand to the extension (bfloat16 as its uint16 bits)."""
    return a.view(np.uint16) if a.dtype.name == "bfloat16" else a


def check_array(x, a, text):
    """Everything an Array says about itself, against the host array `a` it came from."""
    assert x.shape == a.shape
    assert x.ndim == a.ndim
    assert x.size == a.size
    assert x.nbytes == a.nbytes
    assert x.dtype == a.dtype
    assert x.type_name == XLA_NAMES[a.dtype.name]
    assert x.sharding == shardrt.Sharding(text)
    assert x.device_ids == list(range(_num_devices(text)))
    assert x.state == "ready" and x.is_ready
    np.testing.assert_array_equal(x.to_numpy(), a)
    assert x.to_numpy().dtype == a.dtype
    np.testing.assert_array_equal(np.asarray(x), a)
    assert np.asarray(x).dtype == a.dtype
    out = np.empty_like(a)
    assert x.download_into(_raw(out)) is None
    np.testing.assert_array_equal(out, a)

    expected = expected_shards(text, a.shape)
    shards = x.shards
    assert len(shards) == len(x.device_ids)
    covered = np.zeros(a.shape, dtype=np.int64)
    for i, shard in enumerate(shards):
        index, padded = expected[i]
        assert shard.device_id == x.device_ids[i]
        assert shard.index == index, f"shard {i} of {text}"
        assert shard.shape == padded
        assert shard.type_name == x.type_name
        data = shard.to_numpy()
        assert data.shape == padded and data.dtype == a.dtype
        np.testing.assert_array_equal(valid_part(data, shard.index), a[shard.index])
        covered[shard.index] += 1
    # Every element is held, each as often as the sharding replicates it.
    assert (covered == covered.flat[0]).all() and covered.flat[0] >= 1


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("text", SHARDINGS)
@pytest.mark.parametrize("dtype", DTYPES, ids=_dtype_id)
def test_round_trip(rt, dtype, text, shape):
    a = random_array(shape, dtype, seed=zlib.crc32(f"{text}{shape}".encode()))
    x = rt.put(a, text)
    check_array(x, a, text)


@pytest.mark.parametrize("dtype", DTYPES, ids=_dtype_id)
def test_sharding_object_and_text_are_the_same(rt, dtype):
    a = random_array((8, 6), dtype)
    for text in ("{devices=[4,2]<=[8]}", "{devices=[2,4]<=[4,2]T(1,0)}"):
        x = rt.put(a, shardrt.Sharding(text))
        y = rt.put(a, text)
        assert x.sharding == y.sharding
        np.testing.assert_array_equal(x.to_numpy(), y.to_numpy())


def test_uneven_rows_some_devices_hold_only_padding(rt):
    a = np.arange(65, dtype=np.float32).reshape(13, 5)
    x = rt.put(a, "{devices=[8,1]<=[8]}")
    shards = x.shards
    assert [s.shape for s in shards] == [(2, 5)] * 8
    # ceil(13 / 8) = 2 rows each: devices 0..5 full, 6 holds row 12, 7 only padding.
    assert [s.index[0] for s in shards] == [slice(2 * d, min(2 * d + 2, 13)) if 2 * d < 13
                                            else slice(13, 13) for d in range(8)]
    assert shards[7].index == (slice(13, 13), slice(0, 5))
    assert a[shards[7].index].size == 0
    np.testing.assert_array_equal(shards[6].to_numpy()[:1], a[12:13])
    np.testing.assert_array_equal(x.to_numpy(), a)


def test_uneven_more_devices_than_rows(rt):
    a = np.arange(3 * 4, dtype=np.int32).reshape(3, 4)
    x = rt.put(a, "{devices=[8,1]<=[8]}")
    assert [s.index[0] for s in x.shards][3:] == [slice(3, 3)] * 5
    np.testing.assert_array_equal(x.to_numpy(), a)


@pytest.mark.parametrize("shape", [(), (0,), (0, 8), (1,), (7,), (2, 3, 5), (3, 1, 4, 2)],
                         ids=str)
def test_odd_shapes(rt, shape):
    a = random_array(shape, np.float32)
    x = rt.put(a)  # replicated on all 8
    assert x.shape == shape and x.device_ids == list(range(8))
    np.testing.assert_array_equal(x.to_numpy(), a)
    if len(shape) >= 1:
        text = "{devices=[8" + ",1" * (len(shape) - 1) + "]<=[8]}"
        y = rt.put(a, text)
        np.testing.assert_array_equal(y.to_numpy(), a)
        for shard in y.shards:
            np.testing.assert_array_equal(valid_part(shard.to_numpy(), shard.index),
                                          a[shard.index])


def test_rank_3_tiling(rt):
    a = random_array((6, 4, 10), np.float64)
    text = "{devices=[2,2,2]<=[2,2,2]T(2,0,1)}"
    x = rt.put(a, text)
    np.testing.assert_array_equal(x.to_numpy(), a)
    # Reference: iota(8).reshape(2,2,2).transpose(2,0,1) gives each tile's device.
    devices = np.arange(8).reshape(2, 2, 2).transpose(2, 0, 1)
    for shard in x.shards:
        (i, j, k) = [int(c[0]) for c in np.nonzero(devices == shard.device_id)]
        assert shard.index == (slice(3 * i, 3 * i + 3), slice(2 * j, 2 * j + 2),
                               slice(5 * k, 5 * k + 5))


def test_put_on_chosen_devices(rt):
    a = np.arange(8 * 3, dtype=np.float32).reshape(8, 3)
    x = rt.put(a, "{devices=[4,1]<=[4]}", devices=[7, 5, 3, 1])
    assert x.device_ids == [7, 5, 3, 1]
    # Shard i (on devices[i]) holds tile i of the sharding.
    for i, shard in enumerate(x.shards):
        assert shard.device_id == [7, 5, 3, 1][i]
        assert shard.index == (slice(2 * i, 2 * i + 2), slice(0, 3))
        np.testing.assert_array_equal(shard.to_numpy(), a[2 * i:2 * i + 2])
    np.testing.assert_array_equal(x.to_numpy(), a)
    y = rt.put(a, None, devices=[2])
    assert y.device_ids == [2] and y.sharding.is_replicated
    np.testing.assert_array_equal(y.to_numpy(), a)


def test_put_takes_anything_asarray_takes(rt):
    x = rt.put([[1, 2, 3], [4, 5, 6]], "{devices=[2,1]<=[2]}")
    np.testing.assert_array_equal(x.to_numpy(), np.array([[1, 2, 3], [4, 5, 6]]))
    assert x.dtype == np.asarray([1]).dtype
    s = rt.put(np.float32(2.5))
    assert s.shape == () and s.to_numpy() == np.float32(2.5)
    b = rt.put(np.arange(6, dtype=">f4").reshape(2, 3), "{devices=[2,1]<=[2]}")  # big-endian
    np.testing.assert_array_equal(b.to_numpy(), np.arange(6, dtype=np.float32).reshape(2, 3))
    assert b.dtype == np.float32


@pytest.mark.parametrize("make", [
    lambda a: a.T,
    lambda a: a[::2],
    lambda a: a[:, 1:7],
    lambda a: np.asfortranarray(a),
    lambda a: a[::-1, ::3],
], ids=["transpose", "step", "slice", "fortran", "reversed"])
def test_non_contiguous_inputs_are_copied(rt, make):
    base = random_array((16, 8), np.float32)
    a = make(base)
    x = rt.put(a, "{devices=[2,2]<=[4]}" if a.ndim == 2 else None)
    np.testing.assert_array_equal(x.to_numpy(), a)
    base[:] = 0  # the array was uploaded: later host changes do not reach it
    assert x.to_numpy().any()


def test_to_numpy_is_a_fresh_copy(rt):
    a = random_array((8, 4), np.float32)
    x = rt.put(a, "{devices=[8,1]<=[8]}")
    h = x.to_numpy()
    h[:] = 0
    np.testing.assert_array_equal(x.to_numpy(), a)
    a[:] = 0  # put copied the host data too
    assert x.to_numpy().any()


def test_asarray_with_dtype(rt):
    a = random_array((4, 4), np.float32)
    x = rt.put(a, "{devices=[2,2]<=[4]}")
    np.testing.assert_array_equal(np.asarray(x, dtype=np.float64), a.astype(np.float64))
    np.testing.assert_array_equal(np.array(x), a)


def test_download_into_checks_the_destination(rt):
    a = random_array((13, 5), np.float32)
    x = rt.put(a, "{devices=[8,1]<=[8]}")
    with pytest.raises(ValueError, match="260"):
        x.download_into(np.zeros(3, np.float32))
    other = np.zeros((13, 5), np.int32)  # the same bytes, another element type: refused
    with pytest.raises(ValueError, match="download_into: the array is f32, the destination s32"):
        x.download_into(other)
    assert not other.any()
    flat = np.zeros(65, np.float32)  # same bytes, another shape: filled row-major
    x.download_into(flat)
    np.testing.assert_array_equal(flat, a.ravel())
    # A destination that is not C-contiguous cannot be filled in place: refused, not copied.
    transposed = np.zeros((5, 13), np.float32).T
    with pytest.raises(TypeError):
        x.download_into(transposed)
    assert not transposed.any()
    read_only = np.zeros((13, 5), np.float32)
    read_only.flags.writeable = False
    with pytest.raises(TypeError):
        x.download_into(read_only)


@pytest.mark.parametrize("to", [
    "{devices=[1,8]<=[8]}", "{devices=[4,2]<=[8]}", "{devices=[2,4]<=[4,2]T(1,0)}",
    "{devices=[2,1,4]<=[8] last_tile_dim_replicate}", "{replicated}"])
def test_reshard_and_replicate(rt, to):
    a = random_array((13, 10), np.float32, seed=3)
    x = rt.put(a, "{devices=[8,1]<=[8]}")
    y = rt.reshard(x, to)
    assert y.sharding == shardrt.Sharding(to)
    assert y.device_ids == x.device_ids
    check_array(y, a, to)
    r = rt.replicate(y)
    assert r.sharding.is_replicated
    for shard in r.shards:
        np.testing.assert_array_equal(shard.to_numpy(), a)
    np.testing.assert_array_equal(x.to_numpy(), a)  # the source is unchanged


def test_put_shards_from_numpy(rt):
    a = random_array((13, 5), np.int32)
    text = "{devices=[4,2]<=[8]}"
    parts = []
    for index, padded in expected_shards(text, a.shape):
        p = np.full(padded, -1, np.int32)
        p[tuple(slice(0, s.stop - s.start) for s in index)] = a[index]
        parts.append(p)
    x = rt.put_shards(parts, a.shape, text)
    check_array(x, a, text)


def test_release_and_delete(rt):
    a = random_array((8, 8), np.float32)
    xs = [rt.put(a + i, "{devices=[8,1]<=[8]}") for i in range(4)]
    shard = xs[1].shards[2]  # a shard keeps its data: its buffers are not freed
    copy = rt.reshard(xs[2], "{replicated}")
    shardrt.release(xs)
    shardrt.release([])
    for x in xs:
        assert x.is_deleted and x.state == "deleted" and "deleted" in repr(x)
        with pytest.raises(ValueError, match="deleted"):
            x.to_numpy()
    with pytest.raises(ValueError, match="deleted"):
        xs[0].shards
    shardrt.release(xs)  # again: nothing to do
    np.testing.assert_array_equal(shard.to_numpy(), (a + 1)[2:3])
    np.testing.assert_array_equal(copy.to_numpy(), a + 2)
    y = rt.put(a, "{devices=[4,2]<=[8]}")
    y.delete()
    y.delete()
    assert y.is_deleted
    with pytest.raises(ValueError, match="deleted"):
        np.asarray(y)
    # A bad entry leaves every array as it was.
    z = rt.put(a)
    with pytest.raises(TypeError, match="expected shardrt.Array"):
        shardrt.release([z, 1])
    assert not z.is_deleted
    np.testing.assert_array_equal(z.to_numpy(), a)


def test_repr(rt):
    x = rt.put(np.zeros((16, 4), np.float32), "{devices=[8,1]<=[8]}")
    assert "f32[16,4]" in repr(x) and "ready" in repr(x)
    assert repr(shardrt.Sharding("{replicated}")) == "shardrt.Sharding('{replicated}')"
    assert "8 devices" in repr(rt) and "cpu" in repr(rt)


# --- Sharding, Mesh -------------------------------------------------------------------------

def test_sharding_type():
    s = shardrt.Sharding("{devices=[4,2]<=[8]}")
    assert str(s) == "{devices=[4,2]<=[8]}"
    assert s.num_devices == 8 and not s.is_replicated
    assert s == shardrt.Sharding(str(s))
    assert hash(s) == hash(shardrt.Sharding(str(s)))
    assert len({s, shardrt.Sharding("{devices=[4,2]<=[8]}"), shardrt.Sharding.replicated()}) == 2
    r = shardrt.Sharding.replicated()
    assert r.is_replicated and r.num_devices is None
    assert r == shardrt.Sharding("{replicated}")
    # The same tile assignment written two ways is one sharding.
    assert shardrt.Sharding("{devices=[2,2]0,2,1,3}") == shardrt.Sharding(
        "{devices=[2,2]<=[2,2]T(1,0)}")
    assert shardrt.Sharding("{devices=[2,4]<=[8]}") != shardrt.Sharding(
        "{devices=[2,4]<=[4,2]T(1,0)}")
    # XLA reads a partial tiling whose data dims are all 1 as replicated (docs/errors.md).
    assert shardrt.Sharding("{devices=[1,2]<=[2] last_tile_dim_replicate}").is_replicated


@pytest.mark.parametrize("spec,text", [
    (("x", None), "{devices=[4,1,2]<=[8] last_tile_dim_replicate}"),
    ((None, "y"), "{devices=[1,2,4]<=[4,2]T(1,0) last_tile_dim_replicate}"),
    (("x", "y"), "{devices=[4,2]<=[8]}"),
    (("y", "x"), "{devices=[2,4]<=[4,2]T(1,0)}"),
    ((("x", "y"), None), "{devices=[8,1]<=[8]}"),
    ((None, None), "{replicated}"),
])
def test_mesh_sharding_matches_xla_text(spec, text):
    mesh = shardrt.Mesh({"x": 4, "y": 2})
    assert mesh.size == 8
    assert mesh.sharding(*spec) == shardrt.Sharding(text)


def test_mesh_with_device_ids_and_partition_spec(rt):
    from jax.sharding import PartitionSpec as P

    mesh = shardrt.Mesh([("x", 2), ("y", 2)], device_ids=[3, 2, 1, 0])
    s = mesh.sharding("x", "y")
    assert s == mesh.sharding(P("x", "y"))
    assert mesh.sharding(P(None, "y")) == mesh.sharding(None, "y")
    assert mesh.sharding(P(("x", "y"))) == mesh.sharding(("x", "y"))
    a = random_array((4, 6), np.float32)
    x = rt.put(a, s)
    np.testing.assert_array_equal(x.to_numpy(), a)
    # Mesh position (i, j) is device ids[2 i + j]: logical device 3 holds tile (0, 0).
    by_device = {shard.device_id: shard for shard in x.shards}
    np.testing.assert_array_equal(by_device[3].to_numpy(), a[0:2, 0:3])
    np.testing.assert_array_equal(by_device[0].to_numpy(), a[2:4, 3:6])


def test_mesh_errors():
    mesh = shardrt.Mesh({"x": 4, "y": 2})
    with pytest.raises(ValueError, match="'z'"):
        mesh.sharding("z", None)
    with pytest.raises(ValueError):
        mesh.sharding("x", "x")
    with pytest.raises(ValueError):
        shardrt.Mesh({"x": 4}, device_ids=[0, 1]).sharding("x")


def test_put_casts_only_when_asked(rt):
    a = np.arange(16, dtype=np.float64) / np.sqrt(32)  # float64 under NumPy 2
    assert rt.put(a).dtype == np.float64  # never cast silently
    x = rt.put(a, "{devices=[8]<=[8]}", dtype=np.float32)
    assert x.dtype == np.float32 and x.sharding == shardrt.Sharding("{devices=[8]<=[8]}")
    np.testing.assert_array_equal(x.to_numpy(), a.astype(np.float32))
    assert rt.put(np.arange(4), dtype="bfloat16").type_name == "bf16"
    assert rt.put(a, dtype=np.float64).dtype == np.float64  # the same dtype: no copy needed
    with pytest.raises(TypeError):
        rt.put(a, dtype="not a dtype")
