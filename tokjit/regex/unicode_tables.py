"""Unicode data for tokjit's regex engine, loaded lazily from ``tokjit/data/unicode_tables.npz``.

The file is produced by ``scripts/gen_unicode_tables.py`` from the ``regex`` module (and, for the
``"ucd"`` table, from Python's ``unicodedata``).  It holds, run-length encoded:

* two general-category tables (uint8 per code point, index into :data:`CATEGORIES`):
  ``"regex"`` (the Unicode version of the ``regex`` module, the default) and ``"ucd"`` (the older
  Unicode of this Python's ``unicodedata``);
* the White_Space set (what ``\\s`` means in regex / Oniguruma / Rust regex),
* the ``\\w`` set of the ``regex`` module,
* simple case-folding orbits (code points that match each other under ``(?i)``).

Unicode-version findings (measured with tiktoken 0.14 / tokenizers 0.23 / regex 2026.5): see
``UNICODE_VERSION_NOTES``.
"""
from __future__ import annotations

import functools
import os

import numpy as np

CATEGORIES = ("Cn", "Lu", "Ll", "Lt", "Lm", "Lo", "Mn", "Mc", "Me", "Nd", "Nl", "No",
              "Pc", "Pd", "Ps", "Pe", "Pi", "Pf", "Po", "Sm", "Sc", "Sk", "So",
              "Zs", "Zl", "Zp", "Cc", "Cf", "Cs", "Co")
CATEGORY_INDEX = {c: i for i, c in enumerate(CATEGORIES)}
MAX_CODEPOINT = 0x10FFFF
TABLE_VERSIONS = ("regex", "tokenizers", "ucd")

UNICODE_VERSION_NOTES = r"""
Three general-category tables are shipped:
  "regex"      - the regex module (2026.5.9): Unicode 17.0.
  "tokenizers" - measured from HF tokenizers 0.23 (Oniguruma): Unicode 16.0.  tiktoken 0.14
                 (fancy-regex / Rust regex-syntax) agrees with it on every probed code point
                 (e.g. U+1E5D0 Ol Onal and U+10D40 Garay are letters, U+1AD9 / U+20C1 / U+16EA0
                 (Unicode 17) are unassigned, U+0295 is still Ll).
  "ucd"        - Python 3.11's unicodedata: Unicode 14.0.
"regex" and "tokenizers" differ on 4804 code points (all assigned in Unicode 17, plus U+0295
Ll->Lo); "regex" and "ucd" on 15106.  Use "tokenizers" to reproduce tiktoken / HF ids (the
CompiledRegex default) and "regex" to reproduce the regex module.
\s (White_Space) is identical in all references: \t\n\v\f\r, space, U+0085, U+00A0, U+1680,
U+2000-U+200A, U+2028, U+2029, U+202F, U+205F, U+3000; U+001C-U+001F, U+200B, U+180E and U+FEFF
are not whitespace.
"""

_DATA_PATH = os.path.join(os.path.dirname(os.path.dirname(__file__)), "data", "unicode_tables.npz")


@functools.lru_cache(maxsize=None)
def _npz() -> dict:
    with np.load(_DATA_PATH) as z:
        return {k: z[k] for k in z.files}


@functools.lru_cache(maxsize=None)
def general_category_table(version: str = "regex") -> np.ndarray:
    """uint8 array of length 0x110000: general-category index of every code point."""
    if version not in TABLE_VERSIONS:
        raise ValueError(f"unknown Unicode table {version!r}; expected one of {TABLE_VERSIONS}")
    d = _npz()
    starts = d[f"gc_{version}_starts"].astype(np.int64)
    cats = d[f"gc_{version}_cats"]
    lengths = np.diff(np.append(starts, MAX_CODEPOINT + 1))
    table = np.repeat(cats, lengths).astype(np.uint8)
    table.setflags(write=False)
    return table


def white_space_ranges() -> np.ndarray:
    """int32 array of inclusive (lo, hi) pairs, flattened: the White_Space property (``\\s``)."""
    return _npz()["white_space"].reshape(-1, 2)


def word_ranges() -> np.ndarray:
    """int32 (lo, hi) pairs: ``\\w`` as the regex module defines it (Alphabetic, M, Nd, Pc, Join_Control)."""
    return _npz()["word"].reshape(-1, 2)


@functools.lru_cache(maxsize=None)
def case_orbits() -> dict[int, tuple[int, ...]]:
    """Map every code point with case variants to the sorted tuple of all its ``(?i)`` variants."""
    d = _npz()
    groups: dict[int, list[int]] = {}
    for cp, gid in zip(d["fold_cp"].tolist(), d["fold_id"].tolist()):
        groups.setdefault(gid, []).append(cp)
    out = {}
    for members in groups.values():
        t = tuple(sorted(members))
        for cp in t:
            out[cp] = t
    return out
