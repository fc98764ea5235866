"""jax.Array in and out of shardrt, shard by shard: rt.put of a jax.Array (and of JAX shardings),
shardrt.Mesh of a jax.sharding.Mesh, jax.Array arguments of a Computation, and Array.to_jax,
each checked against JAX itself (8 CPU devices, a 4x2 mesh).

"No global host copy" is checked, not assumed: while data moves, jax.Array's host conversions
(__array__, _value) and shardrt's downloads (Array.to_numpy / __array__ / download_into,
Shard.to_numpy) raise, and the memory each shard is read from or lands in is compared by
address: the per-device upload reads each JAX shard's own buffer (DLPack), and each shard of
to_jax's result is the shardrt shard's buffer itself (JAX's CPU backend takes it in place)."""

import contextlib
import os
import subprocess
import sys
from unittest import mock

import numpy as np
import pytest

import shardrt
from _util import random_array

jax = pytest.importorskip("jax")
jnp = jax.numpy
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P  # noqa: E402

RT_MESH = shardrt.Mesh({"x": 4, "y": 2})
PERMUTED = [1, 0, 3, 2, 5, 4, 7, 6]


@pytest.fixture(scope="module")
def mesh():
    assert len(jax.devices()) >= 8, "conftest sets JAX_NUM_CPU_DEVICES=8 before importing jax"
    return Mesh(np.array(jax.devices()[:8]).reshape(4, 2), ("x", "y"))


@pytest.fixture(scope="module")
def permuted_mesh():
    return Mesh(np.array([jax.devices()[i] for i in PERMUTED]).reshape(4, 2), ("x", "y"))


def padded(spec, rank):
    return tuple(spec) + (None,) * (rank - len(tuple(spec)))


def pointer(tensor) -> int:
    """The address of a host tensor's first element, through DLPack (no copy)."""
    return np.from_dlpack(tensor).ctypes.data


@contextlib.contextmanager
def no_global_host_copy():
    """Within the block, converting any jax.Array to host memory, or downloading any shardrt
    array or shard, raises AssertionError."""
    array_type = type(jnp.zeros(1))
    fail = AssertionError("a host copy was made")
    with contextlib.ExitStack() as stack:
        stack.enter_context(mock.patch.object(array_type, "__array__", side_effect=fail))
        stack.enter_context(mock.patch.object(
            array_type, "_value", new_callable=mock.PropertyMock, side_effect=fail))
        for name in ("to_numpy", "__array__", "download_into"):
            stack.enter_context(mock.patch.object(shardrt.Array, name, side_effect=fail))
        stack.enter_context(mock.patch.object(shardrt.Shard, "to_numpy", side_effect=fail))
        yield


@contextlib.contextmanager
def upload_spy():
    """Records the address of every shard the per-device upload (_put_shards) reads."""
    seen: list[int] = []
    real = shardrt._shardrt._put_shards

    def spy(runtime, parts, *args):
        seen.extend(pointer(p) for p in parts)
        return real(runtime, parts, *args)

    with mock.patch.object(shardrt._shardrt, "_put_shards", spy):
        yield seen


def jax_shard_on(j, device_id):
    (shard,) = [s for s in j.addressable_shards if s.device.id == device_id]
    return shard


def bounds(index, shape):
    """A shard index (tuple of slices) as (start, stop) per dim: JAX writes slice(None) for a
    dim it does not split, shardrt the explicit range."""
    return tuple(s.indices(n)[:2] for s, n in zip(index, shape))


def assert_same_shards(x, j):
    """shardrt array x and jax.Array j hold the same data at the same indices on each device."""
    assert sorted(x.device_ids) == sorted(d.id for d in j.sharding.device_set)
    for shard in x.shards:
        js = jax_shard_on(j, shard.device_id)
        assert bounds(shard.index, x.shape) == bounds(js.index, j.shape)
        np.testing.assert_array_equal(shard.to_numpy(), np.asarray(js.data))


def test_importing_shardrt_does_not_import_jax():
    code = "import sys, shardrt; assert 'jax' not in sys.modules, 'jax imported'; print('ok')"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, env=dict(os.environ))
    assert done.returncode == 0 and "ok" in done.stdout, done.stderr[-2000:]


# --- the done-when ----------------------------------------------------------------------

def mlp(x, w1, b1, w2):
    return jnp.tanh(jnp.maximum(x @ w1 + b1, 0.0) @ w2)


