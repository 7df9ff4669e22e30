#!/usr/bin/env python3
"""Checks `kiln tokenize` against independent references on the cases the
shared test vectors do not cover: special-token text, very long words,
'#'-prefixed code and non-NFC input.

Byte-level BPE is checked against bpe_reference.py; SentencePiece against
Debian's python3-sentencepiece.

usage: tokenizer_reference_test.py KILN_BINARY [SHARED_DIR]
(SHARED_DIR defaults to $KILN_SHARED_DIR, else ../shared beside the repository)
"""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bpe_reference  # noqa: E402


def lcg_text(seed, length, alphabet):
    """Deterministic pseudo-random text."""
    out = []
    state = seed
    for _ in range(length):
        state = (state * 1103515245 + 12345) % (1 << 31)
        out.append(alphabet[state % len(alphabet)])
    return "".join(out)


LONG_WORDS = [
    "a" * 1000,
    "supercalifragilistic" * 60,
    lcg_text(7, 5000, "abcdefghijklmnopqrstuvwxyz"),
    lcg_text(11, 3000, "abcdeéèàçñüöß"),
    "1234567890" * 120,
    "日本語" * 300,
    "😀" * 200,
    " " * 700 + "x",
    "-" * 900,
]
CODE = [
    "#include <stdio.h>",
    "#include <stdio.h>\n#define MAX(a, b) ((a) > (b) ? (a) : (b))\n",
    "## Heading\n# comment\n#!/usr/bin/env python3\n",
    "#pragma once\n\n#if defined(X)\n#endif  // X\n",
    "x = 1  # trailing comment\n\t#tab",
]
NON_NFC = [
    "Cafe\u0301 cre\u0300me",
    "A\u030angstro\u0308m",
    "e\u0301\u0301 o\u0308\u0304",
    "\u1100\u1161\u11a8 \u1112\u1161\u11ab",
    "\u212b \u2126 \ufb01 \u00c5",
]
WHITESPACE = ["a \n\n  b", "\t\t\n x", "\u00a0x\u3000y", "line\r\nnext\r\n", "  \n   \n"]


