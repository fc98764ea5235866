"""Drives `shardrt serve` on the real model with the official OpenAI Python client over
loopback: models, chat and text completions, streaming (with usage) and not, max_tokens, stop
sequences and seeds; answers equal `shardrt generate`'s; 8 concurrent streams each equal to
its solo answer; a client that disconnects frees its row (visible in /metrics); bad requests
(key, model, fields, JSON, size, route, context) and a full queue get OpenAI's errors; the
README's curl examples and its OpenAI-client block run as written; SIGTERM drains a running stream and exits 0.
Every wait has a deadline.

    usage: test_serve.py SHARDRT_CLI MODEL.gguf
"""
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

import openai
from openai import OpenAI

KEY = "test-key"
MODEL_ID = "SmolLM2-135M-Instruct.Q4_1"
README = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "README.md")

failures = []
checks = [0]


def check(condition, message):
    checks[0] += 1
    if not condition:
        failures.append(message)
        print(f"FAIL: {message}", flush=True)


class Server:
    """A `shardrt serve` process on a free port."""

    def __init__(self, cli, model, *flags):
        self.proc = subprocess.Popen(
            [cli, "serve", "--model", model, "--port", "0", "--api-key", KEY, *flags],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        self.lines = []
        self.port = None
        deadline = time.time() + 120
        while self.port is None and time.time() < deadline:
            line = self.proc.stderr.readline()
            if not line:
                break
            self.lines.append(line)
            m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", line)
            if m:
                self.port = int(m.group(1))
        if self.port is None:
            self.kill()
            sys.exit(f"FAIL: the server did not start: {''.join(self.lines)}")
        threading.Thread(target=self._drain_stderr, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.port}"

    def _drain_stderr(self):
        for line in self.proc.stderr:
            self.lines.append(line)

    def get(self, path, headers=None):
        """(status, body) of GET path."""
        return self.request("GET", path, None, headers)

    def request(self, method, path, body, headers=None):
        req = urllib.request.Request(self.url + path, data=body, method=method,
                                     headers=headers or {})
        try:
            with urllib.request.urlopen(req, timeout=120) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()

    def wait_ready(self):
        first, _ = self.get("/health")
        deadline = time.time() + 600
        status = first
        while status != 200 and time.time() < deadline:
            time.sleep(0.2)
            status, _ = self.get("/health")
        if status != 200:
            self.kill()
            sys.exit(f"FAIL: /health never turned 200: {''.join(self.lines)}")
        return first

    def metric(self, name):
        _, text = self.get("/metrics")
        m = re.search(rf"^{name} ([0-9.e+-]+)$", text, re.M)
        return float(m.group(1)) if m else None

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=30)


def generate(cli, model, flags, max_tokens):
    out = subprocess.run([cli, "generate", "--model", model, "--devices", "8", "--max-tokens",
                          str(max_tokens), "--json", *flags],
                         capture_output=True, text=True, timeout=600)
    if out.returncode != 0:
        sys.exit(f"FAIL: shardrt generate {flags}: {out.stderr.strip()}")
    return json.loads(out.stdout.strip().splitlines()[-1])["text"]


def chat(client, content, **kw):
    kw.setdefault("temperature", 0)
    return client.chat.completions.create(
        model=MODEL_ID, messages=[{"role": "user", "content": content}], **kw)


def stream_text(client, content, **kw):
    """(text, finish_reason, usage) of a streamed chat answer."""
    kw.setdefault("temperature", 0)
    text, finish, usage = "", None, None
    for chunk in client.chat.completions.create(
            model=MODEL_ID, messages=[{"role": "user", "content": content}], stream=True, **kw):
        if chunk.usage is not None:
            usage = chunk.usage
        for choice in chunk.choices:
            text += choice.delta.content or ""
            finish = choice.finish_reason or finish
    return text, finish, usage


def expect_error(kind, status, fn, what):
    try:
        fn()
    except kind as e:
        check(e.status_code == status, f"{what}: status {e.status_code}, expected {status}")
        body = e.body if isinstance(e.body, dict) else {}
        check(isinstance(body.get("message"), str) and "type" in body,
              f"{what}: error body {e.body!r} lacks OpenAI's message/type")
        return e
    except Exception as e:  # noqa: BLE001 - reported as a failure
        check(False, f"{what}: raised {type(e).__name__} {e}, expected {kind.__name__}")
        return None
    check(False, f"{what}: no error, expected {kind.__name__}")
    return None


