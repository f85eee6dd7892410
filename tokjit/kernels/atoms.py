"""Characters that byte-level BPE always forms whole ("atoms"), and where runs of them can be cut.

In byte-level BPE a 3-byte character starts as three symbols and costs two merges before anything
else can happen to it; in Chinese or Japanese text that is most of the work, and the runs (one
pre-token per run of Han characters under the cl100k / o200k patterns) are long and rarely repeat.
Two facts about a vocabulary, checked once when it compiles, make that work unnecessary.

**Atoms.** A character ``c`` of 2 or 3 UTF-8 bytes whose token is ``T`` may start as the single
symbol ``T`` when

* (A1) BPE of ``c``'s bytes alone ends in ``T``; let ``R`` be the highest rank of those merges;
* (A2) every merge with ``T`` as an operand ranks after ``R``;
* (A3) no token can straddle ``c``'s edge in this piece: none could start inside ``c`` and go on past
  its end, or end inside ``c`` and start before it. Tokens that start or end inside a character are
  few (byte-level vocabularies have a few hundred); each marks the three bytes around the character
  boundary it would cross (:func:`find_atoms`), and a character is an atom only where neither of its
  boundaries in the text carries a mark. Tokens never cross a piece's ends, so those need no check.

By (A3) no symbol ever holds part of ``c`` and a byte outside it, so ``c``'s bytes merge among
themselves, in the order of BPE on ``c`` alone. While they do, the next merge anywhere is of rank
<= ``R`` or is some other merge of lower rank; a merge that uses ``T`` ranks above ``R`` (A2), so in
either run it waits until nothing below it is left, by which time ``T`` exists in both. The two runs
make the same merges outside ``c`` in the same order, hence the same ids. (fastokens ships the same
idea.) (A1) and (A2) are properties of the token, checked once; (A3) is checked where ``c`` occurs.

**Cuts.** Between two adjacent atoms ``c`` and ``d`` a symbol spanning the boundary would be a token
holding a proper part of one of them (ruled out by A3) or the bytes of ``c`` followed by those of
``d``. When no token contains that character pair, BPE never merges across the boundary and the two
sides encode independently: the kernel cuts the piece there, so a long Han run becomes short
segments that the piece cache remembers. The pairs that occur inside tokens are kept as bits of a
hashed bitset; a hash collision only removes a cut, never adds one.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from tokjit.kernels.lookup import PAIR_FIELD_BITS, PAIR_FIELD_MASK, apply_merge, entry_value, lowest_merge
from tokjit.kernels.piece_cache import piece_key
from tokjit.kernels.utf8 import decode_bmp

NO_ATOM = -1
ATOM_CODE_POINTS = 1 << 16  # atoms are characters of the Basic Multilingual Plane (2 or 3 bytes)
PAIR_BITS_LOG2 = 20  # 1 Mbit = 128 KB, L2-resident: o200k marks ~16K pairs (1.5% of bits: few false "joins")
EDGE_BITS = 1 << 24  # one bit per (byte before a boundary, two bytes after): 2 MB
UNREACHABLE_BITS = 1 << 16  # 8 KB; llama3 has ~600 tokens BPE cannot build
_PAIR_MIX = np.int64(-7046029254386353131)


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def pair_bit(cp_left, cp_right):
    """Index of the bit that stands for the adjacent character pair (cp_left, cp_right)."""
    h = ((np.int64(cp_left) << 21) | np.int64(cp_right)) * _PAIR_MIX
    return (h >> (64 - PAIR_BITS_LOG2)) & ((1 << PAIR_BITS_LOG2) - 1)


@njit(cache=True, nogil=True, _nrt=False)
def _mark_edge(edge_bits, blob, k, e):
    """Mark the boundary after ``blob[k]`` (a token's bytes end at ``e``): bit ``blob[k] << 16 |
    blob[k+1] << 8 | blob[k+2]``, or all 256 such bits when the token ends at ``k + 2``."""
    base = (np.int64(blob[k]) << 16) | (np.int64(blob[k + 1]) << 8)
    if k + 2 < e:
        _set_bit(edge_bits, base | np.int64(blob[k + 2]))
    else:
        for b in range(256):
            _set_bit(edge_bits, base | b)


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def _set_bit(bits, i):
    bits[i >> 6] |= np.uint64(1) << np.uint64(i & 63)


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def _has_bit(bits, i):
    return (bits[i >> 6] >> np.uint64(i & 63)) & np.uint64(1) != 0


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def edge_clean(buf, p, ps, pe, edge_bits):
    """True when no token can straddle the character boundary at ``p`` with part of a character on
    one side (``ps < p < pe``; a byte past the piece reads as 0, which every mark for a short token
    covers)."""
    b2 = np.int64(buf[p + 1]) if p + 1 < pe else np.int64(0)
    return not _has_bit(edge_bits, (np.int64(buf[p - 1]) << 16) | (np.int64(buf[p]) << 8) | b2)


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def atom_at(buf, i, ps, pe, atom_ids, edge_bits):
    """(token, length) when the character at ``buf[i]`` (inside piece ``buf[ps:pe]``) may start as one
    symbol, else (-1, length of the character, 1 for a byte that starts none)."""
    cp, step = decode_bmp(buf, i, pe)
    if cp < 0:
        return -1, step
    tid = atom_ids[cp]
    if tid < 0:
        return -1, step
    if i > ps and not edge_clean(buf, i, ps, pe, edge_bits):
        return -1, step
    if i + step < pe and not edge_clean(buf, i + step, ps, pe, edge_bits):
        return -1, step
    return tid, step


@njit(cache=True, nogil=True)
def find_atoms(blob, offsets, include, byte_ids, pair_table, atom_ids, edge_bits, pair_bits):
    """Fill ``atom_ids`` (int32[ATOM_CODE_POINTS], -1 beforehand) with the token of every character
    meeting (A1) and (A2), mark in ``edge_bits`` (uint64[EDGE_BITS / 64]) the boundaries a token could
    straddle (A3), and set a bit of ``pair_bits`` (uint64[2**PAIR_BITS_LOG2 / 64]) for every character
    pair adjacent inside a token; returns the number of atoms. ``pair_table`` is the BPE pair table
    (slots, rows: :func:`~tokjit.kernels.lookup.pair_slot`), ``byte_ids`` the token of each byte.
    O(vocabulary bytes + pairs)."""
    n_tokens = offsets.shape[0] - 1
    # (A2): the lowest rank of a merge using each token as an operand
    min_use = np.full(n_tokens, np.int64(1) << 62, np.int64)
    slots, rows = pair_table
    for s in range(slots.shape[0]):
        entry = slots[s]
        if entry < 0:
            continue
        rank = entry_value(entry, rows) >> 32
        for t in (entry >> (2 * PAIR_FIELD_BITS), (entry >> PAIR_FIELD_BITS) & PAIR_FIELD_MASK):
            if 0 <= t < n_tokens and rank < min_use[t]:
                min_use[t] = rank
    # (A3): the boundaries a token could straddle with part of a character on one side, as the three
    # bytes around them (last byte before, two after; a token too short for the third marks all 256)
    for tid in range(n_tokens):
        if not include[tid]:
            continue
        s = offsets[tid]
        e = offsets[tid + 1]
        n = e - s
        lead = 0
        while lead < n and (blob[s + lead] & 0xC0) == 0x80:
            lead += 1
        if 0 < lead < n:  # starts inside a character and goes on past its end
            _mark_edge(edge_bits, blob, s + lead - 1, e)
        k = e - 1
        while k > s and (blob[k] & 0xC0) == 0x80:
            k -= 1
        b0 = blob[k]
        need = 1 if b0 < 0xC0 else (2 if b0 < 0xE0 else (3 if b0 < 0xF0 else 4))
        if b0 >= 0xC0 and e - k < need and k > s:  # ends inside a character it started before
            _mark_edge(edge_bits, blob, k - 1, e)
        # character pairs adjacent inside the token
        prev = -1
        i = s
        while i < e:
            cp, step = decode_bmp(blob, i, e)
            if cp >= 0 and prev >= 0:
                bit = pair_bit(prev, cp)
                pair_bits[bit >> 6] |= np.uint64(1) << np.uint64(bit & 63)
            prev = cp
            i += step
    # (A1) and the rest, for every token that is one 2- or 3-byte character
    n_atoms = 0
    sym = np.empty(4, np.int64)
    for tid in range(n_tokens):
        if not include[tid]:
            continue
        s = offsets[tid]
        e = offsets[tid + 1]
        cp, step = decode_bmp(blob, s, e)
        if cp < 0 or step != e - s or atom_ids[cp] != NO_ATOM:
            continue
        m, top = bpe_of_bytes(blob, s, e, byte_ids, pair_table, sym)
        if m < 0:
            continue
        if m != 1 or sym[0] != tid or min_use[tid] <= top:
            continue
        atom_ids[cp] = tid
        n_atoms += 1
    return n_atoms


@njit(cache=True, nogil=True, _nrt=False)
def bpe_of_bytes(blob, s, e, byte_ids, pair_table, sym):
    """BPE of ``blob[s:e]`` from single bytes, by ``pair_table`` (slots, rows), left in ``sym[:m]``
    (capacity >= e - s); returns (m, highest rank merged), or (-1, -1) when a byte has no token.
    Leftmost lowest rank first, O(n^2): for a vocabulary's own tokens."""
    m = 0
    for j in range(s, e):
        b = byte_ids[blob[j]]
        if b < 0:
            return -1, np.int64(-1)
        sym[m] = b
        m += 1
    top = np.int64(-1)
    while m > 1:
        best, best_rank, best_merged = lowest_merge(sym, m, pair_table)
        if best < 0:
            break
        if best_rank > top:
            top = best_rank
        m = apply_merge(sym, m, best, best_merged)
    return m, top


@njit(cache=True, nogil=True)
def mark_unreachable(blob, offsets, include, byte_ids, pair_table, sym, bits, builds):
    """Set a bit of ``bits`` (uint64[UNREACHABLE_BITS / 64]) for every included token that BPE does not
    build from its own bytes (``sym``: capacity >= the longest token) and ``builds[tid]`` for every one
    it does (bool, False beforehand); returns how many it does not.

    Under "a piece that is a token is that token" (tiktoken's rule, HF's ``ignore_merges``) such a
    token, met as a whole piece, is itself, but met as a segment of a longer piece it is what BPE
    makes of it: the kernel keeps segments that may be one out of the piece cache, which is keyed by
    bytes alone. O(sum of len^2)."""
    n = 0
    for tid in range(offsets.shape[0] - 1):
        s = offsets[tid]
        e = offsets[tid + 1]
        if not include[tid] or e - s < 2:
            continue
        m, _ = bpe_of_bytes(blob, s, e, byte_ids, pair_table, sym)
        if m != 1 or sym[0] != tid:
            _set_bit(bits, unreachable_bit(blob, s, e))
            n += 1
        else:
            builds[tid] = True
    return n


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def unreachable_bit(buf, s, e):
    """The bit of :func:`mark_unreachable`'s set that stands for the bytes ``buf[s:e]``."""
    return piece_key(buf, s, e)[0] & (UNREACHABLE_BITS - 1)


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def maybe_unreachable(bits, buf, s, e):
    """False when ``buf[s:e]`` is surely not a token BPE cannot build (see :func:`mark_unreachable`)."""
    return _has_bit(bits, unreachable_bit(buf, s, e))


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def maybe_unreachable_key(bits, h):
    """:func:`maybe_unreachable` of the bytes whose :func:`~tokjit.kernels.piece_cache.piece_key` hash is
    ``h`` (for a caller that has the key already, to look the piece up in the cache)."""
    return _has_bit(bits, h & (UNREACHABLE_BITS - 1))


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def atom_segment_end(buf, ps, pe, atom_ids, edge_bits, pair_bits):
    """End of the first segment of piece ``buf[ps:pe]``: the first boundary between two atoms whose
    character pair occurs in no token (see the module docstring), else ``pe``. O(segment)."""
    prev = np.int64(-1)
    clean_at = ps  # a boundary known to be clean: a character's right edge is the next one's left
    i = ps
    while i < pe:
        cp, step = decode_bmp(buf, i, pe)
        atom = False
        if cp >= 0 and atom_ids[cp] >= 0 and (clean_at == i or edge_clean(buf, i, ps, pe, edge_bits)):
            atom = i + step >= pe or edge_clean(buf, i + step, ps, pe, edge_bits)
            if atom:
                clean_at = i + step
        if atom and prev >= 0 and not _has_bit(pair_bits, pair_bit(prev, cp)):
            return i
        prev = cp if atom else -1
        i += step
    return pe


@njit(cache=True, nogil=True)
def count_segments(buf, atom_ids, edge_bits, pair_bits):
    """How many segments :func:`atom_segment_end` cuts ``buf`` into, taken as one piece (a measure of
    how often the cut rule fires on a text; not used when encoding)."""
    n = 0
    i = 0
    end = buf.shape[0]
    while i < end:
        i = atom_segment_end(buf, i, end, atom_ids, edge_bits, pair_bits)
        n += 1
    return n
