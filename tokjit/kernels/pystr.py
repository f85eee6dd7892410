"""UTF-8 of a list of Python str, read by a kernel from the objects themselves.

Packing a batch with ``str.encode`` makes one bytes object per text and costs ~150 ns per text once
the str objects have left the CPU's caches (100 KB of English lines: ~170 us, ~15% of one thread's
encoding of them; of code, 2954 lines, ~420 us), all of it holding the GIL. This kernel reads the
list's item array and each str's own buffer (CPython's compact representation: one, two or four bytes
per code point, ``kind``), prefetches the objects ahead and writes the UTF-8 of every text into one
buffer.

The object layout is CPython's and not an API: :func:`str_layout` learns it, at the first batch, from
objects whose contents are known (``sys.getsizeof`` gives the header sizes, the ``kind`` bits are found by
reading strings of each kind) and :func:`pack_texts` is used only after it reproduced ``str.encode``
on a set of test strings; anywhere else (another implementation, a free-threaded build, a layout that
does not check out) the batch path keeps ``str.encode``. A text the kernel does not take (a str
subclass, a non-compact str, any surrogate code point, an object that is not a str) sends the whole
batch back to ``str.encode``, whose rules (U+FFFD for lone surrogates, errors for non-str) apply.

The kernels hold the GIL (they are not ``nogil``): no other thread can change the list while they read it.
"""

from __future__ import annotations

import ctypes
import sys

import numpy as np
from numba import njit

from tokjit.kernels.memops import (LITTLE_ENDIAN, copy_from_address, data_address, load_at, nonneg,
                                   prefetch_address, store_i64_at)
from tokjit.kernels.utf8 import put_utf8

# layout fields (an int64 array, filled by str_layout)
L_STR_TYPE = 0  # address of the str type object
L_ITEMS = 1  # offset of a list's item array pointer
L_LENGTH = 2  # offset of a str's length in code points
L_STATE = 3  # offset of a str's state bits (their first byte)
L_KIND_SHIFT = 4  # bit position of the 3-bit kind (1, 2 or 4 bytes per code point)
L_COMPACT_BIT = 5  # bit position of "compact" (data right after the header)
L_ASCII_BIT = 6  # bit position of "ascii"
L_ASCII_DATA = 7  # data offset of a compact ASCII str
L_DATA = 8  # data offset of another compact str
LAYOUT_FIELDS = 9

MEASURE_AHEAD = 16  # objects whose headers measure_texts requests ahead of the one it reads
PACK_AHEAD = 4  # texts whose code points pack_texts requests ahead of the one it copies
PREFETCH_LINES = 8


@njit(cache=True)
def measure_texts(list_address, n, layout, sizes):
    """``sizes[i]`` = an upper bound of text ``i``'s UTF-8 length (exact for ASCII: one byte per code
    point, else 2, 3 or 4 per code point by kind); returns their sum, or -1 when a text is not a
    compact exact str (the caller falls back to ``str.encode``). Reads each object's header once,
    prefetching ``MEASURE_AHEAD`` objects ahead. O(n)."""
    if sizes.shape[0] < n:
        return -1
    items = load_at(list_address + layout[L_ITEMS], np.int64)
    str_type, state_at, length_at = layout[L_STR_TYPE], layout[L_STATE], layout[L_LENGTH]
    compact_bit, ascii_bit, kind_shift = layout[L_COMPACT_BIT], layout[L_ASCII_BIT], layout[L_KIND_SHIFT]
    total = 0
    for i in range(n):
        if i + MEASURE_AHEAD < n:
            prefetch_address(load_at(items + 8 * (i + MEASURE_AHEAD), np.int64))
        obj = load_at(items + 8 * i, np.int64)
        if load_at(obj + 8, np.int64) != str_type:
            return -1
        state = np.int64(load_at(obj + state_at, np.uint8))
        if (state >> compact_bit) & 1 == 0:
            return -1
        length = load_at(obj + length_at, np.int64)
        if (state >> ascii_bit) & 1:
            size = length
        else:
            kind = (state >> kind_shift) & 7
            size = length * (2 if kind == 1 else 3 if kind == 2 else 4)
        sizes[i] = size
        total += size
    return total


