"""Each thread's piece -> ids cache: one 32-byte row per piece, so a hit reads half a cache line.

A piece's ids depend only on its bytes, and text repeats words, so the fused BPE kernels remember the
ids of pieces up to ``MAX_PIECE`` bytes (as HF's BPE cache does); a caller may keep longer pieces it
chose, up to ``MAX_CACHED`` bytes (the byte-level kernel: those met twice before). Row ``r`` of
``rows`` (int64[SLOTS, 4]):

* ``[0]``, ``[1]`` the piece's first 16 bytes, little-endian (zero-padded); bytes 16.. live in
  ``byte_pool``;
* ``[2]`` the meta word: length (8 bits) | ``HIT`` | ``POOLED`` | number of ids | byte-pool offset | fourth id
  (0 = empty row; ``HIT`` marks a row hit since the replacement scan last passed it);
* ``[3]`` up to three ids of 21 bits; with the fourth in the meta word, pieces of up to
  ``INLINE_IDS`` ids below 2^21 keep them inline, others (``POOLED``) in ``id_pool`` from ``[3]``.

The key is the bytes themselves (the hash only picks the home row): a lookup compares the length and
two words. A piece lives within ``WINDOW`` rows of its hash's home row (linear probing, bounded), so
a lookup reads at most ``WINDOW`` adjacent rows. When a piece's window has no empty row, a row there
is replaced: the first one not hit since the replacement scan last passed it (each hit sets a bit in
the row; the scan clears them, CLOCK-style), else the home row. A lookup stops at an empty row, so
rows are emptied only when the pools start again (below), which can only hide a piece, never give a
wrong one. A piece found past its home row trades places with the piece there when that one was not
hit lately (:func:`_promote`), so the pieces text keeps meeting end up one compare away. The cache
adapts when the text changes (a server that saw English first still caches the Chinese it meets
later), and memory stays fixed. Pieces over 16 bytes or 4 ids also use the pools;
when one is full, the pieces in the pools are forgotten and both start again.

Rows were 64 bytes (hash, meta, key, eight ids): 64K of them made 4 MB. At 32 bytes, 128K rows fill
the same 4 MB, and a hit reads half a line (fresh English text: llama3 +7-14%, o200k +6%). An unseeded
cache has 256K rows (8 MB): at 128K, text with ~80K distinct pieces (3 MB of English documents read
again and again, or a server's mix of corpora) filled 60% of the rows, so windows filled up; pieces
replaced each other on every pass (each replacement also spends pool space, so the pools started
again every ~20 passes): llama2, 550 documents of 5 KB read 40 times, 23.0 -> 17.0 ms a pass; 150
documents (26K pieces) 4.3 ms either way.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from tokjit.kernels.memops import load_two_words, load_word, nonneg, prefetch_row

SLOTS = 1 << 18
ROW = 4
MAX_PIECE = 48
MAX_CACHED = 255  # the longest piece a row describes (its length field has 8 bits)
INLINE_BYTES = 16
INLINE_IDS = 4
POOL_BYTES = 1 << 20
POOL_IDS = 1 << 19
WINDOW = 8
# fields of a row's meta word [2]
N_MASK = 0xFF  # bits 0-7: the piece's length in bytes (1..MAX_CACHED; 0 = empty row)
HIT = 1 << 8  # hit since the replacement scan last passed the row
POOLED = 1 << 9  # the ids live in id_pool from [3], not inline
_K_SHIFT, _K_MASK = 10, 0xFF  # bits 10-17: the number of ids
_OFF_SHIFT, _OFF_MASK = 18, 0xFFFFF  # bits 18-37: offset of the bytes past 16 in byte_pool
_ID_BITS = 21
_ID_MASK = (1 << 21) - 1
_ID3_SHIFT = 38  # bits 38-58: the fourth inline id
# A seeded cache (byte-level BPE, seed_cache) holds every short token the vocabulary builds from its
# own bytes, at most this fraction of its rows: o200k's 196K such tokens take 512K rows (16 MB),
# cl100k's 99K 256K (8 MB). Seeding the lowest 96K ids into 128K rows (75% full) left longer probe
# runs and sent the rarer tokens to BPE; o200k, one thread, English and code: +7-8% fresh and warm.
SEED_LOAD = 0.4


LINE_BYTES = 64
HUGE_PAGE = 2 << 20


def line_aligned_rows(n_rows: int, like: np.ndarray | None = None) -> np.ndarray:
    """int64[n_rows, ROW] whose first row starts a cache line (zeros, or a copy of ``like``). numpy
    aligns large arrays to 16 bytes only: every other 32-byte row then straddled two lines, and a
    lookup read its meta word from the line after the one its prefetch had asked for. Rows of 4 MB
    or more start a 2 MB page: numpy asks the kernel for huge pages on large arrays, but only whole
    aligned 2 MB extents get one, so an unaligned 16 MB cache kept ~2 MB on 4 KB pages, whose TLB
    misses (page walks from memory after the CPU caches were flushed) fell on 1 lookup in 8."""
    n_bytes = n_rows * ROW * 8
    align = HUGE_PAGE if n_bytes >= 2 * HUGE_PAGE else LINE_BYTES
    raw = np.zeros(n_bytes + align, np.uint8)
    skip = (-raw.ctypes.data) % align
    rows = raw[skip: skip + n_bytes].view(np.int64).reshape(n_rows, ROW)
    if like is not None:
        rows[:] = like
    return rows


def seeded_slots(n_seeds: int) -> int:
    """Rows of a cache seeded with ``n_seeds`` tokens: a power of two, at least ``SLOTS``."""
    slots = SLOTS
    while slots * SEED_LOAD < n_seeds:
        slots *= 2
    return slots

# Each thread's BPE pair cache (kept with its piece cache, read by tokjit.kernels.bpe): a direct-mapped
# copy of the pair-table answers it has looked up. A pair table of a large vocabulary is megabytes
# (o200k: 2 MB, Gemma 3: 4 MB and its rows), past the core's own cache; the pairs text meets are fewer
# and repeat. 16K entries, 256 KB. (With o200k's table at 2 MB, encoding without it measured the same.)
PAIR_CACHE_SLOTS = 1 << 14

_K0 = np.int64(-7046029254386353131)  # odd 64-bit mixing constants (splitmix64's)
_K1 = np.int64(-4658895280553007687)


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def piece_key(buf, s, e):
    """(hash, first 8 bytes, next 8 bytes) of ``buf[s:e]``: the words are loaded whole
    (:func:`~tokjit.kernels.memops.load_two_words`), the hash mixes them once, and bytes past 16 join
    it eight at a time."""
    n = e - s
    u0, u1 = load_two_words(buf, s, n)
    w0 = np.int64(u0)
    w1 = np.int64(u1)
    h = _mix_words(w0, w1, n)
    if n > INLINE_BYTES:
        # eight bytes a step (byte by byte, a 48-byte piece waited on 32 multiplies in a row); a
        # multiply carries a bit only upwards, so the fold and the second multiply bring the high
        # bytes of each word down to the bits that pick the row
        for i in range(INLINE_BYTES, n, 8):
            h = (h ^ np.int64(load_word(buf, s + i, min(n - i, 8)))) * _K0
        h = (h ^ (h >> 32)) * _K1
    return _spread(h), w0, w1


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def _mix_words(w0, w1, n):
    return (w0 * _K0) ^ (w1 * _K1) ^ np.int64(n)


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def _spread(h):
    return h ^ (h >> 29)


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def piece_words(buf, s, e):
    """The two key words of :func:`piece_key` alone (for a caller that kept the hash)."""
    u0, u1 = load_two_words(buf, s, e - s)
    return np.int64(u0), np.int64(u1)


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def cacheable_key(buf, s, e):
    """:func:`piece_key` of ``buf[s:e]`` when the piece may be cached (1..MAX_PIECE bytes), else zeros."""
    if s < e <= s + MAX_PIECE:
        return piece_key(buf, s, e)
    return np.int64(0), np.int64(0), np.int64(0)


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def cache_find(rows, byte_pool, buf, s, e):
    """The row holding piece ``buf[s:e]`` (marked as hit; moved to its home row when it may), or -1."""
    h, w0, w1 = piece_key(buf, s, e)
    return cache_find_key(rows, byte_pool, buf, s, e, h, w0, w1, True)


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def home_row(rows, h):
    """The first row a piece of hash ``h`` may live in (prefetch it to hide a lookup's miss): an even
    row, so that it and the next share the cache line the prefetch brings (rows are line-aligned,
    :func:`line_aligned_rows`), and a piece found at either costs one line."""
    return h & (rows.shape[0] - 2)


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def cache_find_key(rows, byte_pool, buf, s, e, h, w0, w1, promote):
    """:func:`cache_find` with the piece's :func:`piece_key` already computed; with ``promote`` (a
    constant at each call) a piece found past its home row may move there (:func:`_promote`): the
    byte-level piece loop's lookups do (warm English +7%); a new CJK piece's segments do not (fresh
    Japanese, where seeds past their homes are hit once or twice, measured 1-4% slower)."""
    n = e - s
    mask = rows.shape[0] - 1
    home = home_row(rows, h)
    r = home
    for _ in range(WINDOW):
        meta = rows[nonneg(r), 2]
        if meta == 0:
            return -1
        if (meta & N_MASK) == n and rows[nonneg(r), 0] == w0 and rows[nonneg(r), 1] == w1:
            same = True
            if n > INLINE_BYTES:
                off = (meta >> _OFF_SHIFT) & _OFF_MASK
                for k in range(0, n - INLINE_BYTES, 8):  # a word at a time: long pieces reach 255 bytes
                    step = min(n - INLINE_BYTES - k, 8)
                    if load_word(byte_pool, off + k, step) != load_word(buf, s + INLINE_BYTES + k, step):
                        same = False
                        break
            if same:
                if (meta & HIT) == 0:
                    rows[nonneg(r), 2] = meta | HIT
                if promote and r != home:
                    return _promote(rows, home, r)
                return r
        r = (r + 1) & mask
    return -1


@njit(cache=True, nogil=True, _nrt=False)
def _promote(rows, home, r):
    """Move the piece just found in row ``r`` to its home row when the piece there was not hit since
    the replacement scan last passed it (most often a seed no text has met) and may sit where the
    found one was, within WINDOW rows of its own home; returns the row the found piece is in now.
    A seeded cache left one hit in nine past its home, and a hit at home is one compare (warm
    English, every piece cached: hits at home 89% -> 95%, the hit path ~10% faster). A lookup only
    returns a row holding the piece it was asked for, so a swap never gives wrong ids; the displaced
    piece stays reachable because the rows from its home to ``r`` are full (it was placed at the
    first empty row from its home, the walk that found ``r`` passed no empty row), unless the pools
    were started again in between (then it reads as absent, like the other pieces after an emptied
    row, and is merged again). O(1)."""
    mask = rows.shape[0] - 1
    meta = rows[nonneg(home), 2]
    n = meta & N_MASK
    if (meta & HIT) != 0 or n > INLINE_BYTES:  # a pooled piece's hash needs its pooled bytes
        return r
    resident_home = home_row(rows, _spread(_mix_words(rows[nonneg(home), 0], rows[nonneg(home), 1], n)))
    if ((home - resident_home) & mask) + ((r - home) & mask) >= WINDOW:
        return r
    for c in range(ROW):
        resident = rows[nonneg(home), c]
        rows[nonneg(home), c] = rows[nonneg(r), c]
        rows[nonneg(r), c] = resident
    return home


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def cache_emit(rows, id_pool, r, out, at):
    """Copy the ids of the piece in row ``r`` to ``out[at:]``; returns how many."""
    meta = rows[nonneg(r), 2]
    k = (meta >> _K_SHIFT) & _K_MASK
    if (meta & POOLED) == 0 and at + INLINE_IDS <= out.shape[0]:
        # all four inline ids are stored whatever k is (a later write replaces the extra ones or
        # nobody reads them): a loop whose trip count changes from piece to piece mispredicts its exit
        word = rows[nonneg(r), 3]
        out[nonneg(at)] = word & _ID_MASK
        out[nonneg(at + 1)] = (word >> _ID_BITS) & _ID_MASK
        out[nonneg(at + 2)] = (word >> (2 * _ID_BITS)) & _ID_MASK
        out[nonneg(at + 3)] = (meta >> _ID3_SHIFT) & _ID_MASK
    elif (meta & POOLED) == 0:
        word = rows[nonneg(r), 3]
        for i in range(k):
            out[nonneg(at + i)] = ((word >> (_ID_BITS * i)) if i < 3 else (meta >> _ID3_SHIFT)) & _ID_MASK
    else:
        i0 = rows[nonneg(r), 3]
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
    if n > MAX_CACHED or k > _K_MASK:
        return
    inline = k <= INLINE_IDS
    for i in range(k):
        if ids[at + i] < 0 or ids[at + i] > _ID_MASK:
            inline = False
    long_bytes = n - INLINE_BYTES if n > INLINE_BYTES else 0
    long_ids = 0 if inline else k
    if fill[0] + long_bytes > byte_pool.shape[0] or fill[1] + long_ids > id_pool.shape[0]:
        _empty_pools(rows, fill)
        if long_bytes > byte_pool.shape[0] or long_ids > id_pool.shape[0]:
            return
    mask = rows.shape[0] - 1
    home = home_row(rows, h)
    r = -1
    q = home
    for _ in range(WINDOW):
        if rows[q, 2] == 0:
            r = q
            fill[2] += 1
            break
        q = (q + 1) & mask
    if r < 0:
        q = home
        for _ in range(WINDOW):
            meta = rows[q, 2]
            if (meta & HIT) == 0:
                r = q
                break
            rows[q, 2] = meta & ~np.int64(HIT)
            q = (q + 1) & mask
        if r < 0:
            r = home
    rows[r, 0] = w0
    rows[r, 1] = w1
    off = fill[0]
    for i in range(long_bytes):
        byte_pool[off + i] = buf[s + INLINE_BYTES + i]
    fill[0] = off + long_bytes
    meta = np.int64(n) | (np.int64(k) << _K_SHIFT) | (np.int64(off) << _OFF_SHIFT)
    if inline:
        word = np.int64(0)
        for i in range(min(k, 3)):
            word |= np.int64(ids[at + i]) << (_ID_BITS * i)
        rows[r, 3] = word
        if k > 3:
            meta |= np.int64(ids[at + 3]) << _ID3_SHIFT
    else:
        i0 = fill[1]
        for i in range(k):
            id_pool[i0 + i] = ids[at + i]
        fill[1] = i0 + k
        rows[r, 3] = i0
        meta |= POOLED
    rows[r, 2] = meta


# Pieces that mostly do not recur (long runs of Han or kana: ~9% recur; any piece past MAX_PIECE
# bytes) are looked up and kept only from the third time they are met: two bits per hash of a piece
# met (met once, met twice; 2 x 128 Kbit, 32 KB: they stay in the core's cache), the last word
# counting the first bits set; all are cleared once ADMIT_BITS / 8 are set (16K pieces, ~600 KB of
# Japanese), so a false "met before" stays below ~1 in 8.
ADMIT_BITS = 1 << 17
ADMIT_WORDS = ADMIT_BITS // 64


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def met_before(admit, h):
    """Whether a piece of hash ``h`` was met at least twice before: its bit is set in both halves of
    ``admit`` (uint64[2 * ADMIT_WORDS + 1]); sets the bit in the first half, or in the second when the
    first was set. A stand-in of one word (a cache that keeps nothing) answers False."""
    if admit.shape[0] <= 2 * ADMIT_WORDS:
        return False
    bit = (h >> 40) & (ADMIT_BITS - 1)  # other bits than the home row's (the low ones)
    w = bit >> 6
    mask = np.uint64(1) << np.uint64(bit & 63)
    if admit[w] & mask:
        if admit[ADMIT_WORDS + w] & mask:
            return True
        admit[ADMIT_WORDS + w] |= mask
        return False
    admit[w] |= mask
    admit[2 * ADMIT_WORDS] += np.uint64(1)
    if admit[2 * ADMIT_WORDS] >= np.uint64(ADMIT_BITS // 8):
        for k in range(2 * ADMIT_WORDS + 1):
            admit[k] = np.uint64(0)
    return False


@njit(cache=True, nogil=True, _nrt=False)
def _empty_pools(rows, fill):
    """Forget every piece that keeps bytes or ids in a pool and start both pools again, so that long
    pieces and pieces of many ids stay cached in a long run. An emptied row may hide rows after it in
    its window from lookups (they stop at an empty row): those pieces read as absent and are merged
    again, never wrong. O(SLOTS), once per pool's worth of such pieces."""
    for r in range(rows.shape[0]):
        meta = rows[r, 2]
        if meta != 0 and ((meta & POOLED) != 0 or (meta & N_MASK) > INLINE_BYTES):
            for j in range(ROW):
                rows[r, j] = 0
            fill[2] -= 1
    fill[0] = 0
    fill[1] = 0


SEED_AHEAD = 16


@njit(cache=True, nogil=True)
def seed_cache(rows, byte_pool, id_pool, fill, blob, offsets, token_ids, limit):
    """Store up to ``limit`` tokens of ``token_ids`` (in that order) as pieces that encode to
    themselves: the caller passes tokens BPE builds from their own bytes, short enough to stay inline,
    most frequent first. A word met for the first time is then often a hit; seeds are not marked hit,
    so the pieces text brings replace them first. Returns how many were stored. O(limit).

    The home row of the token SEED_AHEAD places on is requested while one is stored: the rows are
    megabytes (o200k: 16 MB) and each token's is a random one, so storing them one miss at a time took
    ~370 ns a token (73 ms of o200k's first call)."""
    one = np.empty(1, np.int32)
    n = min(limit, token_ids.shape[0])
    for i in range(n):
        if i + SEED_AHEAD < n:
            ahead = token_ids[i + SEED_AHEAD]
            prefetch_row(rows, home_row(rows, piece_key(blob, offsets[ahead], offsets[ahead + 1])[0]))
        t = token_ids[i]
        one[0] = t
        cache_put(rows, byte_pool, id_pool, fill, blob, offsets[t], offsets[t + 1], one, 0, 1)
    return n
