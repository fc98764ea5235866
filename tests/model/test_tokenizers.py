"""Checks shardrt's tokenizer (through tests/model/tokenize_tool) for every tokenizer kind it
supports, each against an independent Hugging Face implementation, on small GGUF files written
here (tokenizer metadata only, no tensors):

  - "gpt2" model, pre-tokenizers "default", "gpt2", "smollm", "llama-bpe" and "qwen2": the real
    SmolLM2 vocabulary and merges (from MODEL) under each pre-tokenizer name, against Hugging
    Face tokenizers configured as the matching tokenizer.json configures it:
      default, gpt2   BPE; ByteLevel(add_prefix_space=False, use_regex=True); ByteLevel decoder
      smollm          SmolLM2's: Sequence[Digits(individual_digits), ByteLevel(use_regex)]
      llama-bpe       Llama 3's: Split(its regex, isolated) then ByteLevel(use_regex=False);
                      BPE with ignore_merges=True
      qwen2           Qwen2's: NFC normalizer; Split(its regex, isolated) then
                      ByteLevel(use_regex=False)
    with the control tokens as special added tokens.
  - "llama" model (SentencePiece-style): a synthetic vocabulary (a small BPE trained here on
    varied text with "▁" for spaces; <unk>, <s>, </s>, a control and a user-defined token, the
    256 byte tokens <0xXX>; scores -rank; no merges in the file), against transformers' own GGUF
    tokenizer loading (AutoTokenizer.from_pretrained(folder, gguf_file=...)), which derives the
    merges from the scores. Three files: add_space_prefix true, false, and one without the byte
    tokens 0x80..0xFF (so non-ASCII characters fall back to the fused unknown token).

For each: the ids of a few hundred strings (prose, code, numbers, whitespace runs, contractions,
many scripts, emoji, control tokens next to text, byte fallback, NFC cases, seeded random
mixtures) token for token, encoded without special tokens (add_special_tokens=False: no BOS);
Decode of each id list against the reference's decode (skip_special_tokens=False) where that is
valid UTF-8; StreamDecoder's pieces against Decode; Decode of every single id. For "llama" also
that the reference with add_special_tokens=True prepends exactly BOS, as the tool's add_bos says.

usage: test_tokenizers.py TOKENIZE_TOOL MODEL
Prints one line per tokenizer kind ("<kind>: <n> strings, <m> tokens, identical ...") and exits
0, or the first mismatches and exits 1.
"""
import os
import random
import sys
import tempfile
import unicodedata

import tokenizers
from gguf import GGUFReader, GGUFWriter
from tokenizers import (AddedToken, Regex, Tokenizer, decoders, models, normalizers,
                        pre_tokenizers, trainers)

import test_tokenizer as base

CONTROL, UNKNOWN, USER_DEFINED, BYTE, NORMAL = 3, 2, 4, 6, 1

LLAMA3_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
                r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
               r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")

# Strings where the kinds part: Llama 3's and Qwen2's regexes (case-insensitive contractions,
# a non-letter leading a word, digit groups, newlines after punctuation), NFC, SentencePiece's
# spaces, special tokens and byte fallback.
EXTRA = [
    "'S 'T 'RE 'VE 'M 'LL 'D", "x'S y'Ll", "'\u017f", "IT'S", "1234567", "12345 678 9",
    "a1b22c333d4444", "$100,000.00", "!!!\n\n", "...\r\n", "?!\n", "hi!\nthere", "(x)\n\n\n",
    " \n\n x", "\n \n", "a \n\n b", "\t\n\t", "Hello\u00a0world", "\u00a0\u00a0x",
    "e\u0301", "a\u0302\u0323", "\u1100\u1161\u11a8", "\u212b", "\u2126", "q\u0307\u0323",
    "\u0958", "\uFB2A", "\u0344", "A\u030a\u0301", "\uac00\u11a8", "ﬁ", "Ⅻ",
    "", "▁", "a▁b", "▁▁", " ▁ ", "<s>", "</s>", "<unk>", "<s>Hello</s>", "Hello</s> world",
    " <s> x", "<s><s>", "x<unk>y", "<sep>", "a<sep>b", "<0x41>", "<|im_start|>hi",
    "  two leading", "trailing  ", " ", "  ", "a  b  c", "\u4e00\u4e8c\u4e09 mixed ascii",
    "\U0001F600x\U0001F600", "zzzqqq", "Ünïcödé ñ", "\x7f\x00", "x\u200dy",
]


