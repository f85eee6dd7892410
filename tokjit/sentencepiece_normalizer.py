"""SentencePiece's normalizer (``normalizer.cc``) as a tokjit normalizer component.

SentencePiece normalizes text in one left-to-right pass over *units*: at each position a user-defined
piece (copied as is) or else the longest rule of the precompiled charsmap (or one UTF-8 character when
none applies) is consumed, and its replacement string is emitted, with whitespace handling woven in:

* ``remove_extra_whitespaces``: units that are exactly " " at the start are dropped; a unit following
  one that ended in " " loses its leading spaces; trailing space symbols are removed at the end;
* ``add_dummy_prefix``: one space symbol before the text (after it with
  ``treat_whitespace_as_suffix``);
* ``escape_whitespaces``: every " " becomes U+2581.

The charsmap pass is delegated to :class:`tokjit.charsmap.PrecompiledCharsmap`, whose alignment gives
every output byte of a unit the unit's start offset; the whitespace pass (this module's kernel) finds
the unit boundaries again from that alignment, so it reproduces the unit-wise rules exactly.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .added_tokens import AddedTokenMatcher
from .errors import UnsupportedComponentError
from .normalizers import register_normalizer
from .spec import AddedToken

WS_REMOVE_EXTRA = 1
WS_DUMMY_PREFIX = 2
WS_ESCAPE = 4
WS_SUFFIX = 8


@njit(cache=True, nogil=True)
def sentencepiece_whitespace(buf, align, n, flags, out, out_align):
    """Apply sentencepiece's whitespace rules to charsmap-normalized ``buf[:n]``; returns output length.

    Units are maximal runs of bytes with equal ``align`` (one per consumed input unit). Mirrors
    ``Normalizer::Normalize`` after ``NormalizePrefix``: leading " " units skipped, dummy prefix,
    per-unit leading-space removal after a space, " " -> U+2581, trailing space symbols trimmed.
    O(n). Capacity: ``out`` >= 3 * n + 3, ``out_align`` one more.
    """
    remove_extra = (flags & WS_REMOVE_EXTRA) != 0
    dummy = (flags & WS_DUMMY_PREFIX) != 0
    escape = (flags & WS_ESCAPE) != 0
    suffix = (flags & WS_SUFFIX) != 0
    i = 0
    if remove_extra:
        # skip leading units equal to exactly " "
        while i < n:
            j = i + 1
            while j < n and align[j] == align[i]:
                j += 1
            if j - i == 1 and buf[i] == 32:
                i = j
            else:
                break
    if i >= n:
        out_align[0] = align[n]
        return 0
    m = 0
    if dummy and not suffix:
        if escape:
            out[0] = 0xE2
            out[1] = 0x96
            out[2] = 0x81
            out_align[0] = align[i]
            out_align[1] = align[i]
            out_align[2] = align[i]
            m = 3
        else:
            out[0] = 32
            out_align[0] = align[i]
            m = 1
    is_prev_space = remove_extra
    while i < n:
        j = i + 1
        while j < n and align[j] == align[i]:
            j += 1
        unit_pos = align[i]
        k = i
        if is_prev_space:
            while k < j and buf[k] == 32:
                k += 1
        if k < j:
            for q in range(k, j):
                b = buf[q]
                if escape and b == 32:
                    out[m] = 0xE2
                    out[m + 1] = 0x96
                    out[m + 2] = 0x81
                    out_align[m] = unit_pos
                    out_align[m + 1] = unit_pos
                    out_align[m + 2] = unit_pos
                    m += 3
                else:
                    out[m] = b
                    out_align[m] = unit_pos
                    m += 1
            is_prev_space = buf[j - 1] == 32
        if not remove_extra:
            is_prev_space = False
        i = j
    consumed = align[n]
    if remove_extra:
        if escape:
            while m >= 3 and out[m - 3] == 0xE2 and out[m - 2] == 0x96 and out[m - 1] == 0x81:
                m -= 3
                consumed = out_align[m]
        else:
            while m >= 1 and out[m - 1] == 32:
                m -= 1
                consumed = out_align[m]
    if dummy and suffix:
        if escape:
            out[m] = 0xE2
            out[m + 1] = 0x96
            out[m + 2] = 0x81
            out_align[m] = consumed
            out_align[m + 1] = consumed
            out_align[m + 2] = consumed
            m += 3
        else:
            out[m] = 32
            out_align[m] = consumed
            m += 1
    out_align[m] = consumed
    return m


class SentencePieceNormalizer:
    """``{"type": "SentencePieceNormalizer", "precompiled_charsmap": bytes | None, "add_dummy_prefix",
    "remove_extra_whitespaces", "escape_whitespaces", "treat_whitespace_as_suffix", "user_defined"}``."""

    def __init__(self, config: dict):
        blob = config.get("precompiled_charsmap")
        self.charsmap = None
        if blob:
            try:
                from .charsmap import PrecompiledCharsmap
            except ImportError as exc:
                raise UnsupportedComponentError(
                    "this SentencePiece model has a precompiled charsmap, which needs tokjit.charsmap") from exc
            self.charsmap = PrecompiledCharsmap(bytes(blob))
        flags = 0
        if config.get("remove_extra_whitespaces", True):
            flags |= WS_REMOVE_EXTRA
        if config.get("add_dummy_prefix", True):
            flags |= WS_DUMMY_PREFIX
        if config.get("escape_whitespaces", True):
            flags |= WS_ESCAPE
        if config.get("treat_whitespace_as_suffix", False):
            flags |= WS_SUFFIX
        self.flags = np.int64(flags)
        user = [s for s in config.get("user_defined") or [] if s]
        # user-defined pieces are copied through unnormalized; only the charsmap could change them
        self.protect = AddedTokenMatcher([AddedToken(s, i) for i, s in enumerate(user)]) \
            if user and self.charsmap is not None else None

    def _apply_charsmap(self, buf, align):
        if self.protect is None:
            return self.charsmap.normalize(buf, align)
        ms, me, _ = self.protect.find(buf, 0, buf.shape[0])
        if ms.shape[0] == 0:
            return self.charsmap.normalize(buf, align)
        base = np.arange(buf.shape[0] + 1, dtype=np.int64) if align is None else align
        bufs, aligns = [], []
        pos = 0
        for s, e in zip(ms.tolist(), me.tolist()):
            if s > pos:
                b, a = self.charsmap.normalize(buf[pos:s], base[pos:s + 1])
                bufs.append(b)
                aligns.append(a[:-1])
            bufs.append(buf[s:e])
            aligns.append(np.full(e - s, base[s], np.int64))  # one unit: sentencepiece consumes it whole
            pos = e
        if pos < buf.shape[0]:
            b, a = self.charsmap.normalize(buf[pos:], base[pos:])
            bufs.append(b)
            aligns.append(a[:-1])
        aligns.append(base[-1:])
        return np.concatenate(bufs).astype(np.uint8), np.concatenate(aligns).astype(np.int64)

    def __call__(self, buf, align):
        if self.charsmap is not None:
            buf, align = self._apply_charsmap(buf, align)
        n = buf.shape[0]
        base = np.arange(n + 1, dtype=np.int64) if align is None else np.asarray(align, np.int64)
        out = np.empty(3 * n + 3, np.uint8)
        out_align = np.empty(3 * n + 4, np.int64)
        m = sentencepiece_whitespace(buf, base, np.int64(n), self.flags, out, out_align)
        return out[:m], out_align[:m + 1]


register_normalizer("SentencePieceNormalizer")(SentencePieceNormalizer)

__all__ = ["SentencePieceNormalizer", "sentencepiece_whitespace"]
