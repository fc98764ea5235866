"""Checks shardrt's tokenizer (through tests/model/tokenize_tool) against Hugging Face
tokenizers configured as SmolLM2's tokenizer.json, built here from the GGUF's own vocabulary and
merges: BPE (no unknown token, no dropout), pre-tokenizer Sequence[Digits(individual_digits),
ByteLevel(add_prefix_space=False)], ByteLevel decoder, the control tokens as special added
tokens.

It compares, on a few hundred deterministic strings (prose, code, numbers, whitespace runs,
contractions, many scripts, emoji, combining marks, ChatML, control tokens next to text, seeded
random mixtures):
  - the ids, token for token;
  - Decode of each id list with the string (less the bytes the vocabulary has no token for);
  - StreamDecoder's pieces with Decode, and that they are valid UTF-8;
  - Decode of every single id with tokenizers' decode of [id] (bytes where that is valid UTF-8,
    else both with invalid sequences replaced by U+FFFD);
  - Encode errors for invalid UTF-8, naming the byte offset.

usage: test_tokenizer.py TOKENIZE_TOOL MODEL
Prints "<n> strings, <m> tokens, identical to tokenizers <version>" and exits 0, or the first
mismatches and exits 1.
"""
import random
import subprocess
import sys

import tokenizers
from gguf import GGUFReader
from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers

CONTROL = 3


def load_reference(model: str):
    fields = GGUFReader(model).fields
    tokens = list(fields["tokenizer.ggml.tokens"].contents())
    types = list(fields["tokenizer.ggml.token_type"].contents())
    merges = [tuple(m.split(" ")) for m in fields["tokenizer.ggml.merges"].contents()]
    assert fields["tokenizer.ggml.model"].contents() == "gpt2"
    assert fields["tokenizer.ggml.pre"].contents() == "smollm"
    # Left at their defaults: dropout, unk_token, continuing_subword_prefix and
    # end_of_word_suffix (none).
    bpe = models.BPE(vocab={t: i for i, t in enumerate(tokens)}, merges=merges, fuse_unk=False,
                     byte_fallback=False, ignore_merges=False)
    tok = Tokenizer(bpe)
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=True),
    ])
    tok.decoder = decoders.ByteLevel()
    control = [t for t, k in zip(tokens, types) if k == CONTROL]
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in control])
    return tok, tokens, control


def byte_alphabet() -> dict[int, str]:
    """GPT-2's byte-to-unicode map."""
    printable = (list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD))
                 + list(range(0xAE, 0x100)))
    out, n = {}, 0
    for b in range(256):
        if b in printable:
            out[b] = chr(b)
        else:
            out[b] = chr(256 + n)
            n += 1
    return out


PROSE = [
    "Hello world",
    "The quick brown fox jumps over the lazy dog.",
    "In 1492, Columbus sailed the ocean blue; in 1969, Apollo 11 landed on the Moon.",
    "It was the best of times, it was the worst of times, it was the age of wisdom...",
    "Dr. Smith (Ph.D.) said: \"Don't panic!\" -- and then left at 5:30 p.m.",
    "Tokenization splits text into pieces; BPE merges the most frequent pairs first.",
    "Email me at someone@example.com or visit https://example.org/path?q=1&r=2#frag.",
    "A list:\n- first item\n- second item\n  - nested item\n",
    "Prices: $3.99, €4,50, £10 and ¥1000 — all in one sentence!",
    "She sells sea-shells by the sea-shore; the shells she sells are sea-shells, I'm sure.",
    "What?! No way... Really??? Yes!!!",
    "ALL CAPS SENTENCE WITH SOME NUMBERS 42 AND PUNCTUATION!",
    "mixedCase camelCase snake_case kebab-case PascalCase SCREAMING_SNAKE_CASE",
    "The year 2024 had 366 days; 2023 had 365.",
    "Footnote[1] and reference (see §3.2, p. 17).",
    "\"Quoted\" 'single' `backtick` «guillemets» „German“ “curly” ‘curly’",
    "Ellipsis… en–dash em—dash minus − bullet • middle·dot",
    "   leading spaces and trailing spaces   ",
    "SmolLM2 is a family of compact language models available in three sizes.",
    "Once upon a time, there was a tokenizer that had to match another one exactly.",
]