@njit(cache=True)
def pack_texts(list_address, n, layout, out, starts, ends):
    """Write the UTF-8 of the ``n`` texts of the list at ``list_address`` one after another into
    ``out`` (at least :func:`measure_texts`' total, which checked every item), with each text's byte
    span in ``starts`` / ``ends``; returns the bytes written, or -1 at a surrogate code point
    (``str.encode`` has the rules for those) or when ``out`` is too small. O(bytes)."""
    if starts.shape[0] < n or ends.shape[0] < n:
        return -1
    items = load_at(list_address + layout[L_ITEMS], np.int64)
    state_at, length_at, ascii_data, data_at = layout[L_STATE], layout[L_LENGTH], layout[L_ASCII_DATA], layout[L_DATA]
    ascii_bit, kind_shift = layout[L_ASCII_BIT], layout[L_KIND_SHIFT]
    cap = out.shape[0]
    at = 0
    for i in range(n):
        if i + PACK_AHEAD < n:
            # the text PACK_AHEAD on: its header is cached (measure_texts read it), its code points
            # are not; up to PREFETCH_LINES cache lines of them are requested now
            ahead = load_at(items + 8 * (i + PACK_AHEAD), np.int64)
            span = min(load_at(ahead + length_at, np.int64) * 4 + 128, 64 * PREFETCH_LINES)
            for off in range(64, span, 64):
                prefetch_address(ahead + off)
        obj = load_at(items + 8 * i, np.int64)
        state = np.int64(load_at(obj + state_at, np.uint8))
        length = load_at(obj + length_at, np.int64)
        starts[i] = at
        if (state >> ascii_bit) & 1:
            if at + length > cap:
                return -1
            copy_from_address(out, at, obj + ascii_data, length)
            at += length
        else:
            kind = (state >> kind_shift) & 7
            if at + length * (2 if kind == 1 else 3 if kind == 2 else 4) > cap:
                return -1
            data = obj + data_at
            if kind == 2:
                at = _pack_ucs2(out, at, data, length)
                if at < 0:
                    return -1
                ends[i] = at
                continue
            for k in range(length):
                if kind == 1:
                    c = np.int64(load_at(data + k, np.uint8))
                else:
                    c = np.int64(load_at(data + 4 * k, np.uint32))
                if c < 0x80:
                    out[at] = c
                    at += 1
                elif 0xD800 <= c <= 0xDFFF:
                    return -1
                else:
                    at = put_utf8(out, at, c)
        ends[i] = at
    return at


_LANE = np.uint64(0xFFFF)
_NOT_ASCII_LANES = np.uint64(0xFF80FF80FF80FF80)


@njit(cache=True, forceinline=True, _nrt=False)
def _pack_ucs2(out, at, data, length):
    """The UTF-8 of the ``length`` two-byte code points at ``data`` written at ``out[at]``; returns the
    position after it, or -1 at a surrogate. Four code points at a time: where all four are ASCII
    (one 8-byte store of which 4 count), all four take three bytes (CJK, kana, Hangul: two stores, 12
    bytes) or all four take two (Cyrillic, Greek, Arabic, Hebrew: one store), else one by one. The
    caller checked that ``out`` holds three bytes per code point from ``at``; a group's stores reach
    4 bytes past what it writes, so groups run only with 16 bytes to spare (what they overwrite is
    written next, or cut off). O(length)."""
    cap = out.shape[0]
    dst = data_address(out)
    k = 0
    while k + 4 <= length and at + 16 <= cap and LITTLE_ENDIAN:
        w = load_at(data + 2 * k, np.uint64)
        k += 4
        if w & _NOT_ASCII_LANES == 0:
            store_i64_at(dst + at, (w & _LANE) | ((w >> 8) & 0xFF00) | ((w >> 16) & 0xFF0000)
                         | ((w >> 24) & 0xFF000000))
            at += 4
            continue
        c0, c1, c2, c3 = w & _LANE, (w >> 16) & _LANE, (w >> 32) & _LANE, w >> 48
        if (c0 >= 0x800 and c1 >= 0x800 and c2 >= 0x800 and c3 >= 0x800 and (c0 & 0xF800) != 0xD800
                and (c1 & 0xF800) != 0xD800 and (c2 & 0xF800) != 0xD800 and (c3 & 0xF800) != 0xD800):
            v0, v1, v2, v3 = _three_bytes(c0), _three_bytes(c1), _three_bytes(c2), _three_bytes(c3)
            store_i64_at(dst + at, v0 | (v1 << 24) | (v2 << 48))
            store_i64_at(dst + at + 8, (v2 >> 16) | (v3 << 8))
            at += 12
            continue
        if 0x80 <= c0 < 0x800 and 0x80 <= c1 < 0x800 and 0x80 <= c2 < 0x800 and 0x80 <= c3 < 0x800:
            store_i64_at(dst + at, _two_bytes(c0) | (_two_bytes(c1) << 16) | (_two_bytes(c2) << 32)
                         | (_two_bytes(c3) << 48))
            at += 8
            continue
        at = _put_bmp(out, _put_bmp(out, _put_bmp(out, _put_bmp(out, at, c0), c1), c2), c3)
        if at < 0:
            return -1
    while k < length:
        at = _put_bmp(out, at, np.uint64(load_at(data + 2 * k, np.uint16)))
        k += 1
        if at < 0:
            return -1
    return at


