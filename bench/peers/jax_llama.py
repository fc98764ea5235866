#!/usr/bin/env python3
"""SmolLM2-135M (any Llama GGUF with tied embeddings) in JAX, for tokens/s against shardrt.

The same per-device programs as models/llama/llama_program.cc, written with jax.shard_map over
a 1-D mesh of P CPU devices (JAX_NUM_CPU_DEVICES=P) with the same explicit collectives, the same
weight layout and the same KV-cache layout, so both runtimes must produce the same greedy tokens:

  token_embd [vocab, d]     split on rows (lookup: mask + psum; logits: local argmax, gathered)
  wqkv [layers, q + 2 kv, d] device d holds its rows of Wq, then Wk, then Wv, stacked
  wo [layers, d, q]          split on rows (outputs all-gathered)
  wgu [layers, 2 ffn, d]     device d holds its rows of Wgate, then Wup
  wdown [layers, d, ffn]     split on columns (partial products all-reduced)
  norms [layers, d], [d]     replicated
  k_cache, v_cache [layers, P, C/P, kv, hd]: position p at device p % P, slot p / P

Each program is one lax.while_loop over the layers, which slices the layer's weights out of the
stacked ones (lax.dynamic_index_in_dim), as shardrt's programs do.

Weights are dequantized to f32 by the `gguf` package, in GGUF's row order (Q and K rows with RoPE
pairs adjacent). The cache length C is the prompt plus max_tokens rounded up to a multiple of
lcm(64, block). Prefill runs the prompt padded to a bucket of 64, 128, ... and writes each
layer's keys and values into zero caches in place. One decode step per cache length serves
every position and donates the caches: per layer, its attention is a lax.while_loop over blocks
of `block` positions (block / P slots per device; 256 when P divides it, else 32 P, as shardrt's
CLI; --attention-block sets it) that runs position // block + 1 iterations over the positions
before the token, each block's partial softmax merged into the running one (online softmax,
from m = -1e30, l = 0, o = 0), then the token's own key and value (on the device that holds its
position), then combined across the devices; the layers' new keys and values are collected and
written into the caches once, after the layer loop. The host loop mirrors
LlamaModel::Generate: the greedy token stays on device and feeds the next step, the host reads
each token 4 steps behind the newest scheduled step, and stops at a stop token or max_tokens.
Timing as shardrt's CLI reports it: prefill = from the prompt's upload to the first token read;
decode = (tokens - 1) / (last token read - first token read).

Programs are compiled ahead of the timed part (Model.prepare, as shardrt's Prepare): the prefill
bucket and the decode step.

One process, G generations (bench/model runs G = 1 in a new process per measurement, as the CLI
runs; later generations in the same process are warm), one JSON line each:
    python jax_llama.py --model M --devices 8 --prompt-tokens 6403,1980,253,655 --max-tokens 64
"""

import argparse
import collections
import json
import math
import os
import sys
import time


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", required=True)
    p.add_argument("--devices", type=int, default=8)
    p.add_argument("--prompt-tokens", default="6403,1980,253,655")
    p.add_argument("--max-tokens", type=int, default=64)
    p.add_argument("--generations", type=int, default=2)
    p.add_argument("--attention-block", type=int, default=0,
                   help="positions per decode attention loop iteration, a multiple of --devices "
                        "(default: 256 when the devices divide it, else 32 x devices)")
    return p.parse_args()


ARGS = parse_args()
os.environ["JAX_NUM_CPU_DEVICES"] = str(ARGS.devices)
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import gguf  # noqa: E402
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax import lax  # noqa: E402
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P  # noqa: E402

GRANULE = 64
LOOKAHEAD = 4
STOP_NAMES = ("<|im_end|>", "<|endoftext|>")
# The score of a masked-out key: exp(MASKED - m) is 0 for every real maximum m.
MASKED = -1e30


def bucket(n, granule, cap):
    b = granule
    while b < n and b < cap:
        b *= 2
    return min(b, cap)