CODE = [
    "def main():\n    print(\"hello\")\n    return 0\n",
    "for (int i = 0; i < n; ++i) {\n\tsum += a[i] * b[i];\n}\n",
    "#include <stdio.h>\nint main(void) { printf(\"%d\\n\", 42); }",
    "const x = {a: 1, b: [2, 3], c: {d: null}};",
    "{\"name\": \"shardrt\", \"version\": \"0.1.0\", \"deps\": [\"absl\", \"pcre2\"]}",
    "<html><body><p class=\"x\">Hi &amp; bye</p></body></html>",
    "SELECT id, name FROM users WHERE age >= 18 ORDER BY name DESC;",
    "if [ -f \"$FILE\" ]; then\n  echo \"found\" >&2\nfi",
    "x = lambda a, b: a ** 2 + b // 3 - (a % b)",
    "template <typename T> T max(T a, T b) { return a > b ? a : b; }",
    "    indented with four spaces\n\tindented with a tab\n        eight spaces",
    "fn main() -> Result<(), Box<dyn Error>> { Ok(()) }",
    "a=1;b=2;c=a+b;print(c)",
    "// comment\n/* block\n   comment */\n",
    "regex: ^[a-zA-Z0-9_.+-]+@[a-zA-Z0-9-]+\\.[a-zA-Z0-9-.]+$",
    "path/to/file.txt C:\\Windows\\System32 ~/.bashrc ../../up",
    "0x1F 0b1010 0o777 1e-10 3.14f 1_000_000 -42 +7",
    "```python\nimport numpy as np\n```",
]

NUMBERS = [
    "123", "0", "007", "3.14159", "1,000,000", "12345678901234567890",
    "98765432109876543210987654321098765432109876543210", "2024-01-15T13:45:30Z",
    "+1 (555) 123-4567", "v1.2.3-rc4", "x1y2z3", "abc123def456", "12abc", "1 2 3 4 5",
    " 1", "  12", "a 1", "١٢٣ Arabic-Indic digits", "१२३ Devanagari digits", "①②③ circled",
    "ⅠⅡⅢⅫ Roman numerals", "１２３ fullwidth", "x² + y³ = z¹", "½ ¾ ⅓", "1.5e+308",
    "0.000000001", "٣٫١٤", "九十九", "42nd 3rd 1st",
]

WHITESPACE = [
    " ", "  ", "   ", "\t", "\t\t", "\n", "\n\n", "\n\n\n", "\r\n", " \n", "\n ", " \t \n ",
    "a b", "a  b", "a   b", "a\tb", "a\t\tb", "a\nb", "a\n\nb", "a \nb", "a\n b", "a \n b",
    "a\r\nb", "hello   ", "hello\n", "hello\n\n", "hello \t", "\n\n\nhi", "   hi", "\thi",
    "a\u00a0b", "a\u3000b", "a\u2028b", "a\u2029b", "a\u0085b", "a\u200bb", "a\u1680b",
    "a\u2009b", "a\x0bb", "a\x0cb", "a \u00a0 b", "end with tab\t", "x" + " " * 50 + "y",
    "\n" * 20, " " * 33, "\t \t \t", "line1\n\n\n\nline2", "a\u180eb",
]

CONTRACTIONS = [
    "it's", "don't", "they're", "we've", "I'm", "you'll", "he'd", "IT'S", "DON'T",
    "THEY'RE", "WE'VE", "I'M", "YOU'LL", "HE'D", "It'S", "'s", "'t", "'re", "'ve", "'m",
    "'ll", "'d", "'S", "''s", "'s'", " 's", "rock'n'roll", "O'Reilly", "it’s", "can't've",
    "y'all'd've", "'tis", "'90s", "the cat's toy", "James' book", "'",
]

