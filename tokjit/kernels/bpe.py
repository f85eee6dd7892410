"""Byte-pair encoding of pre-tokenized pieces.

One kernel serves every BPE flavour; the flavour is a few flag bits fixed when the vocab compiles:

* symbols start as bytes (byte-level BPE: GPT-2, tiktoken, Llama 3) or as UTF-8 characters
  (SentencePiece-style BPE: Llama 2, Mistral, Gemma);
* a pair's rank comes from an explicit merge list (HF ``merges``, GGUF ``tokenizer.ggml.merges``) or
  from the merged bytes themselves (tiktoken: rank of the concatenation; SentencePiece: order of the
  concatenated piece's score);
* symbols left without a token fall back to ``<0xXX>`` byte tokens or to the unknown token.
"""

from __future__ import annotations

import numpy as np
from numba import cfunc, njit, types
from numba.cpython.unsafe.numbers import trailing_zeros

from tokjit.kernels.atoms import atom_at, maybe_unreachable
from tokjit.kernels.lookup import PAIR_MIX, lookup_bytes, may_merge, merge_bits_of, pair_home, pair_key, pair_value
from tokjit.kernels.memops import bytes_at, call_at, data_address, find_byte, prefetch_at
from tokjit.kernels.piece_cache import MAX_PIECE
from tokjit.kernels.structs import BPE_SCRATCH, BPE_VOCAB, borrow, struct_address, struct_at
from tokjit.kernels.utf8 import decode_at, decode_bmp, put_utf8, utf8_len

NO_RANK = 2147483647

FLAG_BYTE_SYMBOLS = 1  # initial symbols are single bytes, else UTF-8 characters
FLAG_WHOLE_PIECE_FIRST = 2  # a piece that is itself a token is emitted as is (tiktoken, ignore_merges)
FLAG_RANK_BY_BYTES = 4  # rank = merge_rank[id of the merged bytes], else the pair table
FLAG_BYTE_FALLBACK = 8  # unknown symbols become <0xXX> tokens
FLAG_FUSE_UNK = 16  # consecutive unknown symbols give one unknown token
FLAG_RESEGMENT_UNUSED = 32  # merged UNUSED pieces are split back into their parts (sentencepiece)

FLAG_SPLIT_SPACE_SYMBOL = 64  # cut pieces before U+2581 where no token could merge across the cut
FLAG_ATOMS = 128  # byte-level: characters BPE always forms whole start as one symbol (kernels.atoms)
# ``unreachable_bits`` holds every token BPE cannot build from its bytes (kernels.atoms.mark_unreachable):
# the whole-piece rule then needs its lookup only for pieces whose bit is set, as BPE builds the others
FLAG_UNREACHABLE_KNOWN = 256
# HF's continuing_subword_prefix / end_of_word_suffix: a symbol after a piece's first / the piece's last
# starts as the token spelled with the prefix / suffix (``affix_keys``, :func:`affixed_symbol_id`)
FLAG_PREFIX = 512
FLAG_SUFFIX = 1024
# HF's byte fallback: a character goes to <0xXX> tokens only when every one of its bytes has one, else it
# is unknown as a whole, and that unknown token waits past the byte-fallback characters after it (HF adds
# it before the next known symbol or at the word's end). Without the flag a byte lacking a token is
# unknown alone (the loader has put unk_id in byte_ids) or dropped (none): llama.cpp's rule.
FLAG_FALLBACK_WHOLE_CHAR = 2048

TOKEN_UNUSED = 1  # bit in ``token_flags``

# Pieces up to this many symbols merge by a linear scan (cache friendly, like tiktoken's small path);
# longer ones use a heap so "x" * 1_000_000 stays O(n log n).
SCAN_LIMIT = 48


@njit(cache=True, nogil=True)
def char_token_ids(blob, offsets, table, out):
    """``out[cp]`` = id of the token that is exactly the BMP character ``cp`` (-1: none), for every
    code point below 0x10000 (surrogates -1): the initial symbols of character-symbol BPE by index
    instead of a hash probe per character (``out`` int32[0x10000]). O(65536) lookups, once per model."""
    buf = np.zeros(3, np.uint8)
    for cp in range(0x10000):
        out[cp] = -1
        if 0xD800 <= cp < 0xE000:
            continue
        out[cp] = lookup_bytes(buf, 0, put_utf8(buf, 0, cp), blob, offsets, table)


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def affixed_symbol_id(affix_keys, affix_ids, variant, code):
    """The id of the token spelling symbol ``code`` (a byte, or a code point) with the affixes of
    ``variant`` (1: the prefix, 2: the suffix, 3: both), or -1: a binary search of ``affix_keys``
    (sorted ``variant << 32 | code``; ``affix_ids`` alongside). O(log tokens)."""
    key = (variant << 32) | code
    lo = 0
    hi = affix_keys.shape[0]
    while lo < hi:
        mid = (lo + hi) >> 1
        if affix_keys[mid] < key:
            lo = mid + 1
        else:
            hi = mid
    if lo < affix_keys.shape[0] and affix_keys[lo] == key:
        return np.int64(affix_ids[lo])
    return np.int64(-1)


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def _pair_rank(buf, s_left, id_left, e_right, id_right, by_bytes,
               tok_blob, tok_offsets, tok_table, merge_rank,
               pair_table, pair_cache, max_token_len):
    """(rank, merged id) of two adjacent symbols, or (NO_RANK, -1) when they do not merge.

    Pair-table answers, found or not, go through ``pair_cache`` (2 x a power of two int64: key
    ``left << 32 | right`` or -1, then ``rank << 32 | merged id`` or -1 for "no merge")."""
    if by_bytes:
        if e_right - s_left > max_token_len:
            return NO_RANK, -1
        merged = lookup_bytes(buf, s_left, e_right, tok_blob, tok_offsets, tok_table)
        if merged < 0:
            return NO_RANK, -1
        rank = merge_rank[merged]
        if rank < 0:
            return NO_RANK, -1
        return rank, merged
    if id_left < 0 or id_right < 0:
        return NO_RANK, -1
    value = _cached_pair_value(id_left, id_right, pair_table, pair_cache)
    if value < 0:
        return NO_RANK, -1
    return value >> 32, value & 0xFFFFFFFF


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def _cached_pair_value(id_left, id_right, pair_table, pair_cache):
    """``rank << 32 | merged id`` of the pair (id_left, id_right) (both >= 0), or -1 when it does not
    merge: from ``pair_cache`` when the pair is there, else -1 when the table's merge bits rule it out
    (``pair_table`` = (slots, rows, merge bits)), else from the pair table, then kept there."""
    key = pair_key(id_left, id_right)
    c = _pair_cache_entry(key, pair_cache)
    if pair_cache[2 * c] == key:
        return pair_cache[2 * c + 1]
    if not may_merge(key, pair_table[2]):
        return np.int64(-1)
    value = pair_value(id_left, id_right, pair_table)
    pair_cache[2 * c] = key
    pair_cache[2 * c + 1] = value
    return value


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def _pair_cache_entry(key, pair_cache):
    """The entry of the direct-mapped ``pair_cache`` that holds pair ``key`` (other hash bits than the
    pair table's home slot, :func:`~tokjit.kernels.lookup.pair_home`)."""
    return ((key * PAIR_MIX) >> 40) & ((pair_cache.shape[0] >> 1) - 1)


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def _prefetch_pair(id_left, id_right, pair_table, pair_cache):
    """Start fetching what a lookup of (id_left, id_right) reads (its pair cache entry, its word of the
    merge bits, its pair-table slot), so that the misses of several lookups overlap (the pair table of
    a 200k vocabulary is 2 MB, past the core's own cache, and a merge's two new pairs, or a piece's
    first pairs, do not depend on each other). The merge bits fetched too: read without it they stalled
    as the table had (fresh English, Llama 3: +6% with the bits alone, +13% with this)."""
    if id_left >= 0 and id_right >= 0:
        key = pair_key(id_left, id_right)
        prefetch_at(pair_cache, 2 * _pair_cache_entry(key, pair_cache))
        prefetch_at(pair_table[2], merge_bits_of(key, pair_table[2])[0])
        prefetch_at(pair_table[0], pair_home(key, pair_table[0]))


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def _space_split_end(buf, ps, pe, unsafe_prev):
    """End of the first sub-piece of ``buf[ps:pe]``: the first U+2581 after its first character whose
    preceding character is not in ``unsafe_prev`` (code points that end a token's prefix right before a
    U+2581), else ``pe``. A merge never crosses such a cut, so encoding the parts apart is exact, and
    it keeps whole sentencepiece lines (one piece) off the slower heap path."""
    q = ps + utf8_len(buf[ps])
    while q + 3 <= pe:
        # the next 0xE2, eight bytes a step: a byte loop mispredicted its exit at every word (10% of
        # a llama2 profile of 5 KB English documents)
        q = find_byte(buf, q, pe - 2, 0xE2)
        if q + 3 > pe:
            break
        if buf[q + 1] == 0x96 and buf[q + 2] == 0x81:
            k = q - 1
            while k > ps and (buf[k] & 0xC0) == 0x80:
                k -= 1
            lead = np.int64(buf[k])
            n = q - k
            if n == 1:
                cp = lead
            else:
                cp = lead & (0x7F >> n)
                for t in range(k + 1, q):
                    cp = (cp << 6) | (np.int64(buf[t]) & 0x3F)
            safe = True
            for u in range(unsafe_prev.shape[0]):
                if unsafe_prev[u] == cp:
                    safe = False
                    break
            if safe:
                return q
            q += 3
        else:
            q += 1
    return pe


