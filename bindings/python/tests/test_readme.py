"""Every Python block of README.md and bindings/python/README.md runs as it stands, in a fresh
interpreter, as a user would, with none of the plugin's log lines on stderr (the environment
has neither TF_CPP_MIN_LOG_LEVEL nor SHARDRT_LOG). A block marked `<!-- runs in: PATH -->` is
run by that test instead (tests/readme/readme_test.py checks the markers and runs the shell
blocks). The JAX export of "Programs exported from JAX" is followed by the CLI's run of it, the
shell block after it: both export styles must give 2x+1 and x.sum(0)."""

import os
import re
import subprocess
import sys

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
CLI = os.path.join(ROOT, "build", "shardrt")

# A line of Abseil's log format, as the plugin writes them: "I0000 00:00:1796.1  123 file.cc:59] ..."
PLUGIN_LOG_LINE = re.compile(r"^[IWEF]\d{4} \d\d:\d\d:\d\d\.\d+ +\d+ [^ ]+:\d+\] ", re.M)
FENCE = re.compile(r"(?:^<!-- (?P<marker>.*?) -->\n)?^```(?P<lang>[a-z]*)\n(?P<body>.*?)^```$",
                   re.M | re.S)


def blocks(readme: str):
    with open(os.path.join(ROOT, readme), encoding="utf-8") as f:
        text = f.read()
    return [(f"{readme}:{text.count(chr(10), 0, m.start()) + 1}", m.group("lang"),
             m.group("marker"), m.group("body")) for m in FENCE.finditer(text)]


PYTHON_BLOCKS = [(where, body) for readme in ("README.md", "bindings/python/README.md")
                 for where, lang, marker, body in blocks(readme)
                 if lang == "python" and marker is None]


def run_python(code: str, cwd) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items()
           if k not in ("JAX_NUM_CPU_DEVICES", "XLA_FLAGS", "TF_CPP_MIN_LOG_LEVEL", "SHARDRT_LOG")}
    for name in (".cache", "build"):  # the model and the CLI, as from the repository root
        if not os.path.exists(os.path.join(cwd, name)):
            os.symlink(os.path.join(ROOT, name), os.path.join(cwd, name))
    done = subprocess.run([sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    # Nothing of the plugin's own logging reaches stderr (Runtime's plugin_log default).
    assert "absl::InitializeLog" not in done.stderr, done.stderr
    assert not PLUGIN_LOG_LINE.search(done.stderr), done.stderr
    return done


def test_the_readmes_have_python_blocks():
    places = [where for where, _ in PYTHON_BLOCKS]
    assert sum(p.startswith("README.md") for p in places) >= 4, places
    assert any(p.startswith("bindings/") for p in places), places


@pytest.mark.parametrize("where,code", PYTHON_BLOCKS, ids=[w for w, _ in PYTHON_BLOCKS])
def test_python_block_runs(where, code, tmp_path):
    done = run_python(code, tmp_path)
    # What a block's comments say it prints.
    for expected in re.findall(r"print\(.*?\)\s+# (.+)$", code, re.M):
        if not expected.startswith(("The capital", "[504")):  # the model's: test_llm checks them
            assert expected.strip() in done.stdout, (where, expected, done.stdout)


@pytest.mark.parametrize("shardy", [True, False], ids=["shardy", "gspmd"])
def test_the_jax_export_runs_through_the_cli(shardy, tmp_path):
    readme = blocks("README.md")
    index = next(i for i, (_, lang, _, body) in enumerate(readme)
                 if lang == "python" and 'open("f.mlir", "w")' in body)
    export, (lang, marker, command) = readme[index][3], readme[index + 1][1:]
    assert lang == "sh" and marker == "runs in: bindings/python/tests/test_readme.py", marker
    style = (f'import os; os.environ["JAX_NUM_CPU_DEVICES"] = "8"\nimport jax\n'
             f'jax.config.update("jax_use_shardy_partitioner", {shardy})\n')
    run_python(style + export, tmp_path)
    assert ("sdy.sharding" in (tmp_path / "f.mlir").read_text()) == shardy
    env = {k: v for k, v in os.environ.items() if k not in ("TF_CPP_MIN_LOG_LEVEL", "SHARDRT_LOG")}
    done = subprocess.run(["bash", "-euo", "pipefail", "-c", command], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert not PLUGIN_LOG_LINE.search(done.stderr), done.stderr
    x = np.load(tmp_path / "x.npy")
    np.testing.assert_array_equal(np.load(tmp_path / "out" / "output_0.npy"), 2 * x + 1)
    np.testing.assert_allclose(np.load(tmp_path / "out" / "output_1.npy"), x.sum(0), rtol=1e-6)
