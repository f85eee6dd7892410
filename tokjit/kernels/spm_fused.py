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
from .bpe import bpe_encode


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
                    tok_starts, tok_ends, out_ids, doc_out_end):
    """Encode every document; returns the number of ids written to ``out_ids``.

    Per document: added tokens in the raw text (trie ``at_*``, leftmost-longest); each text segment
    between them is normalized (``sentencepiece_whitespace``), user-defined pieces are matched in the
    result (trie ``ud_*``) and the gaps are BPE-encoded as single pieces (``bpe_encode``).
    Capacities: ``out_ids`` >= 3 * total bytes + 4 * documents; ``norm_*``, ``tok_*``, the BPE
    workspaces and ``ud_*`` >= 3 * longest document + 4; ``at_*`` >= longest + 1; ``ident`` = arange
    of length >= longest + 1.
    """
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
                    if gap_end > q:
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
