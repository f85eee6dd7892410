"""llama.cpp's pre-tokenizer steps for GGUF vocabularies, as kernels.

llama.cpp does not run the GPT-2 and Llama 3 patterns as regexes: ``unicode_regex_split_custom_gpt2``
and ``_llama3`` walk the code points, classified by its own Unicode tables, and their pieces differ from
a regex engine's on some text; :func:`custom_split` mirrors them. Other patterns run in ``std::regex``
on a copy of the text llama.cpp makes first (:func:`build_view`: non-ASCII whitespace as ``\\v``, and
with a pattern that names categories every other non-ASCII code point as its category's
placeholder); the matches and the gaps between them are the pieces (:func:`isolate_view_matches`).
The staged pre-tokenizer (:class:`tokjit.pipeline.llamacpp.LlamaCppRegexSplit`) and the fused
byte-level BPE kernel (:mod:`tokjit.kernels.fused`, through :func:`llamacpp_pieces`: any sequence of
patterns and splitters, the PLAN_* steps) both run these, with the code point flags of
:func:`tokjit.pipeline.llamacpp.cpt_flags`.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from tokjit.kernels.regex_vm import find_step_matches
from tokjit.kernels.structs import borrow

# category codes of data/llamacpp_unicode.npz (scripts/gen_llamacpp_unicode.py)
UNDEF, NUMBER, LETTER, SEPARATOR, MARK, PUNCT, SYMBOL, CONTROL = range(8)
WS_BIT = 0x80
CAT_MASK = 0x7F
# llama.cpp's collapsed text for std::regex (k_ucat_cpt): each non-ASCII code point becomes the placeholder
# of its category (0xD0: any category without one), by category code
PLACEHOLDER_OF_CATEGORY = (0xD0, 0xD1, 0xD2, 0xD0, 0xD4, 0xD3, 0xD5, 0xD0)

# The steps of a llama.cpp pre-tokenizer as the fused byte-level BPE kernel runs them (its regex's
# shape SHAPE_LLAMACPP): a plan of up to PLAN_STEPS steps, PLAN_BITS each in the shape flags, the first
# lowest; each std::regex step takes the next program of the regex structure (its ``steps`` rows)
PLAN_BITS = 4
PLAN_STEPS = 15
PLAN_END = 0
PLAN_VIEW_REGEX = 1  # a std::regex pattern on the view of the text
PLAN_VIEW_REGEX_COLLAPSED = 2  # the same on the collapsed view (the pattern names categories)
PLAN_GPT2 = 3  # llama.cpp's hand-written GPT-2 splitter
PLAN_LLAMA3 = 4  # its Llama 3 splitter
ERR_VIEW = -4  # llamacpp_pieces: the segment is not valid UTF-8 (the staged path takes it)


def plan_word(kinds) -> int:
    """The shape flags of a plan: ``kinds`` (PLAN_* values) in order, at most PLAN_STEPS."""
    if not 1 <= len(kinds) <= PLAN_STEPS:
        raise ValueError(f"a plan has 1 to {PLAN_STEPS} steps, not {len(kinds)}")
    word = 0
    for k, kind in enumerate(kinds):
        word |= int(kind) << (PLAN_BITS * k)
    return word


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
            ok = k > 0 and i + k < end and b < 0xF8  # its k continuation bytes lie before end
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


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def number_chunks(cps, flags, pos, n, prev, offs, out_starts, out_ends, n_out):
    """``\\p{N}{1,3}`` as llama.cpp's splitters take it: the run of numbers from code point ``pos``,
    where every third one ends a piece that starts at ``prev`` (the pending piece's first code point),
    written to ``out_*`` as byte offsets (``offs``). Returns (the run's end, the pending piece's start,
    the piece count)."""
    first = pos
    while _is_cat(_flag_at(cps, flags, pos, n), NUMBER):
        pos += 1
        if pos - first >= 3:
            out_starts[n_out] = offs[prev]
            out_ends[n_out] = offs[pos]
            n_out += 1
            prev = pos
            first = pos
    return pos, prev, n_out


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
                    new_pos, prev, n_out = number_chunks(cps, flags, pos, n, prev, offs, out_starts, out_ends, n_out)
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


@njit(cache=True, nogil=True, _nrt=False)
def build_view(buf, n_buf, flags, collapse, view, view_of_orig, orig_of_view, strict):
    """Copy of ``buf`` as llama.cpp's std::regex sees it; returns its length in bytes.

    Code points are read as llama.cpp reads them (:func:`decode_utf8`: a malformed byte is U+FFFD on
    its own; so is a 4-byte form past U+10FFFF). Every non-ASCII whitespace code point becomes
    ``\\v``. With ``collapse`` every other non-ASCII code point becomes its category's placeholder
    (PLACEHOLDER_OF_CATEGORY: U+00D0..U+00D5, two UTF-8 bytes), else it is copied, U+FFFD as its three
    bytes: the regex engine reads valid UTF-8 only. ``view_of_orig[i]`` maps original byte offsets
    (code point starts and the end) to view offsets, ``orig_of_view`` the other way. O(bytes). The view needs at most 3 * len(buf) bytes
    (len(buf) for valid UTF-8), ``orig_of_view`` one more entry; returns -1 when they hold fewer, and
    with ``strict`` -2 at a malformed byte (the fused kernel leaves such text to the staged pipeline,
    whose BPE of the raw bytes it would not match).
    """
    room = min(view.shape[0], orig_of_view.shape[0] - 1)
    i = 0
    v = 0
    while i < n_buf:
        b = np.int64(buf[i])
        if b < 0x80:
            k = 1
            cp = b
        else:
            k = 0  # malformed unless a lead byte is followed by its continuation bytes
            if 0xC0 <= b < 0xF8:
                k = 2 if b < 0xE0 else 3 if b < 0xF0 else 4
                cp = b & (0x1F if k == 2 else 0x0F if k == 3 else 0x07)
                if i + k > n_buf:
                    k = 0
                else:
                    for j in range(1, k):
                        c = np.int64(buf[i + j])
                        if (c & 0xC0) != 0x80:
                            k = 0
                            break
                        cp = (cp << 6) | (c & 0x3F)
            if k == 0 or cp >= 0x110000:
                if strict:
                    return -2
                k = max(k, 1)
                cp = 0xFFFD
                b = 0  # written as U+FFFD's bytes below
        if v + (3 if b == 0 else k) > room:  # only U+FFFD for a malformed byte writes more than it reads
            return -1
        view_of_orig[i] = v
        for j in range(1, k):
            view_of_orig[i + j] = v  # continuation bytes are never piece bounds
        if cp < 0x80:
            view[v] = cp  # an overlong form is the ASCII character to std::regex
            orig_of_view[v] = i
            v += 1
        else:
            fl = np.int64(flags[cp])
            if (fl & WS_BIT) != 0:
                view[v] = 0x0B
                orig_of_view[v] = i
                v += 1
            elif collapse:
                ph = PLACEHOLDER_OF_CATEGORY[fl & CAT_MASK]
                view[v] = 0xC0 | (ph >> 6)
                view[v + 1] = 0x80 | (ph & 0x3F)
                orig_of_view[v] = i
                orig_of_view[v + 1] = i
                v += 2
            elif b == 0:
                view[v] = 0xEF
                view[v + 1] = 0xBF
                view[v + 2] = 0xBD
                for j in range(3):
                    orig_of_view[v + j] = i
                v += 3
            else:
                for j in range(k):
                    view[v + j] = buf[i + j]
                    orig_of_view[v + j] = i
                v += k
        i += k
    view_of_orig[n_buf] = v
    orig_of_view[v] = n_buf
    return v


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def isolate_view_matches(start, end, m_starts, m_ends, n_matches, orig_of_view, shift, out_starts, out_ends, n_out):
    """The pieces of ``[start, end)`` (original byte offsets, written plus ``shift``) after a regex ran
    on its view: each match, mapped back through ``orig_of_view``, and each gap between matches, as
    llama.cpp's ``unicode_regex_split_stl`` keeps both; appended from ``out_*[n_out]``. Returns the new
    count. O(n_matches)."""
    pos = start
    for k in range(n_matches):
        ms = orig_of_view[m_starts[k]]
        me = orig_of_view[m_ends[k]]
        if ms > pos:
            out_starts[n_out] = pos + shift
            out_ends[n_out] = ms + shift
            n_out += 1
        if me > ms:
            out_starts[n_out] = ms + shift
            out_ends[n_out] = me + shift
            n_out += 1
        pos = me
    if end > pos:
        out_starts[n_out] = pos + shift
        out_ends[n_out] = end + shift
        n_out += 1
    return n_out


@njit(cache=True, nogil=True, _nrt=False)
def llamacpp_pieces(rx, buf, start, end, params, match_starts, match_ends, stack, tok_starts, tok_ends, piece_starts,
                    piece_ends):
    """The pieces of ``buf[start:end]`` after llama.cpp's pre-tokenizer steps (``unicode_regex_split``:
    each step splits every piece of the step before), in ``piece_*`` from 0; returns their number, or a
    negative :func:`~tokjit.kernels.regex_vm.find_matches` code or ERR_VIEW (text that is not UTF-8):
    the caller takes the staged path.

    ``rx`` is the REGEX structure: its shape flags hold the plan (PLAN_*), its ``steps`` rows the
    programs of the std::regex steps in order, its roles the code point flags. A std::regex step runs
    on the view of the segment (:func:`build_view`, built again when the kind of view changes or a
    splitter used its scratch), on each piece's span alone, and keeps matches and gaps
    (:func:`isolate_view_matches`); a splitter step is :func:`custom_split`. Scratch: the pieces of
    one step and the next in the two halves of ``piece_*``, the view in ``match_ends``' bytes, one
    piece's matches in the halves of ``match_starts``, the offset maps (and the splitters' code
    points) in ``tok_*``; ``params`` as find_matches takes them (the program word set per step).
    O(bytes x steps x pattern cost)."""
    plan = borrow(rx, "shape_flags")
    roles = borrow(rx, "roles")
    half = piece_starts.shape[0] // 2
    m_half = match_starts.shape[0] // 2
    m_starts, m_ends = match_starts[:m_half], match_starts[m_half:]
    view = match_ends.view(np.uint8)
    piece_starts[0] = start
    piece_ends[0] = end
    n = 1
    at = 0  # where the current pieces start in piece_*: 0 or half
    view_kind = PLAN_END  # the view in ``view`` (PLAN_VIEW_REGEX or _COLLAPSED), none yet
    n_view = 0
    k_prog = 0
    for k in range(PLAN_STEPS):
        kind = (plan >> (PLAN_BITS * k)) & ((1 << PLAN_BITS) - 1)
        if kind == PLAN_END:
            break
        nxt = half - at
        cur_s, cur_e = piece_starts[at:at + half], piece_ends[at:at + half]
        out_s, out_e = piece_starts[nxt:nxt + half], piece_ends[nxt:nxt + half]
        if kind == PLAN_GPT2 or kind == PLAN_LLAMA3:
            n = custom_split(buf, cur_s, cur_e, n, roles, np.int64(1 if kind == PLAN_LLAMA3 else 0), tok_starts,
                             tok_ends, out_s, out_e)
            view_kind = PLAN_END  # tok_* were its scratch
        else:
            if view_kind != kind:
                n_view = build_view(buf[start:end], end - start, roles, kind == PLAN_VIEW_REGEX_COLLAPSED, view,
                                    tok_starts, tok_ends, True)
                if n_view < 0:
                    return ERR_VIEW
                view_kind = kind
            n_next = 0
            for p in range(n):
                s, e = cur_s[p] - start, cur_e[p] - start
                n_m = find_step_matches(rx, k_prog, view, tok_starts[s], tok_starts[e], params, m_starts, m_ends,
                                        stack)
                if n_m < 0:
                    return n_m
                n_next = isolate_view_matches(s, e, m_starts, m_ends, n_m, tok_ends, start, out_s, out_e, n_next)
            n = n_next
            k_prog += 1
        at = nxt
    if at != 0:
        for p in range(n):
            piece_starts[p] = piece_starts[at + p]
            piece_ends[p] = piece_ends[at + p]
    return n
