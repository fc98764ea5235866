"""Programs on 8 devices, written as StableHLO text (the style of tests/testdata): elementwise
add, matmuls whose shardings need collectives (partial replication, split contraction), several
outputs with different shardings, uneven shardings, integer and boolean types, Shardy
annotations; results against NumPy. Also the Computation's properties and compile's inputs."""

import numpy as np
import pytest

import shardrt
from _util import module, random_array, tensor, valid_part

ROWS = "{devices=[8,1]<=[8]}"
TILE_4x2 = "{devices=[4,2]<=[8]}"

ADD = module("add", [("x", "tensor<8x6xf32>", TILE_4x2), ("y", "tensor<8x6xf32>", TILE_4x2)],
             [("tensor<8x6xf32>", TILE_4x2)], """
    %z = stablehlo.add %x, %y : tensor<8x6xf32>
    return %z : tensor<8x6xf32>
""")

# x: rows over 4 groups, contraction dim over 2; w: contraction rows over the same 2 (devices
# of equal parity, i.e. device order T(1,0)), replicated over 4; y: rows over 4, replicated over
# 2: each partial product is summed over the 2 (an all-reduce).
MATMUL_ALLREDUCE = module(
    "matmul_allreduce",
    [("x", "tensor<8x16xf32>", TILE_4x2),
     ("w", "tensor<16x6xf32>", "{devices=[2,1,4]<=[4,2]T(1,0) last_tile_dim_replicate}")],
    [("tensor<8x6xf32>", "{devices=[4,1,2]<=[8] last_tile_dim_replicate}")], """
    %y = stablehlo.dot_general %x, %w, contracting_dims = [1] x [0]
        : (tensor<8x16xf32>, tensor<16x6xf32>) -> tensor<8x6xf32>
    return %y : tensor<8x6xf32>
""")

# Contraction split over all 8 devices, the result replicated (all-reduce over 8).
MATMUL_SPLIT_K = module(
    "matmul_split_k",
    [("x", "tensor<5x24xf64>", "{devices=[1,8]<=[8]}"), ("w", "tensor<24x3xf64>", ROWS)],
    [("tensor<5x3xf64>", "{replicated}")], """
    %y = stablehlo.dot_general %x, %w, contracting_dims = [1] x [0]
        : (tensor<5x24xf64>, tensor<24x3xf64>) -> tensor<5x3xf64>
    return %y : tensor<5x3xf64>
""")

# Four outputs, four shardings: 2x (as x), column sums (replicated), the transpose (split by
# columns of x, i.e. rows of the result... as given), row maxima (partially replicated).
MULTI = module(
    "multi",
    [("x", "tensor<16x8xf32>", TILE_4x2)],
    [("tensor<16x8xf32>", TILE_4x2),
     ("tensor<8xf32>", "{replicated}"),
     ("tensor<8x16xf32>", "{devices=[2,4]<=[4,2]T(1,0)}"),
     ("tensor<16xf32>", "{devices=[4,2]<=[8] last_tile_dim_replicate}")], """
    %two = stablehlo.constant dense<2.0> : tensor<16x8xf32>
    %d = stablehlo.multiply %x, %two : tensor<16x8xf32>
    %zero = stablehlo.constant dense<0.0> : tensor<f32>
    %s = stablehlo.reduce(%x init: %zero) applies stablehlo.add across dimensions = [0]
        : (tensor<16x8xf32>, tensor<f32>) -> tensor<8xf32>
    %t = stablehlo.transpose %x, dims = [1, 0] : (tensor<16x8xf32>) -> tensor<8x16xf32>
    %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
    %m = stablehlo.reduce(%x init: %ninf) applies stablehlo.maximum across dimensions = [1]
        : (tensor<16x8xf32>, tensor<f32>) -> tensor<16xf32>
    return %d, %s, %t, %m : tensor<16x8xf32>, tensor<8xf32>, tensor<8x16xf32>, tensor<16xf32>
""")

