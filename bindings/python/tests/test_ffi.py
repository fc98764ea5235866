"""Custom kernels from Python: an XLA FFI handler compiled here with the pinned FFI headers
(.cache/xla_ffi/include, from scripts/bootstrap.sh), loaded with ctypes, registered with
Runtime.register_ffi_handler and run inside an 8-device SPMD program (manual sharding around the
custom call), with an attribute; checked against NumPy. Bad registrations raise."""

import ctypes
import os
import shutil
import subprocess

import jaxlib
import numpy as np
import pytest

from conftest import REPO

FFI_INCLUDE = os.path.join(REPO, ".cache", "xla_ffi", "include")

HANDLER = r"""
#include "xla/ffi/api/ffi.h"
namespace ffi = xla::ffi;
// y = scale * x + 1 over the shard it is given.
static ffi::Error ScaleAddOne(ffi::Buffer<ffi::F32> x, ffi::ResultBuffer<ffi::F32> y,
                             float scale) {
  for (size_t i = 0; i < x.element_count(); ++i)
    y->typed_data()[i] = scale * x.typed_data()[i] + 1.0f;
  return ffi::Error::Success();
}
XLA_FFI_DEFINE_HANDLER_SYMBOL(shardrt_py_scale_add_one, ScaleAddOne,
    ffi::Ffi::Bind().Arg<ffi::Buffer<ffi::F32>>().Ret<ffi::Buffer<ffi::F32>>().Attr<float>("scale"));
"""

# x split in 8; the custom call runs on each device's 4 values under manual sharding.
PROGRAM = """
module @ffi_py attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%x: tensor<32xf32> {mhlo.sharding = "{devices=[8]<=[8]}"})
      -> (tensor<32xf32> {mhlo.sharding = "{devices=[8]<=[8]}"}) {
    %0 = stablehlo.custom_call @Sharding(%x) {mhlo.sharding = "{devices=[8]<=[8]}"} : (tensor<32xf32>) -> tensor<32xf32>
    %1 = stablehlo.custom_call @SPMDFullToShardShape(%0) {mhlo.sharding = "{manual}"} : (tensor<32xf32>) -> tensor<4xf32>
    %2 = stablehlo.custom_call @shardrt_py_scale_add_one(%1) {api_version = 4 : i32, backend_config = {scale = 3.0 : f32}, mhlo.sharding = "{manual}"} : (tensor<4xf32>) -> tensor<4xf32>
    %3 = stablehlo.custom_call @Sharding(%2) {mhlo.sharding = "{manual}"} : (tensor<4xf32>) -> tensor<4xf32>
    %4 = stablehlo.custom_call @SPMDShardToFullShape(%3) {mhlo.sharding = "{devices=[8]<=[8]}"} : (tensor<4xf32>) -> tensor<32xf32>
    return %4 : tensor<32xf32>
  }
}
"""


def build_handler(folder, include: str) -> ctypes.CDLL:
    """The handler above, built against the FFI headers in `include` and loaded (it stays
    loaded for the process)."""
    assert os.path.exists(os.path.join(include, "xla", "ffi", "api", "ffi.h")), include
    compiler = shutil.which("c++") or shutil.which("g++")
    assert compiler, "no C++ compiler"
    source, library = folder / "handler.cc", folder / "libhandler.so"
    source.write_text(HANDLER)
    subprocess.run([compiler, "-std=c++17", "-O1", "-shared", "-fPIC", "-isystem", include,
                    str(source), "-o", str(library)], check=True)
    return ctypes.CDLL(str(library))


def handler_address(library: ctypes.CDLL) -> int:
    """The address of the handler in `library`."""
    return ctypes.cast(library.shardrt_py_scale_add_one, ctypes.c_void_p).value


@pytest.fixture(scope="module")
def address(tmp_path_factory) -> int:
    """The handler built with the pinned headers (run scripts/bootstrap.sh if they are missing),
    as an address."""
    return handler_address(build_handler(tmp_path_factory.mktemp("ffi"), FFI_INCLUDE))


def test_a_registered_handler_runs_on_each_shard(rt, address):
    rt.register_ffi_handler("shardrt_py_scale_add_one", address)
    f = rt.compile(PROGRAM)
    x = np.arange(32, dtype=np.float32) - 16
    (y,) = f(rt.put(x, f.parameter_shardings[0]))
    np.testing.assert_array_equal(y.to_numpy(), 3.0 * x + 1.0)


def test_a_capsule_is_taken_too(rt, address):
    capsule_new = ctypes.pythonapi.PyCapsule_New
    capsule_new.restype = ctypes.py_object
    capsule_new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
    rt.register_ffi_handler("shardrt_py_scale_add_one_capsule", capsule_new(address, None, None))


def test_bad_registrations_raise(rt, address):
    with pytest.raises(ValueError, match="null"):
        rt.register_ffi_handler("shardrt_py_null", 0)
    with pytest.raises(ValueError, match="printable ASCII"):
        rt.register_ffi_handler("two words", address)
    with pytest.raises(TypeError):
        rt.register_ffi_handler("shardrt_py_bad", "not a handler")
    with pytest.raises(ValueError, match="shardrt_py_elsewhere"):
        rt.register_ffi_handler("shardrt_py_elsewhere", address, platform="NoSuchPlatform")


def test_a_handler_of_another_ffi_version_is_refused_at_registration(rt, tmp_path):
    """The plugin implements XLA FFI API 0.2; jaxlib 0.10's headers are 0.3. The plugin only logs
    its refusal; the probe compile makes it an error that names the target."""
    include = os.path.join(os.path.dirname(jaxlib.__file__), "include")
    address = handler_address(build_handler(tmp_path, include))
    with pytest.raises(ValueError, match="shardrt_py_newer_api.*does not compile"):
        rt.register_ffi_handler("shardrt_py_newer_api", address)
