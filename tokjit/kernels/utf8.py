"""UTF-8 decoding and encoding shared by the kernels that walk code points."""

from __future__ import annotations

import numpy as np
from numba import njit

from tokjit.kernels.memops import nonneg


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def utf8_len(lead):
    """Length of the UTF-8 sequence a lead byte starts (valid UTF-8 assumed)."""
    return 1 if lead < 0x80 else (2 if lead < 0xE0 else (3 if lead < 0xF0 else 4))


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def decode_at(buf, p):
    """(code point, length) of the UTF-8 sequence starting at ``buf[p]`` (valid UTF-8 assumed: the lead
    byte sets the length, continuation bytes are not checked)."""
    b0 = np.int64(buf[nonneg(p)])
    if b0 < 0x80:
        return b0, 1
    if b0 < 0xE0:
        return ((b0 & 0x1F) << 6) | (np.int64(buf[nonneg(p + 1)]) & 0x3F), 2
    if b0 < 0xF0:
        return (((b0 & 0x0F) << 12) | ((np.int64(buf[nonneg(p + 1)]) & 0x3F) << 6)
                | (np.int64(buf[nonneg(p + 2)]) & 0x3F)), 3
    return (((b0 & 0x07) << 18) | ((np.int64(buf[nonneg(p + 1)]) & 0x3F) << 12)
            | ((np.int64(buf[nonneg(p + 2)]) & 0x3F) << 6) | (np.int64(buf[nonneg(p + 3)]) & 0x3F)), 4


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def decode_bmp(buf, i, end):
    """(code point, length) of a 2- or 3-byte character at ``buf[i]``, or (-1, 1) when the bytes there
    are not one (ASCII, a 4-byte character, a stray byte, or a truncated sequence)."""
    b0 = np.int64(buf[i])
    if 0xC2 <= b0 <= 0xDF:
        if i + 1 < end and (buf[i + 1] & 0xC0) == 0x80:
            return ((b0 & 0x1F) << 6) | (np.int64(buf[i + 1]) & 0x3F), 2
        return -1, 1
    if 0xE0 <= b0 <= 0xEF:
        if i + 2 < end and (buf[i + 1] & 0xC0) == 0x80 and (buf[i + 2] & 0xC0) == 0x80:
            cp = ((b0 & 0x0F) << 12) | ((np.int64(buf[i + 1]) & 0x3F) << 6) | (np.int64(buf[i + 2]) & 0x3F)
            if cp >= 0x800 and not (0xD800 <= cp <= 0xDFFF):
                return cp, 3
        return -1, 1
    return -1, 1


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def put_utf8(out, pos, cp):
    """Write the UTF-8 of code point ``cp`` at ``out[pos]``; returns the position after it."""
    if cp < 0x80:
        out[pos] = cp
        return pos + 1
    if cp < 0x800:
        out[pos] = 0xC0 | (cp >> 6)
        out[pos + 1] = 0x80 | (cp & 0x3F)
        return pos + 2
    if cp < 0x10000:
        out[pos] = 0xE0 | (cp >> 12)
        out[pos + 1] = 0x80 | ((cp >> 6) & 0x3F)
        out[pos + 2] = 0x80 | (cp & 0x3F)
        return pos + 3
    out[pos] = 0xF0 | (cp >> 18)
    out[pos + 1] = 0x80 | ((cp >> 12) & 0x3F)
    out[pos + 2] = 0x80 | ((cp >> 6) & 0x3F)
    out[pos + 3] = 0x80 | (cp & 0x3F)
    return pos + 4
