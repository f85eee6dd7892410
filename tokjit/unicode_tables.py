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

UNICODE_VERSION_NOTES = """\
Code points whose general category differs between the regex module (new Unicode) and
Python 3.11's unicodedata (Unicode 14) are newly assigned characters (Cn in the old table).
tiktoken (fancy-regex -> Rust regex-syntax tables) and HF tokenizers (Oniguruma) both agree with
the new table on the samples tested, so "regex" is the default table; "ucd" is kept selectable.
"""

_DATA_PATH = os.path.join(os.path.dirname(__file__), "data", "unicode_tables.npz")


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
