"""The straight-line split scanners (tokjit.kernels.split_known) give the regex VM's matches.

The VM is itself checked against HF tokenizers and tiktoken by the parity suites; here every recognized
pattern, under every syntax a loader uses, must split every corpus text, every edge case and a few
thousand generated strings exactly as the VM does. Also: the real patterns in the shared data are
recognized (so a refactor cannot silently turn the scanners off), and a pattern that differs is not.
"""

from __future__ import annotations

import json
import random
import re

import numpy as np
import pytest

from conftest import SHARED, corpus_lines
from tokjit.kernels import split_known as sk
from tokjit.pipeline.pre_tokenizers import GPT2_PATTERN
from tokjit.regex.compiled import CompiledRegex
from tokjit.regex.known import KNOWN, PURE_RUNS, pure_runs, recognize

PATTERNS = sorted(KNOWN)
# shapes whose patterns match every character (the others leave some out: DeepSeek's a digit alone)
TILING_SHAPES = (sk.SHAPE_WORDS, sk.SHAPE_CASED)
BLOCK_SHAPES = (sk.SHAPE_WORDS, sk.SHAPE_CASED, sk.SHAPE_DEEPSEEK)  # the 64-byte block path knows them
SYNTAXES = ("onig", "rust", "python")

_ALPHABET = (
    list("abcxyzSTDMLRVEABC") + list("0123456789") + ["'", "'", "’", " ", " ", " ", "\t", "\r", "\n", "\n", "\x0b",
                                                      "\x0c", "\x85", "\u00a0", "\u2028", "\u3000", "\x1c"]
    + list(".,;:!?-/()[]{}\"#$%&*+<=>@\\^_`|~") + ["\u0301", "\u0308", "\u093f", "ſ", "ǅ", "ʰ", "ª", "中", "文",
                                                     "日", "カ", "한", "д", "Д", "ا", "א", "²", "Ⅻ", "١", "٣", "👍",
                                                     "\U0001F3FD", "\u200d", "©", "∑"]
)


