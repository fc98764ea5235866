"""Checks that GgufFile's dequantization (through tests/model/dequant_tool) is bit-identical to
the gguf Python package's (GGUFReader + gguf.quants.dequantize) on every tensor of a model, and
on a few sub-rectangles.

usage: test_dequant.py DEQUANT_TOOL MODEL
Prints "<n> tensors, <m> floats, bit-identical" and exits 0, or names the first mismatch and
exits 1.
"""
import io
import subprocess
import sys

import numpy as np
from gguf import GGUFReader
from gguf.quants import dequantize


def reference(tensor) -> np.ndarray:
    """The tensor dequantized by the gguf package, as rows of dims[0] f32 values."""
    values = np.asarray(dequantize(tensor.data, tensor.tensor_type), dtype=np.float32)
    return values.reshape(-1, int(tensor.shape[0]))


def read_record(stream, what: str) -> tuple[str, np.ndarray]:
    line = stream.readline()
    if not line:
        raise SystemExit(f"FAIL: the tool's output ended before {what}")
    name, count = line.decode().rstrip("\n").rsplit(" ", 1)
    data = stream.read(int(count) * 4)
    if len(data) != int(count) * 4:
        raise SystemExit(f"FAIL: tensor {name}: expected {int(count) * 4} bytes, got {len(data)}")
    return name, np.frombuffer(data, dtype=np.float32)


def compare(name: str, got: np.ndarray, want: np.ndarray) -> None:
    """Exits with the first differing element unless the two are bit-identical."""
    want = np.ascontiguousarray(want, dtype=np.float32).ravel()
    if got.size != want.size:
        raise SystemExit(f"FAIL: tensor {name}: {got.size} floats, expected {want.size}")
    diff = np.flatnonzero(got.view(np.uint32) != want.view(np.uint32))
    if diff.size:
        i = int(diff[0])
        raise SystemExit(f"FAIL: tensor {name}: {diff.size} floats differ; first at index {i}: "
                         f"got {got[i]!r} (0x{got.view(np.uint32)[i]:08x}), expected {want[i]!r} "
                         f"(0x{want.view(np.uint32)[i]:08x})")


def main() -> int:
    tool, model = sys.argv[1], sys.argv[2]
    reader = GGUFReader(model)

    floats = 0
    with subprocess.Popen([tool, model], stdout=subprocess.PIPE) as proc:
        for tensor in reader.tensors:
            name, got = read_record(proc.stdout, f"tensor {tensor.name}")
            if name != tensor.name:
                raise SystemExit(f"FAIL: expected tensor {tensor.name}, got {name}")
            compare(name, got, reference(tensor))
            floats += got.size
        if proc.stdout.read(1):
            raise SystemExit("FAIL: the tool wrote more tensors than the file has")
    if proc.returncode != 0:
        raise SystemExit(f"FAIL: {tool} exited with {proc.returncode}")

    # Sub-rectangles: rows [r0, r1) x columns [c0, c1) of the full dequantization.
    by_type: dict[str, object] = {}
    for tensor in reader.tensors:
        if len(tensor.shape) >= 2:
            by_type.setdefault(tensor.tensor_type.name, tensor)
    rects = 0
    for tensor in by_type.values():
        cols, rows = int(tensor.shape[0]), int(np.prod(tensor.shape[1:]))
        c_mid = min(256, cols)
        for r0, r1, c0, c1 in [(min(100, rows), min(200, rows), min(64, c_mid), c_mid),
                               (0, 1, 0, min(32, cols)),
                               (max(0, rows - 3), rows, max(0, cols - 96), cols),
                               (min(5, rows), min(5, rows), 0, cols)]:
            out = subprocess.run([tool, model, "--rect", tensor.name, str(r0), str(r1), str(c0),
                                  str(c1)], stdout=subprocess.PIPE, check=True).stdout
            name, got = read_record(io.BytesIO(out), tensor.name)
            compare(f"{name}[{r0}:{r1}, {c0}:{c1}]", got, reference(tensor)[r0:r1, c0:c1])
            rects += 1

    print(f"{len(reader.tensors)} tensors, {floats} floats, bit-identical "
          f"(and {rects} sub-rectangles of {', '.join(sorted(by_type))} tensors)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
