"""Which documents may not be in a Unicode normal form already: the quick check of UAX #15 in a kernel.

A tokenizer whose only normalizer is a normal form (Qwen's NFC) runs the fused kernel on text as it
is, which is exact for text already in that form. Almost all text is; proving it per document in
Python (decode, ``unicodedata.is_normalized``) cost as much as encoding it. The kernel below walks the
code points once against a table built from the running Python's ``unicodedata`` (so both agree on
the Unicode version) and flags only the documents the quick check cannot pass; those alone go to
``is_normalized``.

Table value per code point: its canonical combining class, or :data:`NOT_YES` when the character's
quick-check property for the form is not Yes (No: it changes when normalized alone; Maybe: it may
compose with the character before it, for the composing forms), and for the few marks (nonzero
class) that decompose. The quick check says Yes when every character is Yes and the nonzero
combining classes never decrease; anything else is a suspect.

Text whose characters are all Yes but whose marks are out of order (Arabic written with a shadda
before a fatha: 4% of the bytes of the Arabic corpus) is brought into the form in place
(:func:`order_marks_in_place`): sorting each run of marks by class, stably, gives a canonically
equivalent text (adjacent marks of different classes that do not decompose may trade places) that
the quick check passes, and a text that passes is in the form; so that text is the normal form.
"""

from __future__ import annotations

import unicodedata

import numpy as np
from numba import njit

from tokjit.kernels.memops import HIGH_BITS, load_word
from tokjit.kernels.utf8 import decode_bmp

NOT_YES = 255  # combining classes stop at 240
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
        if ccc and decomposition:
            # a mark that decomposes may not trade places with its neighbours as a whole
            # (order_marks_in_place); the few there are go to Python
            not_yes.append(cp)
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


# quick-check verdicts of one document
PASSES = 0
MARKS_OUT_OF_ORDER = 1  # every character Yes, well-formed; only the order of combining classes fails
FAILS = 2
MAX_MARK_RUN = 32  # longer runs of marks go to Python


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def _yes_bit(yes_bits, cp):
    return (yes_bits[cp >> 6] >> np.uint64(cp & 63)) & np.uint64(1) != 0


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def _yes_run3(buf, p, end, yes_bits):
    """The end of the run of 3-byte characters from ``buf[p]`` led by 0xE1..0xEF (no overlong form
    starts so; a surrogate's bit is clear) whose bit is set in ``yes_bits``: CJK and Hangul text, one
    character a step with fewer branches than a decode."""
    while p + 3 <= end:
        b0 = np.int64(buf[p])
        b1 = np.int64(buf[p + 1])
        b2 = np.int64(buf[p + 2])
        if b0 < 0xE1 or b0 > 0xEF or ((b1 & 0xC0) | ((b2 & 0xC0) >> 2)) != 0xA0:
            break
        if not _yes_bit(yes_bits, ((b0 & 0x0F) << 12) | ((b1 & 0x3F) << 6) | (b2 & 0x3F)):
            break
        p += 3
    return p


@njit(cache=True, nogil=True, _nrt=False)
def _quick_check(buf, p, end, table, yes_bits):
    """Verdict of the quick check on ``buf[p:end]`` (PASSES, MARKS_OUT_OF_ORDER or FAILS; malformed
    UTF-8 FAILS). O(bytes): ASCII eight bytes a step, runs of common 3-byte characters without a
    decode (``_yes_run3``), a well-formed 2- or 3-byte character whose bit is set in ``yes_bits`` one
    test; every other character decoded and checked against ``table``."""
    last = 0
    verdict = PASSES
    while p < end:
        b0 = np.int64(buf[p])
        if b0 < 0x80:
            last = 0
            p += 1
            while p + 8 <= end and (load_word(buf, p, 8) & HIGH_BITS) == 0:
                p += 8
            continue
        if 0xE1 <= b0 <= 0xEF:
            q = _yes_run3(buf, p, end, yes_bits)
            if q > p:
                last = 0
                p = q
                continue
        cp, n = decode_bmp(buf, p, end)  # a well-formed 2- or 3-byte character, else -1
        if cp >= 0 and _yes_bit(yes_bits, cp):
            last = 0
            p += n
            continue
        cp, n = _decode(buf, p, end)
        if cp < 0:
            return FAILS
        v = np.int64(table[cp])
        if v == NOT_YES:
            return FAILS
        if v != 0 and last > v:
            verdict = MARKS_OUT_OF_ORDER
        last = v
        p += n
    return verdict


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def _decode(buf, p, end):
    """(code point, length) of the well-formed UTF-8 character at ``buf[p]``, else (-1, 1)."""
    b0 = np.int64(buf[p])
    if b0 < 0x80:
        return b0, 1
    if b0 < 0xC2 or b0 > 0xF4:
        return -1, 1
    n = 2 if b0 < 0xE0 else (3 if b0 < 0xF0 else 4)
    if p + n > end:
        return -1, 1
    cp = b0 & (0x7F >> n)
    for k in range(1, n):
        c = np.int64(buf[p + k])
        if (c & 0xC0) != 0x80:
            return -1, 1
        cp = (cp << 6) | (c & 0x3F)
    if cp >= 0x110000 or (n == 3 and cp < 0x800) or (n == 4 and cp < 0x10000):
        return -1, 1
    return cp, n