def test_jax_array_through_exported_program_without_global_host_copy(rt, mesh):
    specs = [P("x", None), P(None, "y"), P("y"), P("y", None)]
    shapes = [(16, 8), (8, 12), (12,), (12, 4)]
    in_sh = tuple(NamedSharding(mesh, s) for s in specs)
    out_sh = NamedSharding(mesh, P("x", "y"))
    jitted = jax.jit(mlp, in_shardings=in_sh, out_shardings=out_sh)
    exported = jax.export.export(jitted)(*[jax.ShapeDtypeStruct(s, jnp.float32) for s in shapes])
    c = rt.compile(exported)
    inputs = [jax.device_put(random_array(s, np.float32, 300 + i), sh)
              for i, (s, sh) in enumerate(zip(shapes, in_sh))]
    reference = jitted(*inputs)

    with no_global_host_copy(), upload_spy() as read:
        args = [rt.put(j) for j in inputs]  # each keeps its JAX sharding
        (out,) = c(*args)
        result = out.to_jax(mesh=mesh)
        result.block_until_ready()

    # The upload read every JAX shard in place: the addresses it read are the JAX buffers'.
    expected_reads = [jax_shard_on(j, d).data.unsafe_buffer_pointer()
                      for j, a in zip(inputs, args) for d in a.device_ids]
    assert read == expected_reads
    for j, a, spec in zip(inputs, args, specs):
        assert a.sharding == RT_MESH.sharding(*padded(spec, j.ndim))
        assert a.sharding == c.parameter_shardings[args.index(a)]
        assert_same_shards(a, j)

    # Out: a jax.Array on the same mesh and sharding as JAX's own result, each shard on the
    # device JAX puts it, at the same index, being the shardrt shard's memory itself.
    assert isinstance(result, jax.Array)
    assert result.sharding == out_sh and reference.sharding == out_sh
    assert result.shape == reference.shape and result.dtype == reference.dtype
    by_device = {s.device_id: s for s in out.shards}
    for shard in result.addressable_shards:
        ref = jax_shard_on(reference, shard.device.id)
        assert bounds(shard.index, result.shape) == bounds(ref.index, reference.shape)
        assert shard.data.unsafe_buffer_pointer() == pointer(by_device[shard.device.id])
        np.testing.assert_allclose(np.asarray(shard.data), np.asarray(ref.data),
                                   rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(result), np.asarray(reference), rtol=1e-5, atol=1e-6)
    # And JAX computes on it as on its own arrays.
    np.testing.assert_allclose(np.asarray(jax.jit(lambda v: v * 2)(result)),
                               np.asarray(reference) * 2, rtol=1e-5, atol=1e-6)


def test_the_guards_catch_global_host_copies(rt, mesh):
    # The check above is real: each guarded conversion raises inside no_global_host_copy().
    j = jax.device_put(np.ones((8, 4), np.float32), NamedSharding(mesh, P("x", "y")))
    x = rt.put(j)
    with no_global_host_copy():
        for convert in (lambda: np.asarray(j), lambda: x.to_numpy(), lambda: np.asarray(x),
                        lambda: x.shards[0].to_numpy(), lambda: jax.device_get(j)):
            with pytest.raises(AssertionError, match="host copy"):
                convert()


# --- shardings ----------------------------------------------------------------------------------

SPECS = [P("x", "y"), P("x"), P(None, "y"), P(), P(("x", "y")), P("y", "x"), P(("y", "x"), None)]


@pytest.mark.parametrize("spec", SPECS, ids=str)
def test_named_sharding_in_put_equals_mesh_spec(rt, mesh, spec):
    a = random_array((16, 8), np.float32, 310)
    expected = RT_MESH.sharding(*padded(spec, 2))
    via_named = rt.put(a, NamedSharding(mesh, spec))
    assert via_named.sharding == expected
    assert str(via_named.sharding) == str(expected)
    assert via_named.device_ids == list(range(8))
    # The same from a PartitionSpec with either kind of mesh, and from shardrt.Mesh(jax mesh).
    assert rt.put(a, spec, mesh=mesh).sharding == expected
    assert rt.put(a, spec, mesh=RT_MESH).sharding == expected
    assert shardrt.Mesh(mesh).sharding(*padded(spec, 2)) == expected
    assert shardrt.Mesh(mesh).sharding(P(*padded(spec, 2))) == expected
    # JAX's own placement of the same spec: the same data on each device.
    assert_same_shards(via_named, jax.device_put(a, NamedSharding(mesh, spec)))
    # A jax.Array keeps its own sharding; put_shards and reshard take NamedShardings too.
    j = jax.device_put(a, NamedSharding(mesh, spec))
    assert rt.put(j).sharding == expected
    shards = [jax_shard_on(j, d).data for d in range(8)]
    assert rt.put_shards(shards, a.shape, NamedSharding(mesh, spec)).sharding == expected
    moved = rt.reshard(rt.put(a), NamedSharding(mesh, spec))
    assert moved.sharding == expected
    np.testing.assert_array_equal(moved.to_numpy(), a)


