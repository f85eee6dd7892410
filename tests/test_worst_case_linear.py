"""Pathological inputs cost linear time in every tokenizer family (issue 7: time(1 MB) / time(100 KB)
<= 12 for "x"*N, "^"*N, random base64, long digit and space runs, CJK without spaces).

Timed with the thread's CPU time (the shared CI machine is noisy), best of two runs each; the bound
is generous (linear is ~10, a quadratic path would be ~100) so that cache effects of the larger
buffers and a busy machine do not fail CI. ``benchmarks/bench_worst_case.py`` tracks the ratios.
"""

from __future__ import annotations

import time

import pytest

import tokjit

FAMILIES = {
    "o200k": None,
    "llama3": "hf/llama3/tokenizer.json",
    "llama2-spm": "spm/llama2/tokenizer.model",
    "t5": "hf/t5/tokenizer.json",
    "bert": "hf/bert-minilm/tokenizer.json",
}
KINDS = ["x", "caret", "base64", "digits", "spaces", "cjk"]
BOUND = 40.0


def worst_input(kind: str, n: int, seed: int = 7) -> str:
    import base64
    import random
    if kind == "x":
        return "x" * n
    if kind == "caret":
        return "^" * n
    if kind == "digits":
        return "1234567890" * (n // 10)
    if kind == "spaces":
        return " " * n
    if kind == "cjk":
        # no space at all, and characters a SentencePiece-style BPE cuts around (bpe.piece_part_end)
        rng = random.Random(seed)
        return "".join(rng.choice("日本語の文字列テキスト、。中国汉字") for _ in range(n // 3))
    raw = random.Random(seed).randbytes(n * 3 // 4 + 3)
    return base64.b64encode(raw).decode("ascii")[:n]


_LOADED: dict = {}


def _tokenizer(shared, family):
    if family not in _LOADED:
        rel = FAMILIES[family]
        if rel is None:
            _LOADED[family] = tokjit.get_encoding("o200k_base")
        else:
            _LOADED[family] = tokjit.load(shared / "data" / rel)
    return _LOADED[family]


def _cpu_best(tok, kind, n, rounds=2):
    # a fresh random text each round: the byte-level kernel remembers short pieces it has seen, and a
    # second pass over the same base64 would time that cache, not the algorithm
    best = float("inf")
    for r in range(rounds):
        text = worst_input(kind, n, seed=7 + r)
        t0 = time.thread_time()
        tok.encode(text)
        best = min(best, time.thread_time() - t0)
    return best


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("family", list(FAMILIES))
def test_worst_case_is_linear(shared, family, kind):
    tok = _tokenizer(shared, family)
    tok.encode(worst_input(kind, 2000, seed=1))
    t_small = _cpu_best(tok, kind, 100_000)
    t_big = _cpu_best(tok, kind, 1_000_000)
    # 10 ms of CPU floor: below it the ratio is timer noise, not complexity
    ratio = t_big / max(t_small, 0.001)
    assert t_big < 0.010 or ratio < BOUND, f"{family} {kind}: {t_big:.3f}s / {t_small:.3f}s = {ratio:.1f}"