def dedupe(strings):
    return list(dict.fromkeys(strings))  # first occurrences, in order


def write_gguf(path: str, model: str, tokens, types, *, merges=None, scores=None, pre=None,
               bos=None, eos=None, unk=None, add_space_prefix=None) -> None:
    """A GGUF file with the tokenizer metadata only (and a minimal llama config)."""
    writer = GGUFWriter(path, "llama")
    writer.add_name("shardrt tokenizer test")
    writer.add_context_length(2048)
    writer.add_embedding_length(64)
    writer.add_block_count(1)
    writer.add_feed_forward_length(128)
    writer.add_head_count(4)
    writer.add_tokenizer_model(model)
    if pre is not None:
        writer.add_tokenizer_pre(pre)
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    if merges is not None:
        writer.add_token_merges(merges)
    if scores is not None:
        writer.add_token_scores(scores)
    if bos is not None:
        writer.add_bos_token_id(bos)
    if eos is not None:
        writer.add_eos_token_id(eos)
    if unk is not None:
        writer.add_unk_token_id(unk)
    if add_space_prefix is not None:
        writer.add_add_space_prefix(add_space_prefix)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


# ---------------------------------------------------------------------------------------------
# GPT-2-style references (Hugging Face tokenizers)

def gpt2_reference(pre: str, tokens, types, merges) -> Tokenizer:
    bpe = models.BPE(vocab={t: i for i, t in enumerate(tokens)},
                     merges=[tuple(m.split(" ")) for m in merges], fuse_unk=False,
                     byte_fallback=False, ignore_merges=(pre == "llama-bpe"))
    tok = Tokenizer(bpe)
    if pre in ("gpt2", "default"):
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True,
                                                     use_regex=True)
    elif pre == "smollm":
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Digits(individual_digits=True),
            pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=True),
        ])
    elif pre == "llama-bpe":
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(LLAMA3_REGEX), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=False),
        ])
    elif pre == "qwen2":
        tok.normalizer = normalizers.NFC()
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(QWEN2_REGEX), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False),
        ])
    else:
        raise ValueError(pre)
    tok.decoder = decoders.ByteLevel()
    control = [t for t, k in zip(tokens, types) if k == CONTROL]
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in control])
    return tok


# ---------------------------------------------------------------------------------------------
# The SentencePiece-style vocabulary

SPM_CORPUS_WORDS = (
    "the of and to in is that for it as was with be by on not he this are or his from at which "
    "but have an they you were her she there been one all we their has would when if so no "
    "will more about can out other time two these may like only its first new could into over "
    "tokenizer token merge score byte fallback sentence piece vocabulary model llama mistral "
    "hello world quick brown fox jumps lazy dog prices numbers code print return def class "
    "café naïve résumé Zürich über straße niño Привет мир данные Ελληνικά 数据 日本語 "
    "1 2 3 10 42 100 2024 3.14 ( ) { } [ ] , . ; : ! ? ' \" - _ = + * / \\ # @ $ % & < > |"
).split()


def spm_vocabulary(seed: int = 7):
    """Trains a small BPE on text with "▁" for spaces; returns its tokens in rank order."""
    rng = random.Random(seed)
    lines = []
    for _ in range(3000):
        n = rng.randint(1, 14)
        lines.append(" ".join(rng.choice(SPM_CORPUS_WORDS) for _ in range(n)))
    lines += base.PROSE + base.CODE
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always",
                                                 split=True)
    trainer = trainers.BpeTrainer(vocab_size=1500, min_frequency=2, show_progress=False,
                                  special_tokens=[])
    tok.train_from_iterator(lines, trainer=trainer)
    vocab = tok.get_vocab()
    return [t for t, _ in sorted(vocab.items(), key=lambda kv: kv[1])]


