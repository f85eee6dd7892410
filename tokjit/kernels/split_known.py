"""Straight-line scanners for the split patterns the world uses, instead of the backtracking VM.

Byte-level BPE tokenizers nearly all split with one of two pattern shapes:

* ``SHAPE_WORDS`` -- GPT-2 and cl100k-style (Llama 3, GPT-3.5/4, Qwen 2): contractions, an optional
  one-character prefix and a letter run, a digit run of at most ``max_digits``, an optional space and a run
  of other characters (optionally followed by line breaks), then whitespace rules;
* ``SHAPE_CASED`` -- o200k-style (GPT-4o): letter runs split by case, with contraction suffixes.

:mod:`tokjit.regex.known` recognizes a pattern as one of them (its exact text; anything else runs in
the VM) and builds ``roles``, a per-code-point table of the classes the pattern names, evaluated from the
pattern's own compiled classes, so a scanner sees Unicode exactly as the VM would. Each alternative
of the pattern becomes a direct test at the current position, including what the VM's backtracking
would do (a letter run giving back its last character to a lookahead, a case run giving back a
character that is in both case sets). O(n) over the segment.

Mirrors ``find_matches`` for these patterns: same successive matches, same return convention; a
case-insensitive contraction whose letter is a non-ASCII character that case-folds to an ASCII one
(U+017F for 's') is left to the VM (``DEFER``).
"""

from __future__ import annotations

import numpy as np
from numba import njit
from numba.cpython.unsafe.numbers import trailing_zeros

from tokjit.kernels.memops import (BYTE_ONES, HIGH_BITS, LITTLE_ENDIAN, LOW7_BITS, ascii_classes64, bytes_in,
                                   load_word, nonneg)
from tokjit.kernels.utf8 import decode_at

SHAPE_VM = 0
SHAPE_WORDS = 1
SHAPE_CASED = 2
# not a pattern this module scans: llama.cpp's hand-written GPT-2 / Llama 3 splitter (kernels.llamacpp_split),
# its kind in the regex's shape flags and its code point flags in place of the roles
SHAPE_LLAMACPP = 3
# DeepSeek-V3's word split (its third, after digit runs and CJK runs are split off): an ASCII punctuation
# character before ASCII letters, an optional prefix and a run of letters and marks, an optional space
# and a run of punctuation and symbols with the line breaks after it, then the whitespace rules
SHAPE_DEEPSEEK = 4

# roles[cp] bits
ROLE_LETTER = 1  # \p{L}
ROLE_NUMBER = 2  # \p{N}
ROLE_SPACE = 4  # \s
ROLE_UPPER = 8  # [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]
ROLE_LOWER = 16  # [\p{Ll}\p{Lm}\p{Lo}\p{M}]
ROLE_FOLDS_TO_CONTRACTION = 32  # non-ASCII, case-folds to a contraction letter (U+017F ~ s)
ROLE_MARK = 64  # \p{M}
ROLE_PUNCT_SYM = 128  # [\p{P}\p{S}]

# flags of SHAPE_WORDS / SHAPE_CASED
CONTRACTIONS_ANY_CASE = 1  # (?i:'s|...) rather than 's|...
PREFIX_ANY = 2  # [^\r\n\p{L}\p{N}]?\p{L}+ rather than ' ?\p{L}+'
NUMBER_AFTER_SPACE = 4  # ' ?\p{N}+'
OTHER_THEN_BREAKS = 8  # ' ?[^\s\p{L}\p{N}]+[\r\n]*'
OTHER_THEN_BREAKS_SLASH = 16  # ... [\r\n/]*
SPACE_TO_END = 32  # \s++$ before the other whitespace rules
SPACE_TO_BREAK = 64  # \s*[\r\n]+ (or \s*[\r\n])
BLOCK_ASCII = 128  # (recognize() sets it when ``roles`` agree on ASCII) plain ASCII runs go 64 bytes at a time

DEFER = -2  # this segment needs the VM
OUT_FULL = -1
NOT_TILED = -3  # (asked for tiling matches only) a character no alternative matches lies between two

_APOSTROPHE = 39


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def _role_at(roles, buf, p, end):
    """(roles bits, code point, length) at ``p``; (0, -1, 0) at ``end``."""
    if p >= end:
        return 0, np.int64(-1), 0
    b0 = buf[nonneg(p)]
    if b0 < 0x80:
        return np.int64(roles[nonneg(b0)]), np.int64(b0), 1
    cp, ln = decode_at(buf, p)
    return np.int64(roles[nonneg(cp)]), cp, ln


