"""llama.cpp's hand-written text splitters for the GPT-2 and Llama 3 patterns, as kernels.

llama.cpp does not run those two patterns as regexes: ``unicode_regex_split_custom_gpt2`` and ``_llama3``
walk the code points, classified by its own Unicode tables, and their pieces differ from a regex
engine's on some text. :func:`custom_split` mirrors them. The staged llama.cpp pre-tokenizer
(:class:`tokjit.pipeline.llamacpp.LlamaCppRegexSplit`) and the fused byte-level BPE kernel
(:mod:`tokjit.kernels.fused`, for a GGUF vocabulary whose pre type is one of these splitters) both
call it, with the code point flags of :func:`tokjit.pipeline.llamacpp.cpt_flags`.
"""

from __future__ import annotations

import numpy as np
from numba import njit

# category codes of data/llamacpp_unicode.npz (scripts/gen_llamacpp_unicode.py)
UNDEF, NUMBER, LETTER, SEPARATOR, MARK, PUNCT, SYMBOL, CONTROL = range(8)
WS_BIT = 0x80
CAT_MASK = 0x7F


# --------------------------------------------------------------------------------------------------
# UTF-8 helpers shared by the kernels
# --------------------------------------------------------------------------------------------------

@njit(cache=True, nogil=True, _nrt=False)
def decode_utf8(buf, start, end, cps, offs):
    """Code points of ``buf[start:end]`` into ``cps``; ``offs[i]`` = byte offset of code point i,
    ``offs[n] = end``. Returns n. A malformed byte becomes U+FFFD (one per byte, like llama.cpp)."""
    n = 0
    i = start
    while i < end:
        b = np.int64(buf[i])
        offs[n] = i
        if b < 0x80:
            cps[n] = b
            i += 1
        else:
            if b >= 0xF0:
                k = 3
                cp = b & 0x07
            elif b >= 0xE0:
                k = 2
                cp = b & 0x0F
            elif b >= 0xC0:
                k = 1
                cp = b & 0x1F
            else:
                k = -1
                cp = 0
            ok = k > 0 and i + k < end + 1 and b < 0xF8
            if ok:
                for j in range(1, k + 1):
                    c = np.int64(buf[i + j])
                    if (c & 0xC0) != 0x80:
                        ok = False
                        break
                    cp = (cp << 6) | (c & 0x3F)
            if ok:
                cps[n] = cp
                i += k + 1
            else:
                cps[n] = 0xFFFD
                i += 1
        n += 1
    offs[n] = end
    return n


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def _flag_at(cps, flags, pos, n):
    """Flags of code point ``pos`` of the piece, -1 outside it (llama.cpp's empty flags)."""
    if pos < 0 or pos >= n:
        return -1
    cp = cps[pos]
    if cp >= 0x110000:
        return UNDEF
    return np.int64(flags[cp])


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def _is_cat(f, cat):
    return f >= 0 and (f & CAT_MASK) == cat


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def _is_ws(f):
    return f >= 0 and (f & WS_BIT) != 0


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def _is_other(f):
    """``[^\\s\\p{L}\\p{N}]`` as llama.cpp's splitters test it: any in-range code point that is not
    whitespace, letter or number (unassigned code points included)."""
    return f >= 0 and (f & WS_BIT) == 0 and (f & CAT_MASK) != LETTER and (f & CAT_MASK) != NUMBER


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def _ascii_lower(c):
    if 65 <= c <= 90:
        return c + 32
    return c


