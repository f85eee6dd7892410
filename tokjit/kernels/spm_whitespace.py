"""SentencePiece's whitespace rules (``normalizer.cc``) as one pass over charsmap-normalized bytes.

See :mod:`tokjit.pipeline.sentencepiece_normalizer` for the rules and how unit boundaries are found.
"""

from __future__ import annotations

from numba import njit

WS_REMOVE_EXTRA = 1
WS_DUMMY_PREFIX = 2
WS_ESCAPE = 4
WS_SUFFIX = 8


@njit(cache=True, nogil=True, _nrt=False)
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
        if not is_prev_space:
            # up to the unit holding the next " ", no rule applies: bytes and their alignment are
            # copied as they are (a unit's bytes share its align), in a loop with no unit bookkeeping
            k = i
            while k < n and buf[k] != 32:
                k += 1
            if k < n:
                while k > i and align[k - 1] == align[k]:
                    k -= 1
            d = m - i
            for q in range(i, k):
                out[q + d] = buf[q]
                out_align[q + d] = align[q]
            m += k - i
            i = k
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
