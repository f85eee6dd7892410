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
from numba import njit

from tokjit.kernels.atoms import atom_at, maybe_unreachable
from tokjit.kernels.lookup import PAIR_MIX, lookup_bytes, pair_home, pair_key, pair_value
from tokjit.kernels.memops import prefetch_at
from tokjit.kernels.structs import borrow
from tokjit.kernels.utf8 import decode_bmp, put_utf8

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

TOKEN_UNUSED = 1  # bit in ``token_flags``

# Pieces up to this many symbols merge by a linear scan (cache friendly, like tiktoken's small path);
# longer ones use a heap so "x" * 1_000_000 stays O(n log n).
SCAN_LIMIT = 48


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def _utf8_len(lead):
    if lead < 0x80:
        return 1
    if lead < 0xE0:
        return 2
    if lead < 0xF0:
        return 3
    return 4


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
    key = pair_key(id_left, id_right)
    c = _pair_cache_entry(key, pair_cache)
    if pair_cache[2 * c] == key:
        value = pair_cache[2 * c + 1]
    else:
        value = pair_value(id_left, id_right, pair_table)
        pair_cache[2 * c] = key
        pair_cache[2 * c + 1] = value
    if value < 0:
        return NO_RANK, -1
    return value >> 32, value & 0xFFFFFFFF


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def _pair_cache_entry(key, pair_cache):
    """The entry of the direct-mapped ``pair_cache`` that holds pair ``key`` (other hash bits than the
    pair table's home slot, :func:`~tokjit.kernels.lookup.pair_home`)."""
    return ((key * PAIR_MIX) >> 40) & ((pair_cache.shape[0] >> 1) - 1)


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def _prefetch_pair(id_left, id_right, pair_slots, pair_cache):
    """Start fetching the pair cache entry and the pair-table slot of (id_left, id_right), so that the
    misses of several lookups overlap (the pair table of a 200k vocabulary is 2 MB, past the core's
    own cache, and a merge's two new pairs, or a piece's first pairs, do not depend on each other)."""
    if id_left >= 0 and id_right >= 0:
        key = pair_key(id_left, id_right)
        prefetch_at(pair_cache, 2 * _pair_cache_entry(key, pair_cache))
        prefetch_at(pair_slots, pair_home(key, pair_slots))


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def _space_split_end(buf, ps, pe, unsafe_prev):
    """End of the first sub-piece of ``buf[ps:pe]``: the first U+2581 after its first character whose
    preceding character is not in ``unsafe_prev`` (code points that end a token's prefix right before a
    U+2581), else ``pe``. A merge never crosses such a cut, so encoding the parts apart is exact, and
    it keeps whole sentencepiece lines (one piece) off the slower heap path."""
    q = ps + _utf8_len(buf[ps])
    while q + 3 <= pe:
        if buf[q] == 0xE2 and buf[q + 1] == 0x96 and buf[q + 2] == 0x81:
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
def _emit_one(buf, s, e, sid, byte_fallback, fuse_unk, unk_id, byte_ids, last_was_unk,
              out_ids, out_starts, out_ends, n_out):
    """Write symbol ``buf[s:e]`` (token ``sid``, -1 = none): the token, its bytes, or unknown."""
    if sid >= 0:
        out_ids[n_out] = sid
        out_starts[n_out] = s
        out_ends[n_out] = e
        return n_out + 1, False
    if byte_fallback:
        for b in range(s, e):
            if byte_ids[buf[b]] < 0:
                continue  # no <0xXX> token and no unknown token: llama.cpp drops the byte
            out_ids[n_out] = byte_ids[buf[b]]
            out_starts[n_out] = b
            out_ends[n_out] = b + 1
            n_out += 1
        return n_out, False
    if unk_id >= 0:
        if fuse_unk and last_was_unk:
            out_ends[n_out - 1] = e
            return n_out, True
        out_ids[n_out] = unk_id
        out_starts[n_out] = s
        out_ends[n_out] = e
        return n_out + 1, True
    return n_out, last_was_unk


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def _heap_push(heap, size, key):
    i = size
    heap[i] = key
    while i > 0:
        parent = (i - 1) >> 1
        if heap[parent] <= heap[i]:
            break
        tmp = heap[parent]
        heap[parent] = heap[i]
        heap[i] = tmp
        i = parent
    return size + 1


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def _heap_pop(heap, size):
    top = heap[0]
    size -= 1
    heap[0] = heap[size]
    i = 0
    while True:
        left = 2 * i + 1
        if left >= size:
            break
        child = left
        if left + 1 < size and heap[left + 1] < heap[left]:
            child = left + 1
        if heap[i] <= heap[child]:
            break
        tmp = heap[child]
        heap[child] = heap[i]
        heap[i] = tmp
        i = child
    return top, size


