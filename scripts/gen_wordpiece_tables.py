#!/usr/bin/env python3
"""Generate tokjit/data/bert_unicode.npz: the per-code-point tables of the BERT normalizer and
pre-tokenizer, as HF ``tokenizers`` sees the characters.

Run once when upgrading Python:  python scripts/gen_wordpiece_tables.py

HF's BERT components use three different Unicode tables, none of them Python's:
  * ``unicode_categories`` 0.1.1 (Unicode 8.0) for is_other (clean_text), is_mark_nonspacing
    (strip_accents) and is_punctuation (BertPreTokenizer);
  * ``unicode-normalization-alignments`` for NFD;
  * Rust ``std`` (Unicode 16.0) for ``char::to_lowercase`` and ``char::is_whitespace``.
The tables below start from this Python's ``unicodedata`` (Unicode 14.0) and apply the differences
found by comparing every code point against tokenizers 0.23.3 (tests/test_wordpiece.py repeats
that comparison over all of Unicode, so a drift is caught).

Stored arrays:
  ``flags``   uint8 per code point (see FLAG_* in tokjit/kernels/wordpiece.py),
  ``decomp_keys`` / ``decomp_offsets`` / ``decomp_data``: full canonical decomposition (NFD of one
              character) of every code point NFD changes, keys sorted,
  ``lower_keys`` / ``lower_offsets`` / ``lower_data``: ``char::to_lowercase`` where it changes the
              character,
  ``ccc_keys`` / ``ccc_values``: canonical combining class where non-zero.
"""
from __future__ import annotations

import os
import string
import sys
import unicodedata

import numpy as np

MAXCP = 0x110000

FLAG_OTHER = 1        # dropped by clean_text (HF is_control)
FLAG_WHITESPACE = 2   # Rust char::is_whitespace
FLAG_CJK = 4          # isolated by handle_chinese_chars
FLAG_NONSPACING = 8   # dropped by strip_accents after NFD
FLAG_PUNCT = 16       # isolated by BertPreTokenizer
FLAG_DECOMP = 32      # NFD changes the character
FLAG_LOWER = 64       # to_lowercase changes the character
FLAG_CCC = 128        # canonical combining class != 0

# HF's handle_chinese_chars ranges, as its source spells them (0x2B820..0x2B91F is not included).
CJK_RANGES = [(0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F),
              (0x2B740, 0x2B81F), (0x2B920, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F)]

# Format characters assigned after Unicode 8.0: HF does not know them as "other", keeps them.
OTHER_UNKNOWN_TO_HF = [(0x890, 0x891), (0x8E2, 0x8E2), (0x110CD, 0x110CD), (0x13430, 0x13438)]

# Nonspacing marks assigned after Unicode 8.0: HF's strip_accents keeps them.
NONSPACING_UNKNOWN_TO_HF = [
    (0x7FD, 0x7FD), (0x898, 0x89F), (0x8CA, 0x8E1), (0x9FE, 0x9FE), (0xAFA, 0xAFF), (0xB55, 0xB55),
    (0xC04, 0xC04), (0xC3C, 0xC3C), (0xD00, 0xD00), (0xD3B, 0xD3C), (0xD81, 0xD81), (0xEBA, 0xEBA),
    (0x180F, 0x180F), (0x1885, 0x1886), (0x1ABF, 0x1ACE), (0x1DF6, 0x1DFB), (0xA82C, 0xA82C),
    (0xA8C5, 0xA8C5), (0xA8FF, 0xA8FF), (0xA9BD, 0xA9BD), (0x10D24, 0x10D27), (0x10EAB, 0x10EAC),
    (0x10F46, 0x10F50), (0x10F82, 0x10F85), (0x11070, 0x11070), (0x11073, 0x11074),
    (0x110C2, 0x110C2), (0x111C9, 0x111C9), (0x111CF, 0x111CF), (0x1123E, 0x1123E),
    (0x1133B, 0x1133B), (0x11438, 0x1143F), (0x11442, 0x11444), (0x11446, 0x11446),
    (0x1145E, 0x1145E), (0x1182F, 0x11837), (0x11839, 0x1183A), (0x1193B, 0x1193C),
    (0x1193E, 0x1193E), (0x11943, 0x11943), (0x119D4, 0x119D7), (0x119DA, 0x119DB),
    (0x119E0, 0x119E0), (0x11A01, 0x11A0A), (0x11A33, 0x11A38), (0x11A3B, 0x11A3E),
    (0x11A47, 0x11A47), (0x11A51, 0x11A56), (0x11A59, 0x11A5B), (0x11A8A, 0x11A96),
    (0x11A98, 0x11A99), (0x11C30, 0x11C36), (0x11C38, 0x11C3D), (0x11C3F, 0x11C3F),
    (0x11C92, 0x11CA7), (0x11CAA, 0x11CB0), (0x11CB2, 0x11CB3), (0x11CB5, 0x11CB6),
    (0x11D31, 0x11D36), (0x11D3A, 0x11D3A), (0x11D3C, 0x11D3D), (0x11D3F, 0x11D45),
    (0x11D47, 0x11D47), (0x11D90, 0x11D91), (0x11D95, 0x11D95), (0x11D97, 0x11D97),
    (0x11EF3, 0x11EF4), (0x16F4F, 0x16F4F), (0x16FE4, 0x16FE4), (0x1CF00, 0x1CF2D),
    (0x1CF30, 0x1CF46), (0x1E000, 0x1E006), (0x1E008, 0x1E018), (0x1E01B, 0x1E021),
    (0x1E023, 0x1E024), (0x1E026, 0x1E02A), (0x1E130, 0x1E136), (0x1E2AE, 0x1E2AE),
    (0x1E2EC, 0x1E2EF), (0x1E944, 0x1E94A)]
