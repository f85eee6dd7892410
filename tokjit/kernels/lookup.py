"""Exact byte-string -> token id lookup over flat arrays (no Python dict in the hot path).

The vocabulary is one byte blob with offsets; an open-addressing hash table of int32 ids indexes it.
Collisions are resolved by linear probing and confirmed by comparing the bytes in the blob, so a lookup
is exact. Pairs of ids (merge rules) use a second table, packed to 8 bytes an entry (:func:`pair_slot`).
"""

from __future__ import annotations

import numpy as np
from numba import njit

FNV_OFFSET = np.int64(-3750763034362895579)  # 14695981039346656037 as a wrapping int64
FNV_PRIME = np.int64(1099511628211)
PAIR_MIX = np.int64(-7046029254386353131)  # 0x9E3779B97F4A7C15 as a wrapping int64


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def hash_bytes(buf, start, end):
    """FNV-1a over ``buf[start:end]``; int64 arithmetic wraps, which is what we want."""
    h = FNV_OFFSET
    for i in range(start, end):
        h = (h ^ np.int64(buf[i])) * FNV_PRIME
    return h ^ (h >> 31)


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def bytes_equal(a, a_start, b, b_start, n):
    """``a[a_start:a_start + n] == b[b_start:b_start + n]``."""
    for k in range(n):
        if a[a_start + k] != b[b_start + k]:
            return False
    return True


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def lookup_bytes(buf, start, end, blob, offsets, table):
    """Id of the token whose bytes equal ``buf[start:end]``, or -1.

    Linear probing over ``table`` (power-of-two size, -1 = empty); each candidate is confirmed by a
    byte comparison against ``blob[offsets[id]:offsets[id + 1]]``. Expected O(end - start).
    """
    mask = table.shape[0] - 1
    slot = hash_bytes(buf, start, end) & mask
    n = end - start
    while True:
        tid = table[slot]
        if tid < 0:
            return -1
        ts = offsets[tid]
        if offsets[tid + 1] - ts == n and bytes_equal(blob, ts, buf, start, n):
            return tid
        slot = (slot + 1) & mask


@njit(cache=True, nogil=True)
def build_bytes_table(blob, offsets, include, table):
    """Insert every id with ``include[id]`` into ``table`` (filled with -1 beforehand).

    When two ids share the same bytes, the lowest id wins, as a dict built in id order would keep
    the first. O(total bytes).
    """
    mask = table.shape[0] - 1
    n_tokens = offsets.shape[0] - 1
    for tid in range(n_tokens):
        if not include[tid]:
            continue
        s = offsets[tid]
        e = offsets[tid + 1]
        if lookup_bytes(blob, s, e, blob, offsets, table) >= 0:
            continue
        slot = hash_bytes(blob, s, e) & mask
        while table[slot] >= 0:
            slot = (slot + 1) & mask
        table[slot] = tid


PAIR_FIELD_BITS = 21  # a pair-table entry packs left id, right id and a row index or merged id, 21 bits each
PAIR_FIELD_MASK = (1 << PAIR_FIELD_BITS) - 1
PAIR_MAX_LOAD = 0.8  # entries per slot a pair table may reach before it doubles


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def pair_key(left, right):
    """The key ``left << 32 | right`` of a pair of ids in the pair caches; its hash places the pair in
    the pair table (:func:`pair_home`)."""
    return (np.int64(left) << 32) | np.int64(right)


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def pair_home(key, slots):
    """The first entry of ``slots`` (see :func:`pair_slot`) a lookup of ``key`` reads."""
    h = key * PAIR_MIX
    return (h ^ (h >> 29)) & (slots.shape[0] - 1)


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def pair_slot(left, right, slots):
    """Index of the pair (left, right) in ``slots`` (found, or the empty entry where it would go).

    An entry is ``left << 42 | right << 21 | low`` (-1 empty; all three below 2**21): ``low`` indexes
    the pair's ``rank << 32 | merged id`` in the table's rows, or, in a table without rows, is the
    merged id and stands for the rank too (:func:`pair_value`). Eight bytes an entry keep a
    200k-merge table at 2 MB: random reads of an 8 MB table cost ~130 ns on the VMs measured (TLB and
    cache misses), of a 2 MB one ~15 ns, and a merge loop probes it for every new pair. Linear
    probing; the load stays <= PAIR_MAX_LOAD.
    """
    want = (np.int64(left) << PAIR_FIELD_BITS) | np.int64(right)
    mask = slots.shape[0] - 1
    slot = pair_home(pair_key(left, right), slots)
    while True:
        k = slots[slot]
        if k < 0 or (k >> PAIR_FIELD_BITS) == want:
            return slot
        slot = (slot + 1) & mask


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def pair_value(left, right, pair_table):
    """``rank << 32 | merged id`` of the pair (left, right) in ``pair_table`` = (slots, rows), or -1
    when the two do not merge. Without rows (``rows`` empty) the merged id is the rank: rules whose
    ranks rise with their merged ids (tiktoken's) are compared by id, saving a dependent read per
    lookup."""
    slots, rows = pair_table[0], pair_table[1]  # (a kernel's table carries its merge bits third)
    entry = slots[pair_slot(left, right, slots)]
    if entry < 0:
        return np.int64(-1)
    return entry_value(entry, rows)


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def entry_value(entry, rows):
    """``rank << 32 | merged id`` of a filled pair-table entry (see :func:`pair_slot`)."""
    low = entry & PAIR_FIELD_MASK
    if rows.shape[0] == 0:
        return (low << 32) | low
    return rows[low]


