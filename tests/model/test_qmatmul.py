"""Checks the quantized matrix kernels (tests/model/qmatmul_tool) on every path this CPU runs
against an independent computation: W dequantized by the gguf Python package
(gguf.quants.dequantize), then a NumPy float64 product.

Random blocks of every type the kernels take (F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0,
Q4_K, Q6_K; scales drawn as finite f16 values, every other byte random), odd shapes, 1 to 300
rows of x. A product, in either order of the sums (MatmulOrder), must lie within 2e-5 of sum
|x| |w| per output (f32 sums in another order); with MatmulOrder::kPerRow each row of y must
have the bits it has when its row of x is the only one; a row gather, and quants.h's
dequantization of the whole matrix, must be bit-identical to the gguf package's
dequantization.

usage: test_qmatmul.py QMATMUL_TOOL
Prints a line per path and exits 0, or names the first mismatch and exits 1.
"""
import subprocess
import sys

import numpy as np
from gguf import GGMLQuantizationType as T
from gguf.constants import GGML_QUANT_SIZES
from gguf.quants import dequantize

# Byte offsets of the f16 scale fields inside a block of each type.
SCALE_FIELDS = {T.Q4_0: [0], T.Q4_1: [0, 2], T.Q5_0: [0], T.Q5_1: [0, 2], T.Q8_0: [0],
                T.Q4_K: [0, 2], T.Q6_K: [208]}
TYPES = [T.F32, T.F16, T.BF16, T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q8_0, T.Q4_K, T.Q6_K]


def random_matrix(rng, qtype, rows, cols):
    """rows x cols values of `qtype` as raw bytes (rows, row_bytes), uint8."""
    block, size = GGML_QUANT_SIZES[qtype]
    if qtype == T.F32:
        return rng.standard_normal((rows, cols)).astype(np.float32).view(np.uint8)
    if qtype == T.F16:
        return rng.standard_normal((rows, cols)).astype(np.float16).view(np.uint8)
    if qtype == T.BF16:
        bits = rng.standard_normal((rows, cols)).astype(np.float32).view(np.uint32) >> 16
        return bits.astype(np.uint16).view(np.uint8)
    blocks = rng.integers(0, 256, size=(rows, cols // block, size), dtype=np.uint8)
    for at in SCALE_FIELDS[qtype]:
        scales = (rng.standard_normal((rows, cols // block)) * 0.02).astype(np.float16)
        blocks[:, :, at:at + 2] = scales.view(np.uint8).reshape(rows, cols // block, 2)
    return blocks.reshape(rows, -1)


def run(tool, args, stdin):
    out = subprocess.run([tool, *map(str, args)], input=stdin, capture_output=True, check=False)
    if out.returncode != 0:
        raise SystemExit(f"FAIL: qmatmul_tool {' '.join(map(str, args))}: "
                         f"{out.stderr.decode().strip()}")
    return np.frombuffer(out.stdout, dtype=np.float32)


def shapes(qtype):
    block = GGML_QUANT_SIZES[qtype][0]
    cols = [1, 7, 33, 100, 16, 64] if block == 1 else ([block, 3 * block, 17 * block] if block == 32
                                               else [block, 3 * block])
    for rows in (1, 5, 37):
        for c in cols:
            for s in (1, 2, 3, 4, 5, 8, 9, 17, 64) + ((300,) if rows == 5 else ()):
                yield rows, c, s


def main() -> int:
    tool = sys.argv[1]
    isas = subprocess.run([tool, "--isas"], capture_output=True, check=True,
                          text=True).stdout.split()
    if "generic" not in isas:
        raise SystemExit("FAIL: the generic path is missing")
    rng = np.random.default_rng(24)
    checks = {isa: 0 for isa in isas}
    for qtype in TYPES:
        for rows, cols, s in shapes(qtype):
            w_bytes = random_matrix(rng, qtype, rows, cols)
            w = np.asarray(dequantize(w_bytes, qtype), dtype=np.float32).reshape(rows, cols)
            x = rng.standard_normal((s, cols)).astype(np.float32)
            want = x.astype(np.float64) @ w.astype(np.float64).T
            bound = 2e-5 * (np.abs(x).astype(np.float64) @ np.abs(w).astype(np.float64).T)
            ids = rng.integers(-2, rows + 2, size=s).astype(np.int32)
            if s == 1:
                deq = run(tool, ["dequant", "generic", int(qtype), rows, cols, 0],
                          w_bytes.tobytes())
                if deq.tobytes() != w.tobytes():
                    raise SystemExit(f"FAIL: quants.h {qtype.name} {rows}x{cols}: the "
                                     "dequantized matrix differs from the gguf package's")
            for isa in isas:
                args = [isa, int(qtype), rows, cols, s]
                fastest, per_row, alone = run(tool, ["matmul", *args],
                                              w_bytes.tobytes() + x.tobytes()).reshape(3, s, rows)
                for order, got in (("fastest", fastest), ("per-row", per_row)):
                    bad = np.abs(got - want) > bound
                    if bad.any():
                        i, r = map(int, np.argwhere(bad)[0])
                        raise SystemExit(
                            f"FAIL: {isa} {qtype.name} {rows}x{cols}, {s} rows of x, {order}: "
                            f"y[{i}, {r}] = {got[i, r]!r}, expected {want[i, r]!r} within "
                            f"{bound[i, r]:.3g}")
                if per_row.tobytes() != alone.tobytes():
                    i = int(np.argwhere((per_row != alone).any(axis=1))[0][0])
                    raise SystemExit(
                        f"FAIL: {isa} {qtype.name} {rows}x{cols}, {s} rows of x, per-row: row "
                        f"{i} of y differs from the same row of x alone")
                rows_got = run(tool, ["gather", *args], w_bytes.tobytes() + ids.tobytes())
                inside = (ids >= 0) & (ids < rows)
                rows_want = np.zeros((s, cols), dtype=np.float32)
                rows_want[inside] = w[ids[inside]]
                if rows_got.tobytes() != rows_want.tobytes():
                    raise SystemExit(f"FAIL: {isa} {qtype.name} {rows}x{cols}: gathered rows "
                                     f"{ids.tolist()} differ from the gguf package's")
                checks[isa] += 1
    for isa, n in checks.items():
        print(f"{isa}: {n} products and gathers match ({len(TYPES)} types)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
