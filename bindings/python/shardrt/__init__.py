"""shardrt: SPMD (sharded, multi-device) XLA programs on sharded data, through the PJRT C API.

    import numpy as np, shardrt
    rt = shardrt.Runtime(devices=8)                       # the pinned XLA CPU plugin, 8 devices
    x = rt.put(np.arange(64, dtype=np.float32).reshape(16, 4), "{devices=[8,1]<=[8]}")
    f = rt.compile(stablehlo_text)                        # or MLIR bytecode, or a JAX
                                                          # Lowered / jax.export.Exported
    (y,) = f(x)                                           # one PJRT launch on all 8 devices
    y.to_numpy()

The same runtime as the C++ library (libshardrt), not a reimplementation: an Array is one
sharded array (global shape, element type, sharding, one buffer per device); calling a
Computation runs it once on all its devices. Transfers, compilation and execution release the
GIL, and every object may be shared between Python threads. Errors are exceptions carrying the
library's message: ValueError for bad arguments, TimeoutError for waits that time out,
RuntimeError for the plugin's failures.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from typing import Any, Iterator, Mapping, NamedTuple, Sequence

import numpy as np

from . import _shardrt
from ._shardrt import Array, Computation, Shard, Sharding, metrics_report, metrics_reset

__version__ = "0.1.0"

__all__ = [
    "Array",
    "Computation",
    "Device",
    "Mesh",
    "Runtime",
    "Shard",
    "Sharding",
    "default_plugin",
    "metrics",
    "metrics_report",
    "metrics_reset",
    "release",
]

# The environment variable naming another PJRT plugin (as for the C++ library and the CLI).
PLUGIN_ENV = "SHARDRT_PJRT_PLUGIN"

def _type_name(dtype: np.dtype) -> str | None:
    """The XLA type name of a NumPy dtype where its DLPack code does not say it (bfloat16)."""
    return "bf16" if dtype.name == "bfloat16" else None


def default_plugin() -> str:
    """The PJRT plugin a Runtime loads without plugin=: $SHARDRT_PJRT_PLUGIN when set, else the
    XLA CPU plugin of the installed xla-cpu-pjrt package (a dependency of this one)."""
    path = os.environ.get(PLUGIN_ENV)
    if path:
        return path
    try:
        import xla_plugins.xla_cpu_pjrt as cpu  # type: ignore[import-not-found]
    except ImportError as e:
        raise ValueError(
            f"no PJRT plugin: the xla-cpu-pjrt package is not installed and {PLUGIN_ENV} is "
            "not set; pass plugin= or install xla-cpu-pjrt==0.0.1") from e
    return os.path.join(os.path.dirname(cpu.__file__), "xla_cpu_pjrt.so")


class Device(NamedTuple):
    id: int
    kind: str


class Mesh:
    """A named N-d array of devices, as JAX's Mesh: axes in order with their sizes, and the
    device ids in row-major mesh order (default 0..N-1)."""

    def __init__(self, axes: Mapping[str, int] | Sequence[tuple[str, int]],
                 device_ids: Sequence[int] | None = None):
        items = list(axes.items()) if isinstance(axes, Mapping) else list(axes)
        self.axes: tuple[tuple[str, int], ...] = tuple((str(n), int(s)) for n, s in items)
        self.device_ids: tuple[int, ...] = tuple(int(d) for d in device_ids or ())

    @property
    def size(self) -> int:
        n = 1
        for _, s in self.axes:
            n *= s
        return n

    def sharding(self, *spec: str | Sequence[str] | None) -> Sharding:
        """The sharding of an array of rank len(spec) laid out by the partition spec `spec`: per
        array dim None (not split), an axis name, or a tuple of axis names (major to minor), as
        JAX's PartitionSpec (a jax.sharding.PartitionSpec may be passed as the only argument)."""
        # jax.sharding.PartitionSpec is no tuple in recent JAX (its class is jax.P, aliased).
        if len(spec) == 1 and type(spec[0]).__name__ in ("PartitionSpec", "P"):
            spec = tuple(spec[0])
        dims: list[list[str]] = []
        for entry in spec:
            if entry is None:
                dims.append([])
            elif isinstance(entry, str):
                dims.append([entry])
            else:
                dims.append([str(a) for a in entry])
        return Sharding.named(list(self.axes), list(self.device_ids), dims)

    def __repr__(self) -> str:
        return f"shardrt.Mesh({dict(self.axes)})"


def _as_sharding(sharding: Sharding | str | None) -> Sharding:
    if sharding is None:
        return Sharding.replicated()
    if isinstance(sharding, Sharding):
        return sharding
    if isinstance(sharding, str):
        return Sharding(sharding)
    raise TypeError(f"expected a shardrt.Sharding, sharding text or None, got {type(sharding).__name__}")


# What a NumPy dtype kind that no device element type matches holds, for messages.
_DTYPE_KINDS = {"O": "Python objects", "U": "unicode strings", "S": "byte strings",
                "V": "structured or raw bytes", "M": "dates and times", "m": "time differences"}


