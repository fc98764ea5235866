"""Checks `shardrt generate` on Llama-family GGUF files of other shapes, block types and
architectures than the real model's, written here with the `gguf` package from seeded random
weights: for each file, the greedy tokens on 1 and 8 devices (and on f32 weights for some)
equal those of the independent NumPy reference (reference.py) on the gguf package's
dequantized weights, and every step's logits agree with the reference's within a tolerance.

Most files take the tokenizer of the real model (its vocabulary and merges, with the pre-
tokenizer `smollm`, `qwen2` or `llama-bpe`); one takes test_tokenizers.py's synthetic
SentencePiece-style (`llama`) vocabulary. The runs' prompts are token ids (--prompt-tokens) drawn
from the vocabulary; one more run per file (8 devices) takes a text prompt, whose tokens must be
Hugging Face's (BOS first where the tokenizer adds one) and whose text the decoding of Hugging
Face's tokenizer (or transformers' GGUF tokenizer) of the generated tokens. The cases cover: head sizes 16, 32
and 64; multi-head, grouped-query and multi-query attention; tied and untied outputs;
metadata that leaves out rope.freq_base, vocab_size, rope.dimension_count and head_count_kv
(their defaults); rope base 500000 with Llama 3.1's rope_freqs.weight; the `qwen2`
architecture (biases on q, k and v, RoPE over halves); F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1,
Q8_0, Q4_K and Q6_K matrices; a feed-forward width whose per-device slice is not a multiple of
32 (640 over 8 devices: F16 rows need no blocks); widths that do not divide over the devices
(padded shares: quantized feed-forward widths of 10 and 5 blocks over 8 devices; an F16 file
where no split width divides by 8 or 3, on 1, 3 and 8 devices; a vocabulary of 49150 rows).

    usage: test_models.py SHARDRT_CLI MODEL.gguf [NAME_PART]   (NAME_PART: only those files)
Prints a line per file and run and exits 0, or the mismatches and exits 1.
"""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import gguf
from gguf import GGMLQuantizationType as T

from reference import Reference
import test_tokenizers as tok_tests

# Largest |shardrt - reference| allowed for any logit, relative to the largest |logit| of the
# step. The files' logits span a few tens; f32 with another summation order (and the kernels'
# order on native blocks) moves them by about 1e-5 of that; a wrong bias, RoPE pairing or
# output matrix moves them by more than 1e-1.
LOGIT_TOLERANCE = 1e-3
GENERATE = 12  # tokens per run

# name, architecture, sizes, matrix types, options. Types: token_embd, q/k/v, output
# projection, gate/up, down, untied output (None: tied).
CASES = [
    dict(name="llama-q8_0-untied-defaults-ffn320", arch="llama", pre="default", d=128, heads=4,
         kv=None, ffn=320,
         layers=2, types=dict(embd=T.Q8_0, qkv=T.Q8_0, o=T.Q8_0, gu=T.Q8_0, down=T.Q8_0,
                              output=T.Q8_0),
         omit=("rope.freq_base", "vocab_size", "rope.dimension_count", "head_count_kv"),
         f32=False),
    dict(name="llama-f16-gqa-ffn640-rope500k-freqs", arch="llama", spm=True, d=256, heads=8, kv=2,
         ffn=640, layers=2, types=dict(embd=T.F16, qkv=T.F16, o=T.F16, gu=T.F16, down=T.F16,
                                       output=None),
         rope_base=500000.0, rope_freqs=True, eps=1e-6, f32=True),
    dict(name="qwen2-q4_0-q5_0-q5_1-biases", arch="qwen2", pre="qwen2", d=128, heads=4, kv=2, ffn=512,
         layers=2, types=dict(embd=T.Q8_0, qkv=T.Q4_0, o=T.Q5_0, gu=T.Q5_1, down=T.Q4_1,
                              output=T.Q8_0),
         rope_base=1000000.0, eps=1e-6, f32=True),
    dict(name="llama-bf16-mqa-hd16", arch="llama", pre="llama-bpe", d=128, heads=8, kv=1, ffn=384, layers=2,
         types=dict(embd=T.BF16, qkv=T.BF16, o=T.BF16, gu=T.BF16, down=T.F32, output=None),
         f32=False),
    dict(name="llama-q4_k-q6_k-hd64-ffn1280", arch="llama", d=256, heads=4, kv=4, ffn=1280, layers=2,
         types=dict(embd=T.Q8_0, qkv=T.Q4_K, o=T.Q4_K, gu=T.Q4_K, down=T.Q6_K, output=T.Q6_K),
         f32=False),
    # Nothing divides by 8 or 3: width 100, query width 4 x 30, key/value width 2 x 30, feed-
    # forward width 300, vocabulary 49150 rows (the tokenizer's last two ids have none).
    dict(name="llama-f16-uneven-hd30", arch="llama", d=100, heads=4, kv=2, hd=30, ffn=300,
         layers=2, vocab=49150, types=dict(embd=T.F16, qkv=T.F16, o=T.F16, gu=T.F16,
                                           down=T.F16, output=T.F16),
         omit=("vocab_size",), devices=(1, 3, 8), f32=True),
]