class Config:
    def __init__(self, reader):
        f = reader.fields

        def value(key):
            return f[key].contents()

        self.n_layers = int(value("llama.block_count"))
        self.d = int(value("llama.embedding_length"))
        self.ffn = int(value("llama.feed_forward_length"))
        self.n_heads = int(value("llama.attention.head_count"))
        self.n_kv = int(value("llama.attention.head_count_kv"))
        self.hd = self.d // self.n_heads
        self.eps = float(value("llama.attention.layer_norm_rms_epsilon"))
        self.rope_base = float(value("llama.rope.freq_base"))
        self.q_dim = self.n_heads * self.hd
        self.kv_dim = self.n_kv * self.hd
        tokens = [bytes(x).decode("utf-8", "replace") if not isinstance(x, str) else x
                  for x in value("tokenizer.ggml.tokens")]
        self.vocab = len(tokens)
        self.stop = sorted({tokens.index(s) for s in STOP_NAMES if s in tokens}
                           | ({int(value("tokenizer.ggml.eos_token_id"))}
                              if "tokenizer.ggml.eos_token_id" in f else set()))


def load_weights(reader, c, p):
    """Global f32 arrays in shardrt's layouts (WeightSpecs order) and their partition specs."""
    t = {}
    for tensor in reader.tensors:
        a = gguf.quants.dequantize(tensor.data, tensor.tensor_type).astype(np.float32)
        t[tensor.name] = a.reshape([int(x) for x in reversed(tensor.shape)])

    def stacked(parts):  # per device: its rows of each part, one after the other
        return np.concatenate([np.concatenate([a[d * (a.shape[0] // p):(d + 1) * (a.shape[0] // p)]
                                               for a in parts]) for d in range(p)])

    names, arrays, specs = [], [], []

    def add(name, array, spec):
        names.append(name)
        arrays.append(np.ascontiguousarray(array, dtype=np.float32))
        specs.append(spec)

    add("token_embd", t["token_embd.weight"], P("x", None))
    layers = range(c.n_layers)

    def each(f):
        return np.stack([f(f"blk.{i}.") for i in layers])

    add("attn_norm", each(lambda b: t[b + "attn_norm.weight"]), P())
    add("wqkv", each(lambda b: stacked([t[b + "attn_q.weight"], t[b + "attn_k.weight"],
                                         t[b + "attn_v.weight"]])), P(None, "x", None))
    add("wo", each(lambda b: t[b + "attn_output.weight"]), P(None, "x", None))
    add("ffn_norm", each(lambda b: t[b + "ffn_norm.weight"]), P())
    add("wgu", each(lambda b: stacked([t[b + "ffn_gate.weight"], t[b + "ffn_up.weight"]])),
        P(None, "x", None))
    add("wdown", each(lambda b: t[b + "ffn_down.weight"]), P(None, None, "x"))
    add("output_norm", t["output_norm.weight"], P())
    return names, arrays, specs


class Model:
    def __init__(self, path, p, block=0):
        block = block or (256 if 256 % p == 0 else p * 32)
        if block < 1 or block % p != 0:
            sys.exit(f"jax_llama: attention block {block}: expected a multiple of the {p} devices")
        self.block = block
        reader = gguf.GGUFReader(path)
        self.c = c = Config(reader)
        self.p = p
        devices = jax.devices()[:p]
        if len(devices) != p:
            sys.exit(f"jax_llama: {p} devices asked for, JAX has {len(jax.devices())}")
        self.mesh = Mesh(np.array(devices), ("x",))
        self.names, arrays, self.specs = load_weights(reader, c, p)
        self.weights = [jax.device_put(a, NamedSharding(self.mesh, s))
                        for a, s in zip(arrays, self.specs)]
        del arrays
        jax.block_until_ready(self.weights)
        self.replicated = NamedSharding(self.mesh, P())
        half = c.hd // 2
        self.inv_freq = np.array(
            [np.float32(1.0) / np.power(np.float32(c.rope_base),
                                        np.float32(2 * i) / np.float32(c.hd)) for i in range(half)],
            dtype=np.float32)
        self.cache_spec = P(None, "x")
        self._prefill, self._decode = {}, None

    # ---- the per-device model code (mirrors llama_program.cc's Emitter) ----

    def _pid(self):
        return jnp.int32(0) if self.p == 1 else lax.axis_index("x").astype(jnp.int32)

    def _all_reduce(self, v):
        return v if self.p == 1 else lax.psum(v, "x")

    def _all_gather(self, v, dim):
        return v if self.p == 1 else lax.all_gather(v, "x", axis=dim, tiled=True)

    def _norm(self, x, gain):
        d = x.shape[1]
        ms = jnp.sum(x * x, axis=1) / jnp.float32(d)
        root = jnp.sqrt(ms + jnp.float32(self.c.eps))
        return (x * gain[None, :]) / root[:, None]

    @staticmethod
    def _linear(x, w):
        return lax.dot_general(x, w, (((1,), (1,)), ((), ())))

    def _embed(self, emb, tokens):
        rows = self.c.vocab // self.p
        local = tokens - self._pid() * jnp.int32(rows)
        inside = (local >= 0) & (local < rows)
        found = jnp.take(emb, jnp.where(inside, local, 0), axis=0)
        return self._all_reduce(jnp.where(inside[:, None], found, jnp.float32(0)))

    def _rope(self, x, pos):
        s, h, hd = x.shape
        half = hd // 2
        angle = pos.astype(jnp.float32)[:, None] * jnp.asarray(self.inv_freq)[None, :]
        cos = jnp.cos(angle)[:, None, :]
        sin = jnp.sin(angle)[:, None, :]
        pairs = x.reshape(s, h, half, 2)
        x0, x1 = pairs[..., 0], pairs[..., 1]
        r0 = x0 * cos - x1 * sin
        r1 = x0 * sin + x1 * cos
        return jnp.stack([r0, r1], axis=3).reshape(s, h, hd)

    def _project(self, x, w, pos):
        c, p = self.c, self.p
        s = x.shape[0]
        cq, ckv = c.q_dim // p, c.kv_dim // p
        h = self._norm(x, w["attn_norm"])
        every = self._all_gather(self._linear(h, w["wqkv"]), 1).reshape(s, p, cq + 2 * ckv)

        def part(begin, size, heads):
            return every[:, :, begin:begin + size].reshape(s, heads, c.hd)

        return (self._rope(part(0, cq, c.n_heads), pos), self._rope(part(cq, ckv, c.n_kv), pos),
                part(cq + ckv, ckv, c.n_kv))

    def _local_attention(self, q, qpos, keys, values, first_slot):
        """One device's partial attention (o [kv, s, g, hd], m, l [kv, s, g]) of q [s, heads, hd]
        at positions qpos over keys and values [t, kv, hd] in its slots first_slot .. + t - 1
        (positions (first_slot + j) P + pid); keys after a query's position are masked out."""
        c, p = self.c, self.p
        s, kv, hd, t = q.shape[0], c.n_kv, c.hd, keys.shape[0]
        g = c.n_heads // kv
        q4 = q.reshape(s, kv, g, hd)
        scores = lax.dot_general(q4, keys, (((3,), (2,)), ((1,), (1,))))  # [kv, s, g, t]
        scores = scores * jnp.float32(1.0 / np.sqrt(hd))
        slots = jnp.arange(t, dtype=jnp.int32) + first_slot
        kpos = slots * jnp.int32(p) + self._pid()
        allowed = kpos[None, :] <= qpos[:, None]  # [s, t]
        scores = jnp.where(allowed[None, :, None, :], scores, jnp.float32(MASKED))
        m = jnp.max(scores, axis=3)
        e = jnp.exp(scores - m[..., None])
        l = jnp.sum(e, axis=3)
        o = lax.dot_general(e, values, (((3,), (0,)), ((0,), (1,))))  # [kv, s, g, hd]
        return o, m, l

    @staticmethod
    def _merge(a, b):
        """Two partials over disjoint keys merged into the partial over all of them."""
        oa, ma, la = a
        ob, mb, lb = b
        m = jnp.maximum(ma, mb)
        sa = jnp.exp(ma - m)
        sb = jnp.exp(mb - m)
        l = la * sa + lb * sb
        o = oa * sa[..., None] + ob * sb[..., None]
        return o, m, l

    def _combine(self, part):
        """The attention output [s, heads * hd] from every device's partial (one all-gather)."""
        c, p = self.c, self.p
        o, m, l = part
        s, hd = m.shape[1], c.hd
        if p > 1:
            packed = jnp.concatenate([o, m[..., None], l[..., None]], axis=3)
            every = lax.all_gather(packed[None], "x", axis=0, tiled=True)  # [p, kv, s, g, hd+2]
            ms, ls = every[..., hd], every[..., hd + 1]
            m = jnp.max(ms, axis=0)
            scale = jnp.exp(ms - m[None])
            l = jnp.sum(ls * scale, axis=0)
            o = jnp.sum(every[..., :hd] * scale[..., None], axis=0)
        out = o / l[..., None]
        return jnp.transpose(out, (1, 0, 2, 3)).reshape(s, c.q_dim)

    def _attention(self, q, qpos, keys, values):
        return self._combine(self._local_attention(q, qpos, keys, values, jnp.int32(0)))

    def _cached_attention(self, qkv, position, owner, slot, k_cache, v_cache, layer):
        """The attention of one token's query at `position` (qkv: q [1, heads, hd], k and v
        [1, kv, hd]) over the positions before it in layer `layer` of this device's caches
        [layers, 1, slots, kv, hd] (a loop over blocks of block / P slots up to the block holding
        `position`, merged online) and over its own key and value (counted by the device that
        holds the position, `owner`, at `slot`), then combined over the devices."""
        c, p = self.c, self.p
        q, k, v = qkv
        kv, g, hd = c.n_kv, c.n_heads // c.n_kv, c.hd
        bs = self.block // p
        blocks = lax.div(position, jnp.int32(bs * p)) + jnp.int32(1)
        before = (position - jnp.int32(1)).reshape(1)
        zero = jnp.int32(0)

        def body(carry):
            i, m, l, o = carry
            first = i * jnp.int32(bs)

            def block(cache):
                slab = lax.dynamic_slice(cache, (layer, zero, first, zero, zero),
                                         (1, 1, bs, kv, hd))
                return slab.reshape(bs, kv, hd)

            part = self._local_attention(q, before, block(k_cache), block(v_cache), first)
            o, m, l = self._merge((o, m, l), part)
            return i + jnp.int32(1), m, l, o

        init = (zero, jnp.full((kv, 1, g), MASKED, jnp.float32), jnp.zeros((kv, 1, g), jnp.float32),
                jnp.zeros((kv, 1, g, hd), jnp.float32))
        _, m, l, o = lax.while_loop(lambda carry: carry[0] < blocks, body, init)
        self_pos = jnp.where(owner, position, jnp.int32(-1)).reshape(1)
        own = self._local_attention(q, self_pos, k, v, slot)
        return self._combine(self._merge((o, m, l), own))

    def _mlp(self, x, w):
        f = self.c.ffn // self.p
        h = self._norm(x, w["ffn_norm"])
        gu = self._linear(h, w["wgu"])
        gate, up = gu[:, :f], gu[:, f:2 * f]
        act = (gate * up) / (jnp.float32(1) + jnp.exp(-gate))
        return x + self._all_reduce(self._linear(act, w["wdown"]))

    def _logits(self, x, wd):
        rows = self.c.vocab // self.p
        h = self._norm(x, wd["output_norm"])
        logits = self._linear(h, wd["token_embd"]).reshape(rows)
        best = jnp.argmax(logits).astype(jnp.int32)
        index = best + self._pid() * jnp.int32(rows)
        if self.p == 1:
            return index, logits
        maxes = lax.all_gather(logits[best][None], "x", axis=0, tiled=True)
        indices = lax.all_gather(index[None], "x", axis=0, tiled=True)
        return indices[jnp.argmax(maxes)], logits

    LAYER_WEIGHTS = ("attn_norm", "wqkv", "wo", "ffn_norm", "wgu", "wdown")

    def _layer(self, weights, i):
        """Layer i's (s32[]) weights, sliced out of the stacked ones."""
        return {k: lax.dynamic_index_in_dim(weights[k], i, keepdims=False)
                for k in self.LAYER_WEIGHTS}

    def _for_layers(self, body, carried):
        """A lax.while_loop over the layers: body(i, carried) -> the next carried values."""
        def step(state):
            i, rest = state
            return i + jnp.int32(1), body(i, rest)

        _, out = lax.while_loop(lambda state: state[0] < jnp.int32(self.c.n_layers), step,
                                (jnp.int32(0), carried))
        return out

    def _prefill_local(self, tokens, length, *weights):
        c, p = self.c, self.p
        wd = dict(zip(self.names, weights))
        s = tokens.shape[0]
        slots = self.cache_len // p
        pos = jnp.arange(s, dtype=jnp.int32)
        zero = jnp.int32(0)

        def layer(i, carried):
            x, kc, vc = carried
            w = self._layer(wd, i)
            q, k, v = self._project(x, w, pos)

            def mine(a):
                r = a.reshape(s // p, p, c.n_kv, c.hd)
                d = lax.dynamic_slice(r, (0, self._pid(), 0, 0), (s // p, 1, c.n_kv, c.hd))
                return d.reshape(s // p, c.n_kv, c.hd)

            keys, values = mine(k), mine(v)
            x = x + self._all_gather(self._linear(self._attention(q, pos, keys, values),
                                                  w["wo"]), 1)
            x = self._mlp(x, w)

            def write(cache, a):
                return lax.dynamic_update_slice(cache, a.reshape(1, 1, s // p, c.n_kv, c.hd),
                                                (i, zero, zero, zero, zero))

            return x, write(kc, keys), write(vc, values)

        empty = jnp.zeros((c.n_layers, 1, slots, c.n_kv, c.hd), jnp.float32)
        x, kc, vc = self._for_layers(layer, (self._embed(wd["token_embd"], tokens), empty, empty))
        last = lax.dynamic_slice(x, (length - 1, 0), (1, c.d))
        token, logits = self._logits(last, wd)
        return kc, vc, token, logits

    def _decode_local(self, k_cache, v_cache, token, position, *weights):
        c, p = self.c, self.p
        wd = dict(zip(self.names, weights))
        pos = position.reshape(1)
        slot = lax.div(position, jnp.int32(p))
        mine = lax.rem(position, jnp.int32(p)) == self._pid()
        zero = jnp.int32(0)

        def layer(i, carried):
            x, ks, vs = carried
            w = self._layer(wd, i)
            q, k, v = self._project(x, w, pos)
            attn = self._cached_attention((q, k, v), position, mine, slot, k_cache, v_cache, i)
            x = x + self._all_gather(self._linear(attn, w["wo"]), 1)
            x = self._mlp(x, w)
            return (x, lax.dynamic_update_slice(ks, k, (i, zero, zero)),
                    lax.dynamic_update_slice(vs, v, (i, zero, zero)))

        column = jnp.zeros((c.n_layers, c.n_kv, c.hd), jnp.float32)
        x, ks, vs = self._for_layers(
            layer, (self._embed(wd["token_embd"], token.reshape(1)), column, column))
        one = (c.n_layers, 1, 1, c.n_kv, c.hd)
        at = (zero, zero, slot, zero, zero)

        def write(cache, new):
            held = lax.dynamic_slice(cache, at, one)
            return lax.dynamic_update_slice(cache, jnp.where(mine, new.reshape(one), held), at)

        token, logits = self._logits(x, wd)
        return write(k_cache, ks), write(v_cache, vs), token, logits

    # ---- compiled programs ----

    def _out_specs(self):
        return (self.cache_spec, self.cache_spec, P(), P("x"))

    def _abstract(self, shape, dtype, spec):
        return jax.ShapeDtypeStruct(shape, dtype, sharding=NamedSharding(self.mesh, spec))

    def _cache_abstract(self):
        c = self.c
        return self._abstract((c.n_layers, self.p, self.cache_len // self.p, c.n_kv, c.hd),
                              jnp.float32, self.cache_spec)

    def prefill(self, s):
        """The compiled prefill program for a prompt bucket of s tokens (compiled ahead of use,
        as shardrt's Prepare does, so that no call compiles)."""
        if s not in self._prefill:
            f = jax.shard_map(self._prefill_local, mesh=self.mesh,
                              in_specs=(P(), P(), *self.specs), out_specs=self._out_specs(),
                              check_vma=False)
            self._prefill[s] = jax.jit(f).lower(
                self._abstract((s,), jnp.int32, P()), self._abstract((), jnp.int32, P()),
                *self.weights).compile()
        return self._prefill[s]

    def decode(self):
        """The compiled decode step for the cache length, every position (caches donated)."""
        if self._decode is None:
            f = jax.shard_map(self._decode_local, mesh=self.mesh,
                              in_specs=(self.cache_spec, self.cache_spec, P(), P(), *self.specs),
                              out_specs=self._out_specs(), check_vma=False)
            scalar = self._abstract((), jnp.int32, P())
            self._decode = jax.jit(f, donate_argnums=(0, 1)).lower(
                self._cache_abstract(), self._cache_abstract(), scalar, scalar,
                *self.weights).compile()
        return self._decode

    def prepare(self, n, max_tokens):
        """Compiles the prefill bucket and the decode step a generation of max_tokens after a
        prompt of n tokens uses (LlamaModel::Prepare); the cache holds n + max_tokens positions
        rounded up to a multiple of lcm(granule, block) (LlamaModel::Create)."""
        unit = math.lcm(GRANULE, self.block)
        cache_len = -(-(n + max_tokens) // unit) * unit
        if getattr(self, "cache_len", None) != cache_len:
            self.cache_len = cache_len
            self._prefill, self._decode = {}, None
        self.prefill(bucket(n, GRANULE, cache_len))
        self.decode()

    # ---- the host loop (LlamaModel::Generate, greedy) ----

    def generate(self, prompt, max_tokens):
        n = len(prompt)
        self.prepare(n, max_tokens)
        cache_len = self.cache_len
        b = bucket(n, GRANULE, cache_len)
        prefill = self.prefill(b)
        start = time.perf_counter()
        padded = np.array(list(prompt) + [prompt[-1]] * (b - n), dtype=np.int32)
        tokens_dev = jax.device_put(padded, self.replicated)
        length = jax.device_put(np.int32(n), self.replicated)
        kc, vc, tok, _ = prefill(tokens_dev, length, *self.weights)
        pending = collections.deque([tok])
        scheduled, out = 1, []
        first = last = None
        stop = False

        def read_one():
            nonlocal first, last, stop
            token = int(np.asarray(pending.popleft()))
            last = time.perf_counter()
            if first is None:
                first = last
            out.append(token)
            if token in self.c.stop or len(out) >= max_tokens:
                stop = True

        while not stop:
            while not stop and pending and len(pending) > LOOKAHEAD:
                read_one()
            if stop:
                break
            if scheduled >= max_tokens:
                read_one()
                continue
            position = n + scheduled - 1
            step = self.decode()
            pos_dev = jax.device_put(np.int32(position), self.replicated)
            kc, vc, tok, _ = step(kc, vc, tok, pos_dev, *self.weights)
            pending.append(tok)
            scheduled += 1
        pending.clear()
        jax.block_until_ready((kc, vc))
        decode_s = last - first
        return {"tokens": out, "prefill_s": first - start,
                "decode_tokens_per_s": (len(out) - 1) / decode_s if len(out) > 1 and decode_s > 0
                else 0.0}


def main():
    model = Model(ARGS.model, ARGS.devices, ARGS.attention_block)
    prompt = [int(x) for x in ARGS.prompt_tokens.split(",")]
    for g in range(ARGS.generations):
        r = model.generate(prompt, ARGS.max_tokens)
        print(json.dumps({"generation": g, "jax": jax.__version__, **r}), flush=True)


if __name__ == "__main__":
    main()
