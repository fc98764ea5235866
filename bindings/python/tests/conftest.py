"""Fixtures of the shardrt suite: one 8-device runtime on the real XLA CPU plugin for the
session, and JAX with 8 CPU devices (configured here, before anything imports jax)."""

import os
import sys

# JAX reads its device count when its CPU backend starts: set before jax is imported anywhere.
# (jax 0.10.2 honours both; JAX_NUM_CPU_DEVICES is the documented one.)
os.environ.setdefault("JAX_NUM_CPU_DEVICES", "8")
os.environ.setdefault("JAX_PLATFORMS", "cpu")

sys.path.insert(0, os.path.dirname(__file__))  # _util
# Run from bindings/python (`python -m pytest`), the source folder shardrt/ (no extension in
# it) would shadow the installed package: test the installed one.
_SOURCE_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _SOURCE_ROOT]

import numpy as np  # noqa: E402
import pytest  # noqa: E402

import shardrt  # noqa: E402

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))


@pytest.fixture(scope="session")
def rt() -> shardrt.Runtime:
    """The session's runtime: 8 CPU devices, no persistent compile cache."""
    runtime = shardrt.Runtime(devices=8, compile_cache="")
    assert len(runtime.devices) == 8
    return runtime


@pytest.fixture(scope="session")
def testdata() -> str:
    """The C++ tests' programs (tests/testdata)."""
    return os.path.join(REPO, "tests", "testdata")


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(1234)