# Uneven: 13 rows over 8 devices (2 each; device 6 holds one row, device 7 only padding),
# 10x7 over a 4x2 tiling (3 rows / 4 columns per tile).
UNEVEN = module(
    "uneven",
    [("x", "tensor<13x5xf32>", ROWS), ("y", "tensor<10x7xf32>", TILE_4x2)],
    [("tensor<13x5xf32>", ROWS), ("tensor<5xf32>", "{replicated}"),
     ("tensor<10x7xf32>", "{devices=[2,4]<=[8]}"), ("tensor<f32>", "{replicated}")], """
    %three = stablehlo.constant dense<3.0> : tensor<13x5xf32>
    %one = stablehlo.constant dense<1.0> : tensor<13x5xf32>
    %m = stablehlo.multiply %x, %three : tensor<13x5xf32>
    %a = stablehlo.subtract %m, %one : tensor<13x5xf32>
    %zero = stablehlo.constant dense<0.0> : tensor<f32>
    %s = stablehlo.reduce(%x init: %zero) applies stablehlo.add across dimensions = [0]
        : (tensor<13x5xf32>, tensor<f32>) -> tensor<5xf32>
    %e = stablehlo.exponential %y : tensor<10x7xf32>
    %t = stablehlo.reduce(%y init: %zero) applies stablehlo.add across dimensions = [0, 1]
        : (tensor<10x7xf32>, tensor<f32>) -> tensor<f32>
    return %a, %s, %e, %t : tensor<13x5xf32>, tensor<5xf32>, tensor<10x7xf32>, tensor<f32>
""")

# Integers and booleans: x * x + y (s32), x > y (pred), the u8 input widened to s64 and summed.
INTS = module(
    "ints",
    [("x", "tensor<8x4xi32>", TILE_4x2), ("y", "tensor<8x4xi32>", TILE_4x2),
     ("b", "tensor<16xui8>", "{devices=[8]<=[8]}")],
    [("tensor<8x4xi32>", TILE_4x2), ("tensor<8x4xi1>", "{devices=[2,4]<=[4,2]T(1,0)}"),
     ("tensor<i64>", "{replicated}")], """
    %sq = stablehlo.multiply %x, %x : tensor<8x4xi32>
    %z = stablehlo.add %sq, %y : tensor<8x4xi32>
    %gt = stablehlo.compare GT, %x, %y : (tensor<8x4xi32>, tensor<8x4xi32>) -> tensor<8x4xi1>
    %wide = stablehlo.convert %b : (tensor<16xui8>) -> tensor<16xi64>
    %zero = stablehlo.constant dense<0> : tensor<i64>
    %s = stablehlo.reduce(%wide init: %zero) applies stablehlo.add across dimensions = [0]
        : (tensor<16xi64>, tensor<i64>) -> tensor<i64>
    return %z, %gt, %s : tensor<8x4xi32>, tensor<8x4xi1>, tensor<i64>
""")

# Shardy annotations (sdy dialect): the compiler is told to use the Shardy partitioner.
SHARDY = """
module @shardy_mlp attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32} {
  sdy.mesh @mesh = <["x"=4, "y"=2]>
  func.func public @main(%x: tensor<16x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>},
                         %w: tensor<8x6xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"y"}]>})
      -> (tensor<16x6xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {"y"}]>},
          tensor<6xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}]>}) {
    %h = stablehlo.dot_general %x, %w, contracting_dims = [1] x [0]
        : (tensor<16x8xf32>, tensor<8x6xf32>) -> tensor<16x6xf32>
    %t = stablehlo.tanh %h : tensor<16x6xf32>
    %zero = stablehlo.constant dense<0.0> : tensor<f32>
    %s = stablehlo.reduce(%t init: %zero) applies stablehlo.add across dimensions = [0]
        : (tensor<16x6xf32>, tensor<f32>) -> tensor<6xf32>
    return %t, %s : tensor<16x6xf32>, tensor<6xf32>
  }
}
"""


def test_add(rt):
    f = rt.compile(ADD)
    a, b = random_array((8, 6), np.float32, 1), random_array((8, 6), np.float32, 2)
    x, y = rt.put(a, TILE_4x2), rt.put(b, TILE_4x2)
    (z,) = f(x, y)
    assert isinstance(z, shardrt.Array)
    assert z.sharding == shardrt.Sharding(TILE_4x2) and z.shape == (8, 6)
    np.testing.assert_array_equal(z.to_numpy(), a + b)
    # The arguments are not donated: they stay usable and unchanged.
    np.testing.assert_array_equal(x.to_numpy(), a)
    (z2,) = f(z, x)
    np.testing.assert_array_equal(z2.to_numpy(), (a + b) + a)