def spm_file(path: str, trained, *, add_space_prefix: bool, high_bytes: bool) -> dict:
    tokens = ["<unk>", "<s>", "</s>"]
    types = [UNKNOWN, CONTROL, CONTROL]
    scores = [0.0, 0.0, 0.0]
    for b in range(256):
        if b >= 0x80 and not high_bytes:
            continue
        tokens.append(f"<0x{b:02X}>")
        types.append(BYTE)
        scores.append(0.0)
    for t, k in (("<|im_start|>", CONTROL), ("<sep>", USER_DEFINED)):
        tokens.append(t)
        types.append(k)
        scores.append(0.0)
    present = set(tokens)
    for rank, t in enumerate(trained):
        if t in present:
            continue
        present.add(t)
        tokens.append(t)
        types.append(NORMAL)
        # Integer-valued scores, so that ties (which order merges by position) occur too.
        scores.append(-float(rank // 3))
    write_gguf(path, "llama", tokens, types, scores=scores, bos=1, eos=2, unk=0,
               add_space_prefix=add_space_prefix)
    return {"tokens": tokens}


def spm_reference(folder: str, name: str):
    """transformers' tokenizer for the GGUF file folder/name, loaded as AutoTokenizer loads any
    GGUF file. Its GGUF reader (load_gguf_checkpoint) refuses to run without PyTorch, which it
    uses only for tensors (return_tensors=True); the tokenizer and config are read with the gguf
    package alone, so the check is lifted here rather than installing PyTorch."""
    import transformers  # imported here: slow, and only the "llama" kinds need it
    import transformers.modeling_gguf_pytorch_utils as gguf_utils
    transformers.logging.set_verbosity_error()
    gguf_utils.is_torch_available = lambda: True
    return transformers.AutoTokenizer.from_pretrained(folder, gguf_file=name)


# ---------------------------------------------------------------------------------------------
# The comparison

def tool_info(tool: str, path: str) -> dict:
    line = base.run(tool, ["--info", path], b"").decode().strip()
    return dict(field.split("=", 1) for field in line.split())


def compare(kind: str, tool: str, path: str, strings, encode, decode, tokens,
            want_text=None) -> tuple[list[str], str]:
    """Compares the tool on `path` with the reference's encode(s) -> ids and decode(ids) -> str.
    want_text(s), where given, is the exact bytes Decode(Encode(s)) must give."""
    failures = []
    records = [s.encode("utf-8") for s in strings]
    out = base.run(tool, [path], b"".join(b"%d\n%s" % (len(r), r) for r in records))
    lines = out.decode("utf-8").split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if len(lines) != len(records):
        return [f"{kind}: {len(lines)} output lines for {len(records)} records"], ""
    ours, total = [], 0
    for s, line in zip(strings, lines):
        if line.startswith("error:"):
            failures.append(f"{kind}: encode {s!r}: {line}")
            ours.append([])
            continue
        got = [int(x) for x in line.split()]
        want = encode(s)
        ours.append(got)
        total += len(got)
        if got != want:
            first = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b),
                         min(len(got), len(want)))
            failures.append(f"{kind}: encode {s[:120]!r}: first difference at token {first}: "
                            f"got {got[first:first + 8]} expected {want[first:first + 8]} "
                            f"({len(got)} vs {len(want)} tokens)")

    id_lines = "".join(" ".join(map(str, ids)) + "\n" for ids in ours).encode()
    decoded = base.parse_records(base.run(tool, ["--decode", path], id_lines))
    if len(decoded) != len(ours):
        return failures + [f"{kind}: {len(decoded)} decoded records for {len(ours)}"], ""
    for s, ids, got in zip(strings, ours, decoded):
        ref = decode(ids)
        if "\ufffd" not in ref and ref.encode("utf-8") != got:
            failures.append(f"{kind}: decode of encode({s[:120]!r}) gave {got[:120]!r}, the "
                            f"reference {ref[:120]!r}")
        if want_text is not None and got != want_text(s):
            failures.append(f"{kind}: decode of encode({s[:120]!r}) gave {got[:120]!r}")

    stream_input = "".join(" ".join(map(str, ids)) + "\n" for ids in ours)
    stream_out = base.run(tool, ["--stream", path], stream_input.encode()).decode().splitlines()
    if len(stream_out) != len(ours):
        return failures + [f"{kind}: {len(stream_out)} stream results for {len(ours)}"], ""
    for s, line in zip(strings, stream_out):
        if not line.startswith("ok"):
            failures.append(f"{kind}: stream decode of {s[:120]!r}: {line}")

    n = len(tokens)
    singles = base.parse_records(base.run(tool, ["--decode", path],
                                          "".join(f"{i}\n" for i in range(n)).encode()))
    if len(singles) != n:
        return failures + [f"{kind}: {len(singles)} decoded records for {n} ids"], ""
    exact = lossy = 0
    for i in range(n):
        ref = decode([i])
        if "\ufffd" not in ref:
            exact += 1
            if singles[i] != ref.encode("utf-8"):
                failures.append(f"{kind}: decode([{i}]) ({tokens[i]!r}): got {singles[i]!r}, "
                                f"expected {ref!r}")
        else:
            lossy += 1
            if singles[i].decode("utf-8", errors="replace") != ref:
                failures.append(f"{kind}: decode([{i}]) ({tokens[i]!r}): got {singles[i]!r}, "
                                f"the reference gives {ref!r}")
    summary = (f"{kind}: {len(strings)} strings, {total} tokens, {n} single-token decodes "
               f"({exact} exact, {lossy} invalid UTF-8)")
    return failures, summary