# cut_bits (BPEModel.cut_bits): words 0..1023 a bit per BMP code point, then from TAIL_CUTS two words
# per ASCII character (see piece_part_end)
TAIL_CUTS = 0x10000 // 64

# A part longer than this (the piece cache's longest) is also cut around the characters in the
# vocabulary's ``cut_bits``: a line of words between newlines, one sentencepiece piece, then goes
# through the cache a word at a time instead of through the heap path on every call.
LONG_PIECE_BYTES = MAX_PIECE


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def piece_part_end(buf, ps, pe, unsafe_prev, cut_bits, space_end):
    """(end of the first part of ``buf[ps:pe]`` a SentencePiece-style BPE may encode on its own, end of
    the U+2581 part it lies in). Parts end before U+2581 (:func:`_space_split_end`; ``space_end``, the
    end a previous call returned for this piece, is reused while it lies ahead of ``ps``, so a long
    part is scanned once, not once per cut), while over ``LONG_PIECE_BYTES`` around the first
    character in ``cut_bits`` (``BPEModel.cut_bits``, or one word: none), and below it around a
    newline when that is in ``cut_bits`` and before a last ASCII character that no merged token joins
    to the ASCII character before it. No token a merge makes contains such a character beside
    another, so no merge crosses the cut and the parts' ids are the whole's. O(bytes scanned); over a
    piece's parts each byte is scanned a bounded number of times."""
    if space_end <= ps:
        space_end = _space_split_end(buf, ps, pe, unsafe_prev)
    end = space_end
    if cut_bits.shape[0] > 1:
        if end - ps > LONG_PIECE_BYTES:
            i = ps
            while i < end:
                lead = buf[i]
                if lead < 0x80:
                    cp, n = np.int64(lead), np.int64(1)
                else:
                    cp, n = decode_bmp(buf, i, end)
                if cp >= 0 and (cut_bits[cp >> 6] >> np.uint64(cp & 63)) & np.uint64(1):
                    return (i if i > ps else i + n), space_end
                i += n
        elif (cut_bits[0] >> np.uint64(10)) & np.uint64(1):
            # a newline is cut around in short parts too: "\u2581end\nThe" was a new piece wherever two
            # lines met (llama2: a third of the pieces new English text sent to BPE). (Searched only
            # in parts of LONG_PIECE_BYTES or less, so a long part's tail is read at most that often.)
            newline = find_byte(buf, ps, end, 10)
            if newline < end:
                end = newline if newline > ps else newline + 1
        # a last ASCII character no merged token joins to the one before it is a part of its own:
        # "\u2581him," is "\u2581him" and "," (a quarter of the pieces new English sent to BPE)
        if end - ps >= 2 and buf[end - 1] < 0x80 and buf[end - 2] < 0x80:
            last = np.int64(buf[end - 1])
            prev = np.int64(buf[end - 2])
            if (cut_bits[TAIL_CUTS + 2 * last + (prev >> 6)] >> np.uint64(prev & 63)) & np.uint64(1):
                end -= 1
    return end, space_end


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def _note_candidate(merged, left_len, token_flags, rev_left, touched, n_touched):
    """Remember how an UNUSED piece was last proposed as a merge (sentencepiece's ``rev_merge``, which
    keeps the latest proposal per piece, executed or not). Returns the new ``n_touched``."""
    if merged >= 0 and (token_flags[merged] & TOKEN_UNUSED) != 0:
        if rev_left[merged] < 0:
            touched[n_touched] = merged
            n_touched += 1
        rev_left[merged] = left_len
    return n_touched


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def _emit_one(buf, s, e, sid, byte_fallback, whole_char, fuse_unk, unk_id, byte_ids, last_was_unk,
              out_ids, out_starts, out_ends, n_out):
    """Write symbol ``buf[s:e]`` (token ``sid``, -1 = none): the token, its bytes, or unknown
    (``whole_char``: FLAG_FALLBACK_WHOLE_CHAR's rule). Returns (count, whether the last id written
    is an unknown token that a next unknown symbol may fuse with)."""
    if sid >= 0:
        out_ids[n_out] = sid
        out_starts[n_out] = s
        out_ends[n_out] = e
        return n_out + 1, False
    complete = True
    if whole_char:
        for b in range(s, e):
            complete = complete and byte_ids[buf[b]] >= 0
    if byte_fallback and complete:
        pending = whole_char and last_was_unk
        unk_start, unk_end = s, e
        if pending:  # HF's unknown token is still to come: the bytes go before it
            n_out -= 1
            unk_start, unk_end = out_starts[n_out], out_ends[n_out]
        for b in range(s, e):
            if byte_ids[buf[b]] < 0:
                continue  # no <0xXX> token and no unknown token: llama.cpp drops the byte
            out_ids[n_out] = byte_ids[buf[b]]
            out_starts[n_out] = b
            out_ends[n_out] = b + 1
            n_out += 1
        if pending:
            out_ids[n_out] = unk_id
            out_starts[n_out] = unk_start
            out_ends[n_out] = unk_end
            n_out += 1
        return n_out, pending
    if unk_id >= 0:
        if fuse_unk and last_was_unk:
            out_ends[n_out - 1] = e
            return n_out, True
        out_ids[n_out] = unk_id
        out_starts[n_out] = s
        out_ends[n_out] = e
        return n_out + 1, True
    return n_out, last_was_unk


