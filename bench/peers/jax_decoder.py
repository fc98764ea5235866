#!/usr/bin/env python3
"""The demo decoder (models/decoder) written in JAX, for tokens/s against shardrt.

Same model, sizes and Megatron sharding over a 1-D mesh of D CPU devices (JAX_NUM_CPU_DEVICES):
vocab 256, d_model 128, 8 heads of 16, MLP 512, 2 layers, prompt 8, KV cache of prompt + tokens
positions; wq/wk/wv/w1 split on dim 1, wo/w2 on dim 0, caches by heads, the rest replicated;
q/k/v constrained to be split by heads. Weights and prompt come from the same splitmix64
streams as models/decoder/decoder_weights.cc, so both runtimes must generate the same tokens.

The loop mirrors bench/decoder_bench.cc (and bench/decoder_demo): prefill, then tokens - 1 decode
steps with donated caches, the token and position arrays already on device, tokens downloaded
once at the end. One warm-up generation (tracing and compilation) before timing.

Standalone:  python jax_decoder.py --devices 8 --tokens 32 [--generations 5]
Driven:      python jax_decoder.py --serve --devices 8 --tokens 32   (setup | gen | quit)
"""

import argparse
import os
import time

import protocol


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--devices", type=int, default=8)
    p.add_argument("--tokens", type=int, default=32)
    p.add_argument("--generations", type=int, default=5)
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--serve", action="store_true")
    return p.parse_args()


ARGS = parse_args()
os.environ["JAX_NUM_CPU_DEVICES"] = str(ARGS.devices)
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P  # noqa: E402

VOCAB, D_MODEL, HEADS, LAYERS, PROMPT, EPS = 256, 128, 8, 2, 8, 1e-5
HEAD_DIM, HIDDEN = D_MODEL // HEADS, 4 * D_MODEL
M64 = (1 << 64) - 1
GOLDEN = 0x9E3779B97F4A7C15


# ---- weights: the splitmix64 streams of decoder_weights.cc ----

def _mix(z):
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


def _mix_np(z):
    with np.errstate(over="ignore"):
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def _stream_start(seed, name):
    h = 0xCBF29CE484222325
    for c in name.encode():
        h = ((h ^ c) * 0x100000001B3) & M64
    return _mix((seed + GOLDEN) & M64) ^ h


def _draws(seed, name, n):
    """The first n SplitMix64 outputs of the array's stream, as uint64."""
    start = np.uint64(_stream_start(seed, name))
    with np.errstate(over="ignore"):
        states = start + np.arange(1, n + 1, dtype=np.uint64) * np.uint64(GOLDEN)
    return _mix_np(states)


def weight_specs(max_seq):
    """(name, shape, split dim or None), in the programs' parameter order."""
    qkv = HEADS * HEAD_DIM
    specs = [("embed", (VOCAB, D_MODEL), None), ("pos_embed", (max_seq, D_MODEL), None)]
    for i in range(LAYERS):
        p = f"layer{i}."
        specs += [(p + "attn_norm", (D_MODEL,), None), (p + "wq", (D_MODEL, qkv), 1),
                  (p + "wk", (D_MODEL, qkv), 1), (p + "wv", (D_MODEL, qkv), 1),
                  (p + "wo", (qkv, D_MODEL), 0), (p + "mlp_norm", (D_MODEL,), None),
                  (p + "w1", (D_MODEL, HIDDEN), 1), (p + "w2", (HIDDEN, D_MODEL), 0)]
    return specs + [("final_norm", (D_MODEL,), None), ("w_out", (D_MODEL, VOCAB), None)]


def generate_weights(seed, max_seq):
    out = []
    for name, shape, split in weight_specs(max_seq):
        n = int(np.prod(shape))
        u = (_draws(seed, name, n) >> np.uint64(40)).astype(np.float64) / float(1 << 23) - 1.0
        if name == "embed":
            v = u
        elif name == "pos_embed":
            v = 0.1 * u
        elif name.endswith("norm"):
            v = 1.0 + 0.1 * u
        else:
            v = (1.0 / np.sqrt(float(shape[0]))) * u
        out.append((name, v.astype(np.float32).reshape(shape), split))
    return out


def generate_prompt(seed):
    return (_draws(seed, "prompt", PROMPT) % np.uint64(VOCAB)).astype(np.int32)


# ---- the model ----