@njit(cache=True, nogil=True, _nrt=False)
def bpe_encode(vocab, scratch, buf, piece_starts, piece_ends, first_piece, n_pieces, out_ids, out_starts, out_ends):
    """Encode pieces ``buf[piece_starts[i]:piece_ends[i]]`` for ``i`` in ``first_piece..first_piece +
    n_pieces - 1``; returns the number of ids written to ``out_ids`` (spans to ``out_starts``/``out_ends``).

    ``vocab`` is the compiled :data:`~tokjit.kernels.structs.BPE_VOCAB`, ``scratch`` the calling thread's
    :data:`~tokjit.kernels.structs.BPE_SCRATCH` (merge workspace; its piece cache is not used here).

    Algorithm: optional whole-piece lookup, then repeatedly merge the adjacent pair of lowest rank,
    leftmost first (tiktoken ``byte_pair_encode``, HF ``BPE::merge_word``, sentencepiece
    ``bpe_model.cc`` all agree on this order). Short pieces use an O(m^2) scan over a compact
    array; long pieces a lazy-deletion binary heap over a linked list, O(m log m).
    Writes ids and the byte span each id covers into ``out_*`` (capacity >= total piece bytes),
    using the scratch workspaces (capacity >= longest piece, heap >= 3x that).

    With ``FLAG_RESEGMENT_UNUSED`` (sentencepiece ``bpe_model.cc``): merge candidates are proposed in
    sentencepiece's order (all bigrams left to right, then after each merge the pair to the left of the
    new symbol and the pair to its right); for UNUSED pieces the latest proposal's split is kept in
    ``rev_left`` (-1 filled, one per id; ``touched`` lists ids to reset, capacity = number of UNUSED
    ids), and an UNUSED result is recursively split back using ``stack`` (capacity >= 2 * longest
    piece + 2). ``token_flags``/``rev_left`` may have length 1 without the flag.

    With ``FLAG_SPLIT_SPACE_SYMBOL`` each piece is first cut before U+2581 (see ``_space_split_end``;
    ``unsafe_prev`` lists the code points after which no cut is made).
    """
    return bpe_core(vocab, vocab_scalars(vocab), scratch, buf, piece_starts, piece_ends, first_piece, n_pieces,
                    out_ids, out_starts, out_ends)


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def vocab_tables(vocab):
    """The arrays of a BPE_VOCAB in the order :func:`bpe_core` reads them."""
    return (borrow(vocab, "blob"), borrow(vocab, "offsets"), borrow(vocab, "table"), borrow(vocab, "byte_ids"),
            borrow(vocab, "merge_rank"), borrow(vocab, "pair_slots"), borrow(vocab, "token_flags"),
            borrow(vocab, "unsafe_prev"), borrow(vocab, "atom_ids"), borrow(vocab, "edge_bits"),
            borrow(vocab, "pair_rows"))


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def vocab_scalars(vocab):
    """(flags, unk_id, max_len) of a BPE_VOCAB, as :func:`bpe_core` takes them."""
    return borrow(vocab, "flags"), borrow(vocab, "unk_id"), borrow(vocab, "max_len")


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def scratch_tables(scratch):
    """The arrays of a BPE_SCRATCH in the order :func:`bpe_core` reads them (its pair cache last)."""
    return (borrow(scratch, "start"), borrow(scratch, "end"), borrow(scratch, "id"), borrow(scratch, "rank"),
            borrow(scratch, "prev"), borrow(scratch, "next"), borrow(scratch, "heap"), borrow(scratch, "stack"),
            borrow(scratch, "rev_left"), borrow(scratch, "touched"), borrow(borrow(scratch, "cache"), "pairs"))


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
    tok_blob, tok_offsets, tok_table, byte_ids, merge_rank, pair_slots, token_flags, unsafe_prev, atom_ids, \
        edge_bits, pair_rows = vocab_tables(vocab)
    pair_table = (pair_slots, pair_rows)
    flags, unk_id, max_token_len = scalars
    ws_start, ws_end, ws_id, ws_rank, ws_prev, ws_next, heap, stack, rev_left, touched, pair_cache = \
        scratch_tables(scratch)
    byte_symbols = (flags & FLAG_BYTE_SYMBOLS) != 0
    whole_first = (flags & FLAG_WHOLE_PIECE_FIRST) != 0
    by_bytes = (flags & FLAG_RANK_BY_BYTES) != 0
    byte_fallback = (flags & FLAG_BYTE_FALLBACK) != 0
    fuse_unk = (flags & FLAG_FUSE_UNK) != 0
    resegment = (flags & FLAG_RESEGMENT_UNUSED) != 0
    split_space = (flags & FLAG_SPLIT_SPACE_SYMBOL) != 0
    atoms = (flags & FLAG_ATOMS) != 0
    unreachable_known = (flags & FLAG_UNREACHABLE_KNOWN) != 0
    unreachable_bits, char_ids = borrow(vocab, "unreachable_bits"), borrow(vocab, "char_ids")
    n_touched = 0
    n_out = 0
    p = first_piece - 1
    last_piece = first_piece + n_pieces
    cursor = np.int64(0)
    piece_end = np.int64(0)
    while True:
        if cursor >= piece_end:
            p += 1
            if p >= last_piece:
                break
            cursor = piece_starts[p]
            piece_end = piece_ends[p]
            if piece_end <= cursor:
                continue
        ps = cursor
        pe = piece_end
        if split_space:
            pe = _space_split_end(buf, ps, piece_end, unsafe_prev)
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
                step = _utf8_len(buf[i])
                if i + step > pe:
                    step = pe - i
                cp = np.int64(buf[i]) if buf[i] < 0x80 else decode_bmp(buf, i, pe)[0]
                if 0 <= cp < char_ids.shape[0]:  # a valid BMP character (a byte-symbol vocabulary has no table)
                    sid = char_ids[cp]
                else:
                    sid = lookup_bytes(buf, i, i + step, tok_blob, tok_offsets, tok_table)
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
                    _prefetch_pair(ws_id[k], ws_id[k + 1], pair_slots, pair_cache)
            for k in range(m - 1):
                r, mid = _pair_rank(buf, ws_start[k], ws_id[k], ws_start[k + 2], ws_id[k + 1], by_bytes,
                                    tok_blob, tok_offsets, tok_table, merge_rank,
                                    pair_table, pair_cache, max_token_len)
                ws_rank[k] = (np.int64(r) << 32) | (mid & 0xFFFFFFFF)
                if resegment:
                    n_touched = _note_candidate(mid, ws_start[k + 1] - ws_start[k], token_flags, rev_left,
                                                touched, n_touched)
            while m > 1:
                best = np.int64(NO_RANK)
                bi = -1
                for k in range(m - 1):
                    r = ws_rank[k] >> 32
                    if r < best:
                        best = r
                        bi = k
                if bi < 0:
                    break
                ws_id[bi] = np.int32(ws_rank[bi] & 0xFFFFFFFF)
                for k in range(bi + 1, m - 1):
                    ws_start[k] = ws_start[k + 1]
                    ws_id[k] = ws_id[k + 1]
                    ws_rank[k] = ws_rank[k + 1]
                ws_start[m - 1] = ws_start[m]
                m -= 1
                if not by_bytes:
                    if bi > 0:
                        _prefetch_pair(ws_id[bi - 1], ws_id[bi], pair_slots, pair_cache)
                    if bi < m - 1:
                        _prefetch_pair(ws_id[bi], ws_id[bi + 1], pair_slots, pair_cache)
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
            order_first = 0
            use_links = False
        else:
            # linked list + heap path; heap keys are rank << 32 | position
            for k in range(m):
                ws_prev[k] = k - 1
                ws_next[k] = k + 1 if k + 1 < m else -1
            hsize = 0
            for k in range(m - 1):
                r, mid = _pair_rank(buf, ws_start[k], ws_id[k], ws_end[k + 1], ws_id[k + 1], by_bytes,
                                    tok_blob, tok_offsets, tok_table, merge_rank,
                                    pair_table, pair_cache, max_token_len)
                ws_rank[k] = r
                if r != NO_RANK:
                    hsize = _heap_push(heap, hsize, (np.int64(r) << 32) | k)
                    if resegment:
                        n_touched = _note_candidate(mid, ws_end[k] - ws_start[k], token_flags, rev_left,
                                                    touched, n_touched)
            while hsize > 0:
                key, hsize = _heap_pop(heap, hsize)
                k = np.int64(key & 0xFFFFFFFF)
                r = np.int64(key >> 32)
                # stale entries: symbol merged away (ws_end == -1), or its pair changed rank
                if ws_end[k] < 0 or ws_next[k] < 0 or ws_rank[k] != r:
                    continue
                nk = ws_next[k]
                _, mid = _pair_rank(buf, ws_start[k], ws_id[k], ws_end[nk], ws_id[nk], by_bytes,
                                    tok_blob, tok_offsets, tok_table, merge_rank,
                                    pair_table, pair_cache, max_token_len)
                ws_id[k] = mid
                ws_end[k] = ws_end[nk]
                ws_end[nk] = -1
                nn = ws_next[nk]
                ws_next[k] = nn
                if nn >= 0:
                    ws_prev[nn] = k
                # the pair on the left first, as sentencepiece proposes them (matters for rev_left)
                pk = ws_prev[k]
                if pk >= 0:
                    r3, mid3 = _pair_rank(buf, ws_start[pk], ws_id[pk], ws_end[k], ws_id[k], by_bytes,
                                          tok_blob, tok_offsets, tok_table, merge_rank,
                                          pair_table, pair_cache, max_token_len)
                    ws_rank[pk] = r3
                    if r3 != NO_RANK:
                        hsize = _heap_push(heap, hsize, (np.int64(r3) << 32) | pk)
                        if resegment:
                            n_touched = _note_candidate(mid3, ws_end[pk] - ws_start[pk], token_flags,
                                                        rev_left, touched, n_touched)
                if nn >= 0:
                    r2, mid2 = _pair_rank(buf, ws_start[k], ws_id[k], ws_end[nn], ws_id[nn], by_bytes,
                                          tok_blob, tok_offsets, tok_table, merge_rank,
                                          pair_table, pair_cache, max_token_len)
                    ws_rank[k] = r2
                    if r2 != NO_RANK:
                        hsize = _heap_push(heap, hsize, (np.int64(r2) << 32) | k)
                        if resegment:
                            n_touched = _note_candidate(mid2, ws_end[k] - ws_start[k], token_flags,
                                                        rev_left, touched, n_touched)
                else:
                    ws_rank[k] = NO_RANK
            order_first = 0
            use_links = True
        # emit
        k = order_first
        count = 0
        last_was_unk = False
        while (use_links and k >= 0) or ((not use_links) and k < m):
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
                        n_out, last_was_unk = _emit_one(buf, ss, se, tid, byte_fallback, fuse_unk, unk_id,
                                                        byte_ids, last_was_unk, out_ids, out_starts,
                                                        out_ends, n_out)
            else:
                n_out, last_was_unk = _emit_one(buf, ws_start[k], ws_end[k], sid, byte_fallback, fuse_unk,
                                                unk_id, byte_ids, last_was_unk, out_ids, out_starts,
                                                out_ends, n_out)
            count += 1
            if use_links:
                k = ws_next[k]
            else:
                k += 1
    for t in range(n_touched):
        rev_left[touched[t]] = -1
    return n_out
