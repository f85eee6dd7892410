"""UTF-8 decoding shared by the kernels that walk code points."""

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