_CASE_BIT = np.uint64(0x2020202020202020)
# ASCII members of the roles with a word-at-a-time run (recognize() checks them against ``roles``)
ASCII_RUN_ROLES = {ROLE_LETTER: "A-Za-z", ROLE_NUMBER: "0-9", ROLE_UPPER: "A-Z", ROLE_LOWER: "a-z"}


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def _ascii_members(w, bits):
    """0x80 in each byte of ``w`` that is an ASCII member of role ``bits`` (a key of ASCII_RUN_ROLES)."""
    w7 = w & LOW7_BITS
    if bits == ROLE_LOWER:
        m = bytes_in(w7, 0x61, 0x7A)
    elif bits == ROLE_UPPER:
        m = bytes_in(w7, 0x41, 0x5A)
    elif bits == ROLE_NUMBER:
        m = bytes_in(w7, 0x30, 0x39)
    else:
        m = bytes_in(w7 | _CASE_BIT, 0x61, 0x7A)
    return m & ~w


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def _ascii_run(buf, p, end, bits):
    """End of the run of ASCII members of ``bits`` from ``p``, eight bytes per step: the first byte
    that is not one is found by counting trailing zeros, not by a branch per byte."""
    while p < end:
        m = end - p
        if m > 8:
            m = 8
        misses = ~_ascii_members(load_word(buf, p, m), bits) & HIGH_BITS
        if misses == 0:
            p += 8
        else:
            # bytes past ``end`` load as 0, never a member: the run stops at ``end`` at the latest
            return p + np.int64(trailing_zeros(misses) >> 3)
    return p


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def _run(roles, buf, p, end, bits):
    """End of the run of code points from ``p`` whose roles include any of ``bits``. A run that starts
    in ASCII goes eight bytes per step (:func:`_ascii_run`) for the roles that allow it."""
    if (bits == ROLE_LETTER or bits == ROLE_NUMBER or bits == ROLE_UPPER or bits == ROLE_LOWER) \
            and p < end and buf[nonneg(p)] < 0x80:
        p = _ascii_run(buf, p, end, bits)
        if p >= end or buf[nonneg(p)] < 0x80:
            return p
    while p < end:
        r, _, ln = _role_at(roles, buf, p, end)
        if (r & bits) == 0:
            break
        p += ln
    return p


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def _digits(roles, buf, p, end, max_digits):
    """End of ``\\p{N}{1,max_digits}`` from ``p`` (a digit; ``max_digits`` 0 = unbounded)."""
    count = 0
    while p < end and (max_digits == 0 or count < max_digits):
        r, _, ln = _role_at(roles, buf, p, end)
        if (r & ROLE_NUMBER) == 0:
            break
        p += ln
        count += 1
    return p


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def _non_ascii_folds(roles, buf, p, any_case):
    """Whether the non-ASCII character at ``p`` may match a contraction letter: only under ``(?i)``,
    and only a character whose case-folding orbit holds one (the VM decides those)."""
    if not any_case:
        return False
    cp, _ = decode_at(buf, p)
    return (roles[nonneg(cp)] & ROLE_FOLDS_TO_CONTRACTION) != 0


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def _contraction(roles, buf, p, end, any_case):
    """End of a contraction ('s 't 're 've 'm 'll 'd) at ``p``, ``p`` when there is none, or DEFER."""
    if p >= end or buf[nonneg(p)] != _APOSTROPHE or p + 1 >= end:
        return p
    c1 = np.int64(buf[nonneg(p + 1)])
    if c1 >= 0x80:
        return DEFER if _non_ascii_folds(roles, buf, p + 1, any_case) else p
    if any_case and 65 <= c1 <= 90:
        c1 += 32
    if c1 == 115 or c1 == 116 or c1 == 109 or c1 == 100:  # s t m d
        return p + 2
    if c1 != 114 and c1 != 118 and c1 != 108:  # r v l
        return p
    if p + 2 >= end:
        return p
    c2 = np.int64(buf[nonneg(p + 2)])
    if c2 >= 0x80:
        return DEFER if _non_ascii_folds(roles, buf, p + 2, any_case) else p
    if any_case and 65 <= c2 <= 90:
        c2 += 32
    if (c1 == 114 and c2 == 101) or (c1 == 118 and c2 == 101) or (c1 == 108 and c2 == 108):
        return p + 3
    return p


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def _spaces(roles, buf, i, end, flags):
    """The whitespace alternatives at ``i`` (a whitespace character): ``\\s++$``, ``\\s*[\\r\\n]+``,
    ``\\s+(?!\\S)``, ``\\s+``, in that order."""
    run_end = _run(roles, buf, i, end, ROLE_SPACE)
    if run_end == end and (flags & SPACE_TO_END) != 0:
        return end
    if (flags & SPACE_TO_BREAK) != 0:
        k = run_end - 1
        while k >= i:
            b = buf[nonneg(k)]
            if b == 10 or b == 13:
                return k + 1  # \s* gives back up to the last line break of the run
            k -= 1
    if run_end == end:
        return end  # (?!\S) holds at the end of the segment
    last = run_end - 1
    while last > i and (buf[nonneg(last)] & 0xC0) == 0x80:
        last -= 1
    if last > i:
        return last  # \s+ gives back its last character so that (?!\S) holds
    return run_end


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def _other_run(roles, buf, i, end, flags):
    """`` ?[^\\s\\p{L}\\p{N}]+`` (+ line breaks, + '/') at ``i``, or ``i`` when it does not match."""
    other = ROLE_LETTER | ROLE_NUMBER | ROLE_SPACE
    p = i
    if buf[nonneg(p)] == 32:
        r1, _, _ = _role_at(roles, buf, p + 1, end)
        if p + 1 < end and (r1 & other) == 0:
            p += 1
    r0, _, _ = _role_at(roles, buf, p, end)
    if p >= end or (r0 & other) != 0:
        return i
    while p < end:
        r, _, ln = _role_at(roles, buf, p, end)
        if (r & other) != 0:
            break
        p += ln
    if (flags & (OTHER_THEN_BREAKS | OTHER_THEN_BREAKS_SLASH)) != 0:
        slash = (flags & OTHER_THEN_BREAKS_SLASH) != 0
        while p < end and (buf[nonneg(p)] == 10 or buf[nonneg(p)] == 13 or (slash and buf[nonneg(p)] == 47)):
            p += 1
    return p


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def _other_or_spaces(roles, buf, i, end, flags, r):
    """The last alternatives of both shapes at ``i`` (roles ``r``): a run of other characters, then the
    whitespace rules; ``i`` when neither matches."""
    j = _other_run(roles, buf, i, end, flags)
    if j != i:
        return j
    if (r & ROLE_SPACE) != 0:
        return _spaces(roles, buf, i, end, flags)
    return i


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def _words_at(roles, buf, i, end, flags, max_digits):
    """End of the SHAPE_WORDS match at ``i``; ``i`` when none matches; DEFER."""
    r, c, ln = _role_at(roles, buf, i, end)
    any_case = (flags & CONTRACTIONS_ANY_CASE) != 0
    if c == _APOSTROPHE:
        j = _contraction(roles, buf, i, end, any_case)
        if j != i:
            return j
    # letters, after an optional prefix
    if (r & ROLE_LETTER) != 0:
        return _run(roles, buf, i + ln, end, ROLE_LETTER)
    if (flags & PREFIX_ANY) != 0:
        prefix = c != 10 and c != 13 and (r & (ROLE_LETTER | ROLE_NUMBER)) == 0
    else:
        prefix = c == 32
    if prefix:
        r1, _, ln1 = _role_at(roles, buf, i + ln, end)
        if (r1 & ROLE_LETTER) != 0:
            return _run(roles, buf, i + ln + ln1, end, ROLE_LETTER)
    # digits
    p = i
    if (flags & NUMBER_AFTER_SPACE) != 0 and c == 32:
        r1, _, _ = _role_at(roles, buf, i + 1, end)
        if (r1 & ROLE_NUMBER) != 0:
            p = i + 1
    rn, _, _ = _role_at(roles, buf, p, end)
    if (rn & ROLE_NUMBER) != 0:
        return _digits(roles, buf, p, end, max_digits)
    return _other_or_spaces(roles, buf, i, end, flags, r)


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def _cased_core(roles, buf, p, end, lower_first):
    """The letter part of the two o200k word alternatives from ``p``: ``U*L+`` (``lower_first``) or
    ``U+L*``, where U / L are the upper / lower sets (both hold Lm, Lo and marks). End, or -1."""
    u_end = _run(roles, buf, p, end, ROLE_UPPER)
    w_end = _run(roles, buf, u_end, end, ROLE_LOWER)
    if not lower_first:
        return w_end if u_end > p else -1
    if w_end > u_end:
        return w_end
    # U* gives back characters until one of them starts L+ (it must be in both sets)
    k = u_end
    while k > p:
        k -= 1
        while k > p and (buf[nonneg(k)] & 0xC0) == 0x80:
            k -= 1
        rk, _, lnk = _role_at(roles, buf, k, end)
        if (rk & ROLE_LOWER) != 0:
            return k + lnk
    return -1


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def _cased_ascii_word(buf, i, end):
    """End of the o200k word match at ``i`` when all of it is ASCII, else -1 (the general path
    decides). Most pieces of English and code are such words; one 8-byte load decides most, longer
    runs go on eight bytes a step (:func:`_ascii_run`).

    In ASCII the upper and lower sets are disjoint, so ``[prefix]? U* L+`` is the prefix, every
    upper letter, then at least one lower letter, and ``U+ L*`` (tried when that fails) the prefix
    and the upper letters; the match is settled when the letters end at the segment's end or before
    an ASCII byte other than an apostrophe (a contraction may follow one; a non-ASCII character may
    be a letter or mark of either set)."""
    b = buf[nonneg(i)]
    if b >= 0x80:
        return -1
    q = i
    if not ((0x41 <= b <= 0x5A) or (0x61 <= b <= 0x7A)):
        if (0x30 <= b <= 0x39) or b == 10 or b == 13:
            return -1
        q = i + 1  # [^\r\n\p{L}\p{N}] taken as the prefix
    m = end - q
    if m <= 0:
        return -1
    if m > 8:
        m = 8
    w = load_word(buf, q, m)
    # bytes past m load as 0, which is no letter: a run stops there at the latest
    not_upper = ~_ascii_members(w, ROLE_UPPER) & HIGH_BITS
    if not_upper == 0:
        # eight upper letters (m is 8): the runs go on past the load
        run_end = _ascii_run(buf, _ascii_run(buf, q + 8, end, ROLE_UPPER), end, ROLE_LOWER)
    else:
        n_upper = np.int64(trailing_zeros(not_upper) >> 3)
        not_lower = (~_ascii_members(w, ROLE_LOWER) & HIGH_BITS) >> np.uint64(8 * n_upper)
        n_lower = 8 - n_upper if not_lower == 0 else np.int64(trailing_zeros(not_lower) >> 3)
        run_end = q + n_upper + n_lower
        if n_upper + n_lower == 0:
            return -1
        if n_upper + n_lower >= m and run_end < end:
            # the lower letters fill the load (a word of 8 letters or more, ~10% of English words)
            run_end = _ascii_run(buf, run_end, end, ROLE_LOWER)
    if run_end < end:
        t = buf[nonneg(run_end)]
        if t >= 0x80 or t == _APOSTROPHE:
            return -1
    return run_end


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def _cased_at(roles, buf, i, end, flags, max_digits):
    """End of the SHAPE_CASED (o200k) match at ``i``; ``i`` when none matches; DEFER."""
    j = _cased_ascii_word(buf, i, end)
    if j >= 0:
        return j
    r, c, ln = _role_at(roles, buf, i, end)
    any_case = (flags & CONTRACTIONS_ANY_CASE) != 0
    prefix = c != 10 and c != 13 and (r & (ROLE_LETTER | ROLE_NUMBER)) == 0
    # the four word alternatives in the pattern's order: U*L+ with / without the prefix, then U+L*
    # (written out: a loop over a tuple of flags costs ~2x per piece in numba)
    core = -1
    if prefix:
        core = _cased_core(roles, buf, i + ln, end, True)
    if core < 0 and (r & (ROLE_UPPER | ROLE_LOWER)) != 0:
        core = _cased_core(roles, buf, i, end, True)
    if core < 0 and prefix:
        core = _cased_core(roles, buf, i + ln, end, False)
    if core < 0 and (r & (ROLE_UPPER | ROLE_LOWER)) != 0:
        core = _cased_core(roles, buf, i, end, False)
    if core >= 0:
        return _contraction(roles, buf, core, end, any_case)
    if (r & ROLE_NUMBER) != 0:
        return _digits(roles, buf, i, end, max_digits)
    return _other_or_spaces(roles, buf, i, end, flags, r)


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def _letters_marks_run(roles, buf, p, end):
    """End of the run of ``[\\p{L}\\p{M}]`` from ``p``: ASCII letters eight bytes a step first (marks
    have no ASCII members), then a character at a time."""
    p = _ascii_run(buf, p, end, ROLE_LETTER)
    if p >= end or buf[nonneg(p)] < 0x80:
        return p
    return _run(roles, buf, p, end, ROLE_LETTER | ROLE_MARK)


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def _deepseek_at(roles, buf, i, end):
    """End of the SHAPE_DEEPSEEK match at ``i``; ``i`` when none matches. The alternatives in order:
    ``[<ASCII punctuation>][A-Za-z]+``; ``[^\\r\\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+`` (a mark is in both
    the prefix's set and the run's, so the run from it ends where the run after it does);
    `` ?[\\p{P}\\p{S}]+[\\r\\n]*``; then ``\\s*[\\r\\n]+``, ``\\s+(?!\\S)``, ``\\s+`` (:func:`_spaces`)."""
    r, c, ln = _role_at(roles, buf, i, end)
    word = ROLE_LETTER | ROLE_MARK
    if 0x21 <= c <= 0x7E and (r & (ROLE_LETTER | ROLE_NUMBER)) == 0 and i + 1 < end:
        b1 = buf[nonneg(i + 1)] | 0x20
        if 0x61 <= b1 <= 0x7A:
            return _ascii_run(buf, i + 1, end, ROLE_LETTER)
    if c != 10 and c != 13 and (r & (ROLE_LETTER | ROLE_PUNCT_SYM)) == 0:
        r1, _, ln1 = _role_at(roles, buf, i + ln, end)
        if (r1 & word) != 0:
            return _letters_marks_run(roles, buf, i + ln + ln1, end)
    if (r & word) != 0:
        return _letters_marks_run(roles, buf, i + ln, end)
    p = i
    if c == 32:
        r1, _, _ = _role_at(roles, buf, i + 1, end)
        if (r1 & ROLE_PUNCT_SYM) != 0:
            p = i + 1
            r = r1
    if (r & ROLE_PUNCT_SYM) != 0:
        q = _run(roles, buf, p, end, ROLE_PUNCT_SYM)
        while q < end and (buf[nonneg(q)] == 10 or buf[nonneg(q)] == 13):
            q += 1
        return q
    if (r & ROLE_SPACE) != 0:
        return _spaces(roles, buf, i, end, SPACE_TO_BREAK)
    return i


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def _ascii_other(roles, buf, i, end, flags):
    r"""End of the match at ``i`` when it can only be the "other characters" alternative (`` ?[^\s\p{L}
    \p{N}]+`` and its line breaks), decided from two ASCII bytes, else -1. It is when ``buf[i]`` is an
    ASCII "other" not followed by a letter (no word alternative of either shape finds a letter after
    it taken as the prefix, a contraction needs one, it is no digit), or a space followed by an ASCII
    "other" (the same, and no whitespace rule gets past the space). Punctuation is ~1 piece in 5 of
    English and code; the general path tries the word alternatives first."""
    b = buf[nonneg(i)]
    if b >= 0x80:
        return -1
    other = ROLE_LETTER | ROLE_NUMBER | ROLE_SPACE
    letter = ROLE_LETTER | ROLE_UPPER | ROLE_LOWER
    if i + 1 == end:
        return _other_run(roles, buf, i, end, flags) if (roles[nonneg(b)] & other) == 0 else -1
    nb = buf[nonneg(i + 1)]
    if nb >= 0x80:
        return -1
    if b == 32:
        if (roles[nonneg(nb)] & other) != 0:
            return -1
    elif (roles[nonneg(b)] & other) != 0 or (roles[nonneg(nb)] & letter) != 0:
        return -1
    return _other_run(roles, buf, i, end, flags)