UNICODE = [
    "café", "naïve", "résumé", "Zürich", "São Paulo", "Ångström", "Øresund", "Łódź",
    "Ελληνικά γράμματα", "Привет, мир!", "Київ", "中文字符测试", "日本語のテキストです。",
    "한국어 텍스트", "مرحبا بالعالم", "नमस्ते दुनिया", "ภาษาไทย", "עברית", "Հայերեն",
    "ქართული", "తెలుగు", "தமிழ்", "বাংলা", "ᚠᚢᚦᚨᚱᚲ", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢", "𝐁𝐨𝐥𝐝",
    "😀", "😀😃😄", "👍🏽", "👋🏿 hi", "👨‍👩‍👧‍👦", "🏳️‍🌈", "🇺🇸🇫🇷", "❤️", "🧑🏻‍💻",
    "e\u0301", "a\u0308\u0304", "Z\u0324\u0325\u0326\u0344", "n\u0303o", "क्षि", "ﷺ",
    "ﬁ ligature", "Ⓐⓑⓒ", "™®©", "→←↑↓⇒", "∀x∈ℝ: x²≥0", "♠♥♦♣", "漢字かなカナ", "\ufeffBOM",
    "\U00010348 gothic", "\U0001F600\U0001F601", "\u2764\ufe0f\u200d\U0001F525",
    "a\x04b", "\x00", "a\x00b", "\x01\x02\x03", "\x1d\x1e\x1f", "\U00040000", "\U00080000 x",
    "\U0010FFFF", "\ue000 private use",
]

CHATML = [
    "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face"
    "<|im_end|>\n<|im_start|>user\nWhat is the capital of France?<|im_end|>\n"
    "<|im_start|>assistant\n",
    "<|im_start|>user\nHi!<|im_end|>\n<|im_start|>assistant\nHello! How can I help?<|im_end|>\n",
    "<|im_start|>", "<|im_end|>", "<|endoftext|>", "<|im_start|><|im_end|>",
    "<|im_start|>user", "x<|im_end|>y", "  <|im_start|>  ", "\n<|im_end|>\n",
    "<|im_start", "<|im_start|", "<<|im_start|>>", "< |im_start|>", "<|IM_START|>",
    "<|im_start|>system\n<|im_end|>", "text<|endoftext|>more text<|endoftext|>",
    "<repo_name>shardrt<file_sep>src/main.cc<filename>x<gh_stars>100",
    "<reponame><repo_name><reponame>", "<jupyter_start><jupyter_code>print(1)<jupyter_output>1",
    "<issue_start>bug<issue_comment>fixed<issue_closed>", "<empty_output>",
    "<|im_end|><|im_end|><|im_end|>", "12<|im_end|>34", "é<|im_start|>ü", "😀<|endoftext|>😀",
    "<filename><file_sep>", "<jupyter_text><jupyter_script>",
]

# Where the regex engines' character classes could part: U+180E (PCRE2's \s, not Oniguruma's),
# NEL and other separators, numerics of Unicode 15.0 and 16.0 (Rust's char::is_numeric has them,
# PCRE2 10.42 does not), letters of Unicode 15.0 and later (in neither engine's tables here).
UNICODE_EDGES = [
    "a \u180eb", " \u180e\u200b", "x\u180e\u180ey", "\u180e's", "a\u0085\u0085b", "a \u0085b",
    "a\u1680\u1680b", "\u2028\u2029 x", " \u00a0\u00a0y", "\u202f\u205f\u3000z",
    "a\U00011f50b", "x \U00011f51\U00011f52", "\U0001d2c0's", "\u00a0\U0001e4f0",
    "n\U0001ccf0\U0001ccf1", "k\U00010d40 \U00016130 \U00016d70 \U0001e5f1 \U000116d0 \U00011bf0",
    "a\U00031350b", " \U00011f04x", "\U0001e030y", "q\U000105c0\U00011380", "\U0002ebf0 z",
]