# The heap of long pieces is 4-ary: half the levels of a binary heap, and a node's children are 32
# contiguous bytes, so on a piece whose heap outgrows the caches a sift touches half the lines.
@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def _heap_push(heap, size, key):
    i = size
    while i > 0:
        parent = (i - 1) >> 2
        if heap[parent] <= key:
            break
        heap[i] = heap[parent]
        i = parent
    heap[i] = key
    return size + 1


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def _heap_pop(heap, size):
    top = heap[0]
    size -= 1
    key = heap[size]
    i = 0
    while True:
        first = 4 * i + 1
        if first >= size:
            break
        child = first
        best = heap[first]
        last = min(first + 4, size)
        for c in range(first + 1, last):
            if heap[c] < best:
                best = heap[c]
                child = c
        if key <= best:
            break
        heap[i] = best
        i = child
    heap[i] = key
    return top, size


# A long piece's symbols for the heap path: one record of LINK_WORDS int32 per symbol, four to a cache
# line, so that a merge popped at a random position touches one or two lines instead of one per array
# (past ~200K symbols the workspace outgrows the caches and every line touched is a miss). A symbol's
# start never moves (a merge keeps the left symbol) and stays in ``ws_start``; its end is its next
# symbol's start; its previous symbol is the first live record to its left, past the ones merged into
# that symbol (fewer than the longest token's length).
LINK_WORDS = 4
L_ID = 0  # token of the symbol (-1: none)
L_RANK = 1  # rank of the pair (symbol, next symbol); NO_RANK when it does not merge, -1 once merged away
L_MERGED = 2  # the id that pair merges into
L_NEXT = 3  # -1 for the last symbol


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def _prefetch_around(links, k, m):
    """Start fetching the records of symbol ``k`` and of its first neighbours, which a merge at ``k``
    reads (they are further away once their own neighbours merged, but most pairs merge early)."""
    prefetch_at(links, k * LINK_WORDS)
    if k > 0:
        prefetch_at(links, (k - 1) * LINK_WORDS)
    if k + 1 < m:
        prefetch_at(links, (k + 1) * LINK_WORDS)


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def _init_link(links, k, m, ws_id):
    """The record of initial symbol ``k`` of ``m``."""
    rk = k * LINK_WORDS
    links[rk + L_ID] = ws_id[k]
    links[rk + L_RANK] = NO_RANK
    links[rk + L_NEXT] = k + 1 if k + 1 < m else -1


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def _link_end(links, ws_start, k, piece_end):
    """End of symbol ``k``: its next symbol's start."""
    nk = links[k * LINK_WORDS + L_NEXT]
    return ws_start[nk] if nk >= 0 else piece_end


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def _link_pair(buf, ws_start, piece_end, links, a, by_bytes, tok_blob, tok_offsets, tok_table, merge_rank,
               pair_table, pair_cache, max_token_len):
    """Rank and merged id of the pair (symbol ``a``, its next symbol), stored in ``a``'s record."""
    ra = a * LINK_WORDS
    b = links[ra + L_NEXT]
    s_left = np.int64(0)
    e_right = np.int64(0)
    if by_bytes:  # the spans only matter to a merge rule that looks the bytes up
        s_left = ws_start[a]
        e_right = _link_end(links, ws_start, b, piece_end)
    r, mid = _pair_rank(buf, s_left, links[ra + L_ID], e_right, links[b * LINK_WORDS + L_ID],
                        by_bytes, tok_blob, tok_offsets, tok_table, merge_rank, pair_table, pair_cache,
                        max_token_len)
    links[ra + L_RANK] = r
    links[ra + L_MERGED] = mid
    return r, mid


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def _lowest_ranked(ranks, m):
    """Index of the pair to merge among the ``m - 1`` pairs of ``m`` symbols (``ranks[k]`` = ``rank <<
    32 | merged id`` of symbol ``k`` and the next): the lowest rank, the leftmost of equals, as HF and
    tiktoken take it; -1 when no pair merges (every rank NO_RANK). O(m)."""
    best = np.int64(NO_RANK)
    bi = -1
    for k in range(m - 1):
        r = ranks[k] >> 32
        if r < best:
            best = r
            bi = k
    return bi


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def _merge_pair(ids, ranks, bi, m):
    """Merge symbol ``bi`` with the next (into the id its rank word holds) in the compact arrays of
    ``m`` symbols; returns ``m - 1``. The pairs around ``bi`` are stale: the caller ranks them again."""
    ids[bi] = np.int32(ranks[bi] & 0xFFFFFFFF)
    for k in range(bi + 1, m - 1):
        ids[k] = ids[k + 1]
        ranks[k] = ranks[k + 1]
    return m - 1


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def _prefetch_new_pairs(ids, bi, m, pair_table, pair_cache):
    """Start fetching the two pairs a merge at ``bi`` made (with the symbol before and after)."""
    if bi > 0:
        _prefetch_pair(ids[bi - 1], ids[bi], pair_table, pair_cache)
    if bi < m - 1:
        _prefetch_pair(ids[bi], ids[bi + 1], pair_table, pair_cache)


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def _prefetch_successors(ids, ranks, k, m, pair_table, pair_cache):
    """Start fetching the two pairs a merge at ``k`` would make (``ranks[k]`` holds the merged id), in
    case pair ``k`` merges while its neighbours stand. Issued as soon as the pair's rank is known, one
    or more merges before that merge: a merge's new pairs, fetched only once it is made, each waited
    for a pair-table miss (~13% of a fresh English part's time, o200k), one merge after another."""
    if (ranks[k] >> 32) < NO_RANK:
        merged = np.int32(ranks[k] & 0xFFFFFFFF)
        if k > 0:
            _prefetch_pair(ids[k - 1], merged, pair_table, pair_cache)
        if k + 2 < m:
            _prefetch_pair(merged, ids[k + 2], pair_table, pair_cache)


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def _ranked_pair(id_left, id_right, pair_table, pair_cache):
    """``rank << 32 | merged id`` of two adjacent symbols, ``NO_RANK << 32`` when they do not merge."""
    value = _cached_pair_value(id_left, id_right, pair_table, pair_cache)
    return value if value >= 0 else np.int64(NO_RANK) << 32


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def segment_bpe(buf, s, e, atom_ids, edge_bits, byte_ids, pair_table, pair_cache, ids, ranks, out, at):
    """Byte-level BPE of ``buf[s:e]`` by id pairs, its ids written from ``out[at]``; returns their
    number, or -1 (nothing written) when it has more than SCAN_LIMIT symbols (:func:`bpe_core` takes
    those). ``buf[s:e]`` is a segment of a piece cut at atoms (:mod:`tokjit.kernels.atoms`), or a
    short new piece that cannot be a token BPE does not build (the caller checked).

    What :func:`bpe_core` does for it (its flags: byte symbols, atoms, ranks from the pair table,
    every byte a token), without what only other pieces need: no whole-piece rule (moot here), no
    byte spans (a merge is looked up by its two ids), no offsets. Segments are what new Chinese and
    Japanese text sends to BPE, ~10 symbols each, and bpe_core's fixed cost was half of the time of an
    all-atom one; new words are much the same. Symbols start as atoms or single
    bytes; the lowest-ranked pair merges first, the leftmost on ties (a linear scan over ``ranks``,
    ``rank << 32 | merged id`` of each symbol and the next). O(symbols^2)."""
    m = 0
    i = s
    while i < e:
        sid = byte_ids[buf[i]]
        step = 1
        if buf[i] >= 0xC2:
            tid, n_bytes = atom_at(buf, i, s, e, atom_ids, edge_bits)
            if tid >= 0:
                sid = tid
                step = n_bytes
        if m == SCAN_LIMIT:
            return -1
        ids[m] = sid
        m += 1
        i += step
    for k in range(m - 1):
        _prefetch_pair(ids[k], ids[k + 1], pair_table, pair_cache)
    for k in range(m - 1):
        ranks[k] = _ranked_pair(ids[k], ids[k + 1], pair_table, pair_cache)
    for k in range(m - 1):
        _prefetch_successors(ids, ranks, k, m, pair_table, pair_cache)
    while m > 1:
        bi = _lowest_ranked(ranks, m)
        if bi < 0:
            break
        m = _merge_pair(ids, ranks, bi, m)
        _prefetch_new_pairs(ids, bi, m, pair_table, pair_cache)
        if bi > 0:
            ranks[bi - 1] = _ranked_pair(ids[bi - 1], ids[bi], pair_table, pair_cache)
            _prefetch_successors(ids, ranks, bi - 1, m, pair_table, pair_cache)
        if bi < m - 1:
            ranks[bi] = _ranked_pair(ids[bi], ids[bi + 1], pair_table, pair_cache)
            _prefetch_successors(ids, ranks, bi, m, pair_table, pair_cache)
    for k in range(m):
        out[at + k] = ids[k]
    return m


