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

from .lookup import lookup_bytes, pair_slot

NO_RANK = 2147483647

FLAG_BYTE_SYMBOLS = 1  # initial symbols are single bytes, else UTF-8 characters
FLAG_WHOLE_PIECE_FIRST = 2  # a piece that is itself a token is emitted as is (tiktoken, ignore_merges)
FLAG_RANK_BY_BYTES = 4  # rank = merge_rank[id of the merged bytes], else the pair table
FLAG_BYTE_FALLBACK = 8  # unknown symbols become <0xXX> tokens
FLAG_FUSE_UNK = 16  # consecutive unknown symbols give one unknown token

# Pieces up to this many symbols merge by a linear scan (cache friendly, like tiktoken's small path);
# longer ones use a heap so "x" * 1_000_000 stays O(n log n).
SCAN_LIMIT = 48


@njit(cache=True, nogil=True, inline="always")
def _utf8_len(lead):
    if lead < 0x80:
        return 1
    if lead < 0xE0:
        return 2
    if lead < 0xF0:
        return 3
    return 4


@njit(cache=True, nogil=True, inline="always")
def _pair_rank(buf, s_left, id_left, e_right, id_right, by_bytes,
               tok_blob, tok_offsets, tok_table, merge_rank,
               pair_keys, pair_ranks, pair_merged, max_token_len):
    """(rank, merged id) of two adjacent symbols, or (NO_RANK, -1) when they do not merge."""
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
    slot = pair_slot(id_left, id_right, pair_keys)
    if pair_keys[slot] == -1:
        return NO_RANK, -1
    return pair_ranks[slot], pair_merged[slot]


@njit(cache=True, nogil=True, inline="always")
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


@njit(cache=True, nogil=True, inline="always")
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


