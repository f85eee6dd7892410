#!/usr/bin/env python3
"""Generate tokjit/data/unicode_tables.npz: general categories, case-fold orbits, \\s and \\w sets.

Run once when upgrading the ``regex`` module / Python:  python scripts/gen_unicode_tables.py

Two general-category tables are stored, because the reference engines ship different Unicode
versions:
  * ``regex``  - categories as the installed ``regex`` module sees them (newest Unicode; this is
                 what tiktoken's fancy-regex/Rust regex-syntax and HF tokenizers' Oniguruma agree
                 with for the characters we tested, see unicode_tables.py),
  * ``tokenizers`` - categories as HF tokenizers' Oniguruma reports them (measured; Unicode 16.0,
                 and tiktoken's fancy-regex agrees),
  * ``ucd``    - categories from this Python's ``unicodedata`` (older Unicode).
Each table is stored run-length encoded: ``gc_<name>_starts`` (int32, first code point of a run)
and ``gc_<name>_cats`` (uint8 category index, see tokjit.regex.unicode_tables.CATEGORIES).
"""
from __future__ import annotations

import os
import sys
import time
import unicodedata

import numpy as np
import regex

CATEGORIES = ["Cn", "Lu", "Ll", "Lt", "Lm", "Lo", "Mn", "Mc", "Me", "Nd", "Nl", "No",
              "Pc", "Pd", "Ps", "Pe", "Pi", "Pf", "Po", "Sm", "Sc", "Sk", "So",
              "Zs", "Zl", "Zp", "Cc", "Cf", "Cs", "Co"]
MAXCP = 0x110000


def rle(arr):
    change = np.flatnonzero(np.diff(arr.astype(np.int32))) + 1
    starts = np.concatenate([[0], change]).astype(np.int32)
    return starts, arr[starts].astype(np.uint8)


def set_to_ranges(mask):
    m = mask.astype(np.int8)
    d = np.diff(np.concatenate([[0], m, [0]]))
    lo = np.flatnonzero(d == 1)
    hi = np.flatnonzero(d == -1) - 1
    return np.stack([lo, hi], axis=1).astype(np.int32).reshape(-1)


def hf_categories(gc_regex, gc_ucd):
    """General categories as HF tokenizers (Oniguruma) sees them, measured directly.

    Only code points whose category changed between this Python's unicodedata and the regex
    module are probed; everything else is taken from the regex module.  (tiktoken's Rust tables
    were found to agree with Oniguruma: both implement Unicode 16.0.)
    """
    from tokenizers import Regex, pre_tokenizers

    probe = np.flatnonzero(gc_regex != gc_ucd)
    out = gc_regex.copy()
    out[probe] = 0
    text = "".join(chr(c) for c in probe if not 0xD800 <= c < 0xE000)
    for i, cat in enumerate(CATEGORIES):
        if i == 0 or cat == "Cs":
            continue
        pt = pre_tokenizers.Split(Regex(r"\p{%s}" % cat), behavior="removed", invert=True)
        for piece, _ in pt.pre_tokenize_str(text):
            for ch in piece:
                out[ord(ch)] = i
    return out


def main():
    t0 = time.time()
    allchars = "".join(map(chr, range(MAXCP)))
    gc_regex = np.zeros(MAXCP, np.uint8)
    for i, cat in enumerate(CATEGORIES):
        if i == 0:
            continue
        for m in regex.finditer(r"\p{%s}+" % cat, allchars):
            gc_regex[m.start():m.end()] = i
    idx = {c: i for i, c in enumerate(CATEGORIES)}
    gc_ucd = np.array([idx[unicodedata.category(chr(c))] for c in range(MAXCP)], np.uint8)

    gc_hf = hf_categories(gc_regex, gc_ucd)

    ws = np.zeros(MAXCP, bool)
    for m in regex.finditer(r"\s+", allchars):
        ws[m.start():m.end()] = True
    word = np.zeros(MAXCP, bool)
    for m in regex.finditer(r"\w+", allchars):
        word[m.start():m.end()] = True

    # simple case folding orbits as the regex module applies them under (?i)
    parent = list(range(MAXCP))

    def find(a):
        while parent[a] != a:
            parent[a] = parent[parent[a]]
            a = parent[a]
        return a

    for c in range(MAXCP):
        if 0xD800 <= c < 0xE000:
            continue
        ch = chr(c)
        for v in (ch.lower(), ch.upper(), ch.casefold(), ch.title()):
            if len(v) == 1 and v != ch:
                ra, rb = find(c), find(ord(v))
                if ra != rb:
                    parent[max(ra, rb)] = min(ra, rb)
    orbits = {}
    for c in range(MAXCP):
        r = find(c)
        if r != c:
            orbits.setdefault(r, [r]).append(c)
    # verify/complete every orbit with the regex module itself
    final = []
    cased = sorted({c for o in orbits.values() for c in o})
    for r, members in orbits.items():
        found = {m.start() for m in regex.finditer("(?i)" + regex.escape(chr(r)), allchars)}
        final.append(sorted(found | {r}))
    fold_cp, fold_id = [], []
    for i, o in enumerate(sorted(final)):
        for c in o:
            fold_cp.append(c)
            fold_id.append(i)
    order = np.argsort(fold_cp)
    fold_cp = np.array(fold_cp, np.int32)[order]
    fold_id = np.array(fold_id, np.int32)[order]
    assert len(np.unique(fold_cp)) == len(fold_cp), "overlapping case orbits"

    out = {}
    for name, gc in (("regex", gc_regex), ("tokenizers", gc_hf), ("ucd", gc_ucd)):
        s, c = rle(gc)
        out[f"gc_{name}_starts"] = s
        out[f"gc_{name}_cats"] = c
    out["white_space"] = set_to_ranges(ws)
    out["word"] = set_to_ranges(word)
    out["fold_cp"] = fold_cp
    out["fold_id"] = fold_id
    out["meta"] = np.array([f"regex={regex.__version__}", f"ucd={unicodedata.unidata_version}"])
    dst = os.path.join(os.path.dirname(__file__), "..", "tokjit", "data", "unicode_tables.npz")
    np.savez_compressed(dst, **out)
    print(f"wrote {dst}: {os.path.getsize(dst)} bytes, {len(cased)} cased cps, "
          f"{int((gc_regex != gc_ucd).sum())} cps differ regex vs ucd, {time.time() - t0:.1f}s",
          file=sys.stderr)


if __name__ == "__main__":
    main()