def main(cli, model):
    server = Server(cli, model, "--devices", "8", "--max-batch", "8", "--max-queue", "0",
                    "--max-body-bytes", "65536", "--context", "1024")
    try:
        check(server.wait_ready() == 503, "/health was not 503 while the model loaded")
        client = OpenAI(base_url=server.url + "/v1", api_key=KEY, max_retries=0, timeout=300)
        run_checks(cli, model, server, client)
        sigterm_drains(server, client)
    finally:
        server.kill()
        if failures:
            print("".join(server.lines[-20:]), file=sys.stderr)
    if failures:
        sys.exit(f"FAIL: {len(failures)} checks failed")
    print(f"OK: {checks[0]} checks: shardrt serve answers the OpenAI client as shardrt "
          "generate does")


def run_checks(cli, model, server, client):
    models = client.models.list()
    check([m.id for m in models.data] == [MODEL_ID], f"models: {models}")

    # Chat and text completions, not streamed: the same text as `shardrt generate`.
    question = "What is the capital of France?"
    answer = chat(client, question, max_tokens=32)
    expected = generate(cli, model, ["--chat", "--prompt", question], 32)
    check(answer.choices[0].message.content == expected,
          f"chat: {answer.choices[0].message.content!r} != generate's {expected!r}")
    check("Paris" in expected, f"chat answer without Paris: {expected!r}")
    check(answer.choices[0].finish_reason == "stop", f"chat finish: {answer.choices[0]}")
    check(answer.usage.prompt_tokens > 0 and
          answer.usage.total_tokens == answer.usage.prompt_tokens + answer.usage.completion_tokens,
          f"chat usage: {answer.usage}")
    text = client.completions.create(model=MODEL_ID, prompt="Once upon a time", max_tokens=12,
                                     temperature=0)
    expected_text = generate(cli, model, ["--prompt", "Once upon a time"], 12)
    check(text.choices[0].text == expected_text,
          f"completion: {text.choices[0].text!r} != generate's {expected_text!r}")
    check(text.choices[0].finish_reason == "length" and text.usage.completion_tokens == 12,
          f"completion finish/usage: {text.choices[0].finish_reason} {text.usage}")

    # Streamed: the same text, then a usage chunk.
    streamed, finish, usage = stream_text(client, question, max_tokens=32,
                                          stream_options={"include_usage": True})
    check(streamed == expected, f"stream: {streamed!r} != {expected!r}")
    check(finish == "stop" and usage is not None and usage.completion_tokens > 0,
          f"stream finish/usage: {finish} {usage}")
    pieces = [c.choices[0].text for c in client.completions.create(
        model=MODEL_ID, prompt="Once upon a time", max_tokens=12, temperature=0, stream=True)
              if c.choices]
    check("".join(pieces) == expected_text, f"completion stream: {pieces}")

    # max_completion_tokens, stop sequences, seeds.
    short = chat(client, "Write a poem about the sea.", max_completion_tokens=5)
    check(short.usage.completion_tokens == 5 and short.choices[0].finish_reason == "length",
          f"max_completion_tokens: {short.usage} {short.choices[0].finish_reason}")
    long_answer = chat(client, "Count from one to twenty.", max_tokens=48).choices[0].message.content
    stop = long_answer[len(long_answer) // 2:][:3]
    cut = chat(client, "Count from one to twenty.", max_tokens=48, stop=[stop])
    check(cut.choices[0].message.content == long_answer[:long_answer.find(stop)] and
          cut.choices[0].finish_reason == "stop",
          f"stop {stop!r}: {cut.choices[0].message.content!r} from {long_answer!r}")
    seeded = [chat(client, "Tell me a story.", max_tokens=24, temperature=0.9, seed=42)
              .choices[0].message.content for _ in range(2)]
    check(seeded[0] == seeded[1], f"seed 42 gave {seeded}")

    # 8 concurrent streams, each its solo answer.
    prompts = [f"Name {n} animals that live in {place}." for n, place in
               zip(range(2, 10), ["Africa", "the sea", "forests", "deserts", "the arctic",
                                  "rivers", "caves", "mountains"])]
    solo = [chat(client, p, max_tokens=40).choices[0].message.content for p in prompts]
    results = [None] * len(prompts)

    def worker(i):
        results[i] = stream_text(client, prompts[i], max_tokens=40)[0]

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(len(prompts))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=600)
    for i, p in enumerate(prompts):
        check(results[i] == solo[i], f"concurrent {p!r}: {results[i]!r} != solo {solo[i]!r}")
    check(server.metric("shardrt_batch_size") is not None, "no shardrt_batch_size in /metrics")

    # 8 long streams fill the rows (the queue holds none): a 9th request gets 429. Closing
    # the streams mid-answer frees their rows.
    streams = [client.completions.create(model=MODEL_ID, prompt=f"{i}, {i + 1}, {i + 2},",
                                         max_tokens=900, temperature=0, stream=True)
               for i in range(8)]
    for s in streams:
        next(iter(s))  # the first piece: every request holds a row
    check(server.metric("shardrt_active_sequences") == 8,
          f"active sequences {server.metric('shardrt_active_sequences')}, expected 8")
    expect_error(openai.RateLimitError, 429,
                 lambda: chat(client, "Hello?", max_tokens=4), "a full queue")
    generated_before = server.metric("shardrt_generated_tokens_total")
    for s in streams:
        s.close()
    deadline = time.time() + 30
    while server.metric("shardrt_active_sequences") != 0 and time.time() < deadline:
        time.sleep(0.1)
    check(server.metric("shardrt_active_sequences") == 0,
          "closed streams still hold their rows after 30 s")
    check(server.metric("shardrt_generated_tokens_total") - generated_before < 8 * 400,
          "closed streams kept generating")

    # Errors.
    bad_key = OpenAI(base_url=server.url + "/v1", api_key="wrong", max_retries=0)
    expect_error(openai.AuthenticationError, 401, lambda: bad_key.models.list(), "a wrong key")
    expect_error(openai.NotFoundError, 404,
                 lambda: client.chat.completions.create(
                     model="no-such-model", messages=[{"role": "user", "content": "hi"}]),
                 "an unknown model")
    e = expect_error(openai.BadRequestError, 400, lambda: chat(client, "hi", n=2), "n = 2")
    check(e is None or e.body.get("param") == "n", f"n = 2: param {e and e.body}")
    expect_error(openai.BadRequestError, 400,
                 lambda: chat(client, "hi", temperature=5), "temperature 5")
    expect_error(openai.BadRequestError, 400,
                 lambda: chat(client, "hi", max_tokens=5000), "beyond the context")
    auth = {"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"}
    for body, status, what in [
            (b'{"messages": [', 400, "malformed JSON"),
            (b'{"messages": [{"role": "user", "content": "\xff\xfe"}]}', 400, "not UTF-8"),
            (b"[" * 100 + b"]" * 100, 400, "nested 100 deep"),
            (b'{"prompt": "' + b"a" * 70000 + b'"}', 413, "a body over the limit")]:
        got, text = server.request("POST", "/v1/chat/completions", body, auth)
        check(got == status, f"{what}: status {got}, expected {status}: {text[:200]}")
        check(got != status or "error" in json.loads(text), f"{what}: body {text[:200]}")
    got, text = server.request("GET", "/v1/nothing", None, auth)
    check(got == 404 and json.loads(text)["error"]["code"] == "not_found", f"route: {got} {text}")

    # The README's curl examples, as written, at this server's address.
    with open(README) as f:
        readme = f.read()
    block = re.search(r"```sh\n(curl .*?)```", readme, re.S).group(1)
    commands = re.split(r"\n(?=curl )", block.strip())
    check(len(commands) == 3, f"README curl examples: {len(commands)}")
    for command in commands:
        command = command.replace("http://127.0.0.1:8080", server.url)
        command = command.replace("curl ", f"curl -H 'Authorization: Bearer {KEY}' ", 1)
        out = subprocess.run(["bash", "-c", command], capture_output=True, text=True,
                             timeout=300)
        check(out.returncode == 0 and out.stdout.strip(), f"README: {command}: {out}")
        if '"stream": true' in command:
            check(out.stdout.rstrip().endswith("data: [DONE]"), f"README stream: {out.stdout}")
        else:
            check("error" not in json.loads(out.stdout), f"README: {out.stdout}")
    # The README's OpenAI-client block, as written but for this server's address and key.
    example = re.search(r"```python\n(from openai import OpenAI\n.*?)```", readme, re.S).group(1)
    example = example.replace("http://127.0.0.1:8080", server.url).replace('"unused"', repr(KEY))
    out = subprocess.run([sys.executable, "-c", example], capture_output=True, text=True,
                         timeout=300)
    check(out.returncode == 0, f"README OpenAI example: {out.stderr[-2000:]}")
    check(out.stdout.startswith("The capital of France is Paris.\n") and
          len(out.stdout.splitlines()) >= 2, f"README OpenAI example printed {out.stdout!r}")


def sigterm_drains(server, client):
    """SIGTERM while a stream runs: it finishes, new requests are refused, exit 0."""
    stream = client.completions.create(model=MODEL_ID, prompt="1, 2, 3,", max_tokens=60,
                                       temperature=0, stream=True)
    chunks = iter(stream)
    first = next(chunks)
    server.proc.send_signal(signal.SIGTERM)
    time.sleep(0.5)
    status, _ = server.get("/health")
    check(status == 503, f"/health while draining: {status}")
    pieces = [first] + list(chunks)
    finish = [c.choices[0].finish_reason for c in pieces if c.choices][-1]
    check(finish in ("length", "stop"), f"the drained stream ended with {finish}")
    try:
        code = server.proc.wait(timeout=120)
    except subprocess.TimeoutExpired:
        code = None
    check(code == 0, f"exit status after SIGTERM: {code}")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