# Block scanning. In ASCII text made only of "plain" bytes, where pieces start follows from each byte
# and its neighbours, for the words and cased shapes (SHAPE_DEEPSEEK splits plain bytes as the words
# shape does: see _block_pieces):
# * a letter run starts a piece (in SHAPE_CASED so does an upper letter after a lower one), unless the
#   byte before it is its one-character prefix (a space, or with PREFIX_ANY / SHAPE_CASED a punctuation
#   byte that itself starts a piece);
# * a punctuation run starts one unless a space precedes it (`` ?[^\s\p{L}\p{N}]+`` takes that space);
# * a whitespace run starts one. Where line breaks (\n, \r) are plain (patterns with ``\s*[\r\n]+``
#   and ``[^\s\p{L}\p{N}]+[\r\n]*``), the breaks right after punctuation belong to its piece, and a
#   run holding a break is one piece through its last break; the blanks (space, tab, \v, \f) after
#   that start one, unless the run reaches the end under ``\s++$``. The last blank of two or more that
#   something other than whitespace follows starts one (``\s+(?!\S)`` gives it back); a tab, \v or
#   \f is a word's prefix where any punctuation is, the space also where only it is;
# * where digits are plain (no `` ?\p{N}`` prefix), a digit run starts one, and so does every
#   ``max_digits``-th digit of it;
# * a contraction ('s 't 're 've 'm 'll 'd) after a word's letters (SHAPE_CASED) ends that word's
#   piece; where a piece starts at an apostrophe (SHAPE_WORDS) it is a piece of its own.
# Other controls, non-ASCII bytes and what the pattern leaves out above (digits, breaks; o200k's '/'
# after a break, which its ``[\r\n/]*`` may take) stop a block, and the per-piece path takes over
# there. Masks of 64 bytes replace a chain of dependent per-piece tests.
_MOVEMASK = np.uint64(0x0102040810204080)
BLOCK_BYTES = 64
_PLAIN_RETRY = 16  # after a block that found no piece, per-piece bytes before the next try ...
_PLAIN_RETRY_MAX = 1024  # ... doubled after each such block, up to this
_ALL = np.uint64(0xFFFFFFFFFFFFFFFF)


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def _gather(flags80):
    """The 0x80 flags of a word's bytes as an 8-bit mask, bit k for byte k."""
    return ((flags80 >> np.uint64(7)) * _MOVEMASK) >> np.uint64(56)


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def _low_bits(n):
    """A mask of the ``n`` (0..64) lowest bits."""
    return _ALL if n >= 64 else (np.uint64(1) << np.uint64(n)) - np.uint64(1)


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def _byte_classes(buf, i, avail):
    """:func:`~tokjit.kernels.memops.ascii_classes64` of ``buf[i:i + avail]`` (avail <= 64) where 64
    bytes are readable, else eight bytes a step, up to the word with the first hard stop."""
    if LITTLE_ENDIAN and i + 64 <= buf.shape[0]:
        return ascii_classes64(buf, i)
    letters = up = sp = bl = nl = dg = sl = ap = hard = np.uint64(0)
    k = 0
    while k < avail:
        m = avail - k
        if m > 8:
            m = 8
        w = load_word(buf, i + k, m)
        w7 = w & LOW7_BITS
        ascii = ~w & HIGH_BITS
        shift = np.uint64(k)
        letters |= _gather(bytes_in(w7 | _CASE_BIT, 0x61, 0x7A) & ascii) << shift
        up |= _gather(bytes_in(w7, 0x41, 0x5A) & ascii) << shift
        sp |= _gather(bytes_in(w7, 0x20, 0x20) & ascii) << shift
        bl |= _gather((bytes_in(w7, 0x09, 0x09) | bytes_in(w7, 0x0B, 0x0C)) & ascii) << shift
        nl |= _gather((bytes_in(w7, 0x0A, 0x0A) | bytes_in(w7, 0x0D, 0x0D)) & ascii) << shift
        dg |= _gather(bytes_in(w7, 0x30, 0x39) & ascii) << shift
        sl |= _gather(bytes_in(w7, 0x2F, 0x2F) & ascii) << shift
        ap |= _gather(bytes_in(w7, 0x27, 0x27) & ascii) << shift
        controls = (bytes_in(w7, 0x00, 0x1F) & ~bytes_in(w7, 0x09, 0x0D)) | bytes_in(w7, 0x7F, 0x7F)
        hard8 = _gather((controls & ascii) | (w & HIGH_BITS)) & _low_bits(m)
        hard |= hard8 << shift
        if hard8 != 0:
            break
        k += 8
    return letters, up, sp, bl, nl, dg, sl, ap, hard


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def _plain_masks(buf, i, avail, flags):
    """(upper, lower, spaces, blanks, line breaks, digits, apostrophes, number of plain bytes) of
    ``buf[i:i + avail]`` (avail <= 64), bit k for byte ``i + k``, up to the first byte that is not
    plain (or ``avail``): what the pattern's ``flags`` leave plain (breaks, digits) is decided here."""
    letters, up, sp, bl, nl, dg, sl, ap, stops = _byte_classes(buf, i, avail)
    if (flags & SPACE_TO_BREAK) == 0 or (flags & (OTHER_THEN_BREAKS | OTHER_THEN_BREAKS_SLASH)) == 0:
        stops |= nl
    elif (flags & OTHER_THEN_BREAKS_SLASH) != 0:
        stops |= sl & (nl << np.uint64(1))
    if (flags & NUMBER_AFTER_SPACE) != 0:  # `` ?\p{N}+``: a digit's piece depends on the byte before
        stops |= dg
    stops |= ~_low_bits(avail)
    limit = np.int64(trailing_zeros(stops)) if stops != 0 else np.int64(64)
    return up, letters & ~up, sp, bl, nl, dg, ap, limit


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def _plain_starts(up, lo, sp, bl, nl, dg, ap, limit, closes, camel, prefix_any, flags, max_digits):
    """Piece starts (bit k: byte k) among ``limit`` plain bytes whose byte 0 starts a piece (the rules
    are in the comment above); ``closes``: the segment ends after them. Each start depends on the
    bytes before it, and the last space of a run on the one after it: bit ``limit - 1`` is set only as
    far as a byte after it is known to be absent (the caller drops it otherwise), and the spaces after
    a run's last break only when the run ends before ``limit`` or the segment does. Returns (starts,
    apostrophes that may begin a contraction: after a letter in SHAPE_CASED, starting a piece in
    SHAPE_WORDS; :func:`_contraction_starts` decides them)."""
    valid = _low_bits(limit)
    one = np.uint64(1)
    up &= valid
    lo &= valid
    sp &= valid
    bl &= valid
    nl &= valid
    dg &= valid
    letters = up | lo
    blank = sp | bl  # whitespace that is no line break
    ws = blank | nl
    other = valid & ~(letters | ws | dg)
    # byte 0 starts a piece: what precedes it is no context (shifts bring in zeros)
    other_start = other & ~(other << one) & ~(sp << one)
    run_start = letters & ~(letters << one)
    prefix = (blank | other_start) if prefix_any else sp
    starts = run_start & ~(prefix << one) | other_start | one
    if camel:
        starts |= up & (lo << one)
    # breaks right after punctuation are its piece's (an addition carries through each such run)
    after_other = nl & (other << one)
    taken = ((nl + after_other) ^ nl) & nl
    white = ws & ~taken
    starts |= white & ~(white << one)
    starts |= blank & (blank << one) & ~(ws >> one) & (valid >> one)
    last_breaks = nl & ~taken & ~(nl >> one)
    while last_breaks != 0:
        q = np.int64(trailing_zeros(last_breaks)) + 1
        last_breaks &= last_breaks - one
        if q >= 64 or (blank >> np.uint64(q)) & one == 0:
            continue  # what follows the breaks starts a piece by its own rule (or is past the block)
        gaps = ~(blank >> np.uint64(q))
        run_end = q + (np.int64(trailing_zeros(gaps)) if gaps != 0 else 64 - q)
        if run_end < limit:
            if (nl >> np.uint64(run_end)) & one == 0:
                starts |= one << np.uint64(q)  # the spaces after the run's last break
        elif closes and (flags & SPACE_TO_END) == 0:
            starts |= one << np.uint64(q)
    if max_digits != 1:
        digit_starts = dg & ~(dg << one)
        starts |= digit_starts
        while digit_starts != 0 and max_digits > 1:
            s = np.int64(trailing_zeros(digit_starts))
            digit_starts &= digit_starts - one
            gaps = ~(dg >> np.uint64(s))
            run = np.int64(trailing_zeros(gaps)) if gaps != 0 else 64 - s
            for k in range(s + max_digits, s + run, max_digits):
                starts |= one << np.uint64(k)
    else:
        starts |= dg
    ap &= valid
    return starts, (ap & (letters << one)) if camel else (ap & other_start)


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def _contraction_starts(roles, buf, i, limit, closes, starts, candidates, camel, any_case):
    """``starts`` with the contractions among ``candidates`` applied (:func:`_contraction` decides
    them): in SHAPE_CASED one ends the word before it (a letter run, not a contraction itself), in
    SHAPE_WORDS it is a piece of its own; either way nothing inside it starts a piece and the byte
    after it does. Returns (starts, the first bit not decided: an apostrophe with fewer than two known
    bytes after it, more may follow)."""
    one = np.uint64(1)
    after_last = np.int64(-1)
    while candidates != 0:
        q = np.int64(trailing_zeros(candidates))
        candidates &= candidates - one
        if camel and q == after_last:
            continue  # an apostrophe right after a contraction starts a piece: no second suffix
        if not closes and q + 3 > limit:
            return starts, (q if camel else q + 1)
        # plain bytes are ASCII: no DEFER; at the segment's end _contraction sees what the VM sees
        c = _contraction(roles, buf, i + q, i + limit, any_case) - (i + q)
        if c == 0:
            continue
        inside = _low_bits(q + c) & ~_low_bits(q if camel else q + 1)
        starts &= ~inside
        if q + c < limit:
            starts |= one << np.uint64(q + c)
        after_last = q + c
    return starts, np.int64(64)


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def _block_pieces(roles, buf, i, end, shape, flags, max_digits, out_starts, out_ends, n):
    """Pieces of the plain bytes from ``i`` (a piece start), at most 64 of them, written from
    ``out_*[n]`` (room for 65 assumed). Returns (position after the last piece written, new n, stop):
    ``stop`` is the first byte that is not plain, -1 when the block ended otherwise. A piece whose end
    is not known yet (the byte after the block decides it) is left for the next call."""
    avail = end - i
    if avail > BLOCK_BYTES:
        avail = BLOCK_BYTES
    camel = shape == SHAPE_CASED
    deepseek = shape == SHAPE_DEEPSEEK
    if deepseek:
        # on plain ASCII SHAPE_DEEPSEEK splits as cl100k does without contractions: its
        # ``[<punctuation>][A-Za-z]+`` is the one-character prefix of a letter run, a punctuation byte
        # that starts its own piece; its `` ?[\p{P}\p{S}]+[\r\n]*`` and whitespace rules are the same.
        # A digit stops the block (it is a letter run's prefix there, or no match at all)
        flags |= PREFIX_ANY | OTHER_THEN_BREAKS | NUMBER_AFTER_SPACE
    up, lo, sp, bl, nl, dg, ap, limit = _plain_masks(buf, i, avail, flags)
    if limit == 0:
        return i, n, i
    closes = limit == end - i  # the segment ends after the plain bytes: every start is known
    starts, candidates = _plain_starts(up, lo, sp, bl, nl, dg, ap, limit, closes, camel,
                                       camel or (flags & PREFIX_ANY) != 0, flags, max_digits)
    decided = np.int64(64)
    if candidates != 0 and not deepseek:
        starts, decided = _contraction_starts(roles, buf, i, limit, closes, starts, candidates, camel,
                                              (flags & CONTRACTIONS_ANY_CASE) != 0)
    if not closes:
        starts &= _low_bits(limit - 1)
    starts &= _low_bits(decided)
    rest = starts & (starts - np.uint64(1))  # the starts after byte 0
    prev = i
    while rest != 0:
        at = i + np.int64(trailing_zeros(rest))
        out_starts[nonneg(n)] = prev
        out_ends[nonneg(n)] = at
        n += 1
        prev = at
        rest &= rest - np.uint64(1)
    if closes:
        out_starts[nonneg(n)] = prev
        out_ends[nonneg(n)] = end
        n += 1
        prev = end
    stop = i + limit if limit < avail else np.int64(-1)
    return prev, n, stop


