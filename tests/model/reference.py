"""An independent NumPy implementation of the Llama architecture, on weights dequantized by the
gguf package, written the way Hugging Face transformers' LlamaForCausalLM and Qwen2ForCausalLM
compute (f32): for `llama` files Q and K rows are put back in Hugging Face's order (undoing the
GGUF converter's permutation; `qwen2` files keep that order), rotated with rotate_half, attention
is plain softmax over all positions so far. `qwen2` adds the q, k and v biases. Metadata
defaults are transformers' / llama.cpp's: rope base 10000, as many key/value heads as heads, the
head size from the width; Llama 3.1's rope_freqs.weight divides the frequencies; an untied
output.weight makes the logits.

    model = Reference(path)
    tokens, logits = model.greedy(prompt_ids, n)   # n generated ids and the logits of each
"""
import numpy as np
import gguf


def _unpermute(w, n_head):
    """GGUF's Q/K rows (interleaved RoPE pairs) back to Hugging Face's order (halves)."""
    rows = w.shape[0]
    return (w.reshape(n_head, rows // n_head // 2, 2, *w.shape[1:])
            .swapaxes(1, 2).reshape(w.shape))


class Reference:
    def __init__(self, path):
        reader = gguf.GGUFReader(path)
        f = reader.fields

        def value(key):
            return f[key].contents()

        def get(key, default):
            return value(key) if key in f else default

        self.arch = value("general.architecture")
        a = self.arch + "."
        self.n_layers = int(value(a + "block_count"))
        self.d = int(value(a + "embedding_length"))
        self.n_heads = int(value(a + "attention.head_count"))
        self.n_kv = int(get(a + "attention.head_count_kv", self.n_heads))
        self.hd = int(get(a + "attention.key_length", self.d // self.n_heads))
        self.eps = np.float32(value(a + "attention.layer_norm_rms_epsilon"))
        base = np.float32(get(a + "rope.freq_base", 10000.0))
        self.inv_freq = (1.0 / (base ** (np.arange(0, self.hd, 2, dtype=np.float32)
                                         / np.float32(self.hd)))).astype(np.float32)
        w = {}
        for t in reader.tensors:
            a = gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float32)
            w[t.name] = a.reshape([int(x) for x in reversed(t.shape)])
        self.w = w
        if "rope_freqs.weight" in w:
            self.inv_freq = (self.inv_freq / w["rope_freqs.weight"]).astype(np.float32)
        self.output = w.get("output.weight", w["token_embd.weight"])
        self.bias = "blk.0.attn_q.bias" in w
        if self.arch == "llama":
            for i in range(self.n_layers):
                p = f"blk.{i}."
                w[p + "attn_q.weight"] = _unpermute(w[p + "attn_q.weight"], self.n_heads)
                w[p + "attn_k.weight"] = _unpermute(w[p + "attn_k.weight"], self.n_kv)
                if self.bias:
                    w[p + "attn_q.bias"] = _unpermute(w[p + "attn_q.bias"], self.n_heads)
                    w[p + "attn_k.bias"] = _unpermute(w[p + "attn_k.bias"], self.n_kv)

    def _norm(self, x, g):
        var = np.mean(x * x, axis=-1, keepdims=True, dtype=np.float32)
        return (g * (x / np.sqrt(var + self.eps))).astype(np.float32)

    def _rope(self, x, pos):
        # x [s, heads, hd], pos [s]
        freqs = pos.astype(np.float32)[:, None] * self.inv_freq[None, :]
        emb = np.concatenate([freqs, freqs], axis=-1)
        cos, sin = np.cos(emb)[:, None, :], np.sin(emb)[:, None, :]
        half = self.hd // 2
        rotated = np.concatenate([-x[..., half:], x[..., :half]], axis=-1)
        return (x * cos + rotated * sin).astype(np.float32)

    def forward(self, ids, start, cache):
        """Runs tokens `ids` at positions start.. with the (k, v) lists in `cache`; returns the
        logits of the last position."""
        w = self.w
        s = len(ids)
        pos = np.arange(start, start + s)
        x = w["token_embd.weight"][np.asarray(ids)]
        group = self.n_heads // self.n_kv
        for i in range(self.n_layers):
            p = f"blk.{i}."
            h = self._norm(x, w[p + "attn_norm.weight"])
            q, k, v = (h @ w[p + f"attn_{n}.weight"].T for n in "qkv")
            if self.bias:
                q, k, v = (y + w[p + f"attn_{n}.bias"] for y, n in zip((q, k, v), "qkv"))
            q = q.reshape(s, self.n_heads, self.hd)
            k = k.reshape(s, self.n_kv, self.hd)
            v = v.reshape(s, self.n_kv, self.hd)
            q, k = self._rope(q, pos), self._rope(k, pos)
            if len(cache) <= i:
                cache.append([k, v])
            else:
                cache[i][0] = np.concatenate([cache[i][0], k])
                cache[i][1] = np.concatenate([cache[i][1], v])
            keys, values = cache[i]
            t = keys.shape[0]
            out = np.empty((s, self.n_heads, self.hd), np.float32)
            allowed = np.arange(t)[None, :] <= pos[:, None]
            for head in range(self.n_heads):
                kv = head // group
                scores = (q[:, head, :] @ keys[:, kv, :].T) / np.float32(np.sqrt(self.hd))
                scores = np.where(allowed, scores, -np.inf)
                scores = scores - scores.max(axis=-1, keepdims=True)
                e = np.exp(scores)
                out[:, head, :] = (e / e.sum(axis=-1, keepdims=True)) @ values[:, kv, :]
            x = x + out.reshape(s, -1) @ w[p + "attn_output.weight"].T
            h = self._norm(x, w[p + "ffn_norm.weight"])
            gate = h @ w[p + "ffn_gate.weight"].T
            up = h @ w[p + "ffn_up.weight"].T
            act = gate / (np.float32(1) + np.exp(-gate)) * up
            x = (x + act @ w[p + "ffn_down.weight"].T).astype(np.float32)
        h = self._norm(x[-1:], w["output_norm.weight"])
        return (h @ self.output.T)[0]

    def greedy(self, prompt, n, stop=()):
        """Up to n greedy tokens after `prompt` (ending after a token in `stop`), and the logits
        each was chosen from."""
        cache = []
        logits = self.forward(prompt, 0, cache)
        tokens, all_logits = [], []
        position = len(prompt)
        while True:
            token = int(np.argmax(logits))
            tokens.append(token)
            all_logits.append(logits)
            if len(tokens) >= n or token in stop:
                return tokens, np.stack(all_logits)
            logits = self.forward([token], position, cache)
            position += 1
