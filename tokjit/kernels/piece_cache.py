"""Each thread's piece -> ids cache: one 64-byte row per piece, so a hit reads one cache line.

A piece's ids depend only on its bytes, and text repeats words, so the fused BPE kernels remember the
ids of pieces up to ``MAX_PIECE`` bytes (as HF's BPE cache does). Row ``r`` of ``rows`` (int64[SLOTS, 8]):

* ``[0]`` the piece's hash; ``[1]`` ``n_bytes | HIT | n_ids << 16 | byte_pool_offset << 32`` (0 = empty
  row; ``HIT`` marks a row hit since the replacement scan last passed it);
* ``[2]``, ``[3]`` its first 16 bytes, little-endian (zero-padded); bytes 16.. live in ``byte_pool``;
* ``[4..7]`` up to ``INLINE_IDS`` ids, two int32 per word; more ids live in ``id_pool`` from ``[4]``.

A piece lives within ``WINDOW`` rows of its hash's home row (linear probing, bounded), so a lookup
reads at most ``WINDOW`` adjacent rows. When a piece's window has no empty row, a row there is
replaced: the first one not hit since the replacement scan last passed it (each hit sets a bit in
the row; the scan clears them, CLOCK-style), else the home row. Rows are never emptied, so lookups
stay exact without tombstones, the cache adapts when the text changes (a server that saw English
first still caches the Chinese it meets later), and memory stays fixed. Pieces over 16 bytes or 8
ids also use the pools; once a pool is full, such pieces are no longer stored. The layout replaced
five parallel arrays and two pools, which cost a cache line each per lookup.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from tokjit.kernels.memops import load_two_words, nonneg

SLOTS = 1 << 16
ROW = 8
MAX_PIECE = 48
INLINE_BYTES = 16
INLINE_IDS = 8
POOL_BYTES = 1 << 19
POOL_IDS = 1 << 18
WINDOW = 8
HIT = 1 << 15
SEED_ROWS = SLOTS // 2  # vocabulary tokens a new cache starts with (seed_cache)

# Each thread's BPE pair cache (kept with its piece cache, read by tokjit.kernels.bpe): a direct-mapped
# copy of the pair-table answers it has looked up. A pair table of a large vocabulary is megabytes
# (o200k: 2 MB, Gemma 3: 4 MB and its rows), past the core's own cache; the pairs text meets are fewer
# and repeat. 16K entries, 256 KB. (With o200k's table at 2 MB, encoding without it measured the same.)
PAIR_CACHE_SLOTS = 1 << 14

_K0 = np.int64(-7046029254386353131)  # odd 64-bit mixing constants (splitmix64's)
_K1 = np.int64(-4658895280553007687)
_FNV_PRIME = np.int64(1099511628211)
_LOW32 = np.int64(0xFFFFFFFF)


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def piece_key(buf, s, e):
    """(hash, first 8 bytes, next 8 bytes) of ``buf[s:e]``: the words are loaded whole
    (:func:`~tokjit.kernels.memops.load_two_words`), the hash mixes them once, and bytes past 16 go
    through FNV."""
    n = e - s
    u0, u1 = load_two_words(buf, s, n)
    w0 = np.int64(u0)
    w1 = np.int64(u1)
    h = (w0 * _K0) ^ (w1 * _K1) ^ np.int64(n)
    for i in range(INLINE_BYTES, n):
        h = (h ^ np.int64(buf[s + i])) * _FNV_PRIME
    return h ^ (h >> 29), w0, w1


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def cacheable_key(buf, s, e):
    """:func:`piece_key` of ``buf[s:e]`` when the piece may be cached (1..MAX_PIECE bytes), else zeros."""
    if s < e <= s + MAX_PIECE:
        return piece_key(buf, s, e)
    return np.int64(0), np.int64(0), np.int64(0)


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def cache_find(rows, byte_pool, buf, s, e):
    """The row holding piece ``buf[s:e]`` (marked as hit), or -1."""
    h, w0, w1 = piece_key(buf, s, e)
    return cache_find_key(rows, byte_pool, buf, s, e, h, w0, w1)


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def home_row(rows, h):
    """The first row a piece of hash ``h`` may live in (prefetch it to hide a lookup's miss)."""
    return h & (rows.shape[0] - 1)


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def cache_find_key(rows, byte_pool, buf, s, e, h, w0, w1):
    """:func:`cache_find` with the piece's :func:`piece_key` already computed."""
    n = e - s
    mask = rows.shape[0] - 1
    r = h & mask
    for _ in range(WINDOW):
        meta = rows[nonneg(r), 1]
        if meta == 0:
            return -1
        if rows[nonneg(r), 0] == h and (meta & 0x7FFF) == n and rows[nonneg(r), 2] == w0 and rows[nonneg(r), 3] == w1:
            same = True
            if n > INLINE_BYTES:
                off = meta >> 32
                for k in range(n - INLINE_BYTES):
                    if byte_pool[nonneg(off + k)] != buf[nonneg(s + INLINE_BYTES + k)]:
                        same = False
                        break
            if same:
                if (meta & HIT) == 0:
                    rows[nonneg(r), 1] = meta | HIT
                return r
        r = (r + 1) & mask
    return -1


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def cache_emit(rows, id_pool, r, out, at):
    """Copy the ids of the piece in row ``r`` to ``out[at:]``; returns how many."""
    k = (rows[nonneg(r), 1] >> 16) & 0xFFFF
    if k <= INLINE_IDS and at + INLINE_IDS <= out.shape[0]:
        # all eight inline slots are stored whatever k is (zeros past k, which a later write replaces
        # or nobody reads): a loop whose trip count changes from piece to piece mispredicts its exit
        for j in range(INLINE_IDS // 2):
            word = rows[nonneg(r), 4 + j]
            out[nonneg(at + 2 * j)] = word & _LOW32
            out[nonneg(at + 2 * j + 1)] = (word >> 32) & _LOW32
    elif k <= INLINE_IDS:
        for i in range(k):
            out[nonneg(at + i)] = (rows[nonneg(r), 4 + (i >> 1)] >> (32 * (i & 1))) & _LOW32
    else:
        i0 = rows[nonneg(r), 4]
        for i in range(k):
            out[nonneg(at + i)] = id_pool[nonneg(i0 + i)]
    return k


@njit(cache=True, nogil=True, _nrt=False)
def cache_put(rows, byte_pool, id_pool, fill, buf, s, e, ids, at, k):
    """Remember that piece ``buf[s:e]`` (absent from the cache) encodes to ``ids[at:at + k]``: in the first
    empty row of its window, else in place of a row not hit lately (see the module docstring). Not
    stored when a pool it needs is full. O(piece + ids + WINDOW)."""
    h, w0, w1 = piece_key(buf, s, e)
    cache_put_key(rows, byte_pool, id_pool, fill, buf, s, e, ids, at, k, h, w0, w1)


@njit(cache=True, nogil=True, _nrt=False)
def cache_put_key(rows, byte_pool, id_pool, fill, buf, s, e, ids, at, k, h, w0, w1):
    """:func:`cache_put` with the piece's :func:`piece_key` already computed."""
    n = e - s
    long_bytes = n - INLINE_BYTES if n > INLINE_BYTES else 0
    long_ids = k if k > INLINE_IDS else 0
    if k > 0xFFFF or n > 0x7FFF:
        return
    if fill[0] + long_bytes > byte_pool.shape[0] or fill[1] + long_ids > id_pool.shape[0]:
        return
    mask = rows.shape[0] - 1
    home = h & mask
    r = -1
    q = home
    for _ in range(WINDOW):
        if rows[q, 1] == 0:
            r = q
            fill[2] += 1
            break
        q = (q + 1) & mask
    if r < 0:
        q = home
        for _ in range(WINDOW):
            meta = rows[q, 1]
            if (meta & HIT) == 0:
                r = q
                break
            rows[q, 1] = meta & ~np.int64(HIT)
            q = (q + 1) & mask
        if r < 0:
            r = home
    rows[r, 0] = h
    rows[r, 2] = w0
    rows[r, 3] = w1
    off = fill[0]
    for i in range(long_bytes):
        byte_pool[off + i] = buf[s + INLINE_BYTES + i]
    fill[0] = off + long_bytes
    if long_ids:
        i0 = fill[1]
        for i in range(k):
            id_pool[i0 + i] = ids[at + i]
        fill[1] = i0 + k
        rows[r, 4] = i0
    else:
        for j in range(4, ROW):
            rows[r, j] = 0
        for i in range(k):
            rows[r, 4 + (i >> 1)] |= (np.int64(ids[at + i]) & _LOW32) << (32 * (i & 1))
    rows[r, 1] = np.int64(n) | (np.int64(k) << 16) | (np.int64(off) << 32)


@njit(cache=True, nogil=True)
def seed_cache(rows, byte_pool, id_pool, fill, blob, offsets, token_ids, limit):
    """Store up to ``limit`` tokens of ``token_ids`` (in that order) as pieces that encode to
    themselves: the caller passes tokens BPE builds from their own bytes, short enough to stay inline,
    most frequent first. A word met for the first time is then often a hit; seeds are not marked hit,
    so the pieces text brings replace them first. Returns how many were stored. O(limit)."""
    one = np.empty(1, np.int32)
    n = 0
    for t in token_ids:
        if n >= limit:
            break
        one[0] = t
        cache_put(rows, byte_pool, id_pool, fill, blob, offsets[t], offsets[t + 1], one, 0, 1)
        n += 1
    return n
