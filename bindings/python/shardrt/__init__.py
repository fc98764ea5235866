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

JAX is optional and never imported by `import shardrt`. Where JAX is in use, rt.put takes a
jax.Array (moved shard by shard, no global host copy) and jax.sharding shardings, Mesh takes a
jax.sharding.Mesh, a Computation takes jax.Array arguments, and Array.to_jax / to_jax give a
jax.Array back. The device rule: JAX device `d` is shardrt device id `d.id` (JAX's CPU backend
and the CPU plugin both number their devices 0..N-1).
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import re
import sys
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
    "to_jax",
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
    device ids in row-major mesh order (default 0..N-1).

    Mesh(jax_mesh) takes a jax.sharding.Mesh: its axis names and sizes, and its devices in
    its order, JAX device `d` being shardrt's logical device `d.id` (so its device ids must be
    0..N-1 in some order: ValueError otherwise; rt.put takes a NamedSharding over any JAX
    devices). A permuted device order gives shardings with an explicit device list. Immutable;
    thread-safe."""

    def __init__(self, axes: Mapping[str, int] | Sequence[tuple[str, int]] | Any,
                 device_ids: Sequence[int] | None = None):
        self._jax_mesh: Any = None
        if _is_jax_mesh(axes):
            if device_ids is not None:
                raise TypeError("Mesh: a jax.sharding.Mesh brings its own devices; pass no "
                                "device_ids with it")
            ids = [int(d.id) for d in axes.devices.flat]
            if sorted(ids) != list(range(len(ids))):
                raise ValueError(
                    f"Mesh: JAX device id k is shardrt's logical device k, so a JAX mesh's "
                    f"device ids must be 0..{len(ids) - 1} in some order; this mesh has "
                    f"{ids} (rt.put takes a NamedSharding over any of the runtime's devices)")
            self._jax_mesh = axes
            axes, device_ids = [(str(n), int(k)) for n, k in axes.shape.items()], ids
        items = list(axes.items()) if isinstance(axes, Mapping) else list(axes)
        self.axes: tuple[tuple[str, int], ...] = tuple((str(n), int(s)) for n, s in items)
        self.device_ids: tuple[int, ...] = tuple(int(d) for d in device_ids or ())

    @property
    def size(self) -> int:
        n = 1
        for _, s in self.axes:
            n *= s
        return n

    @property
    def jax_mesh(self) -> Any:
        """The jax.sharding.Mesh this mesh was made from, else None."""
        return self._jax_mesh

    def sharding(self, *spec: str | Sequence[str] | None) -> Sharding:
        """The sharding of an array of rank len(spec) laid out by the partition spec `spec`: per
        array dim None (not split), an axis name, or a tuple of axis names (major to minor), as
        JAX's PartitionSpec (a jax.sharding.PartitionSpec may be passed as the only argument).
        ValueError for an axis the mesh lacks or uses twice, or an entry that is none of these
        (e.g. PartitionSpec.UNCONSTRAINED). Thread-safe."""
        if len(spec) == 1 and _is_partition_spec(spec[0]):
            spec = spec[0]
        return Sharding.named(list(self.axes), list(self.device_ids),
                              _spec_dims(spec, None, "Mesh.sharding"))

    def __repr__(self) -> str:
        return f"shardrt.Mesh({dict(self.axes)})"


# --- JAX interop ---------------------------------------------------------------------------------
# JAX stays optional: nothing here imports it until to_jax is called. A value counts as a JAX
# object only when the process has imported jax already (as it has when it holds one).
#
# The device rule: JAX device `d` is shardrt device id `d.id`. A shardrt Sharding numbers its
# logical devices 0..N-1 and an array's device_ids place them; from a JAX sharding, logical
# device i is the sharding's JAX device with the i-th smallest id, so a mesh over JAX devices
# 0..N-1 keeps their ids (a permuted mesh gives an explicit device list).


def _jax_module() -> Any:
    """The jax module when the process has imported it, else None (never imports it)."""
    return sys.modules.get("jax")


def _is_jax_array(x: Any) -> bool:
    jax = _jax_module()
    return jax is not None and isinstance(x, jax.Array)


def _is_jax_sharding(x: Any) -> bool:
    jax = _jax_module()
    return jax is not None and isinstance(x, jax.sharding.Sharding)


def _is_jax_mesh(x: Any) -> bool:
    jax = _jax_module()
    return jax is not None and isinstance(x, jax.sharding.Mesh)


def _is_partition_spec(x: Any) -> bool:
    # jax.sharding.PartitionSpec is no tuple in recent JAX (its class is jax.P, aliased).
    jax = _jax_module()
    return (jax is not None and isinstance(x, jax.sharding.PartitionSpec)) or type(
        x).__name__ in ("PartitionSpec", "P")


def _spec_dims(spec: Any, ndim: int | None, what: str) -> list[list[str]]:
    """A partition spec (PartitionSpec or a sequence of entries) as, per array dim, the mesh
    axes it is split over; padded with unsplit dims to `ndim` when given. ValueError for more
    entries than `ndim`, unreduced/reduced axes and entries that are no axis names."""
    if getattr(spec, "unreduced", None) or getattr(spec, "reduced", None):
        raise ValueError(f"{what}: the partition spec {spec} has unreduced or reduced axes, "
                         "which no sharding of stored data expresses")
    entries = tuple(spec)
    if ndim is not None and len(entries) > ndim:
        raise ValueError(f"{what}: the partition spec {spec} has {len(entries)} entries, more "
                         f"than the array's rank {ndim}")
    dims: list[list[str]] = []
    for entry in entries:
        if entry is None:
            dims.append([])
        elif isinstance(entry, str):
            dims.append([entry])
        else:
            try:
                names = list(entry)
            except TypeError:
                names = None
            if names is None or not all(isinstance(a, str) for a in names):
                raise ValueError(
                    f"{what}: partition spec entry {entry!r} is no mesh axis name, tuple of "
                    "axis names or None (an UNCONSTRAINED dim has no fixed placement)")
            dims.append(names)
    if ndim is not None:
        dims += [[] for _ in range(ndim - len(dims))]
    return dims


def _renumbered(sharding: Sharding, mapping: Sequence[int]) -> Sharding:
    """`sharding` with logical device i renamed mapping[i] (a permutation of 0..N-1)."""
    if list(mapping) == list(range(len(mapping))):
        return sharding
    if sharding.kind == "maximal":
        return Sharding(f"{{maximal device={mapping[sharding.maximal_device]}}}")
    if sharding.kind != "tiled":
        return sharding
    dims = ",".join(str(d) for d in sharding.tile_assignment_dims)
    devices = ",".join(str(mapping[d]) for d in sharding.tile_assignment_devices)
    types = sharding.subgroup_types
    suffix = ("" if not types else " last_tile_dim_replicate" if types == ["replicated"]
              else f" last_tile_dims={{{', '.join(types)}}}")
    return Sharding(f"{{devices=[{dims}]{devices}{suffix}}}")


def _canonical(sharding: Sharding, device_ids: Sequence[int]) -> tuple[Sharding, tuple[int, ...]]:
    """A placement (sharding over logical devices, the device id of each) renumbered so that
    logical device i is the i-th smallest id: equal results mean the same placement."""
    order = sorted(int(d) for d in device_ids)
    rank = {d: i for i, d in enumerate(order)}
    return _renumbered(sharding, [rank[int(d)] for d in device_ids]), tuple(order)


def _from_jax_sharding(jsh: Any, ndim: int, what: str) -> tuple[Sharding, list[int]]:
    """(the shardrt Sharding, shardrt device id of each of its logical devices) of the JAX
    sharding `jsh` for an array of rank `ndim` (see the device rule above)."""
    jax = _jax_module()
    if isinstance(jsh, jax.sharding.NamedSharding):
        mesh = jsh.mesh
        if not isinstance(mesh, jax.sharding.Mesh):
            raise TypeError(f"{what}: the NamedSharding's mesh is a {type(mesh).__name__}, "
                            "not a jax.sharding.Mesh of devices")
        ids = [int(d.id) for d in mesh.devices.flat]
        order = sorted(ids)
        rank = {d: i for i, d in enumerate(order)}
        axes = [(str(n), int(k)) for n, k in mesh.shape.items()]
        return (Sharding.named(axes, [rank[d] for d in ids], _spec_dims(jsh.spec, ndim, what)),
                order)
    try:  # any other JAX sharding: its HLO sharding over its device assignment
        hlo = jsh._to_xla_hlo_sharding(ndim)
        assignment = list(jsh._device_assignment)
    except AttributeError as e:
        raise TypeError(f"{what}: cannot read the placement of a {type(jsh).__name__}") from e
    ids = [int(d.id) for d in assignment]
    order = sorted(ids)
    rank = {d: i for i, d in enumerate(order)}
    return _renumbered(Sharding(str(hlo)), [rank[d] for d in ids]), order


def _placement(sharding: Any, ndim: int, mesh: Any, what: str) -> tuple[Sharding, list[int] | None]:
    """(Sharding, shardrt device ids of its logical devices or None for the default) of what
    put, put_shards and reshard take as a sharding."""
    if mesh is not None and not _is_partition_spec(sharding):
        raise ValueError(f"{what}: mesh= goes with a PartitionSpec sharding, not with a "
                         f"{type(sharding).__name__}")
    if sharding is None:
        return Sharding.replicated(), None
    if isinstance(sharding, Sharding):
        return sharding, None
    if isinstance(sharding, str):
        return Sharding(sharding), None
    if _is_partition_spec(sharding):
        if mesh is None:
            raise ValueError(f"{what}: a PartitionSpec ({sharding}) places an array only on a "
                             "mesh: pass mesh= (a shardrt.Mesh or jax.sharding.Mesh), or a "
                             "jax.sharding.NamedSharding")
        if isinstance(mesh, Mesh):
            return Sharding.named(list(mesh.axes), list(mesh.device_ids),
                                  _spec_dims(sharding, ndim, what)), None
        if _is_jax_mesh(mesh):
            return _from_jax_sharding(_jax_module().sharding.NamedSharding(mesh, sharding),
                                      ndim, what)
        raise TypeError(f"{what}: mesh= takes a shardrt.Mesh or a jax.sharding.Mesh, not "
                        f"{type(mesh).__name__}")
    if _is_jax_sharding(sharding):
        return _from_jax_sharding(sharding, ndim, what)
    raise TypeError(f"{what}: expected a shardrt.Sharding, sharding text or None (or a "
                    "jax.sharding sharding, or a PartitionSpec with mesh=), got "
                    f"{type(sharding).__name__}")


def _resolve_devices(runtime: Any, placed: list[int] | None, devices: Sequence[int] | None,
                     what: str) -> list[int] | None:
    """The device ids to pass the extension: `devices`, or those a JAX sharding placed (None
    where they are the runtime's default, its first devices). ValueError for a JAX device the
    runtime lacks, or `devices` contradicting the JAX sharding's."""
    if placed is None:
        return None if devices is None else list(devices)  # the extension checks the ids
    runtime_ids = list(runtime.device_ids)
    missing = [d for d in placed if d not in runtime_ids]
    if missing:
        raise ValueError(f"{what}: JAX device id(s) {missing} have no shardrt device: JAX "
                         f"device id k is shardrt device id k, and this runtime has devices "
                         f"{runtime_ids} (make the Runtime with more devices=)")
    if devices is not None and [int(d) for d in devices] != placed:
        raise ValueError(f"{what}: devices={list(devices)} contradicts the JAX sharding's "
                         f"devices {placed}")
    return None if placed == runtime_ids[:len(placed)] else placed


def _default_devices(sharding: Sharding, runtime: Any) -> list[int] | None:
    """The device ids MakeLayout places `sharding` on by default, None where unknown here."""
    ids = list(runtime.device_ids)
    n = sharding.num_devices
    if n is None:
        return ids if sharding.kind == "replicated" else None
    return ids[:n] if n <= len(ids) else None


def _put_jax(runtime: Any, x: Any, sharding: Any, devices: Sequence[int] | None, dtype: Any,
             mesh: Any, what: str) -> Array:
    """Runtime.put of the jax.Array `x` (see there), on the extension's runtime `runtime`."""
    if dtype is not None and x.dtype != np.dtype(dtype):
        x = x.astype(np.dtype(dtype))  # in JAX, on its devices
    if not x.is_fully_addressable:
        raise ValueError(f"{what}: the jax.Array is not fully addressable (other processes "
                         "hold some of its shards)")
    shape = tuple(int(d) for d in x.shape)
    own, own_ids = _from_jax_sharding(x.sharding, x.ndim, what)
    _resolve_devices(runtime, own_ids, None, what)

    def upload(y: Any, sh: Sharding, ids: list[int]) -> Array:
        # Each device's jax shard goes up from its own memory (DLPack, no host copy).
        by_device = {int(s.device.id): s for s in y.addressable_shards}
        parts = [by_device[d].data for d in ids]
        return _shardrt._put_shards(runtime, parts, shape, sh,
                                    _resolve_devices(runtime, ids, None, what), None)

    if sharding is None:
        target = own
        target_ids = own_ids if devices is None else [int(d) for d in devices]
    else:
        target, placed = _placement(sharding, x.ndim, mesh, what)
        if placed is not None:
            _resolve_devices(runtime, placed, devices, what)
            target_ids = placed
        elif devices is not None:
            target_ids = [int(d) for d in devices]
        else:
            target_ids = _default_devices(target, runtime)
    if target_ids == own_ids:
        array = upload(x, own, own_ids)
        return array if target == own else _shardrt._reshard(runtime, array, target)
    if own.kind in ("replicated", "maximal"):
        # One shard holds the whole array: read in place, each device's part goes up.
        d = own_ids[0] if own.kind == "replicated" else own_ids[own.maximal_device]
        whole = next(s for s in x.addressable_shards if int(s.device.id) == d).data
        return _shardrt._put(runtime, whole, target, target_ids, None)
    if target_ids is None:
        raise ValueError(f"{what}: cannot tell the devices of {target} for a jax.Array split "
                         f"over JAX devices {own_ids}: pass devices=")
    # Split over other devices: JAX moves it onto the target placement (device to device).
    jax = _jax_module()
    jsh, _ = _jax_sharding(target, target_ids, shape, None, what)
    return upload(jax.device_put(x, jsh), target, target_ids)


def _convert_argument(runtime: Any, sharding: Sharding, device_ids: Sequence[int],
                      value: Any) -> Array | None:
    """A Computation's argument that is no Array: a jax.Array put with the parameter's sharding
    on the parameter's devices (the extension calls this), None for anything else."""
    if not _is_jax_array(value):
        return None
    return _put_jax(runtime, value, sharding, list(device_ids), None, None, "call")


def _find_spec(sharding: Sharding, device_ids: Sequence[int], ndim: int, mesh: Any) -> Any:
    """A PartitionSpec placing an array of rank `ndim` on the JAX mesh `mesh` as `sharding`
    over `device_ids` does, else None (the simplest first: unused axes before used ones)."""
    jax = _jax_module()
    target = _canonical(sharding, device_ids)
    names = list(mesh.axis_names)
    if (ndim + 1) ** len(names) > 1 << 16:
        return None
    for assignment in itertools.product(range(-1, ndim), repeat=len(names)):
        groups = [[n for n, a in zip(names, assignment) if a == k] for k in range(ndim)]
        for orders in itertools.product(*[itertools.permutations(g) for g in groups]):
            spec = jax.sharding.PartitionSpec(
                *[(o[0] if len(o) == 1 else tuple(o)) if o else None for o in orders])
            placed = _from_jax_sharding(jax.sharding.NamedSharding(mesh, spec), ndim, "to_jax")
            if _canonical(*placed) == target:
                return spec
    return None


def _jax_sharding(sharding: Sharding, device_ids: Sequence[int], shape: Sequence[int],
                  mesh: Any, what: str) -> tuple[Any, dict[int, Any]]:
    """(the JAX sharding placing an array of `shape` as `sharding` over shardrt `device_ids`
    does, the JAX device of each shardrt device id). On `mesh` a NamedSharding of it (ValueError
    when no PartitionSpec of it places the array so); without one a NamedSharding of a mesh
    made from the sharding (axes 'dim0'.. and 'replica'), a SingleDeviceSharding for a maximal
    one. ValueError for a manual sharding, uneven shards (JAX keeps even shards only) and
    devices without JAX counterpart."""
    import jax  # to_jax is JAX's way in: importing it here is the caller's request
    from jax.sharding import NamedSharding, PartitionSpec, SingleDeviceSharding

    if isinstance(mesh, Mesh):
        if mesh.jax_mesh is None:
            raise TypeError(f"{what}: mesh= takes a jax.sharding.Mesh (or a shardrt.Mesh made "
                            "from one)")
        mesh = mesh.jax_mesh
    if mesh is not None and not isinstance(mesh, jax.sharding.Mesh):
        raise TypeError(f"{what}: mesh= takes a jax.sharding.Mesh, not {type(mesh).__name__}")
    pool = list(mesh.devices.flat) if mesh is not None else jax.devices()
    by_id = {int(d.id): d for d in pool}
    missing = [int(d) for d in device_ids if int(d) not in by_id]
    if missing:
        raise ValueError(
            f"{what}: shardrt device(s) {missing} have no JAX device: shardrt device id k is "
            f"the JAX device with id k, and {'the mesh' if mesh is not None else 'jax.devices()'}"
            f" has ids {sorted(by_id)}")
    kind = sharding.kind
    if kind == "manual" or "manual" in sharding.subgroup_types:
        raise ValueError(f"{what}: a manual sharding ({sharding}) has no JAX equivalent")
    if kind == "maximal":
        return SingleDeviceSharding(by_id[int(device_ids[sharding.maximal_device])]), by_id
    if kind == "tiled":
        for k, (n, t) in enumerate(zip(shape, sharding.tile_assignment_dims)):
            if n % t:
                raise ValueError(
                    f"{what}: JAX arrays need even shards, but dim {k} of shape {tuple(shape)} "
                    f"(size {n}) is split {t} ways by {sharding} (shardrt pads the last "
                    "shards): reshard so that each split dim divides evenly, or replicate")
    if mesh is not None:
        spec = _find_spec(sharding, device_ids, len(shape), mesh)
        if spec is None:
            raise ValueError(
                f"{what}: no PartitionSpec of the mesh {dict(mesh.shape)} (device ids "
                f"{[int(d.id) for d in mesh.devices.flat]}) places the array as {sharding} "
                f"on devices {list(device_ids)} does; pass no mesh for one made from the "
                "sharding")
        return NamedSharding(mesh, spec), by_id
    if kind == "replicated":
        devices = np.empty(len(device_ids), dtype=object)
        devices[:] = [by_id[int(d)] for d in device_ids]
        return NamedSharding(jax.sharding.Mesh(devices, ("replica",)), PartitionSpec()), by_id
    dims = list(sharding.tile_assignment_dims)
    rank = len(dims) - len(sharding.subgroup_types)
    names = [f"dim{k}" for k in range(rank)] + ["replica"] * len(sharding.subgroup_types)
    devices = np.empty(len(sharding.tile_assignment_devices), dtype=object)
    devices[:] = [by_id[int(device_ids[p])] for p in sharding.tile_assignment_devices]
    spec = PartitionSpec(*[names[k] if dims[k] > 1 else None for k in range(rank)])
    return NamedSharding(jax.sharding.Mesh(devices.reshape(dims), tuple(names)), spec), by_id


def to_jax(array: Array, mesh: Any = None) -> Any:
    """`array` as a jax.Array, shard by shard without a global host copy: each shard's device
    memory (a read-only NumPy view, zero-copy) goes to its JAX device with jax.device_put
    (JAX's CPU backend takes aligned host memory in place, so the result shares the shards'
    memory and keeps them alive), then jax.make_array_from_single_device_arrays assembles it.

    Devices: shardrt device id k becomes the JAX device with id k (of `mesh`, else of
    jax.devices()). Sharding: on `mesh` (a jax.sharding.Mesh, or a shardrt.Mesh made from
    one) a NamedSharding of it with the PartitionSpec that places the array as shardrt does;
    without a mesh, a NamedSharding of a mesh made from the array's sharding (axes 'dim0',
    'dim1', ... per array dim and 'replica' for partial replication), or a
    SingleDeviceSharding for a maximal sharding. Errors: ValueError for uneven shards (JAX
    keeps even shards only: reshard or replicate first), a manual sharding, a sharding no
    PartitionSpec of `mesh` expresses, or a device without a JAX counterpart; TypeError for a
    `mesh` of another kind; ImportError without JAX. Waits for the array. Thread-safe."""
    import jax  # explicit JAX use: the caller asked for a jax.Array

    sharding = array.sharding
    shape = tuple(array.shape)
    device_ids = list(array.device_ids)
    jsh, by_id = _jax_sharding(sharding, device_ids, shape, mesh, "to_jax")
    shards = array.shards
    if sharding.kind == "maximal":
        shards = [shards[sharding.maximal_device]]
    pieces = [jax.device_put(s._numpy_view(), by_id[int(s.device_id)]) for s in shards]
    return jax.make_array_from_single_device_arrays(shape, jsh, pieces)


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
    plugin_log: which of the plugin's own log lines reach stderr: "error" (errors only),
    "warning", "info" (everything), or "plugin" (leave it to the plugin, which reads
    TF_CPP_MIN_LOG_LEVEL, which importing JAX sets to 1). None (default): $SHARDRT_LOG when
    set, else "error". It is set through the plugin's own copy of
    Abseil's logging, never through the process environment, so JAX and other libraries in the
    process keep their own settings; it belongs to the plugin library, so the latest Runtime
    created on it decides.

    Thread-safe. Arrays and computations keep the runtime alive.
    """

    def __init__(self, devices: int = 0, *, plugin: str | os.PathLike[str] | None = None,
                 host_threads: int = 0, compile_cache: str | os.PathLike[str] | None = None,
                 max_in_flight: int = 0, plugin_log: str | None = None):
        if int(max_in_flight) < 0:  # (the library checks the other counts)
            raise ValueError(f"Runtime: max_in_flight must be >= 0, got {max_in_flight}")
        path = os.fspath(plugin) if plugin is not None else default_plugin()
        cache = os.fspath(compile_cache) if compile_cache is not None else None
        try:
            self._rt = _shardrt._create_runtime(int(devices), path, int(host_threads), cache,
                                               int(max_in_flight), plugin_log)
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
    def put(self, array: Any, sharding: Any = None, *, devices: Sequence[int] | None = None,
            dtype: Any = None, mesh: Any = None) -> Array:
        """Uploads a host array (NumPy, or anything np.asarray takes) split by `sharding`
        (default replicated) over `devices` (ids; default the first devices the sharding
        needs). Only each device's shard travels; a C-contiguous NumPy array goes up from its
        own memory, without a host copy. `dtype` (anything np.dtype takes) casts the values to
        it first, on request only (NumPy's rules, as ndarray.astype); without it the array's
        own dtype goes up unchanged (e.g. float64 stays float64).

        sharding: a shardrt.Sharding, XLA sharding text, None, a jax.sharding sharding (e.g.
        NamedSharding: its mesh, spec and devices, JAX device `d` being shardrt device id
        `d.id`), or a PartitionSpec with `mesh` (a shardrt.Mesh or jax.sharding.Mesh).

        A jax.Array goes up shard by shard, never as one global host array: each addressable
        shard is read in place (DLPack) and uploaded to the shardrt device of its JAX device.
        Without `sharding` it keeps its JAX sharding (and devices); with another one it is
        put with its own and then resharded on device (from a jax.Array held whole by one
        device, each device's part is read from that shard instead; onto other devices, JAX
        moves it first). `dtype` casts it in JAX.

        Errors: ValueError for a sharding that does not fit the array or the devices, a
        PartitionSpec without mesh, a spec longer than the array's rank, JAX devices the
        runtime lacks; TypeError for a sharding of another kind. Thread-safe."""
        if _is_jax_array(array):
            return _put_jax(self._rt, array, sharding, devices, dtype, mesh, "put")
        a = _host_array(array)
        if dtype is not None and a.dtype != np.dtype(dtype):
            a = _host_array(a.astype(np.dtype(dtype)))
        sh, placed = _placement(sharding, a.ndim, mesh, "put")
        return _shardrt._put(self._rt, _raw(a), sh,
                             _resolve_devices(self._rt, placed, devices, "put"),
                             _type_name(a.dtype))

    def put_shards(self, shards: Sequence[Any], shape: Sequence[int], sharding: Any, *,
                   devices: Sequence[int] | None = None, mesh: Any = None) -> Array:
        """One array of global `shape` from per-device shards (host arrays with the padded
        shard shape, in the devices' order), e.g. DLPack tensors of another framework.
        `sharding` and `mesh` as for put (a JAX sharding also brings its devices). Errors:
        ValueError for shards that do not fit. Thread-safe."""
        sh, placed = _placement(sharding, len(shape), mesh, "put_shards")
        ids = _resolve_devices(self._rt, placed, devices, "put_shards")
        parts = [s if hasattr(s, "__dlpack__") and not isinstance(s, np.ndarray)
                 else _host_array(s) for s in shards]
        type_name = (_type_name(parts[0].dtype)
                     if parts and isinstance(parts[0], np.ndarray) else None)
        parts = [_raw(p) if isinstance(p, np.ndarray) else p for p in parts]
        return _shardrt._put_shards(self._rt, parts, tuple(int(d) for d in shape), sh, ids,
                                    type_name)

    def from_dlpack(self, tensor: Any, *, device: int | None = None) -> Array:
        """A one-device array from a DLPack tensor in host memory (NumPy, JAX on CPU, torch on
        CPU, ...), read in place (no host copy) and uploaded to `device` (default the first)."""
        ids = [self.devices[0].id if device is None else int(device)]
        return _shardrt._put(self._rt, tensor, Sharding.replicated(), ids, None)

    def reshard(self, array: Array, sharding: Any, *, mesh: Any = None) -> Array:
        """A copy of `array` with another sharding on the same devices (moved on device).
        `sharding` and `mesh` as for put; a JAX sharding must span the array's devices
        (ValueError otherwise). Thread-safe."""
        sh, placed = _placement(sharding, array.ndim, mesh, "reshard")
        if placed is not None:
            ids = [int(d) for d in array.device_ids]
            if sorted(ids) != placed:
                raise ValueError(f"reshard: the JAX sharding spans devices {placed}, the array "
                                 f"is on {ids}; reshard keeps the array's devices")
            # Logical device i of `sh` is placed[i]: renumber to the array's logical devices.
            sh = _renumbered(sh, [ids.index(d) for d in placed])
        return _shardrt._reshard(self._rt, array, sh)

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