# A pair table's merge bits: a blocked Bloom filter of its pairs, two bits of one word per pair, ~5
# bits a pair. Most pairs a merge loop looks up do not merge (a piece's last symbols, every new pair
# that stays): in fresh English text (Llama 3) the table's slot loads were a quarter of the time, each
# a miss in a table past the core's own cache. The bits answer those from 128 KB, a false "may merge"
# (5% of the pairs outside Llama 3's table, 10% for o200k) costing the lookup it would have cost
# anyway. At 256 KB (~10 bits a pair) their own loads missed as often and nothing was gained.
MERGE_BITS_MIX = np.int64(-2956836059437891181)  # 0xD6E8FEB86659FD93 as a wrapping int64
MERGE_BITS_PER_PAIR = 5
MERGE_BITS_MAX_WORDS = 1 << 14  # 128 KB


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def merge_bits_of(key, merge_bits):
    """(word index, two-bit mask) of pair ``key`` (:func:`pair_key`) in ``merge_bits`` (a power of two
    of uint64 words); bits from the product's middle, which every bit of the key reaches."""
    h = key * MERGE_BITS_MIX
    word = (h >> 40) & (merge_bits.shape[0] - 1)
    mask = (np.uint64(1) << np.uint64((h >> 20) & 63)) | (np.uint64(1) << np.uint64((h >> 26) & 63))
    return word, mask


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def may_merge(key, merge_bits):
    """False when pair ``key`` is surely not in the pair table whose ``merge_bits`` these are."""
    word, mask = merge_bits_of(key, merge_bits)
    return (merge_bits[word] & mask) == mask


@njit(cache=True, nogil=True)
def build_merge_bits(slots, merge_bits):
    """Set the merge bits (zeros beforehand) of every pair in ``slots`` (see :func:`pair_slot`)."""
    for entry in slots:
        if entry >= 0:
            key = pair_key(entry >> (2 * PAIR_FIELD_BITS), (entry >> PAIR_FIELD_BITS) & PAIR_FIELD_MASK)
            word, mask = merge_bits_of(key, merge_bits)
            merge_bits[word] |= mask


def merge_bits_words(n: int) -> int:
    """Words of merge bits for ``n`` pairs: a power of two near MERGE_BITS_PER_PAIR bits a pair."""
    words = 1
    while words * 64 < MERGE_BITS_PER_PAIR * n and words < MERGE_BITS_MAX_WORDS:
        words *= 2
    return words


@njit(cache=True, nogil=True)
def build_pair_table(lefts, rights, lows, slots):
    """Insert merge rules as packed entries with low fields ``lows`` (see :func:`pair_slot`); the
    first (lowest-rank) rule for a pair wins, as in HF ``tokenizers``."""
    for i in range(lefts.shape[0]):
        slot = pair_slot(lefts[i], rights[i], slots)
        if slots[slot] >= 0:
            continue
        slots[slot] = (np.int64(lefts[i]) << (2 * PAIR_FIELD_BITS)) | (np.int64(rights[i]) << PAIR_FIELD_BITS) \
            | np.int64(lows[i])