@njit(cache=True, nogil=True, _nrt=False)
def normal_form_suspects(buf, doc_starts, doc_ends, table, yes_bits, suspect):
    """Set ``suspect[d]`` for each document ``buf[doc_starts[d]:doc_ends[d]]`` the quick check does not
    pass (``table``: :func:`quick_check_table`; ``yes_bits``: :func:`quick_check_yes_bits`), or that
    is not well-formed UTF-8 (it goes to Python, which decodes it with replacement characters as
    before); returns how many. O(bytes)."""
    n_suspect = 0
    for d in range(doc_starts.shape[0]):
        if _quick_check(buf, doc_starts[d], doc_ends[d], table, yes_bits) != PASSES:
            suspect[d] = True
            n_suspect += 1
    return n_suspect


@njit(cache=True, nogil=True, _nrt=False)
def order_marks_in_place(buf, doc_starts, doc_ends, table, yes_bits, suspect, run_bytes, run_keys):
    """:func:`normal_form_suspects`, except that a document whose only fault is the order of its marks
    (every character quick-check Yes) is brought into the normal form in ``buf`` itself: each run of
    marks sorted by combining class, stably (the module docstring says why that is the form); the
    bytes do not change in number. A document with a run of more than MAX_MARK_RUN marks is left as
    it is, a suspect. ``run_bytes`` uint8[4 * MAX_MARK_RUN], ``run_keys`` int64[MAX_MARK_RUN]:
    scratch. O(bytes + marks x run length)."""
    n_suspect = 0
    for d in range(doc_starts.shape[0]):
        start, end = doc_starts[d], doc_ends[d]
        verdict = _quick_check(buf, start, end, table, yes_bits)
        if verdict == MARKS_OUT_OF_ORDER and _longest_mark_run(buf, start, end, table) <= run_keys.shape[0]:
            _sort_mark_runs(buf, start, end, table, run_bytes, run_keys)
            verdict = PASSES
        if verdict != PASSES:
            suspect[d] = True
            n_suspect += 1
    return n_suspect


@njit(cache=True, nogil=True, _nrt=False)
def _longest_mark_run(buf, p, end, table):
    """The most marks (nonzero class) in a row in the well-formed ``buf[p:end]``."""
    longest = 0
    count = 0
    while p < end:
        cp, n = _decode(buf, p, end)
        count = count + 1 if table[cp] != 0 else 0
        longest = max(longest, count)
        p += n
    return longest


@njit(cache=True, nogil=True, _nrt=False)
def _sort_mark_runs(buf, p, end, table, run_bytes, run_keys):
    """Sort every run of marks (nonzero class) of the well-formed ``buf[p:end]`` by class, stably, in
    place; no run is longer than ``run_keys`` holds (the caller checked). A key is ``class << 32 |
    offset in the run << 8 | length``: ordering keys orders by class, then by position."""
    while p < end:
        cp, n = _decode(buf, p, end)
        if table[cp] == 0:
            p += n
            continue
        run_start = p
        count = 0
        while p < end:
            cp, n = _decode(buf, p, end)
            ccc = np.int64(table[cp])
            if ccc == 0:
                break
            key = (ccc << 32) | ((p - run_start) << 8) | n
            k = count
            while k > 0 and run_keys[k - 1] > key:  # insertion sort: runs are short
                run_keys[k] = run_keys[k - 1]
                k -= 1
            run_keys[k] = key
            count += 1
            p += n
        for i in range(p - run_start):
            run_bytes[i] = buf[run_start + i]
        q = run_start
        for k in range(count):
            offset = (run_keys[k] >> 8) & 0xFFFFFF
            length = run_keys[k] & 0xFF
            for i in range(length):
                buf[q + i] = run_bytes[offset + i]
            q += length
