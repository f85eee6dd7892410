"""SentencePiece's whitespace rules (``normalizer.cc``) as one pass over charsmap-normalized bytes.

See :mod:`tokjit.pipeline.sentencepiece_normalizer` for the rules and how unit boundaries are found.
"""

from __future__ import annotations

import numpy as np
from numba import njit
from numba.cpython.unsafe.numbers import trailing_zeros

from tokjit.kernels.memops import BYTE_ONES, byte_hits, data_address, load_word, store_i64_at

WS_REMOVE_EXTRA = 1
WS_DUMMY_PREFIX = 2
WS_ESCAPE = 4
WS_SUFFIX = 8
# set by the caller when the charsmap deleted a unit of the text (a rule with an empty string)
WS_DELETED_UNIT = 16
# llama.cpp's UGM normalizer: its space prefix goes in front of the first character that is not a space,
# so text of spaces (and characters the charsmap deletes) gets none; a deleted unit is nothing to it
WS_LLAMACPP = 32


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def _put_space(out, out_align, m, pos, escape):
    """Write one space at ``out[m]`` with alignment ``pos``: U+2581 when ``escape``, else " "; the new
    length."""
    end = _put_space_bytes(out, m, escape)
    for k in range(m, end):
        out_align[k] = pos
    return end


@njit(cache=True, nogil=True, _nrt=False)
def sentencepiece_whitespace(buf, align, n, flags, out, out_align):
    """Apply sentencepiece's whitespace rules to charsmap-normalized ``buf[:n]``; returns output length.

    Units are maximal runs of bytes with equal ``align`` (one per consumed input unit). Mirrors
    ``Normalizer::Normalize`` after ``NormalizePrefix``: leading " " units skipped, dummy prefix,
    per-unit leading-space removal after a space, " " -> U+2581, trailing space symbols trimmed;
    with WS_LLAMACPP llama.cpp's UGM reading of the same flags (no prefix for text of spaces).
    O(n). Capacity: ``out`` >= 3 * n + 3, ``out_align`` one more.
    """
    remove_extra = (flags & WS_REMOVE_EXTRA) != 0
    dummy = (flags & WS_DUMMY_PREFIX) != 0
    escape = (flags & WS_ESCAPE) != 0
    suffix = (flags & WS_SUFFIX) != 0
    llamacpp = (flags & WS_LLAMACPP) != 0
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
        # nothing but space units left; sentencepiece's leading skip, though, stops at a deleted unit, so
        # to it such text is not empty: it gets its dummy prefix, removed again only by the trailing
        # trim (remove_extra with the prefix in front)
        if (flags & WS_DELETED_UNIT) != 0 and dummy and (suffix or not remove_extra) and not llamacpp:
            m = _put_space(out, out_align, 0, align[n], escape)
            out_align[m] = align[n]
            return m
        out_align[0] = align[n]
        return 0
    m = 0
    if dummy and not suffix and not (llamacpp and _only_spaces(buf, i, n)):
        m = _put_space(out, out_align, 0, align[i], escape)
    is_prev_space = remove_extra
    while i < n:
        if not is_prev_space:
            # no rule applies to a byte other than " ", nor to a " " that is a unit of its own and not
            # followed by another (it is escaped, and the next unit has no leading space to drop): these
            # are copied with their alignment (a unit's bytes share its align) in one loop; anything
            # else goes through the unit-by-unit rules below, from the start of its unit
            seg = i
            while i < n:
                b = buf[i]
                if b != 32:
                    out[m] = b
                    out_align[m] = align[i]
                    m += 1
                    i += 1
                    continue
                if i + 1 < n and align[i + 1] != align[i] and (i == seg or align[i - 1] != align[i]) and \
                        (not remove_extra or buf[i + 1] != 32):
                    m = _put_space(out, out_align, m, align[i], escape)
                    i += 1
                    continue
                # back to the start of the unit holding this " " (its bytes so far were copied 1:1)
                u = i
                while u > seg and align[u - 1] == align[i]:
                    u -= 1
                m -= i - u
                i = u
                break
            if i >= n:
                break
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
                    m = _put_space(out, out_align, m, unit_pos, True)
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
        m = _put_space(out, out_align, m, consumed, escape)
    out_align[m] = consumed
    return m


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def _only_spaces(buf, i, n):
    """Whether ``buf[i:n]`` holds no byte but " "."""
    for k in range(i, n):
        if buf[k] != 32:
            return False
    return True


@njit(cache=True, nogil=True, _nrt=False)
def sentencepiece_whitespace_bytes(buf, s, e, flags, out):
    """:func:`sentencepiece_whitespace` for text without a charsmap (every byte its own unit) and
    without the alignment: leading spaces skipped, dummy prefix, runs of spaces collapsed to one,
    " " -> U+2581, trailing ones trimmed. Writes ``out`` from 0 and returns its length; the same bytes
    as the general pass on ``buf[s:e]`` with the identity alignment, in one branch-light loop (the
    fused SentencePiece-BPE kernel reads no alignment). O(e - s). Capacity: ``out`` >= 3 * (e - s) + 3.
    """
    remove_extra = (flags & WS_REMOVE_EXTRA) != 0
    escape = (flags & WS_ESCAPE) != 0
    dummy = (flags & WS_DUMMY_PREFIX) != 0
    suffix = (flags & WS_SUFFIX) != 0
    i = s
    if remove_extra:
        while i < e and buf[i] == 32:
            i += 1
    if i >= e:
        return 0
    m = 0
    if dummy and not suffix:
        m = _put_space_bytes(out, 0, escape)
    prev_space = False  # after a space, with remove_extra: the next space is dropped
    out_at = data_address(out)
    while i < e:
        if buf[i] != 32:
            # a run of other bytes, eight at a time up to its first space: a branch per word, not per
            # byte (a space every ~6 bytes of English mispredicts a byte loop: 570 -> 1150 MB/s on new
            # text). Each word is stored whole: out has room, as m <= 3 (i - s) + 3 and it holds
            # 3 (e - s) + 3 bytes with e >= i + 8
            while i + 8 <= e:
                w = load_word(buf, i, 8)
                store_i64_at(out_at + m, np.int64(w))
                spaces = byte_hits(w, _SPACES)
                if spaces == 0:
                    i += 8
                    m += 8
                else:
                    k = np.int64(trailing_zeros(spaces) >> 3)
                    i += k
                    m += k
                    break
            while i < e and buf[i] != 32:
                out[m] = buf[i]
                m += 1
                i += 1
            prev_space = False
        else:
            i += 1
            if not prev_space:
                m = _put_space_bytes(out, m, escape)
                prev_space = remove_extra
    if remove_extra:
        if escape:
            while m >= 3 and out[m - 3] == 0xE2 and out[m - 2] == 0x96 and out[m - 1] == 0x81:
                m -= 3
        else:
            while m >= 1 and out[m - 1] == 32:
                m -= 1
    if dummy and suffix:
        m = _put_space_bytes(out, m, escape)
    return m


_SPACES = BYTE_ONES * np.uint64(0x20)


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def _put_space_bytes(out, m, escape):
    """:func:`_put_space` without the alignment."""
    if escape:
        out[m] = 0xE2
        out[m + 1] = 0x96
        out[m + 2] = 0x81
        return m + 3
    out[m] = 32
    return m + 1