def _host_array(array: Any) -> np.ndarray:
    """`array` as a C-contiguous NumPy array: no copy when it already is one. TypeError for
    arrays that hold no numbers (object, string, structured, date and time dtypes)."""
    a = np.asarray(array)
    # Kind "V" is also that of ml_dtypes' bfloat16 and float8 types, which are numbers.
    if a.dtype.kind in "OUSMm" or (a.dtype.kind == "V" and (
            a.dtype.fields is not None or a.dtype.name.startswith("void"))):
        raise TypeError(f"expected an array of numbers or booleans, got dtype {a.dtype} "
                        f"({_DTYPE_KINDS[a.dtype.kind]}), which has no device element type")
    if not a.dtype.isnative:
        a = a.astype(a.dtype.newbyteorder("="))  # e.g. big-endian '>f4': the same values
    if not a.flags.c_contiguous:
        a = np.ascontiguousarray(a)
    return a


def _raw(a: np.ndarray) -> np.ndarray:
    """`a` as the extension can read it: bfloat16 (which neither DLPack nor the buffer protocol
    of NumPy export) as its uint16 bits, a view; the element type travels as _type_name(a)."""
    return a.view(np.uint16) if _type_name(a.dtype) == "bf16" else a


def _declared_partitions(data: bytes) -> int | None:
    """The mhlo.num_partitions the text program `data` declares, None when it declares none,
    is MLIR bytecode, or cannot be read (the library's compile then says what is wrong)."""
    return _shardrt._declared_partitions(data)


def _program(program: Any) -> tuple[bytes, int | None, str | None]:
    """(program bytes, declared partition count or None, a default name) of what compile takes."""
    if isinstance(program, str):
        data = program.encode()
    elif isinstance(program, (bytes, bytearray, memoryview)):
        data = bytes(program)
    elif hasattr(program, "mlir_module") and hasattr(program, "nr_devices"):
        # jax.export.Exported: its StableHLO module as text (its shardings and global shapes).
        return program.mlir_module().encode(), int(program.nr_devices), getattr(
            program, "fun_name", None)
    elif hasattr(program, "as_text") and hasattr(program, "compiler_ir"):
        # jax.stages.Lowered: the StableHLO text it would compile.
        data = program.as_text().encode()
    else:
        raise TypeError(
            "compile takes StableHLO text (str), MLIR bytecode or text (bytes), a JAX Lowered "
            f"or a jax.export.Exported, not {type(program).__name__}")
    return data, _declared_partitions(data), None


