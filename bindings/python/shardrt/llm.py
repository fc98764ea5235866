"""shardrt.llm: text generation with a Llama-family GGUF model split over a runtime's devices
(the C++ llm::Session of libshardrt_llm).

    from shardrt.llm import Session
    session = Session("SmolLM2-135M-Instruct.Q4_1.gguf", devices=8)
    for piece in session.generate("What is the capital of France?", chat=True, stream=True):
        print(piece, end="", flush=True)
    result = session.generate("What is the capital of France?", chat=True, max_tokens=16)
    result.text, result.tokens, result.finish_reason

Generation runs on a thread of its own with the GIL released; a stream hands out the answer's
text pieces as their tokens arrive. Closing a stream early (break, close(), or dropping it)
stops the generation. Errors are exceptions carrying the library's message: ValueError for bad
arguments (options, prompts, sampling, a request that does not fit the context),
FileNotFoundError for a missing model file, RuntimeError for the plugin's failures.
"""

from __future__ import annotations

import errno
import os
from dataclasses import dataclass
from typing import Any, Iterator, Sequence

from . import Runtime, _shardrt

__all__ = ["GenerateResult", "GenerateStats", "Session", "TextStream"]

if not hasattr(_shardrt, "_open_session"):  # pragma: no cover - a build without the model
    raise ImportError("shardrt.llm: this build of shardrt has no model (libshardrt_llm); it "
                      "needs the XLA FFI headers at build time (scripts/bootstrap.sh)")


@dataclass(frozen=True)
class GenerateStats:
    """How long a generation took (as the C++ GenerateStats)."""
    prompt_tokens: int
    generated_tokens: int
    prefill_seconds: float  # from the prompt's upload to the first token on the host
    decode_seconds: float  # from the first token to the last
    prefill_tokens_per_second: float
    decode_tokens_per_second: float  # (generated_tokens - 1) / decode_seconds


@dataclass(frozen=True)
class GenerateResult:
    """A finished generation: the answer's text (without stop tokens, cut before a stop
    string), the generated token ids (a stop token included), the prompt's token ids as the
    model saw them, why it ended ("stop_token", "stop_string", "max_tokens", "callback",
    "cancelled") and its timings."""
    text: str
    tokens: list[int]
    prompt_tokens: list[int]
    finish_reason: str
    stats: GenerateStats


def _result(d: dict[str, Any]) -> GenerateResult:
    """The GenerateResult of the extension's result dict."""
    return GenerateResult(text=d["text"], tokens=list(d["tokens"]),
                          prompt_tokens=list(d["prompt_tokens"]),
                          finish_reason=d["finish_reason"], stats=GenerateStats(**d["stats"]))


