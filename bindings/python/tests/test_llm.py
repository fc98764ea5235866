"""shardrt.llm.Session: generation from Python on the real model (SmolLM2-135M-Instruct, Q4_1,
from scripts/bootstrap.sh), against the CLI's `generate --json` and the ids that
tests/testdata/golden_smollm2_greedy.h records (an independent NumPy reference); streaming,
early stops, errors and seeded sampling. Skipped when the model file is absent."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time

import pytest

from conftest import REPO

llm = pytest.importorskip("shardrt.llm")

MODEL = os.path.join(REPO, ".cache", "models", "SmolLM2-135M-Instruct.Q4_1.gguf")
# The CLI: $SHARDRT_CLI when set, else the default build's.
CLI = os.environ.get("SHARDRT_CLI") or os.path.join(REPO, "build", "shardrt")

pytestmark = pytest.mark.skipif(not os.path.exists(MODEL), reason=f"no model file {MODEL}")

FRANCE = "What is the capital of France?"
# The greedy answer's ids to FRANCE as a chat turn (golden_smollm2_greedy.h), the stop token
# (<|im_end|>, 2) last.
FRANCE_IDS = [504, 3575, 282, 4649, 314, 7042, 30, 2]
FRANCE_TEXT = "The capital of France is Paris."
# Seconds any one generation may take here (loads and compiles included): a bound, not a target.
GENERATE_S = 120


@pytest.fixture(scope="module")
def session() -> llm.Session:
    """One session for the module: its own 8-device runtime."""
    return llm.Session(MODEL, devices=8)


def test_session_properties(session):
    assert session.devices == 8
    assert session.context_length >= 2048
    info = session.info
    assert info["architecture"] == "llama"
    assert info["vocab"] == 49152 and info["layers"] == 30
    assert set(info) == {"architecture", "name", "vocab", "context", "layers", "d_model", "heads",
                         "kv_heads"}
    assert "devices=8" in repr(session)


def test_tokenize_detokenize(session):
    ids = session.tokenize("The capital of France is Paris.")
    assert ids == FRANCE_IDS[:-1]
    assert session.detokenize(ids) == FRANCE_TEXT
    assert session.detokenize([]) == ""
    with pytest.raises(ValueError):
        session.detokenize([10**6])


def test_greedy_chat_matches_the_golden_ids(session):
    result = session.generate(FRANCE, chat=True, max_tokens=16)
    assert isinstance(result, llm.GenerateResult)
    assert result.tokens == FRANCE_IDS
    assert result.text == FRANCE_TEXT
    assert result.finish_reason == "stop_token"
    assert result.prompt_tokens[:1] == [1] and len(result.prompt_tokens) > 10
    assert result.stats.prompt_tokens == len(result.prompt_tokens)
    assert result.stats.generated_tokens == len(FRANCE_IDS)
    assert result.stats.prefill_seconds > 0


@pytest.mark.skipif(not os.access(CLI, os.X_OK), reason=f"no CLI {CLI} (set SHARDRT_CLI)")
def test_greedy_chat_matches_the_cli(session):
    command = [CLI, "generate", "--model", MODEL, "--chat", "--prompt", FRANCE, "--devices", "8",
               "--max-tokens", "16", "--json", "--compile-cache", "off"]
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    done = subprocess.run(command, capture_output=True, text=True, timeout=GENERATE_S, env=env)
    assert done.returncode == 0, done.stderr
    cli = json.loads(done.stdout)
    result = session.generate(FRANCE, chat=True, max_tokens=16)
    assert result.tokens == cli["tokens"]
    assert result.text == cli["text"]
    assert result.prompt_tokens == cli["prompt_tokens"]
    assert result.finish_reason == cli["finish_reason"]


def test_stream_pieces_make_the_text(session):
    expected = session.generate(FRANCE, chat=True, max_tokens=16)
    stream = session.generate(FRANCE, chat=True, max_tokens=16, stream=True)
    assert isinstance(stream, llm.TextStream)
    assert stream.result is None
    pieces = list(stream)
    assert len(pieces) > 1 and all(isinstance(p, str) and p for p in pieces)
    assert "".join(pieces) == expected.text
    assert stream.result == llm.GenerateResult(
        text=expected.text, tokens=expected.tokens, prompt_tokens=expected.prompt_tokens,
        finish_reason=expected.finish_reason, stats=stream.result.stats)
    assert list(stream) == []  # exhausted


def test_stream_pieces_arrive_before_the_end(session):
    """Pieces come as their tokens are generated, not all at the end: they arrive spread over
    the decode (64 tokens), the first long before the last."""
    prompt = "Write a long story about a dragon."
    arrivals = []
    with session.generate(prompt, chat=True, max_tokens=64, stream=True) as stream:
        for piece in stream:
            arrivals.append((time.monotonic(), piece))
    result = stream.result
    assert result.stats.generated_tokens == 64 and result.finish_reason == "max_tokens"
    assert len(arrivals) > 10
    assert "".join(p for _, p in arrivals) == result.text
    spread = arrivals[-1][0] - arrivals[0][0]
    assert spread > 0.5 * result.stats.decode_seconds > 0


def test_breaking_out_of_a_stream_stops_the_generation(session):
    start = time.monotonic()
    with session.generate("Write a long story about a dragon.", chat=True, max_tokens=1000,
                          stream=True) as stream:
        for i, _ in enumerate(stream):
            if i == 1:
                break
    assert time.monotonic() - start < GENERATE_S
    assert stream.result is not None
    assert stream.result.finish_reason in ("callback", "cancelled")
    assert stream.result.stats.generated_tokens < 20
    assert list(stream) == []
    # The session generates again, the same as before.
    assert session.generate(FRANCE, chat=True, max_tokens=16).tokens == FRANCE_IDS


def test_dropping_a_stream_stops_the_generation(session):
    stream = session.generate("Write a long story about a dragon.", chat=True, max_tokens=1000,
                              stream=True)
    next(stream)
    del stream  # stops the generation and joins its thread
    start = time.monotonic()
    assert session.generate(FRANCE, chat=True, max_tokens=16).tokens == FRANCE_IDS
    assert time.monotonic() - start < GENERATE_S


def test_close_before_iterating(session):
    stream = session.generate(FRANCE, chat=True, max_tokens=16, stream=True)
    stream.close()
    stream.close()  # idempotent
    assert list(stream) == []


def test_stop_strings(session):
    result = session.generate(FRANCE, chat=True, max_tokens=16, stop=[" Paris"])
    assert result.text == "The capital of France is"
    assert result.finish_reason == "stop_string"


def test_prompt_tokens(session):
    prompt = session.generate(FRANCE, chat=True, max_tokens=1).prompt_tokens
    result = session.generate(prompt, max_tokens=16)
    assert result.tokens == FRANCE_IDS
    with pytest.raises(ValueError, match="chat"):
        session.generate(prompt, chat=True)


def test_sampling_with_a_seed_is_reproducible(session):
    def sample(seed):
        return session.generate("Once upon a time", max_tokens=12, temperature=0.9, top_p=0.95,
                                seed=seed)

    a, b = sample(7), sample(7)
    assert a.tokens == b.tokens and a.text == b.text
    assert len(a.tokens) >= 1
    # Streamed, the same seed gives the same text.
    stream = session.generate("Once upon a time", max_tokens=12, temperature=0.9, top_p=0.95,
                              seed=7, stream=True)
    assert "".join(stream) == a.text
    assert stream.result.tokens == a.tokens


def test_generation_releases_the_gil(session):
    ticks = 0
    stop = threading.Event()

    def tick():
        nonlocal ticks
        while not stop.is_set():
            ticks += 1
            time.sleep(0.001)

    thread = threading.Thread(target=tick)
    thread.start()
    try:
        session.generate("Write a long story about a dragon.", max_tokens=32)
    finally:
        stop.set()
        thread.join(timeout=10)
    assert ticks > 10


def test_missing_model_file():
    missing = os.path.join(REPO, "no-such-model.gguf")
    with pytest.raises((FileNotFoundError, ValueError), match="no-such-model.gguf"):
        llm.Session(missing, devices=8)


def test_bad_session_options(session):
    with pytest.raises(ValueError, match="weights"):
        llm.Session(MODEL, devices=8, runtime=session.runtime, weights="int3")


def test_bad_temperature(session):
    with pytest.raises(ValueError, match="temperature"):
        session.generate(FRANCE, temperature=-1)
    with pytest.raises(ValueError, match="temperature"):
        session.generate(FRANCE, temperature=-1, stream=True)
    with pytest.raises(ValueError, match="top-p"):
        session.generate(FRANCE, temperature=1, top_p=0)


def test_prompt_too_long_for_the_context(session):
    prompt = "hello " * (session.context_length + 100)
    assert len(session.tokenize(prompt)) > session.context_length
    with pytest.raises(ValueError):
        session.generate(prompt, max_tokens=4)
    with pytest.raises(ValueError):
        list(session.generate("Hi", max_tokens=session.context_length + 1, stream=True))
    # The session still works.
    assert session.generate(FRANCE, chat=True, max_tokens=16).tokens == FRANCE_IDS


def test_session_on_a_given_runtime():
    """A session on a caller's runtime keeps it alive, and uses its first `devices` devices."""
    import shardrt

    runtime = shardrt.Runtime(devices=4, compile_cache="")
    s = llm.Session(MODEL, devices=2, runtime=runtime, context_length=256)
    assert s.runtime is runtime and s.devices == 2
    del runtime
    result = s.generate(FRANCE, chat=True, max_tokens=16)
    assert result.tokens == FRANCE_IDS


def test_readme_example_runs():
    """bindings/python/README.md's shardrt.llm example, in a fresh interpreter from the
    repository root."""
    with open(os.path.join(REPO, "bindings", "python", "README.md"), encoding="utf-8") as f:
        blocks = re.findall(r"```python\n(.*?)```", f.read(), re.S)
    (example,) = [b for b in blocks if "shardrt.llm" in b]
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    done = subprocess.run([sys.executable, "-c", example], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=GENERATE_S)
    assert done.returncode == 0, done.stderr[-4000:]
    assert done.stdout.splitlines()[:2] == [
        FRANCE_TEXT, "[504, 3575, 282, 4649, 314, 7042, 30, 2] stop_token"]