POOL_WORDS = ["the", "token", "Ünïcödé", "数据", "данные", "🙂", "👩‍🔬", "42", "3.5",
              "it's", "I'M", "<|im_start|>", "<|im_end|>", "<|endoftext|>", "(", ")", "{",
              "==", "->", "...", "—", "\t", "\n", "  ", " ", "\r\n", "é", "e\u0301", "x",
              "HTTP", "don't", "١٢", "$", "#", "@", "_", "\\", "'", '"', "λ", "π≈3.14"]


def random_strings(rng: random.Random, count: int) -> list[str]:
    out = []
    for _ in range(count):
        n = rng.randint(1, 40)
        parts = []
        for _ in range(n):
            r = rng.random()
            if r < 0.6:
                parts.append(rng.choice(POOL_WORDS))
            elif r < 0.8:
                parts.append(chr(rng.randint(0x20, 0x7E)))
            elif r < 0.95:
                parts.append(chr(rng.choice([rng.randint(0xA0, 0x2FF), rng.randint(0x370, 0x4FF),
                                             rng.randint(0x4E00, 0x9FFF),
                                             rng.randint(0x1F300, 0x1F6FF)])))
            else:
                parts.append(" " * rng.randint(1, 5))
            if rng.random() < 0.5:
                parts.append(" ")
        out.append("".join(parts))
    return out


def long_strings(rng: random.Random) -> list[str]:
    paragraph = " ".join(PROSE) * 20
    return [
        paragraph,
        "a" * 2000,
        "9" * 1000,
        " " * 1000 + "x",
        "\n" * 500 + "end",
        "".join(rng.choice("abcdefghijklmnopqrstuvwxyz ,.") for _ in range(5000)),
        "".join(chr(rng.randint(0x4E00, 0x9FFF)) for _ in range(1000)),
        "!" * 300 + "?" * 300,
        "<|im_start|>" * 50,
    ]


def make_strings() -> list[str]:
    rng = random.Random(20240601)
    strings = (PROSE + CODE + NUMBERS + WHITESPACE + CONTRACTIONS + UNICODE + UNICODE_EDGES
               + CHATML)
    strings += random_strings(rng, 120)
    strings += long_strings(rng)
    return list(dict.fromkeys(strings))  # first occurrences, in order


def parse_records(data: bytes) -> list[bytes]:
    """Splits the tool's output records ("LENGTH\\n" then LENGTH bytes)."""
    out, pos = [], 0
    while pos < len(data):
        newline = data.index(b"\n", pos)
        length = int(data[pos:newline])
        out.append(data[newline + 1:newline + 1 + length])
        pos = newline + 1 + length
    return out


def run(tool: str, args: list[str], data: bytes) -> bytes:
    proc = subprocess.run([tool, *args], input=data, stdout=subprocess.PIPE, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"FAIL: {tool} {' '.join(args)} exited {proc.returncode}")
    return proc.stdout


