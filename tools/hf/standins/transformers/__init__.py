"""transformers (stand-in) — the two names llama.cpp's convert_hf_to_gguf.py takes from Hugging Face transformers
on the Qwen3.5 paths tools/hf/qwen35_hf.py drives; it is not the library (PyPI is unreachable here).

  AutoConfig     from_pretrained raises, so the converter falls back to reading config.json as is (its own
                 fallback path: conversion/base.py ModelBase.load_hparams).
  AutoTokenizer  from_pretrained reads tokenizer.json (a byte-level BPE: model.vocab, model.merges,
                 added_tokens) and tokenizer_config.json, and offers what TextModel.get_vocab_base reads:
                 .vocab, .get_added_vocab(), .added_tokens_decoder, .encode(text), .decode(ids).
encode splits out added tokens, pre-tokenizes with a scanner written after the Qwen2/Qwen3.5 pre-tokenizer
pattern (contractions, letter runs with one leading non-letter, single digits, punctuation runs, newline runs,
space runs) and applies the merges by rank. Only the converter's code paths for these models use it.
"""
import json
import os
import unicodedata

__all__ = ["AutoConfig", "AutoTokenizer", "AddedToken"]


class AutoConfig:
    @staticmethod
    def from_pretrained(path, **kwargs):
        raise OSError(f"transformers stand-in: no AutoConfig for {path} (the converter then reads config.json)")


class AddedToken:
    def __init__(self, content, special=False, normalized=True, lstrip=False, rstrip=False, single_word=False):
        self.content, self.special, self.normalized = content, special, normalized
        self.lstrip, self.rstrip, self.single_word = lstrip, rstrip, single_word

    def __str__(self):
        return self.content


def bytes_to_unicode():
    """The byte-level BPE alphabet: printable Latin-1 bytes map to themselves, the other bytes to 256 + n."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    table, extra = {}, 0
    for b in range(256):
        if b in keep:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + extra)
            extra += 1
    return table


def _letter(c):
    return unicodedata.category(c)[0] in "LM"


def _digit(c):
    return unicodedata.category(c)[0] == "N"


def _ws_end(s, i):
    while i < len(s) and s[i].isspace():
        i += 1
    return i


def _piece_len(s, i):
    """Length of the pre-token at s[i:], trying the pattern's alternatives in order (first match wins)."""
    n, c = len(s), s[i]
    if c == "'":  # contractions, case-insensitive
        if s[i + 1:i + 3].lower() in ("re", "ve", "ll"):
            return 3
        if s[i + 1:i + 2].lower() in ("s", "t", "m", "d"):
            return 2
    j = i
    if not _letter(c) and c not in "\r\n" and not _digit(c) and i + 1 < n and _letter(s[i + 1]):
        j = i + 1  # one leading non-letter, non-digit, non-newline character
    if _letter(s[j]):
        while j < n and _letter(s[j]):
            j += 1
        return j - i
    if _digit(c):
        return 1
    j = i + 1 if c == " " else i  # optional space, then a run of symbols, then newlines
    k = j
    while k < n and not s[k].isspace() and not _letter(s[k]) and not _digit(s[k]):
        k += 1
    if k > j:
        while k < n and s[k] in "\r\n":
            k += 1
        return k - i
    end = _ws_end(s, i)
    nl = max((p for p in range(i, end) if s[p] in "\r\n"), default=-1)
    if nl >= 0:  # whitespace up to the last newline of the run
        return nl + 1 - i
    if end == n or end - i == 1:  # whitespace at the end, or a single space before a word
        return end - i
    return end - i - 1  # leave the last space to the next word


def pre_tokenize(s):
    out, i = [], 0
    while i < len(s):
        k = _piece_len(s, i)
        out.append(s[i:i + k])
        i += k
    return out


class _Tokenizer:
    def __init__(self, path):
        with open(os.path.join(path, "tokenizer.json"), encoding="utf-8") as f:
            tj = json.load(f)
        model = tj["model"]
        if model.get("type") != "BPE":
            raise ValueError(f"transformers stand-in: tokenizer.json model.type: expected BPE, "
                             f"found {model.get('type')}")
        self._vocab = dict(model["vocab"])
        merges = [tuple(m.split(" ", 1)) if isinstance(m, str) else tuple(m) for m in model["merges"]]
        self._rank = {m: r for r, m in enumerate(merges)}
        self.added_tokens_decoder = {}
        for t in tj.get("added_tokens", []):
            self.added_tokens_decoder[t["id"]] = AddedToken(t["content"], t.get("special", False),
                                                            t.get("normalized", True), t.get("lstrip", False),
                                                            t.get("rstrip", False), t.get("single_word", False))
            self._vocab[t["content"]] = t["id"]
        self._added = {t.content: i for i, t in self.added_tokens_decoder.items()}
        self._id_to_tok = {i: t for t, i in self._vocab.items()}
        self._b2u = bytes_to_unicode()
        self._u2b = {u: b for b, u in self._b2u.items()}

    @property
    def vocab(self):
        return dict(self._vocab)

    def get_vocab(self):
        return dict(self._vocab)

    def get_added_vocab(self):
        return dict(self._added)

    def _bpe(self, word):
        parts = list(word)
        while len(parts) > 1:
            ranks = [(self._rank.get((a, b)), k) for k, (a, b) in enumerate(zip(parts, parts[1:]))]
            ranks = [rk for rk in ranks if rk[0] is not None]
            if not ranks:
                break
            _, k = min(ranks)
            parts[k:k + 2] = [parts[k] + parts[k + 1]]
        return [self._vocab[p] for p in parts]

    def _encode_plain(self, text):
        ids = []
        for piece in pre_tokenize(text):
            ids += self._bpe("".join(self._b2u[b] for b in piece.encode("utf-8")))
        return ids

    def encode(self, text, add_special_tokens=True, **kwargs):
        del add_special_tokens, kwargs  # no BOS/EOS is added (tokenizer_config: add_bos_token false)
        ids, i, start = [], 0, 0
        specials = sorted(self._added, key=len, reverse=True)
        while i < len(text):
            hit = next((t for t in specials if text.startswith(t, i)), None)
            if hit is None:
                i += 1
                continue
            ids += self._encode_plain(text[start:i]) + [self._added[hit]]
            i = start = i + len(hit)
        return ids + self._encode_plain(text[start:])

    def decode(self, ids, **kwargs):
        del kwargs
        out, buf = [], bytearray()
        for i in ids:
            tok = self._id_to_tok[i]
            if i in self.added_tokens_decoder:
                out.append(buf.decode("utf-8", errors="replace"))
                buf = bytearray()
                out.append(tok)
            else:
                buf += bytes(self._u2b[c] for c in tok)
        out.append(buf.decode("utf-8", errors="replace"))
        return "".join(out)


class AutoTokenizer:
    @staticmethod
    def from_pretrained(path, **kwargs):
        del kwargs
        return _Tokenizer(str(path))