# TAGBANWA VOWEL SIGN... U+1734 HANUNOO SIGN PAMUDPOD was Mn in Unicode 8.0 (Mc since 14.0).
NONSPACING_EXTRA_IN_HF = [(0x1734, 0x1734)]

# Canonical decompositions added after HF's normalization tables.
DECOMP_UNKNOWN_TO_HF = [0x11938]

# Combining characters newer than HF's NFD tables (canonical class 0 there: they end a combining run
# and are not reordered). Only those strip_accents keeps matter; measured with probes of class 9/216.
CCC_UNKNOWN_TO_HF = [
    (0x7FD, 0x7FD), (0x898, 0x89F), (0x8CA, 0x8D3), (0x9FE, 0x9FE), (0xC3C, 0xC3C), (0xD3B, 0xD3C),
    (0xEBA, 0xEBA), (0x1715, 0x1715), (0x1ABF, 0x1ACE), (0x1DF6, 0x1DFA), (0xA82C, 0xA82C),
    (0x10D24, 0x10D27), (0x10EAB, 0x10EAC), (0x10F46, 0x10F50), (0x10F82, 0x10F85), (0x11070, 0x11070),
    (0x1133B, 0x1133B), (0x1145E, 0x1145E), (0x11839, 0x1183A), (0x1193D, 0x1193E), (0x11943, 0x11943),
    (0x119E0, 0x119E0), (0x11A34, 0x11A34), (0x11A47, 0x11A47), (0x11A99, 0x11A99), (0x11D42, 0x11D42),
    (0x11D44, 0x11D45), (0x11D97, 0x11D97), (0x16FF0, 0x16FF1), (0x1E130, 0x1E136), (0x1E2AE, 0x1E2AE),
    (0x1E2EC, 0x1E2EF)]

# Punctuation assigned (or re-categorised) after Unicode 8.0, unknown to HF's is_punctuation.
PUNCT_UNKNOWN_TO_HF = [
    (0x61D, 0x61D), (0x9FD, 0x9FD), (0xA76, 0xA76), (0xC77, 0xC77), (0xC84, 0xC84), (0x1B7D, 0x1B7E),
    (0x2E43, 0x2E4F), (0x2E52, 0x2E5D), (0x10EAD, 0x10EAD), (0x10F55, 0x10F59), (0x10F86, 0x10F89),
    (0x1144B, 0x1144F), (0x1145A, 0x1145B), (0x1145D, 0x1145D), (0x11660, 0x1166C),
    (0x116B9, 0x116B9), (0x1183B, 0x1183B), (0x11944, 0x11946), (0x119E2, 0x119E2),
    (0x11A3F, 0x11A46), (0x11A9A, 0x11A9C), (0x11A9E, 0x11AA2), (0x11C41, 0x11C45),
    (0x11C70, 0x11C71), (0x11EF7, 0x11EF8), (0x11FFF, 0x11FFF), (0x12FF1, 0x12FF2),
    (0x16E97, 0x16E9A), (0x16FE2, 0x16FE2), (0x1E95E, 0x1E95F)]
# Punctuation in Unicode 8.0 that later became a symbol / a mark.
PUNCT_EXTRA_IN_HF = [(0x166D, 0x166D), (0x111C9, 0x111C9)]

# Rust's Unicode 16.0 lowercase mappings of characters Python 3.11 (Unicode 14.0) does not know.
LOWER_EXTRA = {0x1C89: 0x1C8A, 0xA7CB: 0x264, 0xA7CC: 0xA7CD, 0xA7CE: 0xA7CF, 0xA7D2: 0xA7D3,
               0xA7D4: 0xA7D5, 0xA7DA: 0xA7DB, 0xA7DC: 0x19B}
