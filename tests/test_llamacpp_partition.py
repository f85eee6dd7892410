"""GGUF special-token partition against an oracle of llama.cpp's ``tokenizer_st_partition``.

There is no llama.cpp binary here, and the .inp vectors contain no special-token text, so the oracle
is a direct fragment-list rendering of that function (tokens sorted by byte length, longest first; each
scans every raw fragment with ``find``, splits it, lstrip / rstrip drop ASCII ``isspace`` bytes from the
neighbouring remainders). tokjit's matcher is a different algorithm (all occurrences from a trie,
claimed in priority order), so agreement on random mixtures of the real token sets is a real check.
"""

from __future__ import annotations

import random

import numpy as np
import pytest

import tokjit

ASCII_SPACE = b" \t\n\x0b\x0c\r"


def oracle_partition(text: bytes, tokens):
    """``tokens``: list of (id, bytes, lstrip, rstrip). Returns [(start, end, id)] of the special pieces,
    where start/end include the whitespace the strip flags ate."""
    # fragments: ("raw", offset, length) or ("tok", id, start, end)
    fragments = [("raw", 0, len(text))]
    for tid, content, lstrip, rstrip in sorted(tokens, key=lambda t: (-len(t[1]), t[0])):
        out = []
        for frag in fragments:
            if frag[0] != "raw":
                out.append(frag)
                continue
            base, length = frag[1], frag[2]
            while True:
                match = text.find(content, base, base + length)
                if match < 0:
                    out.append(("raw", base, length))
                    break
                left_len = match - base
                eaten_left = 0
                if lstrip:
                    while left_len > 0 and text[base + left_len - 1] in ASCII_SPACE:
                        left_len -= 1
                        eaten_left += 1
                if left_len > 0:
                    out.append(("raw", base, left_len))
                right_off = match + len(content)
                right_len = base + length - right_off
                eaten_right = 0
                if rstrip:
                    while right_len > 0 and text[right_off] in ASCII_SPACE:
                        right_off += 1
                        right_len -= 1
                        eaten_right += 1
                out.append(("tok", tid, match - eaten_left, match + len(content) + eaten_right))
                if right_len <= 0:
                    break
                base, length = right_off, right_len
        fragments = out
    return [(f[2], f[3], f[1]) for f in fragments if f[0] == "tok"]


@pytest.mark.parametrize("name", ["falcon", "phi-3", "mpt", "command-r", "llama-bpe"])
def test_partition_matches_llamacpp_oracle(shared, name):
    tok = tokjit.load(shared / "data" / "gguf" / f"ggml-vocab-{name}.gguf")
    matcher = tok._match_all
    tokens = [(t.id, t.content.encode("utf-8"), t.lstrip, t.rstrip) for t in matcher.tokens.values()]
    rng = random.Random(7)
    pieces = [t[1] for t in tokens] + [b" ", b"  ", b"\t", b"\n", b"\xc2\xa0", b"x", b"<", b">", b"|", b"hello"]
    # overlapping spellings: a token's tail glued to another token's head
    pieces += [a[1][: len(a[1]) // 2] for a in tokens[:50]] + [a[1][len(a[1]) // 2:] for a in tokens[:50]]
    for _ in range(400):
        text = b"".join(rng.choice(pieces) for _ in range(rng.randint(0, 12)))
        buf = np.frombuffer(text, np.uint8)
        s, e, ids = matcher.find(buf, 0, len(text))
        assert list(zip(s.tolist(), e.tolist(), ids.tolist())) == oracle_partition(text, tokens), text


def test_falcon_longer_token_claims_first(shared):
    """``>>TITLE<<`` ends with ``<``, where ``<|endoftext|>`` (longer) begins: llama.cpp gives the
    longer token its text, leaving ``>>TITLE<`` to the model."""
    tok = tokjit.load(shared / "data" / "gguf" / "ggml-vocab-falcon.gguf")
    text = ">>TITLE<<|endoftext|>"
    tokens = [(t.id, t.content.encode("utf-8"), t.lstrip, t.rstrip) for t in tok._match_all.tokens.values()]
    (start, end, tid), = oracle_partition(text.encode(), tokens)
    assert tok.encode(text, parse_special=True)[-1] == tid == tok.token_to_id("<|endoftext|>")
