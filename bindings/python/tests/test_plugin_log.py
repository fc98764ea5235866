"""The plugin's own log lines stay off stderr unless asked for (Runtime(plugin_log=...) or
$SHARDRT_LOG), in a fresh interpreter as a user runs it; the process environment is left as it
is (TF_CPP_MIN_LOG_LEVEL, which JAX reads too, is never set), also with JAX in the process."""

import os
import subprocess
import sys

import pytest

import shardrt

PROGRAM = """
func.func @main(%x: tensor<16x4xf32> {mhlo.sharding = "{devices=[8,1]<=[8]}"})
    -> (tensor<16x4xf32> {mhlo.sharding = "{devices=[8,1]<=[8]}"}) {
  %0 = stablehlo.add %x, %x : tensor<16x4xf32>
  return %0 : tensor<16x4xf32>
}
"""

SCRIPT = """
import os, sys
import numpy as np, shardrt
kwargs = eval(sys.argv[1])
rt = shardrt.Runtime(devices=8, compile_cache="", **kwargs)
f = rt.compile(sys.argv[2])
x = np.arange(64, dtype=np.float32).reshape(16, 4)
(y,) = f(rt.put(x, f.parameter_shardings[0]))
np.testing.assert_array_equal(y.to_numpy(), 2 * x)
print("ok", os.environ.get("TF_CPP_MIN_LOG_LEVEL"))
"""

BEFORE_INITIALIZE_LOG = "All log messages before absl::InitializeLog()"
DEVICE_COUNT = "cpu_device_count set via create_options: 8"
GSPMD = "GSPMD sharding propagation is going to be deprecated"


def run(kwargs: str, **env_changes) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("TF_CPP_MIN_LOG_LEVEL", "SHARDRT_LOG")}
    env.update(env_changes)
    done = subprocess.run([sys.executable, "-c", SCRIPT, kwargs, PROGRAM], env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-4000:]
    assert done.stdout == "ok None\n" or done.stdout.startswith("ok ")
    return done


def test_quiet_by_default_without_touching_the_environment():
    done = run("{}")
    assert done.stderr == ""
    assert done.stdout == "ok None\n"  # TF_CPP_MIN_LOG_LEVEL still unset


def test_plugin_log_info_and_warning_show_the_plugins_lines():
    info = run("{'plugin_log': 'info'}")
    assert BEFORE_INITIALIZE_LOG in info.stderr and DEVICE_COUNT in info.stderr, info.stderr
    assert GSPMD in info.stderr
    warning = run("{'plugin_log': 'warning'}")
    assert DEVICE_COUNT not in warning.stderr and GSPMD in warning.stderr, warning.stderr


def test_shardrt_log_and_the_applications_own_setting():
    assert DEVICE_COUNT in run("{}", SHARDRT_LOG="info").stderr
    # TF_CPP_MIN_LOG_LEVEL (which importing JAX sets) does not reach the plugin unless asked.
    assert run("{}", TF_CPP_MIN_LOG_LEVEL="0").stderr == ""
    assert DEVICE_COUNT in run("{}", TF_CPP_MIN_LOG_LEVEL="0", SHARDRT_LOG="plugin").stderr
    assert DEVICE_COUNT in run("{'plugin_log': 'plugin'}", TF_CPP_MIN_LOG_LEVEL="0").stderr
    # An explicit plugin_log wins over the environment.
    assert run("{'plugin_log': 'error'}", SHARDRT_LOG="info").stderr == ""


def test_with_jax_in_the_same_process_the_environment_stays_unchanged():
    pytest.importorskip("jax")
    # Importing JAX sets TF_CPP_MIN_LOG_LEVEL=1 (JAX's choice, left as it is); the plugin's
    # warnings (the GSPMD one of every compile) still stay off stderr.
    script = ("import os, jax, jax.numpy as jnp, numpy as np, shardrt, sys\n"
              "level = os.environ.get('TF_CPP_MIN_LOG_LEVEL')\n"
              "rt = shardrt.Runtime(devices=8, compile_cache='')\n"
              "f = rt.compile(sys.argv[1])\n"
              "x = np.ones((16, 4), np.float32)\n"
              "assert (f(rt.put(x, f.parameter_shardings[0]))[0].to_numpy() == 2).all()\n"
              "assert float(jnp.arange(4.0).sum()) == 6.0\n"
              "assert os.environ.get('TF_CPP_MIN_LOG_LEVEL') == level\n"
              "print('ok')\n")
    env = {k: v for k, v in os.environ.items() if k not in ("TF_CPP_MIN_LOG_LEVEL", "SHARDRT_LOG")}
    env["JAX_PLATFORMS"] = "cpu"
    done = subprocess.run([sys.executable, "-c", script, PROGRAM], env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-4000:]
    assert done.stdout == "ok\n"
    assert done.stderr == ""


def test_a_bad_level_is_a_value_error(monkeypatch):
    with pytest.raises(ValueError, match="plugin_log must be 'info', 'warning', 'error' or "
                                         "'plugin', got 'loud'"):
        shardrt.Runtime(devices=1, plugin_log="loud")
    monkeypatch.setenv("SHARDRT_LOG", "loud")
    with pytest.raises(ValueError, match=r"\$SHARDRT_LOG: expected info, warning, error or "
                                         r"plugin, got 'loud'"):
        shardrt.Runtime(devices=1)
