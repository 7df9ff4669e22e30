#!/usr/bin/env python3
"""An independent byte-level BPE reference for kiln's tokenizer tests.

Written from the published descriptions only, and deliberately simple: the
family split patterns are spelled out as hand-written scanners over Unicode
categories (Python's `re` has no \\p{L}), and merging is GPT-2's original
loop (merge every occurrence of the best-ranked pair, rescan), not kiln's
priority queue.
"""
import json
import unicodedata

# Unicode's White_Space property (what \\s means in the split patterns).
WHITE_SPACE = set(
    [chr(c) for c in range(0x09, 0x0E)]
    + [" ", "\u0085", "\u00a0", "\u1680"]
    + [chr(c) for c in range(0x2000, 0x200B)]
    + ["\u2028", "\u2029", "\u202f", "\u205f", "\u3000"]
)


def is_space(c):
    return c in WHITE_SPACE


def is_letter(c):
    return unicodedata.category(c).startswith("L")


def is_number(c):
    return unicodedata.category(c).startswith("N")


def bytes_to_unicode():
    """GPT-2's table: printable Latin-1 bytes stand for themselves, the rest
    move to U+0100 onwards in byte order."""
    keep = list(range(0x21, 0x7F)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    table = {}
    moved = 0
    for b in range(256):
        if b in keep:
            table[b] = chr(b)
        else:
            table[b] = chr(0x100 + moved)
            moved += 1
    return table


BYTE_CHARS = bytes_to_unicode()


def _run(text, i, pred):
    """End of the run of characters satisfying pred starting at i."""
    while i < len(text) and pred(text[i]):
        i += 1
    return i


def _whitespace_alternatives(text, i, with_newline_rule):
    n = len(text)
    end = _run(text, i, is_space)
    if end == i:
        return None
    if with_newline_rule:  # \s*[\r\n]+
        last_newline = max((p for p in range(i, end) if text[p] in "\r\n"), default=None)
        if last_newline is not None:
            return last_newline + 1
    # \s+(?!\S): the whole run before the end of text, else all but its last
    # character (which then precedes a non-space); then plain \s+.
    if end == n:
        return end
    if end - 1 > i:
        return end - 1
    return end


def match_gpt2(text, i):
    n = len(text)
    for suffix in ("s", "t", "re", "ve", "m", "ll", "d"):
        if text.startswith("'" + suffix, i):
            return i + 1 + len(suffix)
    start = i + 1 if text[i] == " " and i + 1 < n else i
    for pred in (is_letter, is_number, lambda c: not (is_space(c) or is_letter(c) or is_number(c))):
        if pred(text[start]):
            return _run(text, start, pred)
        if start != i and pred(text[i]):
            return _run(text, i, pred)
    return _whitespace_alternatives(text, i, with_newline_rule=False)


def match_qwen2_llama3(text, i, max_digits):
    n = len(text)
    if text[i] == "'":
        for suffix in ("s", "t", "re", "ve", "m", "ll", "d"):
            if text[i + 1 : i + 1 + len(suffix)].lower() == suffix:
                return i + 1 + len(suffix)
    # [^\r\n\p{L}\p{N}]?\p{L}+
    c = text[i]
    if c not in "\r\n" and not is_letter(c) and not is_number(c) and i + 1 < n and is_letter(text[i + 1]):
        return _run(text, i + 1, is_letter)
    if is_letter(c):
        return _run(text, i, is_letter)
    # \p{N} or \p{N}{1,3}
    if is_number(c):
        end = i
        while end < n and end - i < max_digits and is_number(text[end]):
            end += 1
        return end
    # ' ?[^\s\p{L}\p{N}]+[\r\n]*'
    other = lambda ch: not (is_space(ch) or is_letter(ch) or is_number(ch))
    start = i + 1 if c == " " and i + 1 < n and other(text[i + 1]) else i
    if other(text[start]):
        end = _run(text, start, other)
        return _run(text, end, lambda ch: ch in "\r\n")
    return _whitespace_alternatives(text, i, with_newline_rule=True)


def split_words(text, family):
    words = []
    i = 0
    while i < len(text):
        if family == "gpt2":
            end = match_gpt2(text, i)
        else:
            end = match_qwen2_llama3(text, i, 1 if family == "qwen2" else 3)
        assert end is not None and end > i, (family, text, i)
        words.append(text[i:end])
        i = end
    return words


class ByteLevelBpe:
    def __init__(self, vocab_path, merges_path, family, added_tokens=()):
        with open(vocab_path, encoding="utf-8") as f:
            self.vocab = json.load(f)
        self.ranks = {}
        with open(merges_path, encoding="utf-8") as f:
            lines = f.read().split("\n")
        if lines and lines[0].startswith("#version"):
            lines = lines[1:]
        for line in lines:
            if line:
                a, b = line.split(" ")
                self.ranks.setdefault((a, b), len(self.ranks))
        self.family = family
        self.added = dict(added_tokens)  # content -> id

    def bpe(self, word):
        if self.family == "llama3" and word in self.vocab:
            return [word]
        parts = list(word)
        while len(parts) > 1:
            pairs = [(self.ranks.get((parts[k], parts[k + 1]), float("inf")), k) for k in range(len(parts) - 1)]
            best_rank = min(pairs)[0]
            if best_rank == float("inf"):
                break
            best = min(pairs)[1]
            a, b = parts[best], parts[best + 1]
            merged = []
            k = 0
            while k < len(parts):
                if k + 1 < len(parts) and parts[k] == a and parts[k + 1] == b:
                    merged.append(a + b)
                    k += 2
                else:
                    merged.append(parts[k])
                    k += 1
            parts = merged
        return parts

    def encode_plain(self, text):
        if self.family == "qwen2":
            text = unicodedata.normalize("NFC", text)
        ids = []
        for word in split_words(text, self.family):
            mapped = "".join(BYTE_CHARS[b] for b in word.encode("utf-8"))
            ids.extend(self.vocab[p] for p in self.bpe(mapped))
        return ids

    def encode(self, text):
        """Added tokens are cut out first (leftmost, then longest)."""
        ids = []
        while text:
            best = None
            for content, token_id in self.added.items():
                at = text.find(content)
                if at >= 0 and (best is None or at < best[0] or (at == best[0] and len(content) > len(best[1]))):
                    best = (at, content, token_id)
            if best is None:
                ids.extend(self.encode_plain(text))
                break
            at, content, token_id = best
            ids.extend(self.encode_plain(text[:at]))
            ids.append(token_id)
            text = text[at + len(content) :]
        return ids