class TextStream:
    """The pieces of an answer's text (non-empty str), as Session.generate(stream=True) makes
    them. Once exhausted, `result` holds the GenerateResult (None before). close() (also on
    `with` exit and when dropped) stops the generation early and waits for it to end; `result`
    then holds what was generated when the generation ended cleanly. (Dropping the stream
    drops the extension's generation, which stops it likewise.)"""

    def __init__(self, generation: Any):
        self._gen = generation
        self._finished = False
        self.result: GenerateResult | None = None

    def __iter__(self) -> Iterator[str]:
        return self

    def __next__(self) -> str:
        if self._finished:
            raise StopIteration
        try:
            piece = self._gen.next()
        except BaseException:
            self._finished = True
            raise
        if piece is None:
            self._finished = True
            self.result = _result(self._gen.result())
            raise StopIteration
        return piece

    def close(self) -> None:
        """Stops the generation (if it is still running) and waits for its thread."""
        if self._finished:
            return
        self._finished = True
        self._gen.stop()
        try:
            self.result = _result(self._gen.result())
        except Exception:  # the generation failed: nobody reads it any more
            pass

    def __enter__(self) -> TextStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Session:
    """A Llama-family GGUF model (llama, qwen2) loaded on `devices` devices of a runtime, ready
    to generate text (the C++ llm::Session).

    model: the GGUF file. devices: the devices the model is split over (tensor parallel); with
    runtime=None the session makes its own shardrt.Runtime(devices), else it uses the first
    `devices` devices of `runtime` (0: all of them). The session keeps its runtime alive.
    context_length: positions the key/value cache holds, a request's prompt plus its generated
    tokens (0: 2048, or the model's context when smaller). weights: "native" (the file's
    quantized blocks) or "f32" (dequantized at load).

    The weights load and the programs compile on the first generation (into the runtime's
    persistent compile cache when it has one). Thread-safe: generations on one session run one
    at a time (a second waits for the first); tokenize and detokenize run alongside.
    """

    def __init__(self, model: str | os.PathLike[str], devices: int = 8, *,
                 runtime: Runtime | None = None, context_length: int = 0,
                 weights: str = "native"):
        path = os.fspath(model)
        if not os.path.exists(path):
            raise FileNotFoundError(errno.ENOENT, "shardrt.llm.Session: no model file", path)
        self._runtime = runtime if runtime is not None else Runtime(int(devices))
        self._s = _shardrt._open_session(self._runtime._rt, path, int(devices),
                                         int(context_length), str(weights))
        self._model = path

    @property
    def runtime(self) -> Runtime:
        return self._runtime

    @property
    def model(self) -> str:
        return self._model

    @property
    def devices(self) -> int:
        """The devices the model is split over."""
        return self._s.devices

    @property
    def context_length(self) -> int:
        """Positions the key/value cache holds (after rounding)."""
        return self._s.context_length

    @property
    def info(self) -> dict[str, Any]:
        """What the model is: architecture, name, vocab, context (positions it was trained
        for), layers, d_model, heads, kv_heads."""
        return self._s.info

    def tokenize(self, text: str) -> list[int]:
        """Text to token ids (special tokens matched literally; no BOS)."""
        return self._s.tokenize(text)

    def detokenize(self, ids: Sequence[int]) -> str:
        """Token ids to text (bytes that are not UTF-8 become U+FFFD)."""
        return self._s.detokenize([int(i) for i in ids])

    def generate(self, prompt: str | Sequence[int], *, chat: bool = False,
                 system: str | None = None, max_tokens: int = 128, temperature: float = 0.0,
                 top_p: float = 1.0, top_k: int = 0, seed: int = 0,
                 stop: Sequence[str] | None = None,
                 stream: bool = False) -> GenerateResult | TextStream:
        """Generates an answer to `prompt`: text, or token ids used as they are.

        chat: wrap the text in the model's chat template as one user turn (after `system`, if
        given). max_tokens: tokens to generate at most, a stop token included. temperature 0
        is greedy; above 0, sampling from the top_k (0: all) likeliest tokens within top_p of
        the probability, reproducibly for a given seed. stop: strings that end the answer
        (not part of it).

        stream=False waits for the end and returns a GenerateResult; stream=True returns a
        TextStream of the text's pieces as they are generated. Bad arguments raise ValueError
        here; errors of the generation itself (a request that does not fit the context, load
        and compile errors) raise from the wait, or from the stream's iteration.
        """
        if isinstance(prompt, str):
            text, ids = prompt, []
        else:
            if chat or system is not None:
                raise ValueError("generate: chat and system need a text prompt, not token ids")
            text, ids = None, [int(i) for i in prompt]
        if isinstance(stop, str):
            stop = [stop]
        gen = self._s.generate(text, ids, bool(chat), system, int(max_tokens),
                               float(temperature), float(top_p), int(top_k), int(seed),
                               list(stop or ()), bool(stream))
        if stream:
            return TextStream(gen)
        try:
            return _result(gen.result())
        finally:
            gen.stop()

    def __repr__(self) -> str:
        return f"shardrt.llm.Session({self._model!r}, devices={self.devices})"