# Pieces of at least this many symbols keep their candidates in sorted runs and rank buckets (below).
SORTED_PAIRS_MIN = 4096
RADIX_BITS = 11
PAIR_PREFETCH = 16  # entries of a sorted run whose records are fetched ahead
INSERTION_SORT_MAX = 256
NO_KEY = np.int64(0x7FFFFFFFFFFFFFFF)
ALL_BITS = np.uint64(0xFFFFFFFFFFFFFFFF)


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def _radix_sort(keys, tmp, counts, n, low_bit, n_bits):
    """Sort ``keys[:n]`` stably by their bits ``low_bit .. low_bit + n_bits - 1``: an LSD radix sort,
    RADIX_BITS a pass, O(n + 2^RADIX_BITS) per pass; ``tmp`` holds n, ``counts`` 2^RADIX_BITS."""
    src, dst = keys, tmp
    in_keys = True
    shift = low_bit
    n_digits = 1 << RADIX_BITS
    while shift < low_bit + n_bits:
        for d in range(n_digits):
            counts[d] = 0
        for i in range(n):
            counts[(src[i] >> shift) & (n_digits - 1)] += 1
        total = 0
        for d in range(n_digits):
            c = counts[d]
            counts[d] = total
            total += c
        for i in range(n):
            d = (src[i] >> shift) & (n_digits - 1)
            dst[counts[d]] = src[i]
            counts[d] += 1
        src, dst = dst, src
        in_keys = not in_keys
        shift += RADIX_BITS
    if not in_keys:
        for i in range(n):
            keys[i] = src[i]


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def _bit_length(x):
    n = 1
    while (np.int64(1) << n) <= x:
        n += 1
    return n