@njit(cache=True, nogil=True)
def token_split_pairs(blob, offsets, include, table, out_left, out_right, out_merged):
    """Every cut of an included token into two included tokens, as (left id, right id, token id)
    rows; returns the number written (``out_*`` hold sum(len - 1) over included tokens).

    This is the pair table of tiktoken-style BPE, where two adjacent parts merge whenever their
    concatenation is a token, so merging by id pair replaces hashing the merged bytes.
    O(sum of len^2) over the vocabulary.
    """
    n = 0
    for tid in range(offsets.shape[0] - 1):
        if not include[tid]:
            continue
        s = offsets[tid]
        e = offsets[tid + 1]
        for cut in range(s + 1, e):
            left = lookup_bytes(blob, s, cut, blob, offsets, table)
            if left < 0:
                continue
            right = lookup_bytes(blob, cut, e, blob, offsets, table)
            if right < 0:
                continue
            out_left[n] = left
            out_right[n] = right
            out_merged[n] = tid
            n += 1
    return n


def table_size(n: int) -> int:
    """Power of two with load factor <= 0.5."""
    size = 16
    while size < 2 * n:
        size *= 2
    return size


def pair_table_size(n: int) -> int:
    """Power of two with load factor <= PAIR_MAX_LOAD (and at least one empty slot)."""
    size = 16
    while n > PAIR_MAX_LOAD * size or n >= size:
        size *= 2
    return size


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def lowest_merge(symbols, m, pair_table):
    """(position, rank, merged id) of the leftmost lowest-rank pair of ``symbols[:m]`` in
    ``pair_table`` (slots, rows), or (-1, -1, -1) when no pair merges. O(m)."""
    best = np.int64(-1)
    best_rank = np.int64(-1)
    best_merged = np.int64(-1)
    for k in range(m - 1):
        value = pair_value(symbols[k], symbols[k + 1], pair_table)
        if value < 0:
            continue
        r = value >> 32
        if best < 0 or r < best_rank:
            best_rank = r
            best = k
            best_merged = value & 0xFFFFFFFF
    return best, best_rank, best_merged


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def apply_merge(symbols, m, k, merged):
    """Replace ``symbols[k], symbols[k + 1]`` by ``merged``; returns the new length."""
    symbols[k] = merged
    for j in range(k + 1, m - 1):
        symbols[j] = symbols[j + 1]
    return m - 1


@njit(cache=True, nogil=True)
def reachable_merges(blob, offsets, table, include, byte_ids, by_chars, pair_table, symbols, out_left, out_right,
                     out_merged, out_rank):
    """Of the rules in ``pair_table`` (slots, rows), the one merge that can form each included token;
    returns the number of (left, right, token, rank) rows written.

    In byte-level BPE that merges by rank, the merges inside a token's bytes happen in the same order
    whatever surrounds them, as long as no merge crosses the token's edges (a crossing merge would keep
    the token from forming at all). So a token forms in running text only from the last merge of BPE
    on its own bytes, and only if that BPE ends in the token itself; two adjacent symbols are always
    such a state of the BPE of their joined bytes, so any other rule is never applied, and the table
    of these rows (one per reachable token: 200k instead of o200k's 446k cuts, 127k instead of Llama
    3's 280k merges) gives the same ids in less memory. The last merge is found by running that BPE: a
    leftmost lowest-rank scan over ``symbols`` (capacity >= the longest token). O(sum of len^2) over
    the vocabulary. The same holds when symbols start as characters (``by_chars``: each UTF-8
    character's id in the vocabulary's ``table``, as SentencePiece-style BPE starts) instead of
    bytes (``byte_ids``).
    """
    n = 0
    for tid in range(offsets.shape[0] - 1):
        s = offsets[tid]
        e = offsets[tid + 1]
        if not include[tid] or e - s < 2:
            continue
        m = 0
        ok = True
        i = s
        while i < e:
            step = 1
            if by_chars:
                lead = blob[i]
                step = 1 if lead < 0x80 else (2 if lead < 0xE0 else (3 if lead < 0xF0 else 4))  # as bpe_core
                step = min(step, e - i)
                b = lookup_bytes(blob, i, i + step, blob, offsets, table)
            else:
                b = byte_ids[blob[i]]
            if b < 0:
                ok = False
                break
            symbols[m] = b
            m += 1
            i += step
        if not ok or m < 2:
            continue
        last_left = -1
        last_right = -1
        last_rank = -1
        while m > 1:
            best, best_rank, best_merged = lowest_merge(symbols, m, pair_table)
            if best < 0:
                break
            last_left = symbols[best]
            last_right = symbols[best + 1]
            last_rank = best_rank
            m = apply_merge(symbols, m, best, best_merged)
        if m == 1 and symbols[0] == tid:
            out_left[n] = last_left
            out_right[n] = last_right
            out_merged[n] = tid
            out_rank[n] = last_rank
            n += 1
    return n