def main() -> int:
    tool, model = sys.argv[1], sys.argv[2]
    reference, tokens, control = load_reference(model)
    alphabet = byte_alphabet()
    vocab = set(tokens)
    missing_bytes = {b for b in range(256) if alphabet[b] not in vocab}
    strings = make_strings()
    failures: list[str] = []

    def fail(message: str) -> None:
        failures.append(message)

    # Encode: ids token for token.
    records = [s.encode("utf-8") for s in strings]
    invalid = [(b"abc\xffdef", 3), (b"\xc3", 0), (b"ok \xe2\x82", 3), (b"\xed\xa0\x80", 0),
               (b"x\xc0\xafy", 1), (b"\xf4\x90\x80\x80", 0), (b"<|im_start|>\x80", 12)]
    out = run(tool, [model], b"".join(b"%d\n%s" % (len(r), r)
                                      for r in records + [r for r, _ in invalid]))
    lines = out.decode("utf-8").split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if len(lines) != len(records) + len(invalid):
        raise SystemExit(f"FAIL: {len(lines)} output lines for {len(records) + len(invalid)} "
                         "records")
    ours = []
    total_tokens = 0
    for s, line in zip(strings, lines):
        if line.startswith("error:"):
            fail(f"encode {s!r}: {line}")
            ours.append([])
            continue
        got = [int(x) for x in line.split()]
        want = reference.encode(s, add_special_tokens=False).ids
        ours.append(got)
        total_tokens += len(got)
        if got != want:
            first = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b),
                         min(len(got), len(want)))
            fail(f"encode {s[:200]!r}: first difference at token {first}: "
                 f"got {got[first:first + 8]} expected {want[first:first + 8]} "
                 f"({len(got)} vs {len(want)} tokens)")
    for (record, offset), line in zip(invalid, lines[len(records):]):
        if not (line.startswith("error:") and f"byte offset {offset}" in line):
            fail(f"encode of invalid UTF-8 {record!r}: expected an error at byte offset "
                 f"{offset}, got {line!r}")

    # Decode of each id list: the string, less the bytes that have no token.
    id_lines = "".join(" ".join(map(str, ids)) + "\n" for ids in ours).encode()
    decoded = parse_records(run(tool, ["--decode", model], id_lines))
    if len(decoded) != len(ours):
        raise SystemExit(f"FAIL: {len(decoded)} decoded records for {len(ours)} id lists")
    for s, ids, got in zip(strings, ours, decoded):
        want = bytes(b for b in s.encode("utf-8") if b not in missing_bytes)
        if got != want:
            fail(f"decode of encode({s[:200]!r}) gave {got[:200]!r}")
        ref = reference.decode(ids, skip_special_tokens=False)
        if "\ufffd" not in ref and ref.encode("utf-8") != got:
            fail(f"decode of encode({s[:200]!r}) differs from tokenizers: {ref[:200]!r}")

    # StreamDecoder: pieces concatenate to Decode, and are valid UTF-8 where Decode's bytes are.
    # Also on every id sequence split into single-byte tokens (4-byte emoji as 4 tokens).
    token_of = {t: i for i, t in enumerate(tokens)}
    byte_lines = []
    for s in strings:
        ids = [token_of[alphabet[b]] for b in s.encode("utf-8") if b not in missing_bytes]
        byte_lines.append(ids)
    stream_input = "".join(" ".join(map(str, ids)) + "\n" for ids in ours + byte_lines)
    stream_out = run(tool, ["--stream", model], stream_input.encode()).decode().splitlines()
    if len(stream_out) != 2 * len(strings):
        raise SystemExit(f"FAIL: {len(stream_out)} stream results for {2 * len(strings)} lines")
    for i, line in enumerate(stream_out):
        if not line.startswith("ok"):
            which = strings[i % len(strings)]
            fail(f"stream decode of {which[:200]!r}: {line}")

    # Every single id: Decode([id]) against tokenizers' decode([id]).
    n = len(tokens)
    singles = run(tool, ["--decode", model], "".join(f"{i}\n" for i in range(n)).encode())
    singles = parse_records(singles)
    if len(singles) != n:
        raise SystemExit(f"FAIL: {len(singles)} decoded records for {n} ids")
    exact = lossy = 0
    for i in range(n):
        got = singles[i]
        ref = reference.decode([i], skip_special_tokens=False)
        if "\ufffd" not in ref:
            exact += 1
            if got != ref.encode("utf-8"):
                fail(f"decode([{i}]) ({tokens[i]!r}): got {got!r}, expected {ref!r}")
        else:
            lossy += 1
            if got.decode("utf-8", errors="replace") != ref:
                fail(f"decode([{i}]) ({tokens[i]!r}): got {got!r}, tokenizers gives {ref!r}")

    if failures:
        for message in failures[:20]:
            print("FAIL:", message)
        print(f"{len(failures)} failures")
        return 1
    print(f"{len(strings)} strings, {total_tokens} tokens, identical to tokenizers "
          f"{tokenizers.__version__} (single-token decodes: {exact} exact, {lossy} with "
          f"incomplete UTF-8; {len(control)} control tokens)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