@njit(cache=True, nogil=True)
def bpe_encode(buf, piece_starts, piece_ends, n_pieces,
               tok_blob, tok_offsets, tok_table, byte_ids, merge_rank,
               pair_keys, pair_ranks, pair_merged,
               flags, unk_id, max_token_len,
               out_ids, out_starts, out_ends,
               ws_start, ws_end, ws_id, ws_rank, ws_prev, ws_next, heap):
    """Encode every piece ``buf[piece_starts[i]:piece_ends[i]]``; returns the number of ids written.

    Algorithm: optional whole-piece lookup, then repeatedly merge the adjacent pair of lowest rank,
    leftmost first (tiktoken ``byte_pair_encode``, HF ``BPE::merge_word``, sentencepiece
    ``bpe_model.cc`` all agree on this order). Short pieces use an O(m^2) scan over a compact
    array; long pieces a lazy-deletion binary heap over a linked list, O(m log m).
    Writes ids and the byte span each id covers into ``out_*`` (capacity >= total piece bytes),
    using the ``ws_*``/``heap`` workspaces (capacity >= longest piece, heap >= 3x that).
    """
    byte_symbols = (flags & FLAG_BYTE_SYMBOLS) != 0
    whole_first = (flags & FLAG_WHOLE_PIECE_FIRST) != 0
    by_bytes = (flags & FLAG_RANK_BY_BYTES) != 0
    byte_fallback = (flags & FLAG_BYTE_FALLBACK) != 0
    fuse_unk = (flags & FLAG_FUSE_UNK) != 0
    n_out = 0
    for p in range(n_pieces):
        ps = piece_starts[p]
        pe = piece_ends[p]
        if pe <= ps:
            continue
        if whole_first and pe - ps <= max_token_len:
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
            else:
                step = _utf8_len(buf[i])
                if i + step > pe:
                    step = pe - i
                sid = lookup_bytes(buf, i, i + step, tok_blob, tok_offsets, tok_table)
            ws_start[m] = i
            ws_end[m] = i + step
            ws_id[m] = sid
            m += 1
            i += step
        if m <= SCAN_LIMIT:
            # compact-array path
            for k in range(m - 1):
                r, mid = _pair_rank(buf, ws_start[k], ws_id[k], ws_end[k + 1], ws_id[k + 1], by_bytes,
                                    tok_blob, tok_offsets, tok_table, merge_rank,
                                    pair_keys, pair_ranks, pair_merged, max_token_len)
                ws_rank[k] = r
                ws_next[k] = mid
            while m > 1:
                best = NO_RANK
                bi = -1
                for k in range(m - 1):
                    if ws_rank[k] < best:
                        best = ws_rank[k]
                        bi = k
                if bi < 0:
                    break
                ws_id[bi] = ws_next[bi]
                ws_end[bi] = ws_end[bi + 1]
                for k in range(bi + 1, m - 1):
                    ws_start[k] = ws_start[k + 1]
                    ws_end[k] = ws_end[k + 1]
                    ws_id[k] = ws_id[k + 1]
                    ws_rank[k] = ws_rank[k + 1]
                    ws_next[k] = ws_next[k + 1]
                m -= 1
                if bi > 0:
                    r, mid = _pair_rank(buf, ws_start[bi - 1], ws_id[bi - 1], ws_end[bi], ws_id[bi], by_bytes,
                                        tok_blob, tok_offsets, tok_table, merge_rank,
                                        pair_keys, pair_ranks, pair_merged, max_token_len)
                    ws_rank[bi - 1] = r
                    ws_next[bi - 1] = mid
                if bi < m - 1:
                    r, mid = _pair_rank(buf, ws_start[bi], ws_id[bi], ws_end[bi + 1], ws_id[bi + 1], by_bytes,
                                        tok_blob, tok_offsets, tok_table, merge_rank,
                                        pair_keys, pair_ranks, pair_merged, max_token_len)
                    ws_rank[bi] = r
                    ws_next[bi] = mid
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
                                    pair_keys, pair_ranks, pair_merged, max_token_len)
                ws_rank[k] = r
                if r != NO_RANK:
                    hsize = _heap_push(heap, hsize, (np.int64(r) << 32) | k)
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
                                    pair_keys, pair_ranks, pair_merged, max_token_len)
                ws_id[k] = mid
                ws_end[k] = ws_end[nk]
                ws_end[nk] = -1
                nn = ws_next[nk]
                ws_next[k] = nn
                if nn >= 0:
                    ws_prev[nn] = k
                    r2, _ = _pair_rank(buf, ws_start[k], ws_id[k], ws_end[nn], ws_id[nn], by_bytes,
                                       tok_blob, tok_offsets, tok_table, merge_rank,
                                       pair_keys, pair_ranks, pair_merged, max_token_len)
                    ws_rank[k] = r2
                    if r2 != NO_RANK:
                        hsize = _heap_push(heap, hsize, (np.int64(r2) << 32) | k)
                else:
                    ws_rank[k] = NO_RANK
                pk = ws_prev[k]
                if pk >= 0:
                    r3, _ = _pair_rank(buf, ws_start[pk], ws_id[pk], ws_end[k], ws_id[k], by_bytes,
                                       tok_blob, tok_offsets, tok_table, merge_rank,
                                       pair_keys, pair_ranks, pair_merged, max_token_len)
                    ws_rank[pk] = r3
                    if r3 != NO_RANK:
                        hsize = _heap_push(heap, hsize, (np.int64(r3) << 32) | pk)
            order_first = 0
            use_links = True
        # emit
        k = order_first
        count = 0
        last_was_unk = False
        while (use_links and k >= 0) or ((not use_links) and k < m):
            sid = ws_id[k]
            if sid >= 0:
                out_ids[n_out] = sid
                out_starts[n_out] = ws_start[k]
                out_ends[n_out] = ws_end[k]
                n_out += 1
                last_was_unk = False
            elif byte_fallback:
                for b in range(ws_start[k], ws_end[k]):
                    out_ids[n_out] = byte_ids[buf[b]]
                    out_starts[n_out] = b
                    out_ends[n_out] = b + 1
                    n_out += 1
                last_was_unk = False
            elif unk_id >= 0:
                if fuse_unk and last_was_unk:
                    out_ends[n_out - 1] = ws_end[k]
                else:
                    out_ids[n_out] = unk_id
                    out_starts[n_out] = ws_start[k]
                    out_ends[n_out] = ws_end[k]
                    n_out += 1
                last_was_unk = True
            count += 1
            if use_links:
                k = ws_next[k]
            else:
                k += 1
    return n_out
