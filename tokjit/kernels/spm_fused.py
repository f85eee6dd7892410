"""One kernel for the SentencePiece-BPE pipeline over a batch of documents.

For ``.model`` tokenizers without a precompiled charsmap (Llama 2, Mistral, most byte-fallback BPE
models): raw-text added tokens (control pieces, only with ``parse_special``), sentencepiece's
whitespace normalization, user-defined pieces matched in the normalized text, and score-ranked BPE,
for many documents in one ``nogil`` call, exactly as the staged pipeline composes them.
"""

from __future__ import annotations

from numba import njit

from ..added_tokens import find_added_tokens
from ..sentencepiece_normalizer import sentencepiece_whitespace
from .bpe import FLAG_RESEGMENT_UNUSED, FLAG_SPLIT_SPACE_SYMBOL, _space_split_end, bpe_encode
from .fused import CACHE_MAX_PIECE, _cache_clear, _cache_find
from .lookup import hash_bytes


@njit(cache=True, nogil=True)
def encode_docs_spm(buf, doc_starts, doc_ends, n_docs, ident, ws_flags,
                    at_first, at_child_start, at_child_count, at_edge_byte, at_edge_target, at_token,
                    at_starts, at_ends, at_ids,
                    ud_first, ud_child_start, ud_child_count, ud_edge_byte, ud_edge_target, ud_token,
                    ud_starts, ud_ends, ud_ids,
                    norm_buf, norm_align, one_start, one_end,
                    tok_blob, tok_offsets, tok_table, byte_ids, merge_rank,
                    pair_slots, flags, unk_id, max_token_len,
                    ws_start, ws_end, ws_id, ws_rank, ws_prev, ws_next, heap,
                    token_flags, rev_left, touched, bpe_stack, unsafe_prev,
                    tok_starts, tok_ends, out_ids, doc_out_end,
                    cache_hash, cache_bstart, cache_blen, cache_istart, cache_ilen, cache_bytes, cache_ids,
                    cache_fill):
    """Encode every document; returns the number of ids written to ``out_ids``.

    Per document: added tokens in the raw text (trie ``at_*``, leftmost-longest); each text segment
    between them is normalized (``sentencepiece_whitespace``), user-defined pieces are matched in the
    result (trie ``ud_*``) and the gaps are BPE-encoded as single pieces (``bpe_encode``). With
    ``FLAG_SPLIT_SPACE_SYMBOL`` a gap is cut before U+2581 where no merge can cross (the cuts
    ``bpe_encode`` makes itself), and unless UNUSED pieces are resegmented each part goes through the
    piece cache (as ``kernels.fused`` keeps it): words repeat, so most parts copy ids instead of merging.
    Capacities: ``out_ids`` >= 3 * total bytes + 4 * documents; ``norm_*``, ``tok_*``, the BPE
    workspaces and ``ud_*`` >= 3 * longest document + 4; ``at_*`` >= longest + 1; ``ident`` = arange
    of length >= longest + 1.
    """
    split_space = (flags & FLAG_SPLIT_SPACE_SYMBOL) != 0
    cached = (flags & FLAG_RESEGMENT_UNUSED) == 0
    n_out = 0
    for d in range(n_docs):
        ds = doc_starts[d]
        de = doc_ends[d]
        n_added = find_added_tokens(buf, ds, de, at_first, at_child_start, at_child_count, at_edge_byte,
                                    at_edge_target, at_token, at_starts, at_ends, at_ids)
        pos = ds
        for a in range(n_added + 1):
            seg_end = at_starts[a] if a < n_added else de
            if seg_end > pos:
                n = seg_end - pos
                m = sentencepiece_whitespace(buf[pos:seg_end], ident, n, ws_flags, norm_buf, norm_align)
                n_ud = find_added_tokens(norm_buf, 0, m, ud_first, ud_child_start, ud_child_count,
                                         ud_edge_byte, ud_edge_target, ud_token, ud_starts, ud_ends, ud_ids)
                q = 0
                for u in range(n_ud + 1):
                    gap_end = ud_starts[u] if u < n_ud else m
                    if gap_end > q and cached:
                        ps = q
                        while ps < gap_end:
                            pe = _space_split_end(norm_buf, ps, gap_end, unsafe_prev) if split_space else gap_end
                            # the piece cache of kernels.fused, written out here: a helper call
                            # would incref/decref every array argument per piece (3x slower)
                            slot = -1
                            if pe - ps <= CACHE_MAX_PIECE:
                                slot = _cache_find(norm_buf, ps, pe, cache_hash, cache_bstart, cache_blen,
                                                   cache_bytes)
                                if cache_blen[slot] > 0:
                                    i0 = cache_istart[slot]
                                    for k in range(cache_ilen[slot]):
                                        out_ids[n_out + k] = cache_ids[i0 + k]
                                    n_out += cache_ilen[slot]
                                    ps = pe
                                    continue
                            one_start[0] = ps
                            one_end[0] = pe
                            n_ids = bpe_encode(norm_buf, one_start, one_end, 1,
                                               tok_blob, tok_offsets, tok_table, byte_ids, merge_rank,
                                               pair_slots, flags, unk_id, max_token_len,
                                               out_ids[n_out:], tok_starts, tok_ends,
                                               ws_start, ws_end, ws_id, ws_rank, ws_prev, ws_next, heap,
                                               token_flags, rev_left, touched, bpe_stack, unsafe_prev)
                            if slot >= 0:
                                if cache_fill[0] + (pe - ps) > cache_bytes.shape[0] or \
                                        cache_fill[1] + n_ids > cache_ids.shape[0] or \
                                        2 * cache_fill[2] > cache_hash.shape[0]:
                                    _cache_clear(cache_blen, cache_fill)
                                    slot = _cache_find(norm_buf, ps, pe, cache_hash, cache_bstart, cache_blen,
                                                       cache_bytes)
                                b0 = cache_fill[0]
                                for k in range(pe - ps):
                                    cache_bytes[b0 + k] = norm_buf[ps + k]
                                i0 = cache_fill[1]
                                for k in range(n_ids):
                                    cache_ids[i0 + k] = out_ids[n_out + k]
                                cache_hash[slot] = hash_bytes(norm_buf, ps, pe)
                                cache_bstart[slot] = b0
                                cache_blen[slot] = pe - ps
                                cache_istart[slot] = i0
                                cache_ilen[slot] = n_ids
                                cache_fill[0] = b0 + (pe - ps)
                                cache_fill[1] = i0 + n_ids
                                cache_fill[2] += 1
                            n_out += n_ids
                            ps = pe
                    elif gap_end > q:
                        one_start[0] = q
                        one_end[0] = gap_end
                        n_out += bpe_encode(norm_buf, one_start, one_end, 1,
                                            tok_blob, tok_offsets, tok_table, byte_ids, merge_rank,
                                            pair_slots, flags, unk_id, max_token_len,
                                            out_ids[n_out:], tok_starts, tok_ends,
                                            ws_start, ws_end, ws_id, ws_rank, ws_prev, ws_next, heap,
                                            token_flags, rev_left, touched, bpe_stack, unsafe_prev)
                    if u < n_ud:
                        out_ids[n_out] = ud_ids[u]
                        n_out += 1
                        q = ud_ends[u]
            if a < n_added:
                out_ids[n_out] = at_ids[a]
                n_out += 1
                pos = at_ends[a]
        doc_out_end[d] = n_out
    return n_out