def test_matmul_partial_replication_all_reduce(rt):
    f = rt.compile(MATMUL_ALLREDUCE)
    assert f.parameter_shardings == [
        shardrt.Sharding(TILE_4x2),
        shardrt.Sharding("{devices=[2,1,4]<=[4,2]T(1,0) last_tile_dim_replicate}")]
    a, w = random_array((8, 16), np.float32, 3), random_array((16, 6), np.float32, 4)
    x = rt.put(a, f.parameter_shardings[0])
    ww = rt.put(w, f.parameter_shardings[1])
    (y,) = f(x, ww)
    assert y.sharding == shardrt.Sharding("{devices=[4,1,2]<=[8] last_tile_dim_replicate}")
    np.testing.assert_allclose(y.to_numpy(), a @ w, rtol=1e-5, atol=1e-5)
    # Each row block is on the two devices of its group, the same values on both.
    shards = y.shards
    for i in range(0, 8, 2):
        np.testing.assert_array_equal(shards[i].to_numpy(), shards[i + 1].to_numpy())
        np.testing.assert_allclose(shards[i].to_numpy(), (a @ w)[shards[i].index],
                                   rtol=1e-5, atol=1e-5)


def test_matmul_testdata_partial_replication(rt, testdata):
    f = rt.compile(open(f"{testdata}/partial_replication_matmul.mlir").read())
    a, w = random_array((8, 6), np.float32, 5), random_array((6, 4), np.float32, 6)
    (y,) = f(rt.put(a, f.parameter_shardings[0]), rt.put(w))
    np.testing.assert_allclose(y.to_numpy(), a @ w, rtol=1e-5, atol=1e-5)


def test_matmul_split_contraction_f64(rt):
    f = rt.compile(MATMUL_SPLIT_K)
    a, w = random_array((5, 24), np.float64, 7), random_array((24, 3), np.float64, 8)
    (y,) = f(rt.put(a, "{devices=[1,8]<=[8]}"), rt.put(w, ROWS))
    assert y.sharding.is_replicated and y.dtype == np.float64
    np.testing.assert_allclose(y.to_numpy(), a @ w, rtol=1e-12)
    for shard in y.shards:  # every device holds the whole sum
        np.testing.assert_allclose(shard.to_numpy(), a @ w, rtol=1e-12)