def kiln_ids(kiln, model, texts, extra=()):
    out = subprocess.run(
        [kiln, "tokenize", "--ids-only", *extra, model, "--", *texts],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    lines = out.split("\n")
    assert lines[-1] == "" and len(lines) == len(texts) + 1, (model, len(lines), len(texts))
    return [[int(t) for t in line.split()] for line in lines[:-1]]


def added_tokens(config_path):
    with open(config_path, encoding="utf-8") as f:
        config = json.load(f)
    return {v["content"]: int(k) for k, v in config.get("added_tokens_decoder", {}).items()}


def check(label, texts, expected, got):
    failures = 0
    for text, want, have in zip(texts, expected, got):
        if want != have:
            failures += 1
            print(f"FAIL {label}: {text[:60]!r}\n  expected {want[:40]}\n  got      {have[:40]}")
    print(f"{label}: {len(texts) - failures}/{len(texts)} match")
    return failures


def read_vectors(data, name):
    base = os.path.join(data, "llama.cpp-vectors", f"ggml-vocab-{name}.gguf")
    with open(base + ".inp", "rb") as f:
        texts = f.read().decode("utf-8").split("\n__ggml_vocab_test__\n")[:-1]
    with open(base + ".out", encoding="utf-8") as f:
        ids = [[int(t) for t in line.split()] for line in f.read().split("\n")[:-1]]
    return texts, ids


def main():
    kiln = sys.argv[1]
    here = os.path.dirname(os.path.abspath(__file__))
    shared = sys.argv[2] if len(sys.argv) > 2 else os.environ.get(
        "KILN_SHARED_DIR", os.path.join(here, "..", "..", "..", "shared"))
    data = os.path.join(shared, "data", "tokenizers")
    models = os.path.join(shared, "models")
    failures = 0

    plain = LONG_WORDS + CODE + NON_NFC + WHITESPACE
    # The reference must itself reproduce the shared vectors.
    vector_names = {"qwen2": "qwen2", "gpt2": "gpt-2", "llama3": "llama-bpe"}
    byte_level = [
        ("qwen2", os.path.join(data, "qwen2"), "vocab.json", "merges.txt",
         ["<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n", "a<|endoftext|>b<|im_end|>"]),
        ("qwen2", os.path.join(data, "qwen2.5"), "vocab.json", "merges.txt",
         ["<tool_call>\n{\"name\": \"f\"}\n</tool_call><|im_end|>", "<|vision_start|><|image_pad|>x"]),
        ("gpt2", os.path.join(data, "gpt2"), "vocab.json", "merges.txt", ["a<|endoftext|>b", "<|endoftext|>"]),
        ("llama3", os.path.join(data, "llama3"), "encoder.json", "vocab.bpe",
         ["<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>", "x<|reserved_special_token_5|>y"]),
        ("qwen2", os.path.join(models, "tiny-qwen2"), "vocab.json", "merges.txt",
         ["<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"]),
    ]
    for family, folder, vocab, merges, special_cases in byte_level:
        config = os.path.join(folder, "tokenizer_config.json")
        added = added_tokens(config) if os.path.exists(config) else {}
        if family == "gpt2":
            added = {"<|endoftext|>": 50256}
        reference = bpe_reference.ByteLevelBpe(os.path.join(folder, vocab), os.path.join(folder, merges), family, added)
        if folder.startswith(data):
            vector_texts, vector_ids = read_vectors(data, vector_names[family])
            failures += check(f"reference on {vector_names[family]} vectors", vector_texts,
                              vector_ids, [reference.encode_plain(t) for t in vector_texts])
        texts = plain + special_cases
        expected = [reference.encode(t) for t in texts]
        failures += check(f"{folder} ({family})", texts, expected, kiln_ids(kiln, folder, texts, ["--no-special"]))

    import sentencepiece

    spm_cases = [
        (os.path.join(data, "llama2", "tokenizer.model"), os.path.join(data, "llama2", "tokenizer.model")),
        (os.path.join(data, "llama2", "tokenizer.model"), os.path.join(data, "llama2", "tokenizer.json")),
        (os.path.join(models, "tiny-llama", "tokenizer.model"), os.path.join(models, "tiny-llama")),
        (os.path.join(models, "tiny-llama", "tokenizer.model"), os.path.join(models, "tiny-llama", "tokenizer.model")),
    ]
    for model_file, kiln_model in spm_cases:
        sp = sentencepiece.SentencePieceProcessor(model_file=model_file)
        # SentencePiece does not parse special tokens: compare text as text,
        # with BOS as the models' configurations add it.
        texts = plain + ["<s>Hello</s>", "x <unk> y"]
        expected = [[sp.bos_id()] + sp.encode(t) for t in texts]
        failures += check(kiln_model, texts, expected, kiln_ids(kiln, kiln_model, texts, ["--no-parse-special"]))
        # Parsed special tokens. Where </s> is matched in raw text, each text
        # segment gets its own dummy prefix (Hugging Face and llama.cpp
        # alike). Llama 2's tokenizer.json marks it "normalized", so it is
        # matched in normalized text, spelled as normalized: "▁</s>".
        texts = ["Hello</s>world", "</s>x", "Hello </s> world"]
        enc = sp.encode
        if kiln_model.endswith("tokenizer.json"):
            expected = [enc("Hello</s>world"), [sp.eos_id(), sp.piece_to_id("x")], enc("Hello") + [sp.eos_id()] + enc("world")]
        else:
            expected = [enc("Hello") + [sp.eos_id()] + enc("world"), [sp.eos_id()] + enc("x"),
                        enc("Hello ") + [sp.eos_id()] + enc(" world")]
        failures += check(kiln_model + " (special)", texts, expected, kiln_ids(kiln, kiln_model, texts, ["--no-special"]))

    # The readable listing: one line per id with its quoted piece, then the count.
    listing = subprocess.run([kiln, "tokenize", os.path.join(models, "tiny-qwen2"), "<|im_start|>Hi\n"],
                             check=True, capture_output=True, text=True).stdout.split("\n")
    want = ["byte-level BPE tokenizer, 2048 ids", '    2046  "<|im_start|>"  (special)', "      39  \"H\"",
            "      72  \"i\"", "     198  \"Ċ\"", "4 tokens", ""]
    if not (listing[0].startswith(want[0]) and listing[1:] == want[1:]):
        failures += 1
        print("FAIL listing:\n" + "\n".join(listing))

    if failures:
        print(f"{failures} mismatches")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