def main() -> int:
    tool, model = sys.argv[1], sys.argv[2]
    fields = GGUFReader(model).fields
    tokens = list(fields["tokenizer.ggml.tokens"].contents())
    types = list(fields["tokenizer.ggml.token_type"].contents())
    merges = list(fields["tokenizer.ggml.merges"].contents())
    alphabet = base.byte_alphabet()
    vocab = set(tokens)
    missing = {b for b in range(256) if alphabet[b] not in vocab}
    strings = dedupe(base.make_strings() + EXTRA)
    failures, summaries = [], []

    with tempfile.TemporaryDirectory() as folder:
        for pre in ("default", "gpt2", "smollm", "llama-bpe", "qwen2"):
            path = os.path.join(folder, f"gpt2-{pre}.gguf")
            write_gguf(path, "gpt2", tokens, types, merges=merges, pre=pre, bos=1, eos=2)
            ref = gpt2_reference(pre, tokens, types, merges)
            nfc = pre == "qwen2"

            def want_text(s, nfc=nfc):
                text = unicodedata.normalize("NFC", s) if nfc else s
                return bytes(b for b in text.encode("utf-8") if b not in missing)

            f, summary = compare(
                f"gpt2/{pre}", tool, path, strings,
                lambda s, ref=ref: ref.encode(s, add_special_tokens=False).ids,
                lambda ids, ref=ref: ref.decode(ids, skip_special_tokens=False), tokens,
                want_text)
            info = tool_info(tool, path)
            want_bos = "1" if pre == "llama-bpe" else "0"  # llama.cpp's defaults
            if info.get("add_bos") != want_bos or info.get("model") != "gpt2":
                f.append(f"gpt2/{pre}: --info gave {info}, expected add_bos={want_bos}")
            failures += f
            summaries.append(summary)

        trained = spm_vocabulary()
        for name, add_space_prefix, high_bytes in (("llama", True, True),
                                                   ("llama-no-prefix", False, True),
                                                   ("llama-unk", True, False)):
            path = os.path.join(folder, f"{name}.gguf")
            spm = spm_file(path, trained, add_space_prefix=add_space_prefix,
                           high_bytes=high_bytes)
            ref = spm_reference(folder, f"{name}.gguf")
            f, summary = compare(
                name, tool, path, strings,
                lambda s, ref=ref: ref.encode(s, add_special_tokens=False),
                lambda ids, ref=ref: ref.decode(ids, skip_special_tokens=False), spm["tokens"])
            info = tool_info(tool, path)
            if info != {"model": "llama", "vocab": str(len(spm["tokens"])), "bos": "1",
                        "eos": "2", "unk": "0", "add_bos": "1"}:
                f.append(f"{name}: --info gave {info}")
            for s in ("Hello world", "x", ""):
                with_bos = ref.encode(s, add_special_tokens=True)
                if with_bos != [1] + ref.encode(s, add_special_tokens=False):
                    f.append(f"{name}: transformers' BOS behaviour differs: {s!r} -> {with_bos}")
            failures += f
            summaries.append(summary)

    if failures:
        for message in failures[:30]:
            print("FAIL:", message)
        print(f"{len(failures)} failures")
        return 1
    for summary in summaries:
        print(summary)
    import transformers
    print(f"identical to tokenizers {tokenizers.__version__} (gpt2 kinds) and transformers "
          f"{transformers.__version__}'s GGUF loading (llama kinds)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
