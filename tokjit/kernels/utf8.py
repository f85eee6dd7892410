"""UTF-8 decoding and encoding shared by the kernels that walk code points."""

from __future__ import annotations

import numpy as np
from numba import njit

from tokjit.kernels.memops import nonneg


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
def bmp_at(buf, i, n):
    """(code point, length) of the character at ``buf[i]`` when it is valid UTF-8 in the BMP and ends by
    ``n``, else (-1, 0): one to three bytes, continuation bytes, overlong forms and surrogates checked."""
    b0 = np.int64(buf[i])
    if b0 < 0x80:
        return b0, 1
    if 0xC2 <= b0 < 0xE0 and i + 1 < n:
        b1 = np.int64(buf[i + 1])
        if (b1 & 0xC0) == 0x80:
            return ((b0 & 0x1F) << 6) | (b1 & 0x3F), 2
    elif 0xE0 <= b0 < 0xF0 and i + 2 < n:
        b1 = np.int64(buf[i + 1])
        b2 = np.int64(buf[i + 2])
        cp = ((b0 & 0x0F) << 12) | ((b1 & 0x3F) << 6) | (b2 & 0x3F)
        if (b1 & 0xC0) == 0x80 and (b2 & 0xC0) == 0x80 and cp >= 0x800 and not 0xD800 <= cp < 0xE000:
            return cp, 3
    return np.int64(-1), 0


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def encode_bmp(cp, out):
    """Write the UTF-8 of BMP code point ``cp`` to ``out[:3]``; returns its length."""
    if cp < 0x80:
        out[0] = cp
        return 1
    if cp < 0x800:
        out[0] = 0xC0 | (cp >> 6)
        out[1] = 0x80 | (cp & 0x3F)
        return 2
    out[0] = 0xE0 | (cp >> 12)
    out[1] = 0x80 | ((cp >> 6) & 0x3F)
    out[2] = 0x80 | (cp & 0x3F)
    return 3
