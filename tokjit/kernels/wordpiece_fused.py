"""One kernel for the BERT-style WordPiece pipeline over a batch of documents.

For tokenizer.json / vocab.txt tokenizers whose pipeline is ``BertNormalizer`` ->
``BertPreTokenizer`` or ``WhitespaceSplit`` -> ``WordPiece``: raw-text added tokens, the
normalizer, added tokens matched in the normalized text, the pre-tokenizer and the greedy
longest-match-first walk run for many documents in one ``nogil`` call, composed exactly as the
staged pipeline (``Tokenizer._encode_staged``) composes them, so both give HF's ids.
"""

from __future__ import annotations

from numba import njit

from ..added_tokens import find_added_tokens
from .lookup import lookup_bytes
from .wordpiece import bert_normalize, bert_pre_tokenize, wordpiece_encode

STATUS_OK = 0
STATUS_OUT_FULL = 1  # out_ids too small for the next document: grow and resume there
STATUS_STAGED = 2  # this document needs the staged path (its error, or a huge combining run)


@njit(cache=True, nogil=True)
def encode_docs_wordpiece(buf, doc_starts, doc_ends, first_doc, last_doc,
                          at_first, at_child_start, at_child_count, at_edge_byte, at_edge_target, at_token,
                          at_starts, at_ends, at_ids,
                          nt_first, nt_child_start, nt_child_count, nt_edge_byte, nt_edge_target, nt_token,
                          nt_starts, nt_ends, nt_ids,
                          flags, dec_keys, dec_off, dec_data, low_keys, low_off, low_data, ccc_keys, ccc_vals,
                          norm_opts, run_cp, run_src, run_ccc, norm_buf, norm_align,
                          isolate_punct, one_start, one_end, piece_starts, piece_ends,
                          edges, word_row, word_node, word_node_token, cont_row, cont_node, unk_id, max_chars,
                          whole_words, tok_blob, tok_offsets, tok_table, max_token_len,
                          tok_starts, tok_ends, out_ids, out_pos, doc_out_end, expansion, status):
    """Encode documents ``first_doc..last_doc-1``; returns the index of the first document not
    finished (``last_doc`` when all are done) and sets ``status[0]``: ``STATUS_OUT_FULL`` (grow
    ``out_ids`` and resume there) or ``STATUS_STAGED`` (the caller encodes that document through the
    staged path, which raises the proper error, and resumes after it).

    Per document: leftmost-longest raw added tokens (trie ``at_*``); every text segment between them
    is normalized (``bert_normalize``), normalized added tokens are matched in the result (trie
    ``nt_*``), and each gap between those is pre-tokenized (``bert_pre_tokenize``) and encoded
    (``wordpiece_encode``); with ``whole_words`` (HF's flavour: first tokens matched from the root,
    never empty) a word that is itself a vocabulary entry (hash table ``tok_*``, the ids the trie
    holds) is emitted in one lookup instead of a trie walk of cache misses. A document stops early when a combining run outgrows ``run_*`` or a word
    needs the unknown token and ``unk_id`` < 0. Ids go to ``out_ids`` from ``out_pos[0]``;
    ``doc_out_end[d]`` = end of document ``d``'s ids. O(total bytes * longest token).
    Capacities (E = the normalizer's worst expansion per byte, L = longest document): ``norm_buf``,
    ``piece_*``, ``nt_*``, ``tok_*`` >= E * L + 8, ``norm_align`` one more; ``run_*`` >= 4 * L + 16;
    ``at_*`` >= L + 1. A document of n bytes needs 2 * E * n + 2 free ids in ``out_ids`` (a word
    yields at most one id per normalized byte, plus llama.cpp's empty first token).
    """
    status[0] = STATUS_OK
    n_out = out_pos[0]
    cap = out_ids.shape[0]
    for d in range(first_doc, last_doc):
        ds = doc_starts[d]
        de = doc_ends[d]
        if cap - n_out < 2 * expansion * (de - ds) + 2:
            status[0] = STATUS_OUT_FULL
            out_pos[0] = n_out
            return d
        doc_begin = n_out
        n_added = find_added_tokens(buf, ds, de, at_first, at_child_start, at_child_count, at_edge_byte,
                                    at_edge_target, at_token, at_starts, at_ends, at_ids)
        pos = ds
        for a in range(n_added + 1):
            seg_end = at_starts[a] if a < n_added else de
            if seg_end > pos:
                m = bert_normalize(buf[pos:seg_end], seg_end - pos, flags, dec_keys, dec_off, dec_data,
                                   low_keys, low_off, low_data, ccc_keys, ccc_vals, norm_opts,
                                   run_cp, run_src, run_ccc, norm_buf, norm_align)
                if m < 0:
                    status[0] = STATUS_STAGED
                    out_pos[0] = doc_begin
                    return d
                n_nt = find_added_tokens(norm_buf, 0, m, nt_first, nt_child_start, nt_child_count,
                                         nt_edge_byte, nt_edge_target, nt_token, nt_starts, nt_ends, nt_ids)
                q = 0
                for u in range(n_nt + 1):
                    gap_end = nt_starts[u] if u < n_nt else m
                    if gap_end > q:
                        one_start[0] = q
                        one_end[0] = gap_end
                        n_p = bert_pre_tokenize(norm_buf, one_start, one_end, 1, flags, isolate_punct,
                                                piece_starts, piece_ends)
                        for p in range(n_p):
                            ps = piece_starts[p]
                            pe = piece_ends[p]
                            # most words are one vocabulary entry: that entry is the longest match
                            if whole_words and pe - ps <= max_token_len and pe - ps <= max_chars:
                                tid = lookup_bytes(norm_buf, ps, pe, tok_blob, tok_offsets, tok_table)
                                if tid >= 0:
                                    out_ids[n_out] = tid
                                    n_out += 1
                                    continue
                            n_ids = wordpiece_encode(norm_buf, piece_starts[p:p + 1], piece_ends[p:p + 1], 1,
                                                     edges, word_row, word_node, word_node_token, cont_row,
                                                     cont_node, unk_id, max_chars, out_ids[n_out:],
                                                     tok_starts, tok_ends)
                            if n_ids < 0:
                                status[0] = STATUS_STAGED
                                out_pos[0] = doc_begin
                                return d
                            n_out += n_ids
                    if u < n_nt:
                        out_ids[n_out] = nt_ids[u]
                        n_out += 1
                        q = nt_ends[u]
            if a < n_added:
                out_ids[n_out] = at_ids[a]
                n_out += 1
                pos = at_ends[a]
        doc_out_end[d] = n_out
    out_pos[0] = n_out
    return last_doc
