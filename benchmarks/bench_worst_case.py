"""asv: pathological inputs must cost linear time (issue 7: time(1 MB) / time(100 KB) <= 12).

``track_linearity`` reports time(10 n) / time(n) (best of
two runs each), which stays near 10 for a linear tokenizer and would be ~100 for a quadratic one.
``tests/test_worst_case_linear.py`` asserts a generous bound on the same inputs.
"""

from __future__ import annotations

import base64
import random
import time

from ._common import FAMILY_NAMES, SCALE, load, warm

KINDS = ["x", "caret", "base64", "digits", "spaces", "cjk"]


def worst_input(kind: str, n: int, seed: int = 7) -> str:
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
    if kind == "base64":
        raw = random.Random(seed).randbytes(n * 3 // 4 + 3)
        return base64.b64encode(raw).decode("ascii")[:n]
    raise ValueError(kind)


def _best(tok, kind, n, rounds=2):
    # a fresh random text each round, so the byte-level piece cache cannot serve a repeat
    best = float("inf")
    for r in range(rounds):
        text = worst_input(kind, n, seed=7 + r)
        t0 = time.perf_counter()
        tok.encode(text)
        best = min(best, time.perf_counter() - t0)
    return best


class WorstCase:
    params = (FAMILY_NAMES, KINDS)
    param_names = ["family", "kind"]
    timeout = 300

    def setup(self, family, kind):
        self.tok = load(family)
        warm(self.tok)
        self.n = int(100_000 * SCALE)
        self.tok.encode(worst_input(kind, 1000, seed=1))

    def track_linearity(self, family, kind):
        t_small = _best(self.tok, kind, self.n)
        t_big = _best(self.tok, kind, 10 * self.n)
        return t_big / max(t_small, 1e-6)

    track_linearity.unit = "ratio"