def test_mesh_of_a_jax_mesh(mesh):
    m = shardrt.Mesh(mesh)
    assert m.axes == (("x", 4), ("y", 2))
    assert m.device_ids == tuple(range(8))
    assert m.jax_mesh is mesh
    assert m.size == 8


def test_permuted_mesh_gives_an_explicit_device_list(rt, permuted_mesh):
    m = shardrt.Mesh(permuted_mesh)
    assert m.device_ids == tuple(PERMUTED)
    sharding = m.sharding(P("x", "y"))
    assert str(sharding) == "{devices=[4,2]1,0,3,2,5,4,7,6}"
    assert sharding == shardrt.Mesh({"x": 4, "y": 2}, PERMUTED).sharding("x", "y")
    assert sharding != RT_MESH.sharding("x", "y")
    a = random_array((16, 8), np.float32, 320)
    assert rt.put(a, NamedSharding(permuted_mesh, P("x", "y"))).sharding == sharding
    j = jax.device_put(a, NamedSharding(permuted_mesh, P("x", "y")))
    x = rt.put(j)
    assert x.sharding == sharding
    assert_same_shards(x, j)
    # Back on the permuted mesh: each JAX shard on its device is that device's shardrt shard.
    back = x.to_jax(mesh=permuted_mesh)
    assert back.sharding == NamedSharding(permuted_mesh, P("x", "y"))
    by_device = {s.device_id: s for s in x.shards}
    for shard in back.addressable_shards:
        assert bounds(shard.index, a.shape) == bounds(jax_shard_on(j, shard.device.id).index,
                                                     a.shape)
        assert shard.data.unsafe_buffer_pointer() == pointer(by_device[shard.device.id])
    np.testing.assert_array_equal(np.asarray(back), a)


def test_jax_arrays_on_some_devices_keep_them(rt):
    a = random_array((8, 6), np.float32, 330)
    sub = Mesh(np.array(jax.devices()[4:8]).reshape(2, 2), ("x", "y"))
    j = jax.device_put(a, NamedSharding(sub, P("x", "y")))
    x = rt.put(j)
    assert x.device_ids == [4, 5, 6, 7]
    assert x.sharding == shardrt.Sharding("{devices=[2,2]<=[4]}")
    assert_same_shards(x, j)
    one = rt.put(jax.device_put(a, jax.devices()[3]))
    assert one.device_ids == [3] and one.sharding.is_replicated
    np.testing.assert_array_equal(one.to_numpy(), a)
    # Onto other devices: from a whole-array shard each device's part is read in place ...
    spread = rt.put(jax.device_put(a, jax.devices()[3]), "{devices=[8,1]<=[8]}")
    assert spread.device_ids == list(range(8))
    np.testing.assert_array_equal(spread.to_numpy(), a)
    # ... and a split one is moved by JAX first.
    moved = rt.put(j, NamedSharding(Mesh(np.array(jax.devices()[:8]), ("x",)), P("x")))
    assert moved.device_ids == list(range(8))
    assert moved.sharding == shardrt.Sharding("{devices=[8,1]<=[8]}")
    np.testing.assert_array_equal(moved.to_numpy(), a)


def test_put_jax_array_with_another_sharding_reshards(rt, mesh):
    a = random_array((16, 8), np.float32, 340)
    j = jax.device_put(a, NamedSharding(mesh, P("x", "y")))
    for target in (NamedSharding(mesh, P("y", "x")), "{devices=[8,1]<=[8]}",
                   shardrt.Sharding.replicated(), RT_MESH.sharding(None, "x")):
        x = rt.put(j, target)
        expected = target if isinstance(target, shardrt.Sharding) else (
            shardrt.Sharding(target) if isinstance(target, str)
            else RT_MESH.sharding("y", "x"))
        assert x.sharding == expected
        np.testing.assert_array_equal(x.to_numpy(), a)
    with upload_spy() as read:
        x = rt.put(j, P("y", "x"), mesh=mesh)  # put with JAX's own sharding, then resharded
    assert read == [jax_shard_on(j, d).data.unsafe_buffer_pointer() for d in range(8)]
    assert x.sharding == RT_MESH.sharding("y", "x")
    # dtype= casts in JAX.
    half = rt.put(j, dtype=np.float16)
    assert half.dtype == np.float16 and half.sharding == RT_MESH.sharding("x", "y")
    np.testing.assert_array_equal(half.to_numpy(), a.astype(np.float16))


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.bool_, np.float16, "bfloat16"])
def test_dtypes_round_trip(rt, mesh, dtype):
    if dtype == "bfloat16":
        dtype = pytest.importorskip("ml_dtypes").bfloat16
    a = random_array((8, 4), dtype, 350)
    j = jax.device_put(a, NamedSharding(mesh, P("x", "y")))
    x = rt.put(j)
    assert x.dtype == a.dtype
    np.testing.assert_array_equal(x.to_numpy(), a)
    back = x.to_jax()
    assert back.dtype == j.dtype
    np.testing.assert_array_equal(np.asarray(back), a)