# Rank buckets: the candidates a merge creates, by rank, each a list (newest first) of pool entries
# ``position << 32 | next entry``; the pool grows down from the top of the heap's region while the heap
# grows up (together they never hold more than the 2m candidates merges create). ``rank_bits`` marks
# the ranks with a list, one bit per rank, then one bit per word of those, so the next occupied rank
# is a few word scans away.
@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def _bucket_push(region, top, n_pool, rank_heads, rank_bits, n_words, r, k):
    region[top - 1 - n_pool] = (np.int64(k) << 32) | (np.int64(rank_heads[r]) & 0xFFFFFFFF)
    rank_heads[r] = n_pool
    w = r >> 6
    rank_bits[w] |= np.uint64(1) << np.uint64(r & 63)
    rank_bits[n_words + (w >> 6)] |= np.uint64(1) << np.uint64(w & 63)
    return n_pool + 1


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def _next_bucket(rank_bits, n_words, r):
    """The smallest rank >= ``r`` with a bucket, else NO_KEY."""
    w = r >> 6
    if w >= n_words:
        return NO_KEY
    word = rank_bits[w] & (ALL_BITS << np.uint64(r & 63))
    if word != 0:
        return (w << 6) | np.int64(trailing_zeros(word))
    w += 1
    v = w >> 6
    n_top = rank_bits.shape[0] - n_words
    if v >= n_top:
        return NO_KEY
    word = rank_bits[n_words + v] & (ALL_BITS << np.uint64(w & 63))
    while word == 0:
        v += 1
        if v >= n_top:
            return NO_KEY
        word = rank_bits[n_words + v]
    w = (v << 6) | np.int64(trailing_zeros(word))
    return (w << 6) | np.int64(trailing_zeros(rank_bits[w]))


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def _open_bucket(region, top, rank_heads, rank_bits, n_words, r, opened, spare, pos_bits):
    """Empty bucket ``r`` into ``opened`` in position order; returns how many entries it had. A merge
    pass creates its candidates left to right, so a bucket is often sorted already; else a small one
    is insertion-sorted, a large one radix-sorted."""
    w = r >> 6
    rank_bits[w] &= ~(np.uint64(1) << np.uint64(r & 63))
    if rank_bits[w] == 0:
        rank_bits[n_words + (w >> 6)] &= ~(np.uint64(1) << np.uint64(w & 63))
    i = np.int64(rank_heads[r])
    rank_heads[r] = -1
    n = 0
    while i >= 0:
        e = region[top - 1 - i]
        opened[n] = e >> 32
        n += 1
        i = e & 0xFFFFFFFF
        if i == 0xFFFFFFFF:
            i = -1
    for j in range(n // 2):  # newest first -> in the order they came
        t = opened[j]
        opened[j] = opened[n - 1 - j]
        opened[n - 1 - j] = t
    ascending = True
    for j in range(1, n):
        if opened[j] < opened[j - 1]:
            ascending = False
            break
    if ascending:
        return n
    if n <= INSERTION_SORT_MAX:
        for j in range(1, n):
            v = opened[j]
            t = j - 1
            while t >= 0 and opened[t] > v:
                opened[t + 1] = opened[t]
                t -= 1
            opened[t + 1] = v
    else:
        _radix_sort(opened, spare[:n], spare[n:n + (1 << RADIX_BITS)], n, 0, pos_bits)
    return n


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def _propose(buf, a, left_len, piece_end, top, use_buckets, open_rank, symbols, queues, rule, tables, unused, counts):
    """Rank the pair (symbol ``a``, its next symbol) after a merge changed it and queue it: in its rank's
    bucket when that rank is above the bucket last opened, else on the heap (:func:`_merge_long`; the
    bucket pool grows down from ``top``). ``counts`` (heap size, bucket entries, smallest unopened rank,
    n_touched) come back updated."""
    ws_start = symbols[0]
    links, heap, _, rank_heads, rank_bits = queues
    by_bytes, resegment, max_token_len = rule
    tok_blob, tok_offsets, tok_table, merge_rank, pair_table, pair_cache = tables
    token_flags, rev_left, touched = unused
    hsize, n_pool, next_rank, n_touched = counts
    r, mid = _link_pair(buf, ws_start, piece_end, links, a, by_bytes, tok_blob, tok_offsets, tok_table, merge_rank,
                        pair_table, pair_cache, max_token_len)
    if r != NO_RANK:
        if use_buckets and r > open_rank and r < rank_heads.shape[0]:
            n_words = (rank_heads.shape[0] + 63) >> 6
            n_pool = _bucket_push(heap, top, n_pool, rank_heads, rank_bits, n_words, r, a)
            next_rank = min(next_rank, np.int64(r))
        else:
            hsize = _heap_push(heap, hsize, (np.int64(r) << 32) | a)
        if resegment:
            n_touched = _note_candidate(mid, left_len, token_flags, rev_left, touched, n_touched)
    return hsize, n_pool, next_rank, n_touched


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def _merge_long(buf, m, symbols, queues, rule, tables, unused, n_touched, sorted_pairs):
    """BPE of a long piece: its ``m`` initial symbols in ``ws_start``/``ws_end``/``ws_id`` are merged
    lowest rank first, leftmost among equals, over a linked list of :data:`LINK_WORDS` records. The
    candidates are ``rank << 32 | position`` keys with lazy deletion (an entry whose pair has changed
    is skipped when it comes up). The surviving symbols are written back to the front of ``ws_*`` in
    order. Returns ``n_touched << 32 | symbols``.

    Without ``sorted_pairs`` (below SORTED_PAIRS_MIN symbols) every candidate goes on a 4-ary min-heap
    (``heap[:3m]``), O(m log m). With it, so that a 1 MB piece costs ten times a 100 KB one (a heap's log factor
    and its misses past the caches made it 13-18 times), candidates come from three places and the
    next is the smallest of their heads: the initial pairs radix-sorted once (``heap[2m:3m]``); rank
    buckets for the pairs merges create, opened in rank order and sorted by position when opened
    (``heap[3m:5m]``), which hold any rank above the bucket last opened (in a merge list that is every
    new pair: a pair's rank is above the ranks that made its parts); and the heap for the others.
    Sorted runs are read front to back, so the records they check are fetched well ahead. O(m + R/64
    + sorting) for R ranks. ``spare`` (>= 2m + 2^RADIX_BITS) is the sorts' scratch; ``rank_heads`` (-1
    filled, one per rank, left so) and ``rank_bits`` (zeros) the buckets; one-element stand-ins keep
    every created pair on the heap.

    Grouped arguments: ``symbols`` (ws_start, ws_end, ws_id), ``queues`` (links, heap, spare, rank_heads,
    rank_bits), ``rule`` (by_bytes, resegment, max_token_len), ``tables`` (the vocabulary's blob,
    offsets, table, merge_rank, the pair table and the pair cache), ``unused`` (token_flags, rev_left,
    touched: UNUSED-piece bookkeeping)."""
    ws_start, ws_end, ws_id = symbols
    links, heap, spare, rank_heads, rank_bits = queues
    by_bytes, resegment, max_token_len = rule
    tok_blob, tok_offsets, tok_table, merge_rank, pair_table, pair_cache = tables
    token_flags, rev_left, touched = unused
    hsize = 0
    n_words = (rank_heads.shape[0] + 63) >> 6
    use_buckets = sorted_pairs and rank_heads.shape[0] > 1 and \
        rank_bits.shape[0] >= n_words + ((n_words + 63) >> 6)
    top = 2 * m  # the heap grows up from 0, the bucket pool down from here
    first = heap[2 * m:3 * m]
    opened = heap[3 * m:5 * m]
    n_first = 0
    max_rank = 0
    piece_end = ws_end[m - 1]
    _init_link(links, 0, m, ws_id)
    for k in range(m - 1):
        # records are filled one ahead of the pair that reads them, in this loop: alone, their loop
        # compiled to scatter stores, slow on some x86 cores
        _init_link(links, k + 1, m, ws_id)
        r, mid = _link_pair(buf, ws_start, piece_end, links, k, by_bytes, tok_blob, tok_offsets, tok_table,
                            merge_rank, pair_table, pair_cache, max_token_len)
        if r != NO_RANK:
            if sorted_pairs:
                first[n_first] = (np.int64(r) << 32) | k
                n_first += 1
                max_rank = max(max_rank, r)
            else:
                hsize = _heap_push(heap, hsize, (np.int64(r) << 32) | k)
            if resegment:
                n_touched = _note_candidate(mid, ws_end[k] - ws_start[k], token_flags, rev_left, touched, n_touched)
    if n_first > 0:
        _radix_sort(first, spare[:n_first], spare[n_first:n_first + (1 << RADIX_BITS)], n_first, 32,
                    _bit_length(max_rank))
        for i in range(min(n_first, PAIR_PREFETCH)):
            _prefetch_around(links, first[i] & 0xFFFFFFFF, m)
    pos_bits = _bit_length(m)
    next_first = 0
    n_pool = 0
    open_rank = np.int64(-1)
    n_open = 0
    cursor = 0
    next_rank = NO_KEY  # smallest rank with an unopened bucket
    while True:
        if not sorted_pairs:
            if hsize == 0:
                break
            key, hsize = _heap_pop(heap, hsize)
        else:
            s_key = first[next_first] if next_first < n_first else NO_KEY
            h_key = heap[0] if hsize > 0 else NO_KEY
            if cursor >= n_open and next_rank <= (s_key >> 32) and next_rank <= (h_key >> 32):
                open_rank = next_rank
                n_open = _open_bucket(heap, top, rank_heads, rank_bits, n_words, open_rank, opened, spare, pos_bits)
                cursor = 0
                next_rank = _next_bucket(rank_bits, n_words, open_rank + 1)
                for i in range(min(n_open, PAIR_PREFETCH)):
                    _prefetch_around(links, opened[i], m)
            b_key = (open_rank << 32) | opened[cursor] if cursor < n_open else NO_KEY
            if s_key <= h_key and s_key <= b_key:
                if s_key == NO_KEY:
                    break
                key = s_key
                if next_first + PAIR_PREFETCH < n_first:
                    _prefetch_around(links, first[next_first + PAIR_PREFETCH] & 0xFFFFFFFF, m)
                next_first += 1
            elif b_key <= h_key:
                key = b_key
                if cursor + PAIR_PREFETCH < n_open:
                    _prefetch_around(links, opened[cursor + PAIR_PREFETCH], m)
                cursor += 1
            else:
                key, hsize = _heap_pop(heap, hsize)
                # a stale entry's check is a cache miss on a long piece: fetch the next one's record
                # while this one is checked or merged
                if hsize > 0:
                    _prefetch_around(links, heap[0] & 0xFFFFFFFF, m)
        k = np.int64(key & 0xFFFFFFFF)
        rk = k * LINK_WORDS
        # stale entry: the symbol was merged away (-1) or its pair changed since
        if links[rk + L_RANK] != (key >> 32):
            continue
        nk = links[rk + L_NEXT]
        rn = nk * LINK_WORDS
        links[rk + L_ID] = links[rk + L_MERGED]
        links[rn + L_RANK] = -1
        nn = links[rn + L_NEXT]
        links[rk + L_NEXT] = nn
        # the pair on the left first, as sentencepiece proposes them (matters for rev_left)
        pk = k - 1
        while pk >= 0 and links[pk * LINK_WORDS + L_RANK] == -1:
            pk -= 1
        if pk >= 0:
            hsize, n_pool, next_rank, n_touched = _propose(
                buf, pk, ws_start[k] - ws_start[pk], piece_end, top, use_buckets, open_rank, symbols, queues, rule,
                tables, unused, (hsize, n_pool, next_rank, n_touched))
        if nn >= 0:
            hsize, n_pool, next_rank, n_touched = _propose(
                buf, k, ws_start[nn] - ws_start[k], piece_end, top, use_buckets, open_rank, symbols, queues, rule,
                tables, unused, (hsize, n_pool, next_rank, n_touched))
        else:
            links[rk + L_RANK] = NO_RANK
    # the first symbol is never merged away (a merge keeps its left symbol); n <= k, and the starts
    # read ahead (ws_start[next]) are past k, not yet overwritten
    n = 0
    k = 0
    while k >= 0:
        rk = k * LINK_WORDS
        nk = links[rk + L_NEXT]
        ws_start[n] = ws_start[k]
        ws_end[n] = ws_start[nk] if nk >= 0 else piece_end
        ws_id[n] = links[rk + L_ID]
        n += 1
        k = nk
    return (np.int64(n_touched) << 32) | n


def _merge_long_native(vocab_address, scratch_address, buf_address, buf_len, m, flags, max_token_len, n_touched):
    """:func:`_merge_long` for :func:`bpe_core`, compiled once as a C function (:func:`merge_long_address`)
    and called through its address (``BPE_VOCAB.merge_long_fn``): inlined, the long-piece code was
    compiled again into every kernel that calls bpe_core, and o200k's cold start (a first encode with an
    empty numba cache) measured 32.5 s; this way 29-30 s (26 s before this code existed). One call per
    piece of more than SCAN_LIMIT symbols."""
    vocab = struct_at(vocab_address, BPE_VOCAB)
    scratch = struct_at(scratch_address, BPE_SCRATCH)
    buf = bytes_at(buf_address, buf_len)
    tok_blob, tok_offsets, tok_table, _, merge_rank, token_flags, _, _, _ = vocab_tables(vocab)
    ws_start, ws_end, ws_id, _, links, heap, stack, rev_left, touched, rank_heads, rank_bits, pair_cache = \
        scratch_tables(scratch)
    rule = ((flags & FLAG_RANK_BY_BYTES) != 0, (flags & FLAG_RESEGMENT_UNUSED) != 0, max_token_len)
    return _merge_long(buf, m, (ws_start, ws_end, ws_id), (links, heap, stack, rank_heads, rank_bits), rule,
                       (tok_blob, tok_offsets, tok_table, merge_rank, kernel_pair_table(vocab), pair_cache),
                       (token_flags, rev_left, touched), n_touched, m >= SORTED_PAIRS_MIN)


_MERGE_LONG_SIGNATURE = types.int64(*([types.int64] * 8))
_merge_long_cfunc = []


def merge_long_address() -> int:
    """The address of the compiled :func:`_merge_long_native` (compiled, or loaded from numba's cache, on
    first use)."""
    if not _merge_long_cfunc:
        _merge_long_cfunc.append(cfunc(_MERGE_LONG_SIGNATURE, cache=True, _nrt=False)(_merge_long_native))
    return _merge_long_cfunc[0].address


@njit(cache=True, nogil=True, _nrt=False)
def bpe_encode(vocab, scratch, buf, piece_starts, piece_ends, first_piece, n_pieces, out_ids, out_starts, out_ends):
    """Encode pieces ``buf[piece_starts[i]:piece_ends[i]]`` for ``i`` in ``first_piece..first_piece +
    n_pieces - 1``; returns the number of ids written to ``out_ids`` (spans to ``out_starts``/``out_ends``).

    ``vocab`` is the compiled :data:`~tokjit.kernels.structs.BPE_VOCAB`, ``scratch`` the calling thread's
    :data:`~tokjit.kernels.structs.BPE_SCRATCH` (merge workspace; its piece cache is not used here).

    Algorithm: optional whole-piece lookup, then repeatedly merge the adjacent pair of lowest rank,
    leftmost first (tiktoken ``byte_pair_encode``, HF ``BPE::merge_word``, sentencepiece
    ``bpe_model.cc`` all agree on this order). Short pieces use an O(m^2) scan over a compact
    array; long pieces a lazy-deletion heap over a linked list, O(m log m) (:func:`_merge_long`).
    Writes ids and the byte span each id covers into ``out_*`` (capacity >= total piece bytes),
    using the scratch workspaces (capacity >= longest piece, heap >= 5x that, stack >= 2x that +
    2^RADIX_BITS, links LINK_WORDS x).

    With ``FLAG_RESEGMENT_UNUSED`` (sentencepiece ``bpe_model.cc``): merge candidates are proposed in
    sentencepiece's order (all bigrams left to right, then after each merge the pair to the left of the
    new symbol and the pair to its right); for UNUSED pieces the latest proposal's split is kept in
    ``rev_left`` (-1 filled, one per id; ``touched`` lists ids to reset, capacity = number of UNUSED
    ids), and an UNUSED result is recursively split back using ``stack`` (capacity >= 2 * longest
    piece + 2). ``token_flags``/``rev_left`` may have length 1 without the flag.

    With ``FLAG_SPLIT_SPACE_SYMBOL`` each piece is first cut before U+2581 (see ``_space_split_end``;
    ``unsafe_prev`` lists the code points after which no cut is made), and long parts around the
    characters of ``cut_bits`` (:func:`piece_part_end`).
    """
    return bpe_core(vocab, vocab_scalars(vocab), scratch, buf, piece_starts, piece_ends, first_piece, n_pieces,
                    out_ids, out_starts, out_ends)


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def vocab_tables(vocab):
    """The arrays of a BPE_VOCAB in the order :func:`bpe_core` reads them (the pair table's:
    :func:`kernel_pair_table`)."""
    return (borrow(vocab, "blob"), borrow(vocab, "offsets"), borrow(vocab, "table"), borrow(vocab, "byte_ids"),
            borrow(vocab, "merge_rank"), borrow(vocab, "token_flags"), borrow(vocab, "unsafe_prev"),
            borrow(vocab, "atom_ids"), borrow(vocab, "edge_bits"))


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def kernel_pair_table(vocab):
    """(slots, rows, merge bits) of a BPE_VOCAB's pair table, as the merge loops read it."""
    return borrow(vocab, "pair_slots"), borrow(vocab, "pair_rows"), borrow(vocab, "merge_bits")


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def vocab_scalars(vocab):
    """(flags, unk_id, max_len) of a BPE_VOCAB, as :func:`bpe_core` takes them."""
    return borrow(vocab, "flags"), borrow(vocab, "unk_id"), borrow(vocab, "max_len")


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def scratch_tables(scratch):
    """The arrays of a BPE_SCRATCH in the order :func:`bpe_core` reads them (its pair cache last)."""
    return (borrow(scratch, "start"), borrow(scratch, "end"), borrow(scratch, "id"), borrow(scratch, "rank"),
            borrow(scratch, "links"), borrow(scratch, "heap"), borrow(scratch, "stack"),
            borrow(scratch, "rev_left"), borrow(scratch, "touched"), borrow(scratch, "rank_heads"),
            borrow(scratch, "rank_bits"), borrow(borrow(scratch, "cache"), "pairs"))


# Compiled without numba's reference counting: it reads arrays its caller keeps alive and allocates
# nothing, and with counting on, every inlined helper taking an array paid an atomic incref/decref per
# call inside the merge loops.
#
# The vocabulary and the scratch go in as the two structures, not as tuples of their arrays: numba
# passes an array as seven machine words, and the 21 arrays of the tuples made each call push ~150
# words (a call per piece the cache misses, per segment of a CJK run).
@njit(cache=True, nogil=True, _nrt=False)
def bpe_core(vocab, scalars, scratch, buf, piece_starts, piece_ends, first_piece, n_pieces, out_ids, out_starts,
             out_ends):
    """:func:`bpe_encode` with the vocabulary's (flags, unk_id, max_len) given apart, so a caller can
    change the flags (``vocab_scalars``)."""
    tok_blob, tok_offsets, tok_table, byte_ids, merge_rank, token_flags, unsafe_prev, atom_ids, edge_bits = \
        vocab_tables(vocab)
    pair_table = kernel_pair_table(vocab)
    flags, unk_id, max_token_len = scalars
    # (the long-piece arrays are _merge_long_native's)
    ws_start, ws_end, ws_id, ws_rank, _, _, stack, rev_left, touched, _, _, pair_cache = scratch_tables(scratch)
    byte_symbols = (flags & FLAG_BYTE_SYMBOLS) != 0
    whole_first = (flags & FLAG_WHOLE_PIECE_FIRST) != 0
    by_bytes = (flags & FLAG_RANK_BY_BYTES) != 0
    byte_fallback = (flags & FLAG_BYTE_FALLBACK) != 0
    whole_char = (flags & FLAG_FALLBACK_WHOLE_CHAR) != 0
    fuse_unk = (flags & FLAG_FUSE_UNK) != 0
    resegment = (flags & FLAG_RESEGMENT_UNUSED) != 0
    split_space = (flags & FLAG_SPLIT_SPACE_SYMBOL) != 0
    atoms = (flags & FLAG_ATOMS) != 0
    unreachable_known = (flags & FLAG_UNREACHABLE_KNOWN) != 0
    unreachable_bits, char_ids = borrow(vocab, "unreachable_bits"), borrow(vocab, "char_ids")
    cut_bits = borrow(vocab, "cut_bits")
    affix_keys, affix_ids = borrow(vocab, "affix_keys"), borrow(vocab, "affix_ids")
    prefixed = np.int64(1) if (flags & FLAG_PREFIX) != 0 else np.int64(0)
    suffixed = np.int64(2) if (flags & FLAG_SUFFIX) != 0 else np.int64(0)
    n_touched = 0
    n_out = 0
    p = first_piece - 1
    last_piece = first_piece + n_pieces
    cursor = np.int64(0)
    piece_end = np.int64(0)
    space_end = np.int64(-1)
    while True:
        if cursor >= piece_end:
            p += 1
            if p >= last_piece:
                break
            cursor = piece_starts[p]
            piece_end = piece_ends[p]
            space_end = np.int64(-1)
            if piece_end <= cursor:
                continue
        ps = cursor
        pe = piece_end
        if split_space:
            pe, space_end = piece_part_end(buf, ps, piece_end, unsafe_prev, cut_bits, space_end)
        cursor = pe
        # a piece that is a token BPE builds comes out as that token anyway, and a lookup in the
        # vocabulary's table costs more than the BPE of most pieces that miss the piece cache
        if whole_first and pe - ps <= max_token_len and (
                not unreachable_known or maybe_unreachable(unreachable_bits, buf, ps, pe)):
            tid = lookup_bytes(buf, ps, pe, tok_blob, tok_offsets, tok_table)
            if tid >= 0:
                out_ids[n_out] = tid
                out_starts[n_out] = ps
                out_ends[n_out] = pe
                n_out += 1
                continue
        # initial symbols
        m = 0
        i = ps
        while i < pe:
            if byte_symbols:
                step = 1
                sid = byte_ids[buf[i]]
                if atoms and buf[i] >= 0xC2:
                    tid, n_bytes = atom_at(buf, i, ps, pe, atom_ids, edge_bits)
                    if tid >= 0:
                        step = n_bytes
                        sid = tid
            else:
                step = utf8_len(buf[i])
                if i + step > pe:
                    step = pe - i
                cp = np.int64(buf[i]) if buf[i] < 0x80 else decode_bmp(buf, i, pe)[0]
                if 0 <= cp < char_ids.shape[0]:  # a valid BMP character (a byte-symbol vocabulary has no table)
                    sid = char_ids[cp]
                else:
                    sid = lookup_bytes(buf, i, i + step, tok_blob, tok_offsets, tok_table)
            if prefixed | suffixed:
                variant = (prefixed if i > ps else 0) | (suffixed if i + step >= pe else 0)
                if variant != 0:
                    code = np.int64(buf[i])
                    if not byte_symbols and code >= 0x80:
                        # a stray or truncated sequence spells no token (-1: unknown)
                        if code < 0xF0:
                            code = decode_bmp(buf, i, pe)[0]
                        else:
                            code = decode_at(buf, i)[0] if step == 4 and code <= 0xF4 else np.int64(-1)
                    sid = affixed_symbol_id(affix_keys, affix_ids, variant, code) if code >= 0 else np.int64(-1)
            ws_start[m] = i
            ws_end[m] = i + step
            ws_id[m] = sid
            m += 1
            i += step
        if m <= SCAN_LIMIT:
            # compact-array path: symbol k spans ws_start[k]:ws_start[k + 1] (ws_start[m] = pe);
            # ws_rank[k] = rank << 32 | merged id of the pair (k, k + 1), so a merge shifts three arrays
            ws_start[m] = pe
            if not by_bytes:
                for k in range(m - 1):
                    _prefetch_pair(ws_id[k], ws_id[k + 1], pair_table, pair_cache)
            for k in range(m - 1):
                r, mid = _pair_rank(buf, ws_start[k], ws_id[k], ws_start[k + 2], ws_id[k + 1], by_bytes,
                                    tok_blob, tok_offsets, tok_table, merge_rank,
                                    pair_table, pair_cache, max_token_len)
                ws_rank[k] = (np.int64(r) << 32) | (mid & 0xFFFFFFFF)
                if resegment:
                    n_touched = _note_candidate(mid, ws_start[k + 1] - ws_start[k], token_flags, rev_left,
                                                touched, n_touched)
            while m > 1:
                bi = _lowest_ranked(ws_rank, m)
                if bi < 0:
                    break
                for k in range(bi + 1, m):
                    ws_start[k] = ws_start[k + 1]
                m = _merge_pair(ws_id, ws_rank, bi, m)
                if not by_bytes:
                    _prefetch_new_pairs(ws_id, bi, m, pair_table, pair_cache)
                if bi > 0:
                    r, mid = _pair_rank(buf, ws_start[bi - 1], ws_id[bi - 1], ws_start[bi + 1], ws_id[bi], by_bytes,
                                        tok_blob, tok_offsets, tok_table, merge_rank,
                                        pair_table, pair_cache, max_token_len)
                    ws_rank[bi - 1] = (np.int64(r) << 32) | (mid & 0xFFFFFFFF)
                    if resegment:
                        n_touched = _note_candidate(mid, ws_start[bi] - ws_start[bi - 1], token_flags,
                                                    rev_left, touched, n_touched)
                if bi < m - 1:
                    r, mid = _pair_rank(buf, ws_start[bi], ws_id[bi], ws_start[bi + 2], ws_id[bi + 1], by_bytes,
                                        tok_blob, tok_offsets, tok_table, merge_rank,
                                        pair_table, pair_cache, max_token_len)
                    ws_rank[bi] = (np.int64(r) << 32) | (mid & 0xFFFFFFFF)
                    if resegment:
                        n_touched = _note_candidate(mid, ws_start[bi + 1] - ws_start[bi], token_flags,
                                                    rev_left, touched, n_touched)
            for k in range(m):
                ws_end[k] = ws_start[k + 1]
        else:
            m = call_at(borrow(vocab, "merge_long_fn"),
                        (struct_address(vocab), struct_address(scratch), data_address(buf), np.int64(buf.shape[0]),
                         np.int64(m), np.int64(flags), np.int64(max_token_len), np.int64(n_touched)))
            n_touched = m >> 32
            m &= 0xFFFFFFFF
        # emit
        last_was_unk = False
        for k in range(m):
            sid = ws_id[k]
            if resegment and sid >= 0 and (token_flags[sid] & TOKEN_UNUSED) != 0:
                # sentencepiece `resegment`: split an UNUSED piece by its recorded proposal, recursively
                stack[0] = ws_start[k]
                stack[1] = ws_end[k]
                top = 2
                while top > 0:
                    se = stack[top - 1]
                    ss = stack[top - 2]
                    top -= 2
                    tid = sid if (ss == ws_start[k] and se == ws_end[k]) else \
                        lookup_bytes(buf, ss, se, tok_blob, tok_offsets, tok_table)
                    if tid >= 0 and (token_flags[tid] & TOKEN_UNUSED) != 0 and rev_left[tid] > 0 \
                            and rev_left[tid] < se - ss:
                        cut = ss + rev_left[tid]
                        stack[top] = cut
                        stack[top + 1] = se
                        stack[top + 2] = ss
                        stack[top + 3] = cut
                        top += 4
                    else:
                        n_out, last_was_unk = _emit_one(buf, ss, se, tid, byte_fallback, whole_char, fuse_unk,
                                                        unk_id, byte_ids, last_was_unk, out_ids, out_starts,
                                                        out_ends, n_out)
            else:
                n_out, last_was_unk = _emit_one(buf, ws_start[k], ws_end[k], sid, byte_fallback, whole_char,
                                                fuse_unk, unk_id, byte_ids, last_was_unk, out_ids, out_starts,
                                                out_ends, n_out)
    for t in range(n_touched):
        rev_left[touched[t]] = -1
    return n_out