def _generated(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        k = rng.randint(1, 40)
        out.append("".join(rng.choice(_ALPHABET) for _ in range(k)))
    # contractions in every case next to letters, digits, marks and line breaks
    for word in ("'s", "'S", "'t", "'re", "'RE", "'Ve", "'m", "'ll", "'lL", "'d", "'x", "'", "''s"):
        for left in ("", "a", "A", "1", " ", "\n", "é", "中"):
            for right in ("", "a", " ", "\n", "'", "ſ", "1"):
                out.append(left + word + right)
    # runs the scanner takes eight bytes at a time, ending on each side of a word boundary
    for run in ("a", "Z", "aB", "Ab", "7", "x1"):
        for n in (1, 7, 8, 9, 15, 16, 17, 24):
            body = (run * n)[:n]
            for stop in ("", "é", "É", "B", "b", "1", " ", "'s", "中", "\n", "_"):
                out.append(" " + body + stop + body)
    # o200k's ASCII word fast path (one 8-byte load, then eight bytes a step): every prefix kind, case
    # runs around eight and sixteen bytes long, and each kind of character that ends them or makes the
    # general path decide
    # DeepSeek-V3's alternatives: ASCII punctuation before ASCII letters, a prefix before letters and
    # marks (a mark in both sets), a space before punctuation and symbols, breaks after them
    for left in ("", " ", "1", "\u0301", "\u00a0", "\t", "\n", ".", "_", "¿", "€", "  "):
        for mid in ("", "a", "ab\u0301c", "\u0301", "\u0301a", "é", "中", "..", "_x", "-x", " .", "€x", "\r\n"):
            for right in ("", " ", "\n", "\r\n ", "1", "!", "a", "\u0308"):
                out.append(left + mid + right)
    for prefix in ("", " ", "_", "\n", "\r", "1", "é"):
        for word in ("a", "A", "ab", "AB", "Ab", "aB", "ABCDEFG", "ABCDEFGh", "ABCDEFGH", "abcdefg", "abcdefgh",
                     "Abcdefgh", "ABCDabcd", "ABCDEFGHI", "abcdefghi", "ABCDEFGHIJKLMNOP", "ABCDEFGHIJKLMNOPQ",
                     "ABCDEFGHIjklmnopqrs", "Abcdefghijklmnopq", "ABCDEFGhijklmnopqrstuvw",
                     "abcdefghijklmnopqrstuvwxyz"):
            for stop in ("", "'s", "'", "é", "É", "\u0301", "ª", " ", "1", "x", "X", ",", "\n"):
                out.append(prefix + word + stop)
    return out


def _texts() -> list[str]:
    texts = corpus_lines(limit_per_file=400) if SHARED.is_dir() else []
    return texts + _generated(3000, 7)


def _scan(known, buf, tiled_only=0):
    shape, flags, max_digits, roles = known
    cap = buf.shape[0] + 16
    out_s, out_e = np.empty(cap, np.int64), np.empty(cap, np.int64)
    n = sk.split_known(np.int64(shape), np.int64(flags), np.int64(max_digits), roles, buf, np.int64(0),
                       np.int64(buf.shape[0]), out_s, out_e, np.int64(tiled_only))
    return n, out_s, out_e


@pytest.mark.parametrize("syntax", SYNTAXES)
@pytest.mark.parametrize("pattern", PATTERNS, ids=lambda p: p[:24])
def test_scanner_matches_the_vm(pattern, syntax):
    vm = CompiledRegex(pattern, syntax=syntax)
    known = recognize(vm.program)
    assert known is not None, "a known pattern must be recognized"
    deferred = 0
    texts = _texts()
    for text in texts:
        buf = np.frombuffer(bytearray(text.encode("utf-8")), np.uint8)
        n, out_s, out_e = _scan(known, buf)
        if n == sk.DEFER:
            # only where (?i) case folding could make a non-ASCII letter part of a contraction
            assert re.search(r"'[rvl]?ſ", text, re.IGNORECASE), repr(text)
            deferred += 1
            continue
        starts, ends = vm.find_spans(buf)
        assert n >= 0
        assert out_s[:n].tolist() == starts.tolist() and out_e[:n].tolist() == ends.tolist(), repr(text)
        bounds = [0, *np.column_stack([starts, ends]).ravel().tolist(), buf.shape[0]]
        tiles = bounds[1::2] == bounds[::2] if n else buf.shape[0] == 0
        tiled = _scan(known, buf, tiled_only=1)
        if known[0] in TILING_SHAPES:
            # the matches cover the text (the fused kernel takes them as its pieces, asking tiled_only)
            assert tiles, repr(text)
        if tiles:
            assert tiled[0] == n and tiled[1][:n].tolist() == starts.tolist() \
                and tiled[2][:n].tolist() == ends.tolist()
        else:
            assert tiled[0] == sk.NOT_TILED, repr(text)
    assert deferred < len(texts) // 20  # the VM is the exception


_PLAIN = list("etaoinshrdluETAOINSHRDLU") * 4 + [" "] * 30 + list(".,;:!?-/()[]{}\"#$%&*+<=>@\\^_`|~\x7f") \
    + list("0123456789\n\n\n'\t\r")
_STOPS = ["\x1c", "\x1f", "\x00", "é", "É", "中", "’", "\u00a0", "\u3000", "\x85", "ſ"]
# few characters, so that every rule meets every other at every offset of a block: breaks after
# punctuation, '/' after a break, spaces around breaks, digit runs, contractions in both cases
_DENSE = [" ", " ", "\n", ".", "/", "a", "A", "1", "(", "\r", "\t", "\x0b", "'", "'", "s", "S", "t", "r", "e", "E", "l",
          "L", "v", "m", "d"]


def _mostly_plain(n: int, seed: int) -> list[str]:
    """Texts 50-500 characters long of the bytes the block scanner takes (ASCII letters, spaces,
    punctuation, digits, line feeds, apostrophes) with a stop now and then: its rules, its edges and
    the hand-overs to the per-piece path."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        stop_rate = rng.choice((0.0, 0.005, 0.03, 0.15))
        k = rng.randint(60, 500)
        out.append("".join(rng.choice(_STOPS) if rng.random() < stop_rate else rng.choice(_PLAIN) for _ in range(k)))
    words = ["the", "The", "THE", "camelCase", "HTTPServer", "iPhone", "x", "", " ", "  ", "   ", ".", "..", "(",
             "\"", "-", "a.b", "A.B", ".a", "::", "don't", "it's", "WE'LL", "they'Re", "'s", "12", "1234", "1234567",
             "\n", " \n", "\n  ", ".\n", ".\n\n ", "./\n/", "\r\n", ".\r\n", "\t", " \t", "\t ", "\r\n\t", "é"]
    for _ in range(n):
        out.append("".join(rng.choice(words) + rng.choice(("", " ", "  ")) for _ in range(rng.randint(10, 120))))
    for _ in range(n):
        out.append("".join(rng.choice(_DENSE) for _ in range(rng.randint(50, 200))))
    return out


@pytest.mark.parametrize("pattern", PATTERNS, ids=lambda p: p[:24])
def test_block_scanner_matches_the_vm_and_the_piece_by_piece_scanner(pattern):
    """The 64-byte block path (BLOCK_ASCII) is on for every known pattern of a tiling shape, and with it the scanner
    gives the VM's matches and what it gives without it, on long mostly plain texts."""
    vm = CompiledRegex(pattern, syntax="onig")
    known = recognize(vm.program)
    assert known is not None
    if known[0] not in BLOCK_SHAPES:
        assert not known[1] & sk.BLOCK_ASCII  # the block scanner knows these shapes only
        return
    assert known[1] & sk.BLOCK_ASCII
    per_piece = (known[0], known[1] & ~sk.BLOCK_ASCII, known[2], known[3])
    # DeepSeek's word split leaves a digit alone unmatched (its first split isolates digits): no tiling
    tiled_only = int(known[0] in TILING_SHAPES)
    for text in _mostly_plain(400, 11):
        buf = np.frombuffer(bytearray(text.encode("utf-8")), np.uint8)
        n, out_s, out_e = _scan(known, buf)
        if n == sk.DEFER:
            continue
        starts, ends = vm.find_spans(buf)
        assert out_s[:n].tolist() == starts.tolist() and out_e[:n].tolist() == ends.tolist(), repr(text)
        m, pp_s, pp_e = _scan(per_piece, buf, tiled_only=tiled_only)
        assert m == n and pp_s[:m].tolist() == starts.tolist() and pp_e[:m].tolist() == ends.tolist(), repr(text)


def test_shared_patterns_are_recognized():
    if not SHARED.is_dir():
        pytest.skip("shared data not found")
    patterns = {GPT2_PATTERN}
    for entry in json.loads((SHARED / "data/tiktoken/encodings.json").read_text()).values():
        patterns.add(entry["pat_str"])
    for name in ("llama3", "gpt4o", "gpt35turbo"):
        doc = json.loads((SHARED / f"data/hf/{name}/tokenizer.json").read_text())
        steps = doc["pre_tokenizer"].get("pretokenizers") or [doc["pre_tokenizer"]]
        patterns.update(s["pattern"]["Regex"] for s in steps if s.get("type") == "Split")
    assert len(patterns) >= 5
    for pattern in patterns:
        assert recognize(CompiledRegex(pattern, syntax="onig").program) is not None, pattern


def test_other_patterns_keep_the_vm():
    cl100k = next(p for p in PATTERNS if p.startswith("(?i:'s"))
    for pattern in (cl100k + "|x", cl100k.replace(r"\p{L}+", r"\p{L}*"), r"\s+|\S+", GPT2_PATTERN.upper()):
        assert recognize(CompiledRegex(pattern, syntax="onig").program) is None


def test_fused_path_uses_the_scanner():
    import tokjit
    tok = tokjit.get_encoding("o200k_base")
    tok.encode("warm up")
    assert tok._fused.shape != sk.SHAPE_VM


@pytest.mark.parametrize("syntax", SYNTAXES)
@pytest.mark.parametrize("pattern", [p for p, (shape, _, _) in KNOWN.items() if shape in PURE_RUNS],
                         ids=lambda p: p[:24])
def test_pure_runs_hold_on_the_vm(pattern, syntax):
    """What ``known.PURE_RUNS`` says of a recognized pattern (a class run's later split relies on it,
    ``class_runs.stream_plan``): on the VM, every string of the first set's characters is one match
    of all of it, and no string of the second set's holds a match. Strings of 1-12 characters drawn
    from each set across the code space, with the set's ASCII and BMP members weighted up."""
    program = CompiledRegex(pattern, syntax=syntax).program
    whole, unmatched = pure_runs(program)
    vm = CompiledRegex(pattern, syntax=syntax)
    rng = random.Random(3)
    for members, one_match in ((whole, True), (unmatched, False)):
        if members is None:
            continue
        cps = np.flatnonzero(members)
        cps = cps[(cps < 0xD800) | (cps > 0xDFFF)]
        pools = [cps[cps < 0x80], cps[cps < 0x10000], cps]
        pools = [p for p in pools if p.size]
        for _ in range(3000):
            text = "".join(chr(int(rng.choice(rng.choice(pools)))) for _ in range(rng.randint(1, 12)))
            buf = np.frombuffer(bytearray(text.encode("utf-8")), np.uint8)
            starts, ends = vm.find_spans(buf)
            spans = [(s, e) for s, e in zip(starts.tolist(), ends.tolist()) if e > s]
            assert spans == ([(0, buf.shape[0])] if one_match else []), repr(text)
