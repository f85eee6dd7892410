"""Pieces of thousands of symbols, against the reference libraries.

A piece of ``bpe.SORTED_PAIRS_MIN`` symbols or more merges through another path than short pieces
(its first pairs radix-sorted, the rest on a heap, symbols in packed records): text with no spaces
(base64, words run together, CJK, one letter repeated) at lengths on both sides of that bound, through
every BPE flavour: SentencePiece ``.model`` (with and without UNUSED pieces, which sentencepiece splits
back), tiktoken (rank by the merged bytes), HF tokenizer.json byte-level (merge list) and SentencePiece
style (Gemma 3).
"""

from __future__ import annotations

import base64
import random

import pytest

import tokjit
from conftest import SHARED, corpus_lines, shared_path
from tokjit.kernels import bpe as bpe_kernel

pytestmark = pytest.mark.skipif(not SHARED.is_dir(), reason=f"test data folder {SHARED} not found")

BOUND = bpe_kernel.SORTED_PAIRS_MIN


def long_texts(lengths=(BOUND - 1, BOUND + 7, 3 * BOUND)) -> list[str]:
    rng = random.Random(11)
    words = "".join(corpus_lines(limit_per_file=200, step=3)).replace(" ", "").replace("\n", "")
    out = []
    for n in lengths:
        out.append(base64.b64encode(rng.randbytes(n)).decode("ascii")[:n])
        out.append("".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(n)))
        out.append(("thethe" * n)[:n])
        out.append("x" * n)
        out.append("".join(chr(rng.randint(0x4E00, 0x9FA5)) for _ in range(n)))
        start = rng.randrange(max(1, len(words) - n))
        out.append(words[start:start + n])
    return out


def first_mismatch(texts, ours, theirs):
    for text, a, b in zip(texts, ours, theirs):
        if a != b:
            at = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
            return f"{len(text)} chars {text[:40]!r}: first difference at id {at}: {a[at:at + 8]} vs {b[at:at + 8]}"
    return None


@pytest.mark.parametrize("variant", ["plain", "unused"])
def test_sentencepiece_model(tmp_path, variant):
    spm = pytest.importorskip("sentencepiece")
    path = str(shared_path("data", "spm", "llama2", "tokenizer.model"))
    if variant == "unused":
        from test_sentencepiece_bpe import _unused, edited_llama2
        path = edited_llama2(tmp_path, _unused, "unused")
    tok = tokjit.load(path)
    ref = spm.SentencePieceProcessor(model_file=path)
    texts = long_texts()
    assert first_mismatch(texts, [tok.encode(t) for t in texts], ref.encode(texts)) is None
    # a batch on two threads goes through each thread's own workspace
    assert tok.encode_batch(texts, num_threads=2) == ref.encode(texts)


@pytest.mark.parametrize("name", ["o200k_base", "cl100k_base"])
def test_tiktoken(name):
    pytest.importorskip("tiktoken")
    from test_bpe_parity import reference_tiktoken
    tok = tokjit.get_encoding(name)
    ref = reference_tiktoken(name)
    # tiktoken merges a piece in quadratic time: lengths just past the bound
    texts = long_texts(lengths=(BOUND + 7,))
    assert first_mismatch(texts, [tok.encode(t) for t in texts], ref.encode_ordinary_batch(texts)) is None


@pytest.mark.parametrize("name", ["llama3", "gpt4o", "gemma3"])
def test_tokenizer_json(name):
    tokenizers = pytest.importorskip("tokenizers")
    path = str(shared_path("data", "hf", name, "tokenizer.json"))
    tok = tokjit.load(path)
    ref = tokenizers.Tokenizer.from_file(path)
    ref.no_truncation()
    ref.no_padding()
    texts = long_texts()
    theirs = [e.ids for e in ref.encode_batch(texts, add_special_tokens=False)]
    assert first_mismatch(texts, [tok.encode(t) for t in texts], theirs) is None


@pytest.mark.parametrize("n_ranks", [1000, 300_000])
def test_rank_buckets_drain_in_rank_then_position_order(n_ranks):
    """The buckets of a long piece's created pairs, filled in an order no merge pass produces (runs out
    of order, ranks in several words of both bit levels), come out as Python's sort orders them."""
    import numpy as np

    rng = random.Random(5)
    m = 50_000
    entries = [(rng.randrange(n_ranks), rng.randrange(m)) for _ in range(2 * m - 2)]
    entries += [(7, p) for p in range(m - 1, m - 600, -1)]  # one large bucket, descending: radix-sorted
    region = np.zeros(len(entries) + 1, np.int64)
    top = region.shape[0]
    heads = np.full(n_ranks, -1, np.int32)
    n_words = (n_ranks + 63) // 64
    bits = np.zeros(n_words + (n_words + 63) // 64, np.uint64)
    n_pool = 0
    for r, p in entries:
        n_pool = bpe_kernel._bucket_push(region, top, n_pool, heads, bits, n_words, r, p)
    opened = np.zeros(len(entries), np.int64)
    spare = np.zeros(len(entries) + (1 << bpe_kernel.RADIX_BITS), np.int64)
    drained = []
    r = bpe_kernel._next_bucket(bits, n_words, 0)
    while r != bpe_kernel.NO_KEY:
        n = bpe_kernel._open_bucket(region, top, heads, bits, n_words, r, opened, spare, 17)
        drained += [(r, int(p)) for p in opened[:n]]
        r = bpe_kernel._next_bucket(bits, n_words, r + 1)
    assert drained == sorted(entries)
    assert (heads == -1).all() and not bits.any()