@njit(cache=True, forceinline=True, _nrt=False)
def _put_bmp(out, at, c):
    """The UTF-8 of ``c`` (< 0x10000) at ``out[at]``: the position after it; -1 for a surrogate or
    when ``at`` is already -1. utf8.put_utf8 with the surrogate check in front measured 10-15% slower
    on mixed Cyrillic / Arabic (its signed indices and four-byte branch)."""
    if at < 0:
        return at
    if c < 0x80:
        out[nonneg(at)] = c
        return at + 1
    if c < 0x800:
        out[nonneg(at)] = 0xC0 | (c >> 6)
        out[nonneg(at + 1)] = 0x80 | (c & 0x3F)
        return at + 2
    if 0xD800 <= c <= 0xDFFF:
        return -1
    out[nonneg(at)] = 0xE0 | (c >> 12)
    out[nonneg(at + 1)] = 0x80 | ((c >> 6) & 0x3F)
    out[nonneg(at + 2)] = 0x80 | (c & 0x3F)
    return at + 3


@njit(cache=True, forceinline=True, _nrt=False)
def _three_bytes(c):
    """The three UTF-8 bytes of ``c`` (0x800..0xFFFF) as the low 24 bits, first byte lowest."""
    return (np.uint64(0xE0) | (c >> 12)) | ((np.uint64(0x80) | ((c >> 6) & 0x3F)) << 8) | \
        ((np.uint64(0x80) | (c & 0x3F)) << 16)


@njit(cache=True, forceinline=True, _nrt=False)
def _two_bytes(c):
    """The two UTF-8 bytes of ``c`` (0x80..0x7FF) as the low 16 bits, first byte lowest."""
    return (np.uint64(0xC0) | (c >> 6)) | ((np.uint64(0x80) | (c & 0x3F)) << 8)


def _read_state(s: str, offset: int) -> int:
    # the defined bits of the state are its first byte (the rest of the word is padding)
    return ctypes.c_uint8.from_address(id(s) + offset).value


