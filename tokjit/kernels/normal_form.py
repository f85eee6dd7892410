"""Which documents may not be in a Unicode normal form already: the quick check of UAX #15 in a kernel.

A tokenizer whose only normalizer is a normal form (Qwen's NFC) runs the fused kernel on text as it
is, which is exact for text already in that form. Almost all text is; proving it per document in
Python (decode, ``unicodedata.is_normalized``) cost as much as encoding it. The kernel below walks the
code points once against a table built from the running Python's ``unicodedata`` (so both agree on
the Unicode version) and flags only the documents the quick check cannot pass; those alone go to
``is_normalized``.

Table value per code point: its canonical combining class, or :data:`NOT_YES` when the character's
quick-check property for the form is not Yes (No: it changes when normalized alone; Maybe: it may
compose with the character before it, for the composing forms). The quick check says Yes when every
character is Yes and the nonzero combining classes never decrease; anything else is a suspect.
"""

from __future__ import annotations

import unicodedata

import numpy as np
from numba import njit

from tokjit.kernels.memops import load_word

NOT_YES = 255  # combining classes stop at 240
_HIGH_BITS = np.uint64(0x8080808080808080)
_TABLES: dict[str, np.ndarray] = {}
_YES_BITS: dict[str, np.ndarray] = {}
_HANGUL_SYLLABLES = range(0xAC00, 0xD7A4)
_HANGUL_V_T = list(range(0x1161, 0x1176)) + list(range(0x11A8, 0x11C3))  # compose after L or LV


def quick_check_table(form: str) -> np.ndarray:
    """uint8[0x110000] for ``form`` ("NFC", "NFD", "NFKC", "NFKD"), built once per process (~0.3 s)."""
    table = _TABLES.get(form)
    if table is not None:
        return table
    table = np.zeros(0x110000, np.uint8)
    composing = form in ("NFC", "NFKC")
    not_yes = list(range(0xD800, 0xE000))  # surrogates: never in valid UTF-8; left to Python
    if composing:
        not_yes += _HANGUL_V_T
    for cp in range(0x110000):
        c = chr(cp)
        ccc = unicodedata.combining(c)
        if ccc:
            table[cp] = ccc
        decomposition = unicodedata.decomposition(c)
        if decomposition or cp in _HANGUL_SYLLABLES:
            if unicodedata.normalize(form, c) != c:
                not_yes.append(cp)  # quick check No
            if composing and decomposition and not decomposition.startswith("<"):
                parts = decomposition.split()
                if len(parts) == 2 and unicodedata.normalize("NFC", c) == c:
                    not_yes.append(int(parts[1], 16))  # second half of a primary composite: Maybe
    table[not_yes] = NOT_YES  # after every combining class, which it overrides
    _TABLES[form] = table
    return table


def quick_check_yes_bits(form: str) -> np.ndarray:
    """uint64[1024]: a bit per code point of the Basic Multilingual Plane whose entry in
    :func:`quick_check_table` is 0 (quick check Yes, combining class 0), the common case, read from
    8 KB instead of the 1.1 MB table."""
    bits = _YES_BITS.get(form)
    if bits is None:
        clear = quick_check_table(form)[:0x10000] == 0
        bits = _YES_BITS[form] = np.packbits(clear, bitorder="little").view(np.uint64).copy()
    return bits


@njit(cache=True, nogil=True, _nrt=False)
def normal_form_suspects(buf, doc_starts, doc_ends, table, yes_bits, suspect):
    """Set ``suspect[d]`` for each document ``buf[doc_starts[d]:doc_ends[d]]`` the quick check does not
    pass (``table``: :func:`quick_check_table`; ``yes_bits``: :func:`quick_check_yes_bits`), or that
    is not well-formed UTF-8 (it goes to Python, which decodes it with replacement characters as
    before); returns how many. O(bytes): ASCII (combining class 0, always Yes) eight bytes a step,
    a well-formed 2- or 3-byte character whose bit is set in ``yes_bits`` one test; every other
    character decoded and checked in full against ``table``."""
    n_suspect = 0
    for d in range(doc_starts.shape[0]):
        p = doc_starts[d]
        end = doc_ends[d]
        last = 0
        bad = False
        while p < end:
            b0 = np.int64(buf[p])
            if b0 < 0x80:
                last = 0
                p += 1
                while p + 8 <= end and (load_word(buf, p, 8) & _HIGH_BITS) == 0:
                    p += 8
                continue
            if 0xE0 <= b0 < 0xF0 and p + 3 <= end:
                b1 = np.int64(buf[p + 1])
                b2 = np.int64(buf[p + 2])
                cp = ((b0 & 0x0F) << 12) | ((b1 & 0x3F) << 6) | (b2 & 0x3F)
                # well-formed, not overlong (surrogates have no yes bit)
                if (b1 & 0xC0) == 0x80 and (b2 & 0xC0) == 0x80 and cp >= 0x800 \
                        and (yes_bits[cp >> 6] >> np.uint64(cp & 63)) & np.uint64(1):
                    last = 0
                    p += 3
                    continue
            elif 0xC2 <= b0 < 0xE0 and p + 2 <= end:
                b1 = np.int64(buf[p + 1])
                cp = ((b0 & 0x1F) << 6) | (b1 & 0x3F)
                if (b1 & 0xC0) == 0x80 and (yes_bits[cp >> 6] >> np.uint64(cp & 63)) & np.uint64(1):
                    last = 0
                    p += 2
                    continue
            if b0 < 0xC2 or b0 > 0xF4:
                bad = True
                break
            n = 2 if b0 < 0xE0 else (3 if b0 < 0xF0 else 4)
            if p + n > end:
                bad = True
                break
            cp = b0 & (0x7F >> n)
            for k in range(1, n):
                c = np.int64(buf[p + k])
                if (c & 0xC0) != 0x80:
                    bad = True
                cp = (cp << 6) | (c & 0x3F)
            if bad or cp >= 0x110000 or (n == 3 and cp < 0x800) or (n == 4 and cp < 0x10000):
                bad = True
                break
            v = np.int64(table[cp])
            if v == NOT_YES or (v != 0 and last > v):
                bad = True
                break
            last = v
            p += n
        if bad:
            suspect[d] = True
            n_suspect += 1
    return n_suspect