@njit(cache=True, nogil=True, _nrt=False)
def custom_split(buf, starts, ends, n_pieces, flags, kind, cps, offs, out_starts, out_ends):
    """llama.cpp's hand-written splitters for the GPT-2 (kind 0) and Llama 3 (kind 1) patterns.

    Mirrors ``unicode_regex_split_custom_gpt2`` / ``_llama3``: one left-to-right pass per piece over
    code points classified by the Unicode 15.1 flags; each piece is split on its own (lookaheads
    stop at its end). ``cps``/``offs`` are scratch (len(buf) + 1). Returns the number of sub-pieces.
    O(bytes).
    """
    n_out = 0
    for p in range(n_pieces):
        n = decode_utf8(buf, starts[p], ends[p], cps, offs)
        prev = 0
        pos = 0
        while pos < n:
            cpt = cps[pos]
            f = _flag_at(cps, flags, pos, n)
            new_pos = -1
            # 's|'t|'re|'ve|'m|'ll|'d (case-insensitive for llama3)
            if cpt == 39 and pos + 1 < n:
                nx = cps[pos + 1]
                if kind == 1:
                    nx = _ascii_lower(nx)
                if nx == 115 or nx == 116 or nx == 109 or nx == 100:
                    new_pos = pos + 2
                elif pos + 2 < n:
                    nn = cps[pos + 2]
                    if kind == 1:
                        nn = _ascii_lower(nn)
                    if (nx == 114 and nn == 101) or (nx == 118 and nn == 101) or (nx == 108 and nn == 108):
                        new_pos = pos + 3
            if new_pos < 0 and kind == 0:
                f2 = _flag_at(cps, flags, pos + 1, n) if cpt == 32 else f
                if _is_cat(f2, LETTER):
                    q = pos + (1 if cpt == 32 else 0)
                    while _is_cat(_flag_at(cps, flags, q, n), LETTER):
                        q += 1
                    new_pos = q
                elif _is_cat(f2, NUMBER):
                    q = pos + (1 if cpt == 32 else 0)
                    while _is_cat(_flag_at(cps, flags, q, n), NUMBER):
                        q += 1
                    new_pos = q
                elif _is_other(f2):
                    q = pos + (1 if cpt == 32 else 0)
                    while _is_other(_flag_at(cps, flags, q, n)):
                        q += 1
                    new_pos = q
            elif new_pos < 0:
                # [^\r\n\p{L}\p{N}]?\p{L}+
                if not (cpt == 13 or cpt == 10 or _is_cat(f, NUMBER)):
                    if _is_cat(f, LETTER) or _is_cat(_flag_at(cps, flags, pos + 1, n), LETTER):
                        q = pos + 1
                        while _is_cat(_flag_at(cps, flags, q, n), LETTER):
                            q += 1
                        new_pos = q
                # \p{N}{1,3}
                if new_pos < 0 and _is_cat(f, NUMBER):
                    q = pos
                    ini = pos
                    while _is_cat(_flag_at(cps, flags, q, n), NUMBER):
                        q += 1
                        if q - ini >= 3:
                            out_starts[n_out] = offs[prev]
                            out_ends[n_out] = offs[q]
                            n_out += 1
                            prev = q
                            ini = q
                    new_pos = q
                #  ?[^\s\p{L}\p{N}]+[\r\n]*  (llama.cpp tests the current code point's flags for "any")
                if new_pos < 0:
                    f2 = _flag_at(cps, flags, pos + 1, n) if cpt == 32 else f
                    if f >= 0 and f2 >= 0 and (f2 & WS_BIT) == 0 and (f2 & CAT_MASK) != LETTER \
                            and (f2 & CAT_MASK) != NUMBER:
                        q = pos + (1 if cpt == 32 else 0)
                        while _is_other(_flag_at(cps, flags, q, n)):
                            q += 1
                        while q < n and (cps[q] == 13 or cps[q] == 10):
                            q += 1
                        new_pos = q
            if new_pos < 0:
                num_ws = 0
                last_rn = 0
                while _is_ws(_flag_at(cps, flags, pos + num_ws, n)):
                    c2 = cps[pos + num_ws]
                    if kind == 1 and (c2 == 13 or c2 == 10):
                        last_rn = pos + num_ws + 1
                    num_ws += 1
                if last_rn > 0:  # \s*[\r\n]+
                    new_pos = last_rn
                elif num_ws > 1 and pos + num_ws < n:  # \s+(?!\S)
                    new_pos = pos + num_ws - 1
                elif num_ws > 0:  # \s+
                    new_pos = pos + num_ws
                else:
                    new_pos = pos + 1
            if new_pos > prev:
                out_starts[n_out] = offs[prev]
                out_ends[n_out] = offs[new_pos]
                n_out += 1
                prev = new_pos
            pos = new_pos
    return n_out