def kquant_blocks(rng, rows, cols, qtype):
    """Random K-quant blocks (the gguf package cannot quantize to them): random bytes with
    finite, small f16 scales, so that the values stay in a range a model can use."""
    block_size, type_size = gguf.GGML_QUANT_SIZES[qtype]
    n = rows * cols // block_size
    data = rng.integers(0, 256, size=(n, type_size), dtype=np.uint8)
    # A value is about d x (6-bit scale) x (quant): up to ~1000 d.
    scale = (rng.uniform(0.5, 1.0, size=n) / np.sqrt(cols) / 300).astype(np.float16)
    if qtype == T.Q4_K:  # d, dmin (f16), scales[12], qs[128]
        data[:, 0:2] = scale.view(np.uint8).reshape(n, 2)
        data[:, 2:4] = (scale * 4).astype(np.float16).view(np.uint8).reshape(n, 2)
    elif qtype == T.Q6_K:  # ql[128], qh[64], scales[16] (int8), d (f16)
        data[:, 192:208] = rng.integers(-32, 32, size=(n, 16), dtype=np.int8).view(np.uint8)
        data[:, 208:210] = (scale / 4).astype(np.float16).view(np.uint8).reshape(n, 2)
    else:
        raise ValueError(qtype)
    return data.reshape(rows, cols // block_size * type_size)


def add_matrix(writer, rng, name, rows, cols, qtype, std, poison=None):
    """A [rows, cols] matrix (GGUF dims [cols, rows]) of N(0, std) values in `qtype`; with
    `poison` = (name, value), that tensor's values are all `value` instead."""
    if qtype in (T.Q4_K, T.Q6_K):
        writer.add_tensor(name, kquant_blocks(rng, rows, cols, qtype), raw_dtype=qtype)
        return
    x = (rng.standard_normal((rows, cols)) * std).astype(np.float32)
    if poison and poison[0] == name:
        x[:] = poison[1]
    if qtype == T.F32:
        writer.add_tensor(name, x)
    elif qtype == T.F16:
        writer.add_tensor(name, x.astype(np.float16))
    else:
        writer.add_tensor(name, gguf.quants.quantize(x, qtype), raw_dtype=qtype)


def spm_tokenizer():
    """A SentencePiece-style (`llama`) tokenizer: test_tokenizers.py's synthetic vocabulary
    (<unk>, <s>, </s>, the byte tokens, a small trained BPE with scores)."""
    trained = tok_tests.spm_vocabulary()
    tokens, types, scores = ["<unk>", "<s>", "</s>"], [2, 3, 3], [0.0, 0.0, 0.0]
    for b in range(256):
        tokens.append(f"<0x{b:02X}>")
        types.append(6)
        scores.append(0.0)
    present = set(tokens)
    for rank, t in enumerate(trained):
        if t not in present:
            present.add(t)
            tokens.append(t)
            types.append(1)
            scores.append(-float(rank))
    return {"tokenizer.ggml.model": "llama", "tokenizer.ggml.tokens": tokens,
            "tokenizer.ggml.token_type": types, "tokenizer.ggml.scores": scores,
            "tokenizer.ggml.bos_token_id": 1, "tokenizer.ggml.eos_token_id": 2,
            "tokenizer.ggml.unknown_token_id": 0}


def write_model(path, case, tokenizer_fields, seed, extra=None, drop=(), poison=None):
    rng = np.random.default_rng(seed)
    arch, d, heads, ffn, layers = case["arch"], case["d"], case["heads"], case["ffn"], case["layers"]
    kv = case["kv"] or heads
    hd = case.get("hd", d // heads)
    types = case["types"]
    omit = case.get("omit", ())
    vocab = case.get("vocab") or len(tokenizer_fields["tokenizer.ggml.tokens"])
    w = gguf.GGUFWriter(path, arch)
    w.add_name(case["name"])
    w.add_block_count(layers)
    if "context_length" not in drop:
        w.add_context_length(512)
    w.add_embedding_length(d)
    w.add_feed_forward_length(ffn)
    w.add_head_count(heads)
    if "head_count_kv" not in omit:
        w.add_head_count_kv(kv)
    if hd != d // heads:
        w.add_key_length(hd)
        w.add_value_length(hd)
    if "rope.freq_base" not in omit:
        w.add_rope_freq_base(case.get("rope_base", 10000.0))
    if "rope.dimension_count" not in omit:
        w.add_rope_dimension_count(hd)
    if "vocab_size" not in omit:
        w.add_vocab_size(vocab)
    if "eps" not in drop:
        w.add_layer_norm_rms_eps(case.get("eps", 1e-5))
    if extra:
        extra(w)
    t = tokenizer_fields or {}
    if t:
        w.add_tokenizer_model(t["tokenizer.ggml.model"])
    if "tokenizer.ggml.pre" in t:
        w.add_tokenizer_pre(case.get("pre", t["tokenizer.ggml.pre"]))
    if "tokenizer.ggml.tokens" in t:
        w.add_token_list(t["tokenizer.ggml.tokens"])
        w.add_token_types(t["tokenizer.ggml.token_type"])
    if "tokenizer.ggml.merges" in t:
        w.add_token_merges(t["tokenizer.ggml.merges"])
    if "tokenizer.ggml.scores" in t:
        w.add_token_scores(t["tokenizer.ggml.scores"])
    if "tokenizer.ggml.unknown_token_id" in t:
        w.add_unk_token_id(t["tokenizer.ggml.unknown_token_id"])
    if "tokenizer.ggml.bos_token_id" in t:
        w.add_bos_token_id(t["tokenizer.ggml.bos_token_id"])
        w.add_eos_token_id(t["tokenizer.ggml.eos_token_id"])

    def norm(name, n):
        x = (1.0 + 0.2 * rng.standard_normal(n)).astype(np.float32)
        if poison and poison[0] == name:
            x[n // 2] = poison[1]
        w.add_tensor(name, x)

    def matrix(name, rows, cols, qtype, std):
        add_matrix(w, rng, name, rows, cols, qtype, std, poison)

    # Tied logits are the embedding's rows times the normalized state: std 1 makes logits of a
    # few tens, far apart at the top.
    matrix("token_embd.weight", vocab, d, types["embd"], 1.0)
    norm("output_norm.weight", d)
    if types["output"] is not None:
        matrix("output.weight", vocab, d, types["output"], 3.0 / np.sqrt(d))
    if case.get("rope_freqs"):
        # Llama 3.1's factors: 1 for the fast frequencies, up to 8 for the slow ones.
        w.add_tensor("rope_freqs.weight",
                     np.linspace(1.0, 8.0, hd // 2).astype(np.float32))
    for i in range(layers):
        p = f"blk.{i}."
        norm(p + "attn_norm.weight", d)
        for n, rows in (("q", heads * hd), ("k", kv * hd), ("v", kv * hd)):
            matrix(p + f"attn_{n}.weight", rows, d, types["qkv"], 1.5 / np.sqrt(d))
            if arch == "qwen2":
                w.add_tensor(p + f"attn_{n}.bias",
                             (0.5 * rng.standard_normal(rows)).astype(np.float32))
        matrix(p + "attn_output.weight", d, heads * hd, types["o"],
                   1.0 / np.sqrt(heads * hd))
        norm(p + "ffn_norm.weight", d)
        matrix(p + "ffn_gate.weight", ffn, d, types["gu"], 1.5 / np.sqrt(d))
        matrix(p + "ffn_up.weight", ffn, d, types["gu"], 1.5 / np.sqrt(d))
        matrix(p + "ffn_down.weight", d, ffn, types["down"], 1.0 / np.sqrt(ffn))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def tokenizer_of(model):
    fields = gguf.GGUFReader(model).fields
    keys = ["tokenizer.ggml.model", "tokenizer.ggml.pre", "tokenizer.ggml.tokens",
            "tokenizer.ggml.token_type", "tokenizer.ggml.merges", "tokenizer.ggml.bos_token_id",
            "tokenizer.ggml.eos_token_id"]
    return {k: fields[k].contents() for k in keys}


def run(cli, model, prompt, devices, weights, workdir):
    """Greedy tokens, logits and --json result for `prompt` (token ids, or a text)."""
    logits_path = os.path.join(workdir, f"logits_{devices}_{weights}.npy")
    cmd = [cli, "generate", "--model", model, "--devices", str(devices), "--max-tokens",
           str(GENERATE), "--json", "--logits-out", logits_path, "--weights", weights,
           "--compile-cache", os.path.join(workdir, "cache")]
    if isinstance(prompt, str):
        cmd += ["--prompt", prompt]
    else:
        cmd += ["--prompt-tokens", ",".join(map(str, prompt))]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if out.returncode != 0:
        return None, None, f"{' '.join(cmd[1:])} exited {out.returncode}: {out.stderr.strip()}"
    result = json.loads(out.stdout.strip().splitlines()[-1])
    return result["tokens"], np.load(logits_path), result


# Files shardrt must refuse: (what is changed, the writer's change, words the one-line error
# must hold). Each is the first case's file with one thing changed.
REFUSALS = [
    ("an unknown architecture", dict(arch="gemma"),
     ["general.architecture is 'gemma'", "supported: 'llama', 'qwen2'"]),
    ("an architecture name holding a NUL", dict(arch="lla\0ma"),
     ["general.architecture is 'lla\\x00ma'"]),
    ("a context shorter than one unit of the cache", dict(drop=("context_length",),
                                                          kv=("llama.context_length", 16)),
     ["the model's context of 16 positions is shorter than one unit of"]),
    ("an output bias", dict(tensor=("blk.1.attn_output.bias", 128)),
     ["blk.1.attn_output.bias is not supported"]),
    ("yarn RoPE scaling", dict(kv=("llama.rope.scaling.type", "yarn")),
     ["llama.rope.scaling.type is 'yarn'", "supported: 'none'"]),
    ("partial RoPE", dict(kv=("llama.rope.dimension_count", 16)),
     ["llama.rope.dimension_count is 16", "partial RoPE is not supported"]),
    ("a missing context length", dict(drop=("context_length",)),
     ["llama.context_length"]),
    ("a NaN norm weight", dict(poison=("blk.1.ffn_norm.weight", np.nan)),
     ["tensor 'blk.1.ffn_norm.weight': row 0, column 64: the value is not finite"]),
    ("an infinite F16 weight", dict(types=dict(qkv=T.F16), poison=("blk.0.attn_k.weight", np.inf)),
     ["tensor 'blk.0.attn_k.weight': row 0, column 0: the value is not finite"]),
    ("a NaN rope base", dict(kv=("llama.rope.freq_base", np.nan)),
     ["llama.rope.freq_base is nan, expected a finite number > 0"]),
    ("a zero rope base", dict(kv=("llama.rope.freq_base", 0.0)),
     ["llama.rope.freq_base is 0, expected a finite number > 0"]),
    ("an infinite norm epsilon", dict(drop=("eps",), kv=("llama.attention.layer_norm_rms_epsilon",
                                                         np.inf)),
     ["llama.attention.layer_norm_rms_epsilon is inf, expected a finite number >= 0"]),
    ("logits that overflow", dict(types=dict(output=T.F32), poison=("output.weight", 3e38)),
     ["the model's logits are not finite (NaN or infinity)"]),
    ("logits that overflow, 8 devices", dict(types=dict(output=T.F32),
                                             poison=("output.weight", 3e38),
                                             flags=["--devices", "8"]),
     ["the model's logits are not finite (NaN or infinity)"]),
    ("logits that overflow, sampled", dict(types=dict(output=T.F32),
                                           poison=("output.weight", 3e38),
                                           flags=["--temperature", "0.8"]),
     ["the model's logits are not finite (NaN or infinity)"]),
]


def check_refusals(cli, tokenizer, workdir):
    failures = []
    for what, change, words in REFUSALS:
        case = dict(CASES[0])
        if "arch" in change:
            case["arch"] = change["arch"]
        if "types" in change:
            case["types"] = dict(case["types"], **change["types"])

        def extra(w, change=change):
            if "tensor" in change:
                name, n = change["tensor"]
                w.add_tensor(name, np.zeros(n, np.float32))
            if "kv" in change:
                key, value = change["kv"]
                if isinstance(value, str):
                    w.add_string(key, value)
                elif isinstance(value, float):
                    w.add_float32(key, value)
                else:
                    w.add_uint32(key, value)

        path = os.path.join(workdir, "refused.gguf")
        write_model(path, case, tokenizer, 0, extra, drop=change.get("drop", ()),
                    poison=change.get("poison"))
        cmd = [cli, "generate", "--model", path, "--devices", "1", "--max-tokens", "1",
               "--compile-cache", "off", "--prompt-tokens", "1,2,3"] + change.get("flags", [])
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        lines = out.stderr.strip().splitlines()
        if out.returncode != 1 or not lines or not all(w_ in lines[-1] for w_ in words):
            failures.append(f"{what}: expected exit 1 and an error holding {words}, got exit "
                            f"{out.returncode}: {out.stderr.strip()[-300:]!r}")
        else:
            print(f"refused {what}: {lines[-1]}")
    return failures


TEXT_PROMPT = "Hello world, the quick brown fox: 3.14 Zürich!"


def check_text(cli, path, case, fields, reference, workdir):
    """A text prompt through the file's own tokenizer (SentencePiece-style or byte-level BPE
    with the case's pre-tokenizer), on 8 devices: its tokens equal Hugging Face's (BOS first
    where the tokenizer adds it), the generated tokens the NumPy reference's, and the text
    Hugging Face's decoding of them after the prompt."""
    label = f"{case['name']}: text prompt"
    if fields["tokenizer.ggml.model"] == "llama":
        hf = tok_tests.spm_reference(os.path.dirname(path), os.path.basename(path))
        expected = hf.encode(TEXT_PROMPT, add_special_tokens=True)
        decode = lambda ids: hf.decode(ids, skip_special_tokens=True)
    else:
        pre = case.get("pre", fields["tokenizer.ggml.pre"])
        hf = tok_tests.gpt2_reference(pre, fields["tokenizer.ggml.tokens"],
                                      fields["tokenizer.ggml.token_type"],
                                      fields["tokenizer.ggml.merges"])
        expected = hf.encode(TEXT_PROMPT, add_special_tokens=False).ids
        if pre == "llama-bpe":  # Llama 3's tokenizer starts every prompt with BOS
            expected = [int(fields["tokenizer.ggml.bos_token_id"])] + expected
        decode = lambda ids: hf.decode(ids, skip_special_tokens=True)
    tokens, _, result = run(cli, path, TEXT_PROMPT, 8, "native", workdir)
    if isinstance(result, str):
        return [f"{label}: {result}"]
    failures = []
    if result["prompt_tokens"] != expected:
        failures.append(f"{label}: prompt tokens {result['prompt_tokens']} != Hugging Face's "
                        f"{expected}")
    stop = (int(fields["tokenizer.ggml.eos_token_id"]),)
    ref_tokens, _ = reference.greedy(expected, GENERATE, stop)
    if tokens != ref_tokens:
        failures.append(f"{label}: shardrt {tokens} != reference {ref_tokens}")
    shown = [t for t in tokens if t not in stop]
    text = decode(expected + shown)[len(decode(expected)):]
    if result["text"] != text:
        failures.append(f"{label}: text {result['text']!r} != Hugging Face's {text!r}")
    print(f"{label}: {len(expected)} prompt tokens {'equal' if result['prompt_tokens'] == expected else 'NOT equal'}"
          f" to Hugging Face's, {len(tokens)} tokens {'equal' if tokens == ref_tokens else 'NOT equal'}"
          f" to the reference's, text {result['text']!r}")
    return failures


def check_without_tokenizer(cli, tokenizer, workdir):
    """A file with no tokenizer metadata at all runs --prompt-tokens: exit 0, the greedy tokens
    (the reference's) printed as ids, the reason on stderr; a text prompt is a clean error."""
    case = dict(CASES[0], vocab=len(tokenizer["tokenizer.ggml.tokens"]))
    path = os.path.join(workdir, "no-tokenizer.gguf")
    write_model(path, case, None, 0)
    prompt = [5, 17, 300, 4000]
    expected, _ = Reference(path).greedy(prompt, 6)
    cmd = [cli, "generate", "--model", path, "--devices", "8", "--max-tokens", "6",
           "--compile-cache", "off", "--prompt-tokens", ",".join(map(str, prompt))]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    failures = []
    printed = out.stdout.split()
    if out.returncode != 0 or printed != [str(t) for t in expected]:
        failures.append(f"no tokenizer: expected exit 0 and ids {expected}, got exit "
                        f"{out.returncode}, stdout {out.stdout!r}, stderr {out.stderr[-300:]!r}")
    elif "no text" not in out.stderr or "tokenizer.ggml.model" not in out.stderr:
        failures.append(f"no tokenizer: stderr does not say why there is no text: {out.stderr!r}")
    else:
        print(f"no tokenizer: --prompt-tokens printed {printed} (the reference's ids)")
    cmd = [cli, "generate", "--model", path, "--devices", "1", "--compile-cache", "off",
           "--prompt", "hi"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    lines = out.stderr.strip().splitlines()
    if out.returncode != 1 or not lines or "tokenizer.ggml.model" not in lines[-1]:
        failures.append(f"no tokenizer: --prompt should fail naming the key, got exit "
                        f"{out.returncode}: {out.stderr[-300:]!r}")
    else:
        print(f"no tokenizer: --prompt refused: {lines[-1]}")
    return failures


def main(cli, real_model, only=""):
    tokenizer = tokenizer_of(real_model)
    stop = {int(tokenizer["tokenizer.ggml.eos_token_id"])}
    stop |= {i for i, t in enumerate(tokenizer["tokenizer.ggml.tokens"])
             if t in ("<|im_end|>", "<|endoftext|>")}
    failures, worst, runs, tokenizers = [], 0.0, 0, {}
    with tempfile.TemporaryDirectory() as workdir:
        for seed, case in enumerate(CASES):
            if only not in case["name"]:
                continue
            path = os.path.join(workdir, case["name"] + ".gguf")
            tokenizers[case["name"]] = spm_tokenizer() if case.get("spm") else tokenizer
            write_model(path, case, tokenizers[case["name"]], seed)
            reference = Reference(path)
            rng = np.random.default_rng(1000 + seed)
            prompt = [int(t) for t in rng.integers(3, reference.output.shape[0], size=23)]
            if "vocab" in case:  # the embedding's last row: padding on 8 devices is next to it
                prompt[-1] = case["vocab"] - 1
            ref_tokens, ref_logits = reference.greedy(prompt, GENERATE, tuple(stop))
            settings = [(n, "native") for n in case.get("devices", (1, 8))]
            settings += [(8, "f32")] if case["f32"] else []
            for devices, weights in settings:
                runs += 1
                label = f"{case['name']} on {devices} device(s), {weights} weights"
                tokens, logits, result = run(cli, path, prompt, devices, weights, workdir)
                if isinstance(result, str):
                    failures.append(f"{label}: {result}")
                    continue
                steps = min(len(logits), len(ref_logits))
                scale = float(np.max(np.abs(ref_logits[:steps])))
                diff = float(np.max(np.abs(logits[:steps] - ref_logits[:steps]))) / scale
                worst = max(worst, diff)
                print(f"{label}: {len(tokens)} tokens {'equal' if tokens == ref_tokens else 'NOT equal'}"
                      f" to the reference's; max |logit diff| / max |logit| {diff:.2e}")
                if tokens != ref_tokens:
                    failures.append(f"{label}: shardrt {tokens} != reference {ref_tokens}")
                if diff > LOGIT_TOLERANCE:
                    failures.append(f"{label}: logits differ from the reference by {diff:.3g} "
                                    f"of their largest magnitude")
            failures += check_text(cli, path, case, tokenizers[case["name"]], reference,
                                   workdir)
        failures += check_refusals(cli, tokenizer, workdir)
        failures += check_without_tokenizer(cli, tokenizer, workdir)
    for f in failures:
        print("FAIL:", f)
    print(f"{sum(only in c['name'] for c in CASES)} files, {runs} runs, worst relative logit difference {worst:.2e} "
          f"(tolerance {LOGIT_TOLERANCE})")
    return 1 if failures else 0


if __name__ == "__main__":
    if len(sys.argv) not in (3, 4):
        sys.exit(__doc__)
    sys.exit(main(*sys.argv[1:]))