LOWER_EXTRA.update({0x10D50 + i: 0x10D70 + i for i in range(0x16)})
LOWER_EXTRA.update({0x16EA0 + i: 0x16EBB + i for i in range(0x19)})

# Rust char::is_whitespace: the White_Space property (stable across versions).
WHITESPACE = [(0x9, 0xD), (0x20, 0x20), (0x85, 0x85), (0xA0, 0xA0), (0x1680, 0x1680), (0x2000, 0x200A),
              (0x2028, 0x2029), (0x202F, 0x202F), (0x205F, 0x205F), (0x3000, 0x3000)]


def _set(flags, ranges, bit, on=True):
    for lo, hi in ranges:
        if on:
            flags[lo:hi + 1] |= bit
        else:
            flags[lo:hi + 1] &= ~np.uint8(bit)


def _csr(mapping: dict[int, list[int]]):
    keys = np.asarray(sorted(mapping), np.int32)
    offsets = np.zeros(len(keys) + 1, np.int64)
    data: list[int] = []
    for i, k in enumerate(keys.tolist()):
        data.extend(mapping[k])
        offsets[i + 1] = len(data)
    return keys, offsets, np.asarray(data, np.int32)


def build():
    flags = np.zeros(MAXCP, np.uint8)
    decomp: dict[int, list[int]] = {}
    lower: dict[int, list[int]] = {}
    ccc: dict[int, int] = {}
    for cp in range(MAXCP):
        if 0xD800 <= cp < 0xE000:
            continue
        ch = chr(cp)
        cat = unicodedata.category(ch)
        bits = 0
        if cat in ("Cc", "Cf", "Co") and ch not in "\t\n\r":
            bits |= FLAG_OTHER
        if cat == "Mn":
            bits |= FLAG_NONSPACING
        if cat.startswith("P") or (cp < 128 and ch in string.punctuation):
            bits |= FLAG_PUNCT
        nfd = unicodedata.normalize("NFD", ch)
        if nfd != ch and cp not in DECOMP_UNKNOWN_TO_HF:
            decomp[cp] = [ord(c) for c in nfd]
            bits |= FLAG_DECOMP
        low = LOWER_EXTRA.get(cp)
        low_s = chr(low) if low is not None else ch.lower()
        if low_s != ch:
            lower[cp] = [ord(c) for c in low_s]
            bits |= FLAG_LOWER
        c = unicodedata.combining(ch)
        if c and not any(lo <= cp <= hi for lo, hi in CCC_UNKNOWN_TO_HF):
            ccc[cp] = c
            bits |= FLAG_CCC
        flags[cp] = bits
    for cp in (0, 0xFFFD):
        flags[cp] |= FLAG_OTHER
    _set(flags, OTHER_UNKNOWN_TO_HF, FLAG_OTHER, on=False)
    _set(flags, WHITESPACE, FLAG_WHITESPACE)
    _set(flags, CJK_RANGES, FLAG_CJK)
    _set(flags, NONSPACING_UNKNOWN_TO_HF, FLAG_NONSPACING, on=False)
    _set(flags, NONSPACING_EXTRA_IN_HF, FLAG_NONSPACING)
    _set(flags, PUNCT_UNKNOWN_TO_HF, FLAG_PUNCT, on=False)
    _set(flags, PUNCT_EXTRA_IN_HF, FLAG_PUNCT)
    # The kernel lowercases ccc != 0 characters in place inside a combining run; it relies on this.
    for cp in ccc:
        assert cp not in lower or all(unicodedata.combining(chr(x)) for x in lower[cp]), hex(cp)
    out = {"flags": flags}
    for name, table in (("decomp", decomp), ("lower", lower)):
        keys, offsets, data = _csr(table)
        out[f"{name}_keys"], out[f"{name}_offsets"], out[f"{name}_data"] = keys, offsets, data
    out["ccc_keys"] = np.asarray(sorted(ccc), np.int32)
    out["ccc_values"] = np.asarray([ccc[k] for k in sorted(ccc)], np.uint8)
    out["unicode_version"] = np.asarray(unicodedata.unidata_version)
    return out


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    dest = os.path.join(here, "..", "tokjit", "data", "bert_unicode.npz")
    tables = build()
    np.savez_compressed(dest, **tables)
    print(f"wrote {dest} ({os.path.getsize(dest)} bytes, Python {sys.version.split()[0]}, "
          f"Unicode {unicodedata.unidata_version})")


if __name__ == "__main__":
    main()