class Runtime:
    """A PJRT plugin, its client and shardrt's runtime over it (the C++ Runtime).

    devices: devices to use (0: every device of the plugin; the CPU plugin makes as many as
    asked). plugin: the plugin's path (default: default_plugin()). host_threads: the host pool
    that moves shards and builds argument lists (0: one per core). compile_cache: a directory
    for the persistent compile cache ("" turns it off; None: $SHARDRT_COMPILE_CACHE if set).
    max_in_flight: executions call_async may have in flight before it blocks (0: 16).

    Thread-safe. Arrays and computations keep the runtime alive.
    """

    def __init__(self, devices: int = 0, *, plugin: str | os.PathLike[str] | None = None,
                 host_threads: int = 0, compile_cache: str | os.PathLike[str] | None = None,
                 max_in_flight: int = 0):
        if int(max_in_flight) < 0:  # (the library checks the other counts)
            raise ValueError(f"Runtime: max_in_flight must be >= 0, got {max_in_flight}")
        path = os.fspath(plugin) if plugin is not None else default_plugin()
        cache = os.fspath(compile_cache) if compile_cache is not None else None
        try:
            self._rt = _shardrt._create_runtime(int(devices), path, int(host_threads), cache,
                                               int(max_in_flight))
        except ValueError as e:
            # The library names its C++ option fields; here they are this call's keywords.
            raise ValueError(re.sub(r"RuntimeOptions::(devices|host_threads)\b",
                                    r"Runtime: \1", str(e))) from None

    # --- what it runs on -----------------------------------------------------------------
    @property
    def devices(self) -> list[Device]:
        return [Device(i, k) for i, k in zip(self._rt.device_ids, self._rt.device_kinds)]

    @property
    def platform(self) -> str:
        """What the plugin reports it is, e.g. 'cpu'."""
        return self._rt.platform

    @property
    def plugin_path(self) -> str:
        return self._rt.plugin_path

    @property
    def plugin_threads(self) -> int:
        """The plugin's worker threads when known (the CPU plugin reads $PJRT_NPROC), else 0."""
        return self._rt.plugin_threads

    @property
    def host_threads(self) -> int:
        return self._rt.host_threads

    @property
    def has_compile_cache(self) -> bool:
        return self._rt.has_compile_cache

    # --- data ----------------------------------------------------------------------------
    def put(self, array: Any, sharding: Sharding | str | None = None, *,
            devices: Sequence[int] | None = None, dtype: Any = None) -> Array:
        """Uploads a host array (NumPy, or anything np.asarray takes) split by `sharding`
        (default replicated) over `devices` (ids; default the first devices the sharding
        needs). Only each device's shard travels; a C-contiguous NumPy array goes up from its
        own memory, without a host copy. `dtype` (anything np.dtype takes) casts the values to
        it first, on request only (NumPy's rules, as ndarray.astype); without it the array's
        own dtype goes up unchanged (e.g. float64 stays float64)."""
        a = _host_array(array)
        if dtype is not None and a.dtype != np.dtype(dtype):
            a = _host_array(a.astype(np.dtype(dtype)))
        return _shardrt._put(self._rt, _raw(a), _as_sharding(sharding),
                             None if devices is None else list(devices), _type_name(a.dtype))

    def put_shards(self, shards: Sequence[Any], shape: Sequence[int],
                   sharding: Sharding | str, *, devices: Sequence[int] | None = None) -> Array:
        """One array of global `shape` from per-device shards (host arrays with the padded
        shard shape, in the devices' order), e.g. DLPack tensors of another framework."""
        parts = [s if hasattr(s, "__dlpack__") and not isinstance(s, np.ndarray)
                 else _host_array(s) for s in shards]
        type_name = (_type_name(parts[0].dtype)
                     if parts and isinstance(parts[0], np.ndarray) else None)
        parts = [_raw(p) if isinstance(p, np.ndarray) else p for p in parts]
        return _shardrt._put_shards(self._rt, parts, tuple(int(d) for d in shape),
                                    _as_sharding(sharding),
                                    None if devices is None else list(devices), type_name)

    def from_dlpack(self, tensor: Any, *, device: int | None = None) -> Array:
        """A one-device array from a DLPack tensor in host memory (NumPy, JAX on CPU, torch on
        CPU, ...), read in place (no host copy) and uploaded to `device` (default the first)."""
        ids = [self.devices[0].id if device is None else int(device)]
        return _shardrt._put(self._rt, tensor, Sharding.replicated(), ids, None)

    def reshard(self, array: Array, sharding: Sharding | str) -> Array:
        """A copy of `array` with another sharding on the same devices (moved on device)."""
        return _shardrt._reshard(self._rt, array, _as_sharding(sharding))

    def replicate(self, array: Array) -> Array:
        """A copy of `array` replicated on its devices."""
        return _shardrt._replicate(self._rt, array)

    # --- programs ------------------------------------------------------------------------
    def compile(self, program: Any, *, name: str | None = None,
                devices: int | None = None) -> Computation:
        """Compiles a StableHLO program (MLIR text or bytecode, a JAX Lowered or a
        jax.export.Exported) for `devices` partitions (default: what the program declares,
        else every device of the runtime). Cached: compiling the same program again returns
        the same computation (and with a compile cache, later processes load it)."""
        data, declared, default_name = _program(program)
        partitions = devices if devices is not None else declared
        if partitions is None:
            partitions = len(self._rt.device_ids)
        return _shardrt._compile(self._rt, data, name or default_name or "main", int(partitions))

    def register_ffi_handler(self, target: str, handler: Any, *, platform: str = "Host") -> None:
        """Registers a custom kernel: an XLA FFI handler for `stablehlo.custom_call @target`.

        handler: a PyCapsule holding the handler's function pointer (XLA_FFI_DEFINE_HANDLER's
        symbol, e.g. from a ctypes-loaded library wrapped as jax.ffi.pycapsule does) or its
        address as an int; the library holding it must stay loaded. The handler must be built
        with XLA FFI headers of the API version the plugin implements (the CPU plugin: jaxlib
        0.9.0's). Registration is process-wide; the runtime then compiles a one-op program that
        calls `target` and raises when the plugin does not find the handler (e.g. it refused
        the handler's FFI API version). Raises ValueError for a bad target or null handler.
        """
        self._rt.register_ffi_handler(str(target), handler, str(platform))

    def synchronize(self) -> None:
        """Waits for every call_async scheduled so far to finish on the devices; raises the
        first error since the last synchronize."""
        self._rt.synchronize()

    def executor_stats(self) -> dict[str, int]:
        return self._rt.executor_stats()

    # --- observability -------------------------------------------------------------------
    @contextlib.contextmanager
    def trace(self, path: str | os.PathLike[str]) -> Iterator[None]:
        """Records shardrt's spans (compile, transfers, executions, executor) while the block
        runs and writes them to `path` as a Chrome trace (chrome://tracing, Perfetto)."""
        recorder = _shardrt._Trace()
        recorder.start()
        try:
            yield
        finally:
            recorder.stop()
            recorder.write(os.fspath(path))

    def __repr__(self) -> str:
        return f"shardrt.Runtime({self.platform}, {len(self._rt.device_ids)} devices)"


def metrics() -> dict[str, Any]:
    """Every metric and counter, PyTorch/XLA style, as {"metrics": {name: statistics of its
    samples}, "counters": {name: value}}: e.g. metrics()["metrics"]["ExecuteReplicatedTime"]."""
    return json.loads(_shardrt.metrics_json())


def release(arrays: Sequence[Array]) -> None:
    """Deletes these arrays together (each as Array.delete(): using one afterwards is a
    ValueError). Buffers nothing else holds are freed device by device, the order the plugin
    frees fastest: for dropping the outputs of a call with many outputs at once."""
    _shardrt._release_all(list(arrays))