def test_multiple_outputs_with_different_shardings(rt):
    f = rt.compile(MULTI)
    assert f.num_outputs == 4
    a = random_array((16, 8), np.float32, 9)
    d, s, t, m = f(rt.put(a, TILE_4x2))
    np.testing.assert_array_equal(d.to_numpy(), 2 * a)
    np.testing.assert_allclose(s.to_numpy(), a.sum(0), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(t.to_numpy(), a.T)
    np.testing.assert_array_equal(m.to_numpy(), a.max(1))
    assert [o.sharding for o in (d, s, t, m)] == f.output_shardings
    assert s.sharding.is_replicated
    assert t.sharding == shardrt.Sharding("{devices=[2,4]<=[4,2]T(1,0)}")
    for out, ref in ((d, 2 * a), (t, a.T), (m, a.max(1))):
        for shard in out.shards:
            np.testing.assert_array_equal(valid_part(shard.to_numpy(), shard.index),
                                          ref[shard.index])


def test_uneven_program(rt):
    f = rt.compile(UNEVEN)
    assert f.parameter_shapes == [("f32", (13, 5)), ("f32", (10, 7))]
    assert f.output_shapes == [("f32", (13, 5)), ("f32", (5,)), ("f32", (10, 7)), ("f32", ())]
    a, b = random_array((13, 5), np.float32, 10), random_array((10, 7), np.float32, 11)
    x, y = rt.put(a, ROWS), rt.put(b, TILE_4x2)
    assert x.shards[7].index[0] == slice(13, 13)  # device 7 holds only padding
    r, s, e, t = f(x, y)
    np.testing.assert_allclose(r.to_numpy(), a * np.float32(3) - np.float32(1), rtol=1e-6)
    np.testing.assert_allclose(s.to_numpy(), a.sum(0), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(e.to_numpy(), np.exp(b), rtol=1e-5)
    np.testing.assert_allclose(t.to_numpy(), b.sum(), rtol=1e-4, atol=1e-4)
    assert e.shape == (10, 7) and e.sharding == shardrt.Sharding("{devices=[2,4]<=[8]}")
    for shard in e.shards:
        np.testing.assert_allclose(valid_part(shard.to_numpy(), shard.index),
                                   np.exp(b)[shard.index], rtol=1e-5)


def test_uneven_four_device_program_from_testdata(rt, testdata):
    # 4 partitions on the 8-device runtime: it runs on the first 4 devices.
    f = rt.compile(open(f"{testdata}/uneven_two_outputs.mlir").read())
    assert f.num_devices == 4
    a = random_array((10, 3), np.float32, 12)
    x = rt.put(a, "{devices=[4,1]<=[4]}")
    assert x.device_ids == [0, 1, 2, 3]
    y, s = f(x)
    np.testing.assert_allclose(y.to_numpy(), 2 * a + 1, rtol=1e-6)
    np.testing.assert_allclose(s.to_numpy(), a.sum(0), rtol=1e-5, atol=1e-5)
    assert y.device_ids == [0, 1, 2, 3]


def test_integer_and_boolean_program(rt):
    f = rt.compile(INTS)
    assert [t for t, _ in f.parameter_shapes] == ["s32", "s32", "u8"]
    assert [t for t, _ in f.output_shapes] == ["s32", "pred", "s64"]
    rng = np.random.default_rng(13)
    a = rng.integers(-1000, 1000, (8, 4)).astype(np.int32)
    b = rng.integers(-1000, 1000, (8, 4)).astype(np.int32)
    u = rng.integers(0, 256, 16).astype(np.uint8)
    z, gt, s = f(rt.put(a, TILE_4x2), rt.put(b, TILE_4x2), rt.put(u, "{devices=[8]<=[8]}"))
    np.testing.assert_array_equal(z.to_numpy(), a * a + b)
    assert gt.dtype == np.bool_
    np.testing.assert_array_equal(gt.to_numpy(), a > b)
    assert s.dtype == np.int64 and s.to_numpy() == u.astype(np.int64).sum()


@pytest.mark.parametrize("type_name,dtype", [("f16", np.float16), ("bf16", "bfloat16"),
                                             ("f64", np.float64)])
def test_low_and_high_precision_floats(rt, type_name, dtype):
    if dtype == "bfloat16":
        ml_dtypes = pytest.importorskip("ml_dtypes")
        dtype = ml_dtypes.bfloat16
    t = tensor((8, 4), type_name)
    f = rt.compile(module(f"scale_{type_name}", [("x", t, TILE_4x2)], [(t, ROWS)], f"""
        %y = stablehlo.add %x, %x : {t}
        return %y : {t}
    """))
    a = random_array((8, 4), dtype, 14)
    (y,) = f(rt.put(a, TILE_4x2))
    assert y.dtype == np.dtype(dtype) and y.sharding == shardrt.Sharding(ROWS)
    np.testing.assert_array_equal(y.to_numpy(), a + a)  # doubling is exact in every format


def test_shardy_program(rt):
    f = rt.compile(SHARDY)
    a, w = random_array((16, 8), np.float32, 15), random_array((8, 6), np.float32, 16)
    x = rt.put(a, f.parameter_shardings[0])
    ww = rt.put(w, f.parameter_shardings[1])
    mesh = shardrt.Mesh({"x": 4, "y": 2})
    assert f.parameter_shardings == [mesh.sharding("x", None), mesh.sharding(None, "y")]
    assert f.output_shardings == [mesh.sharding("x", "y"), shardrt.Sharding.replicated()]
    t, s = f(x, ww)
    ref = np.tanh(a @ w)
    np.testing.assert_allclose(t.to_numpy(), ref, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(s.to_numpy(), ref.sum(0), rtol=1e-4, atol=1e-4)


def test_shardy_testdata(rt, testdata):
    f = rt.compile(open(f"{testdata}/shardy_row_sum.mlir").read())
    a = random_array((16, 4), np.float32, 17)
    y, s = f(rt.put(a, f.parameter_shardings[0]))
    np.testing.assert_array_equal(y.to_numpy(), 2 * a)
    np.testing.assert_allclose(s.to_numpy(), a.sum(0), rtol=1e-5, atol=1e-5)


def test_computation_properties(rt, testdata):
    f = rt.compile(MATMUL_SPLIT_K.replace("@matmul_split_k", "@props"), name="splitk")
    assert f.name == "splitk"
    assert f.num_devices == 8
    assert f.num_parameters == 2 and f.num_outputs == 1
    assert f.parameter_shapes == [("f64", (5, 24)), ("f64", (24, 3))]
    assert f.output_shapes == [("f64", (5, 3))]
    assert f.parameter_shardings == [shardrt.Sharding("{devices=[1,8]<=[8]}"),
                                     shardrt.Sharding(ROWS)]
    assert [s.is_replicated for s in f.output_shardings] == [True]
    assert f.donated_parameters == []
    g = rt.compile(open(f"{testdata}/donate_add_one.mlir").read())
    assert g.name == "main"
    assert g.donated_parameters == [0]
    assert g.parameter_shapes == [("f32", (16, 4))] and g.output_shapes == [("f32", (16, 4))]
    assert isinstance(g, shardrt.Computation)


def test_compile_accepts_bytes_and_is_cached(rt):
    f = rt.compile(ADD)
    g = rt.compile(ADD.encode())
    h = rt.compile(bytearray(ADD.encode()))
    a = random_array((8, 6), np.float32, 18)
    x = rt.put(a, TILE_4x2)
    for c in (f, g, h):
        np.testing.assert_array_equal(c(x, x)[0].to_numpy(), a + a)
    before = shardrt.metrics()["counters"].get("UncachedCompile", 0)
    rt.compile(ADD)
    assert shardrt.metrics()["counters"].get("UncachedCompile", 0) == before


def test_compile_for_declared_partitions_read_as_mlir_reads_them(rt):
    # A count in a comment or a string is not the module's; any whitespace before '='.
    text = module("declared", [("x", "tensor<8xf32>", "{devices=[4]<=[4]}")],
                  [("tensor<8xf32>", "{devices=[4]<=[4]}")], """
        %y = stablehlo.add %x, %x : tensor<8xf32>
        return %y : tensor<8xf32>
    """, partitions=4)
    commented = "// mhlo.num_partitions = 2 (a comment)\n" + text
    spaced = text.replace("mhlo.num_partitions = 4", "mhlo.num_partitions" + " " * 2_000_000 + "= 4")
    a = np.arange(8, dtype=np.float32)
    for program in (commented, spaced):
        f = rt.compile(program)
        assert f.num_devices == 4
        np.testing.assert_array_equal(f(rt.put(a, "{devices=[4]<=[4]}"))[0].to_numpy(), 2 * a)


def test_main_found_as_mlir_writes_it(rt):
    # A space before '(' and an '@main(' in a comment before the real one (docs/errors.md).
    text = """// not this: func.func public @main(%x: tensor<12x3xf32>)
module @m attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main (%x: tensor<10x3xf32>) -> tensor<3xf32> {
    %zero = stablehlo.constant dense<0.0> : tensor<f32>
    %s = stablehlo.reduce(%x init: %zero) applies stablehlo.add across dimensions = [0]
        : (tensor<10x3xf32>, tensor<f32>) -> tensor<3xf32>
    return %s : tensor<3xf32>
  }
}
"""
    f = rt.compile(text)
    assert f.parameter_shapes == [("f32", (10, 3))]
    a = random_array((10, 3), np.float32, 19)
    (s,) = f(rt.put(a, devices=[0]))
    np.testing.assert_allclose(s.to_numpy(), a.sum(0), rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match=r"expected f32\[10,3\].*got f32\[12,3\]"):
        f(rt.put(random_array((12, 3), np.float32), devices=[0]))


def test_reshard_argument_on_call(rt):
    f = rt.compile(ADD)
    a = random_array((8, 6), np.float32, 20)
    x_rows = rt.put(a, ROWS)
    y = rt.put(a, TILE_4x2)
    with pytest.raises(ValueError, match="expected f32"):
        f(x_rows, y)
    (z,) = f(x_rows, y, reshard=True)
    np.testing.assert_array_equal(z.to_numpy(), a + a)
    assert x_rows.sharding == shardrt.Sharding(ROWS)  # resharded a copy


def test_single_device_program(rt, testdata):
    f = rt.compile(open(f"{testdata}/single_device_axpy.mlir").read())
    assert f.num_devices == 1 and f.parameter_shapes == [("f32", ()), ("f32", (6,)),
                                                         ("f32", (6,))]
    a, x, b = np.float32(1.5), random_array(6, np.float32, 21), random_array(6, np.float32, 22)
    # A replicated put spans every device unless told which: this program runs on device 0.
    with pytest.raises(ValueError, match="on 1 device, got .* on 8 devices"):
        f(rt.put(a), rt.put(x), rt.put(b))
    (y,) = f(*(rt.put(v, devices=[0]) for v in (a, x, b)))
    assert y.device_ids == [0]
    np.testing.assert_allclose(y.to_numpy(), a * x + b, rtol=1e-6)


def test_many_calls_keep_values(rt):
    f = rt.compile(ADD)
    a = random_array((8, 6), np.float32, 22)
    one = rt.put(np.ones((8, 6), np.float32), TILE_4x2)
    x = rt.put(a, TILE_4x2)
    ref = a.copy()
    for _ in range(200):
        (x,) = f(x, one)
        ref = ref + np.float32(1)
    np.testing.assert_array_equal(x.to_numpy(), ref)