# --- computations -------------------------------------------------------------------------------

def test_jax_arrays_passed_to_a_computation(rt, mesh):
    x_sh, w_sh = NamedSharding(mesh, P("x", "y")), NamedSharding(mesh, P("y", None))
    jitted = jax.jit(lambda x, w: jnp.tanh(x @ w), in_shardings=(x_sh, w_sh),
                     out_shardings=NamedSharding(mesh, P("x", None)))
    c = rt.compile(jax.export.export(jitted)(jax.ShapeDtypeStruct((16, 8), jnp.float32),
                                             jax.ShapeDtypeStruct((8, 4), jnp.float32)))
    x = jax.device_put(random_array((16, 8), np.float32, 360), x_sh)
    w = jax.device_put(random_array((8, 4), np.float32, 361), w_sh)
    reference = np.asarray(jitted(x, w))
    with no_global_host_copy():
        (out,) = c(x, w)
        (mixed,) = c(rt.put(x), w)
        (scheduled,) = c.call_async(x, w)
        scheduled.block_until_ready()
    for o in (out, mixed, scheduled):
        np.testing.assert_allclose(o.to_numpy(), reference, rtol=1e-5, atol=1e-6)
    # A jax.Array sharded otherwise, or on one device, is put with the parameter's sharding.
    (other,) = c(jax.device_put(np.asarray(x), NamedSharding(mesh, P(None, "x"))),
                 jax.device_put(np.asarray(w), jax.devices()[5]))
    np.testing.assert_allclose(other.to_numpy(), reference, rtol=1e-5, atol=1e-6)
    # Other values stay refused.
    with pytest.raises(TypeError, match="argument 1 is a .*, expected shardrt.Array"):
        c(x, np.asarray(w))


# --- to_jax -------------------------------------------------------------------------------------

@pytest.mark.parametrize("text", ["{replicated}", "{devices=[8,1]<=[8]}", "{devices=[4,2]<=[8]}",
                                  "{devices=[2,1,4]<=[8] last_tile_dim_replicate}",
                                  "{devices=[4,2]7,6,5,4,3,2,1,0}"])
def test_to_jax_round_trip(rt, text):
    a = random_array((16, 6), np.float32, 370)
    x = rt.put(a, text)
    with no_global_host_copy():
        j = shardrt.to_jax(x)
    assert isinstance(j, jax.Array) and j.shape == a.shape and j.dtype == a.dtype
    assert len(j.addressable_shards) == 8
    assert_same_shards(x, j)
    by_device = {s.device_id: s for s in x.shards}
    for shard in j.addressable_shards:
        assert shard.data.unsafe_buffer_pointer() == pointer(by_device[shard.device.id])
    np.testing.assert_array_equal(np.asarray(j), a)
    # JAX's reading of the sharding places the array as shardrt's does.
    assert rt.put(j).sharding == x.sharding
    np.testing.assert_array_equal(np.asarray(jax.jit(lambda v: v + 1)(j)), a + 1)


def test_to_jax_on_a_mesh_finds_the_partition_spec(rt, mesh):
    a = random_array((16, 8), np.float32, 380)
    for spec in SPECS:
        x = rt.put(a, RT_MESH.sharding(*padded(spec, 2)))
        j = x.to_jax(mesh=shardrt.Mesh(mesh))
        assert j.sharding.mesh is mesh
        assert j.sharding.is_equivalent_to(NamedSharding(mesh, spec), 2)
        np.testing.assert_array_equal(np.asarray(j), a)


def test_to_jax_outlives_the_array(rt):
    a = random_array((8, 4), np.float32, 390)
    x = rt.put(a, "{devices=[8,1]<=[8]}")
    j = x.to_jax()
    x.delete()
    del x
    np.testing.assert_array_equal(np.asarray(j), a)