def str_layout() -> np.ndarray | None:
    """The offsets and bits :func:`measure_texts` / :func:`pack_texts` read, learned from this
    interpreter's objects, or None when they cannot be (not CPython, or a layout these kernels do not
    know). Checked by :func:`fast_pack_ok` before use."""
    if sys.implementation.name != "cpython" or getattr(sys, "_is_gil_enabled", lambda: True)() is False:
        return None
    word = ctypes.sizeof(ctypes.c_void_p)
    if word != 8:
        return None
    layout = np.zeros(LAYOUT_FIELDS, np.int64)
    layout[L_STR_TYPE] = id(str)
    layout[L_ITEMS] = 3 * word  # PyVarObject header (refcount, type, size), then the item pointer
    layout[L_LENGTH] = 2 * word  # refcount, type, then the length
    layout[L_STATE] = 4 * word  # ... the hash, then the state bits
    layout[L_ASCII_DATA] = sys.getsizeof("") - 1  # header and the terminating NUL
    # a str made here: sys.getsizeof counts a str's cached UTF-8 copy, which the one-character
    # singleton "\xe9" carries once any C code asked for its UTF-8 (the offset then read 3 too far)
    two = "".join(["\xe9", "\xff"])
    layout[L_DATA] = sys.getsizeof(two) - 3  # header, two code points and the NUL
    if ctypes.string_at(id(two) + int(layout[L_DATA]), 2) != b"\xe9\xff":
        return None
    # strings made at run time (constants may be interned, which sets other bits of the state)
    samples = {1: "".join(["\xe9", "t\xe9"]), 2: "".join(["\u20ac", "\u4e2d"]), 4: "".join(["\U0001f600", "x"])}
    states = {k: _read_state(s, int(layout[L_STATE])) for k, s in samples.items()}
    plain = "".join(["plain", " ascii"])
    ascii_state = _read_state(plain, int(layout[L_STATE]))
    for shift in range(0, 8):
        if all((st >> shift) & 7 == k for k, st in states.items()) and (ascii_state >> shift) & 7 == 1:
            layout[L_KIND_SHIFT] = shift
            break
    else:
        return None
    # compact and ascii: the bits set in an ASCII string's state that are clear / set in the others
    compact_candidates = [b for b in range(8) if all((st >> b) & 1 for st in (*states.values(), ascii_state))
                          and not layout[L_KIND_SHIFT] <= b < layout[L_KIND_SHIFT] + 3]
    ascii_candidates = [b for b in range(int(layout[L_KIND_SHIFT]) + 3, 8)
                        if (ascii_state >> b) & 1 and not any((st >> b) & 1 for st in states.values())]
    if len(ascii_candidates) != 1 or not compact_candidates:
        return None
    layout[L_ASCII_BIT] = ascii_candidates[0]
    # CPython puts "compact" right below "ascii"
    layout[L_COMPACT_BIT] = ascii_candidates[0] - 1
    if layout[L_COMPACT_BIT] not in compact_candidates:
        return None
    return layout


_CHECK_TEXTS = ["", "a", "hello world", "\xe9t\xe9 \xff", "\u20ac \u4e2d\u6587 \u0800\u07ff", "\U0001f600 \U0010ffff x",
                "mixed \u00e9 \u4e2d \U0001f680 end", "x" * 300, "\u4e2d" * 100, "\U0001f600" * 50, "tab\tnl\n\x00nul"]


def fast_pack_ok(layout: np.ndarray | None) -> bool:
    """Whether the kernels, with ``layout``, give ``str.encode``'s bytes and spans on test strings
    (and send a surrogate, a str subclass and a non-str back)."""
    if layout is None:
        return False
    try:
        texts = list(_CHECK_TEXTS)
        sizes = np.empty(len(texts), np.int64)
        total = measure_texts(id(texts), len(texts), layout, sizes)
        if total < sum(len(t.encode()) for t in texts):
            return False
        out = np.empty(total, np.uint8)
        starts = np.empty(len(texts), np.int64)
        ends = np.empty(len(texts), np.int64)
        n = pack_texts(id(texts), len(texts), layout, out, starts, ends)
        if n < 0 or out[:n].tobytes() != b"".join(t.encode() for t in texts):
            return False
        if [out[a:b].tobytes() for a, b in zip(starts, ends)] != [t.encode() for t in texts]:
            return False

        class Sub(str):
            pass

        for bad in (["ok", Sub("x")], ["ok", b"bytes"], ["ok", 5]):
            if measure_texts(id(bad), len(bad), layout, np.empty(2, np.int64)) != -1:
                return False
        lone = ["ok", "a\ud800b"]
        sizes = np.empty(2, np.int64)
        total = measure_texts(id(lone), 2, layout, sizes)
        if total < 0 or pack_texts(id(lone), 2, layout, np.empty(total, np.uint8), np.empty(2, np.int64),
                                   np.empty(2, np.int64)) != -1:
            return False
        return True
    except Exception:  # noqa: BLE001 - any surprise means: do not use the kernels
        return False