@njit(cache=True, nogil=True, _nrt=False)
def split_known(shape, flags, max_digits, roles, buf, start, end, out_starts, out_ends, tiled_only):
    """All successive matches of a recognized pattern in ``buf[start:end]`` (valid UTF-8), as
    ``find_matches`` returns them; OUT_FULL when the output is too small, DEFER when the VM must decide.
    With ``tiled_only`` (nonzero), NOT_TILED when the matches leave a character out: a caller that
    isolates matches and gaps alike (HF's Isolated split) then has its pieces in ``out_*`` as they
    are. The patterns of both shapes match every character, so that is the case for any text."""
    n = 0
    cap = out_starts.shape[0]
    i = start
    blocks = (flags & BLOCK_ASCII) != 0
    per_piece_until = start  # bytes before this go piece by piece (after a byte that is not plain)
    retry = np.int64(_PLAIN_RETRY)
    while i < end:
        if blocks and i >= per_piece_until and n + BLOCK_BYTES + 1 <= cap:
            after, n, stop = _block_pieces(roles, buf, i, end, shape, flags, max_digits, out_starts, out_ends, n)
            if after > i:
                retry = _PLAIN_RETRY
                if stop >= 0:
                    per_piece_until = stop + 1
                i = after
                continue
            if stop >= 0:
                # a block that found no piece: in text that is not plain ASCII (Cyrillic, Han) tries
                # grow rarer while they fail
                per_piece_until = max(stop + 1, i + retry)
                retry = min(2 * retry, _PLAIN_RETRY_MAX)
        j = _deepseek_at(roles, buf, i, end) if shape == SHAPE_DEEPSEEK else _ascii_other(roles, buf, i, end, flags)
        if j < 0:
            if shape == SHAPE_WORDS:
                j = _words_at(roles, buf, i, end, flags, max_digits)
            else:
                j = _cased_at(roles, buf, i, end, flags, max_digits)
        if j == DEFER:
            return DEFER
        if j == i:  # no alternative matches here: finditer moves on one character
            if tiled_only != 0:
                return NOT_TILED
            _, _, ln = _role_at(roles, buf, i, end)
            i += ln
            continue
        if n >= cap:
            return OUT_FULL
        out_starts[nonneg(n)] = i
        out_ends[nonneg(n)] = j
        n += 1
        i = j
    return n