def test_to_jax_of_uneven_shards(rt):
    a = random_array((10, 4), np.float32, 400)
    x = rt.put(a, "{devices=[4,1]<=[4]}")  # shards of 3, 3, 3 and 1 (+2 padding) rows
    with pytest.raises(ValueError, match=r"JAX arrays need even shards.*dim 0 .*size 10.* 4 ways"):
        x.to_jax()
    # Replicated first, it goes over whole.
    j = rt.replicate(x).to_jax()
    assert [s.device.id for s in j.addressable_shards] == [0, 1, 2, 3]
    np.testing.assert_array_equal(np.asarray(j), a)
    # An even split of the same array works.
    even = rt.put(a, "{devices=[2,2]<=[4]}").to_jax()
    assert_same_shards(rt.put(a, "{devices=[2,2]<=[4]}"), even)


# --- errors -------------------------------------------------------------------------------------

def test_partition_spec_without_mesh(rt):
    with pytest.raises(ValueError, match="a PartitionSpec .* only on a mesh: pass mesh="):
        rt.put(np.zeros((8, 4), np.float32), P("x"))
    j = jax.device_put(np.zeros((8, 4), np.float32), jax.devices()[0])
    with pytest.raises(ValueError, match="only on a mesh"):
        rt.put(j, P("x"))


def test_rank_mismatch_and_bad_entries(rt, mesh):
    a = np.zeros((8, 4), np.float32)
    with pytest.raises(ValueError, match=r"has 3 entries, more than the array's rank 2"):
        rt.put(a, NamedSharding(mesh, P("x", "y", None)))
    with pytest.raises(ValueError, match=r"has 3 entries, more than the array's rank 2"):
        rt.put(a, P("x", None, "y"), mesh=mesh)
    with pytest.raises(ValueError, match="UNCONSTRAINED"):
        rt.put(a, P("x", P.UNCONSTRAINED), mesh=RT_MESH)
    with pytest.raises(ValueError, match="z"):
        rt.put(a, P("z"), mesh=RT_MESH)
    with pytest.raises(ValueError, match="mesh= goes with a PartitionSpec"):
        rt.put(a, "{replicated}", mesh=mesh)
    with pytest.raises(TypeError, match="expected a shardrt.Sharding, sharding text or None"
                                        ".* got object"):
        rt.put(a, object())
    with pytest.raises(TypeError, match="mesh= takes a shardrt.Mesh or a jax.sharding.Mesh"):
        rt.put(a, P("x"), mesh={"x": 8})
    with pytest.raises(TypeError, match="pass no device_ids"):
        shardrt.Mesh(mesh, [0, 1, 2, 3, 4, 5, 6, 7])


def test_unmappable_devices(rt, mesh):
    a = random_array((8, 4), np.float32, 410)
    j = jax.device_put(a, NamedSharding(mesh, P("x", "y")))
    small = shardrt.Runtime(devices=4, compile_cache="")
    with pytest.raises(ValueError, match=r"JAX device id\(s\) \[4, 5, 6, 7\] have no shardrt "
                                         r"device: JAX device id k is shardrt device id k"):
        small.put(j)
    with pytest.raises(ValueError, match="have no shardrt device"):
        small.put(a, NamedSharding(mesh, P("x", "y")))
    # A JAX mesh whose ids are not 0..N-1 is no shardrt.Mesh (rt.put takes it as a sharding).
    upper = Mesh(np.array(jax.devices()[4:8]).reshape(2, 2), ("x", "y"))
    with pytest.raises(ValueError, match=r"device ids must be 0..3 in some order; this mesh "
                                         r"has \[4, 5, 6, 7\]"):
        shardrt.Mesh(upper)
    # Out: shardrt devices the mesh lacks, and placements no spec of the mesh gives.
    x = rt.put(a, "{devices=[4,2]<=[8]}")
    with pytest.raises(ValueError, match=r"shardrt device\(s\) \[0, 1, 2, 3\] have no JAX device"):
        x.to_jax(mesh=upper)
    odd = rt.put(a, "{devices=[8,1]0,1,2,3,4,5,7,6}")
    with pytest.raises(ValueError, match="no PartitionSpec of the mesh"):
        odd.to_jax(mesh=mesh)
    np.testing.assert_array_equal(np.asarray(odd.to_jax()), a)  # its own mesh does
    with pytest.raises(TypeError, match="mesh= takes a jax.sharding.Mesh"):
        x.to_jax(mesh=RT_MESH)
    with pytest.raises(ValueError, match="reshard keeps the array's devices"):
        rt.reshard(rt.put(a, devices=[0, 1, 2, 3]), NamedSharding(mesh, P("x", "y")))