class Model:
    def __init__(self, devices, max_seq):
        self.mesh = Mesh(np.array(jax.devices()[:devices]), ("x",))
        self.devices = devices
        self.max_seq = max_seq

    def sharding(self, split, rank):
        if split is None or self.devices == 1:
            return NamedSharding(self.mesh, P())
        spec = [None] * rank
        spec[split] = "x"
        return NamedSharding(self.mesh, P(*spec))

    def split(self, x, dim):
        if self.devices == 1:
            return x
        return jax.lax.with_sharding_constraint(x, self.sharding(dim, x.ndim))

    @staticmethod
    def rms_norm(x, gain):
        ms = jnp.sum(x * x, axis=1) * (1.0 / x.shape[1])
        inv = jax.lax.rsqrt(ms + EPS)
        return x * inv[:, None] * gain[None, :]

    def to_heads(self, x):  # [t, H*hd] -> [H, t, hd], split by heads
        t = x.shape[0]
        return self.split(jnp.transpose(x.reshape(t, HEADS, HEAD_DIM), (1, 0, 2)), 0)

    @staticmethod
    def from_heads(x):  # [H, t, hd] -> [t, H*hd]
        return jnp.transpose(x, (1, 0, 2)).reshape(x.shape[1], HEADS * HEAD_DIM)

    @staticmethod
    def attention(q, k, v, allowed):
        scores = jnp.einsum("htd,hsd->hts", q, k)
        scores = jnp.where(allowed[None, :, :], scores, jnp.float32(-1e30))
        e = jnp.exp(scores - jnp.max(scores, axis=2, keepdims=True))
        p = e / jnp.sum(e, axis=2, keepdims=True)
        return jnp.einsum("hts,hsd->htd", p, v)

    def project(self, x, w, p):
        h = self.rms_norm(x, w[p + "attn_norm"])
        q = self.to_heads(h @ w[p + "wq"]) * jnp.float32(1.0 / np.sqrt(HEAD_DIM))
        return q, self.to_heads(h @ w[p + "wk"]), self.to_heads(h @ w[p + "wv"])

    def block_rest(self, x, o, w, p):
        x = x + self.from_heads(o) @ w[p + "wo"]
        h = self.rms_norm(x, w[p + "mlp_norm"])
        u = self.split(h @ w[p + "w1"], 1)
        return x + (u * jax.nn.sigmoid(u)) @ w[p + "w2"]

    def logits(self, x, w):
        return (self.rms_norm(x, w["final_norm"]) @ w["w_out"]).reshape(VOCAB)

    def prefill(self, names, tokens, *weights):
        w = dict(zip(names, weights))
        t = tokens.shape[0]
        x = w["embed"][tokens] + w["pos_embed"][:t]
        causal = jnp.arange(t)[:, None] >= jnp.arange(t)[None, :]
        caches = []
        for i in range(LAYERS):
            p = f"layer{i}."
            q, k, v = self.project(x, w, p)
            x = self.block_rest(x, self.attention(q, k, v, causal), w, p)
            for kv in (k, v):
                caches.append(self.split(
                    jnp.pad(kv, ((0, 0), (0, self.max_seq - t), (0, 0))), 0))
        logits = self.logits(x[t - 1:t], w)
        return (*caches, jnp.argmax(logits).astype(jnp.int32), logits)

    def decode_step(self, names, *args):
        n_caches = 2 * LAYERS
        caches, token, position = args[:n_caches], args[n_caches], args[n_caches + 1]
        w = dict(zip(names, args[n_caches + 2:]))
        x = (jax.lax.dynamic_slice(w["embed"], (token, 0), (1, D_MODEL))
             + jax.lax.dynamic_slice(w["pos_embed"], (position, 0), (1, D_MODEL)))
        seen = (jnp.arange(self.max_seq) <= position)[None, :]
        out = []
        for i in range(LAYERS):
            p = f"layer{i}."
            q, k_new, v_new = self.project(x, w, p)
            k = jax.lax.dynamic_update_slice(caches[2 * i], k_new, (0, position, 0))
            v = jax.lax.dynamic_update_slice(caches[2 * i + 1], v_new, (0, position, 0))
            x = self.block_rest(x, self.attention(q, k, v, seen), w, p)
            out += [k, v]
        logits = self.logits(x, w)
        return (*out, jnp.argmax(logits).astype(jnp.int32), logits)


class Decoder:
    def __init__(self, devices, tokens, seed):
        self.tokens = tokens
        max_seq = PROMPT + tokens
        m = Model(devices, max_seq)
        weights = generate_weights(seed, max_seq)
        names = tuple(n for n, _, _ in weights)
        w_shardings = tuple(m.sharding(s, a.ndim) for _, a, s in weights)
        rep = m.sharding(None, 0)
        cache = m.sharding(0, 3)
        n_caches = 2 * LAYERS
        outs = (cache,) * n_caches + (rep, rep)
        self.prefill = jax.jit(lambda *a: m.prefill(names, *a),
                               in_shardings=(rep,) + w_shardings, out_shardings=outs)
        self.decode = jax.jit(lambda *a: m.decode_step(names, *a),
                              in_shardings=(cache,) * n_caches + (rep, rep) + w_shardings,
                              out_shardings=outs, donate_argnums=tuple(range(n_caches)))
        self.weights = [jax.device_put(a, s) for (_, a, _), s in zip(weights, w_shardings)]
        self.prompt = jax.device_put(generate_prompt(seed), rep)
        # Decode step i (1..tokens-1) runs at position prompt + i - 1.
        self.positions = [jax.device_put(np.int32(PROMPT + i), rep) for i in range(tokens - 1)]
        self.n_caches = n_caches
        self.generate()  # warm-up: tracing and compilation

    def generate(self):
        t0 = time.perf_counter()
        state = self.prefill(self.prompt, *self.weights)
        tokens = [state[self.n_caches]]
        for i in range(1, self.tokens):
            state = self.decode(*state[:self.n_caches], tokens[-1], self.positions[i - 1],
                                *self.weights)
            tokens.append(state[self.n_caches])
        ids = [int(t) for t in jax.device_get(tokens)]
        return ids, time.perf_counter() - t0


def serve():
    decoder = None

    def handle(words):
        nonlocal decoder
        if words[0] == "setup":
            decoder = Decoder(ARGS.devices, ARGS.tokens, ARGS.seed)
            return {"ok": True}
        if words[0] == "gen" and decoder is not None:
            ids, seconds = decoder.generate()
            return {"ok": True, "seconds": seconds, "tokens": ids}
        return None

    protocol.serve(handle)


def main():
    if ARGS.serve:
        serve()
        return
    decoder = Decoder(ARGS.devices, ARGS.tokens, ARGS.seed)
    times = []
    for _ in range(ARGS.generations):
        ids, seconds = decoder.generate()
        times.append(seconds)
    times.sort()
    median = times[len(times) // 2]
    print("tokens:", " ".join(map(str, ids)))
    print(f"decoded {ARGS.tokens} tokens in {median:.4f} s median of {ARGS.generations} "
          f"({ARGS.tokens / median:.1f} tokens/s)")


if __name__ == "__main__":
    main()
