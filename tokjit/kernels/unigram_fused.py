"""One kernel for the SentencePiece Unigram pipeline (``.model`` files) over a batch of documents.

Per document, exactly as the staged pipeline composes the same kernels: raw-text added tokens
(control pieces, only with ``parse_special``); for each text segment between them, user-defined
pieces protected from the charsmap, sentencepiece's charsmap (``spm_normalize``), its whitespace
rules (``sentencepiece_whitespace``) and the Viterbi search (``unigram_encode``) over the whole
normalized segment. Scratch sizes depend on how much the charsmap expands the text, so the kernel
stops before a document that does not fit and says how much room it needs; the caller grows the
buffers and resumes there.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ..added_tokens import find_added_tokens
from ..sentencepiece_normalizer import sentencepiece_whitespace
from ..pre_tokenizers import metaspace_pieces
from .charsmap import hf_normalize, spm_normalize
from .unigram import MISSING_UNK, unigram_encode
from .wordpiece import bert_pre_tokenize

STATUS_DONE = 0
STATUS_GROW_SCRATCH = 1  # need[0] = bytes of normalized text one segment needs
STATUS_GROW_OUT = 2  # need[0] = ids one document needs
STATUS_MISSING_UNK = 3


@njit(cache=True, nogil=True)
def _copy_unnormalized(buf, start, end, out, out_src):
    """``buf[start:end]`` into ``out`` with each byte its own source offset (no charsmap); its length."""
    for k in range(start, end):
        out[k - start] = buf[k]
        out_src[k - start] = k
    return end - start


@njit(cache=True, nogil=True)
def encode_docs_unigram_spm(buf, doc_starts, doc_ends, first_doc, n_docs, ws_flags,
                            at_first, at_child_start, at_child_count, at_edge_byte, at_edge_target, at_token,
                            at_starts, at_ends, at_ids,
                            ud_first, ud_child_start, ud_child_count, ud_edge_byte, ud_edge_target, ud_token,
                            ud_starts, ud_ends, ud_ids,
                            has_charsmap, cm_units, cm_strings, cm_max_step, cm_buf, cm_src,
                            norm_buf, norm_align, one_start, one_end,
                            da, scores, id_flags, byte_ids, arith, unk_id, unk_score, byte_fallback,
                            best_score, best_start, best_id, path_start, path_end, tok_starts, tok_ends,
                            out_ids, out_pos, doc_out_end, need):
    """Encode documents ``first_doc..n_docs-1`` appending ids at ``out_pos[0]``; returns
    ``(next document, status)``. A document is written whole or not at all.

    Capacities the caller guarantees: ``at_*`` and ``ud_*`` >= longest document + 1; the rest are
    checked here against the actual sizes (``cm_*`` hold the charsmap output, ``norm_*``, ``best_*``,
    ``path_*`` and ``tok_*`` the whitespace-normalized segment, ``out_ids`` the ids). O(normalized bytes
    * longest piece), as the Viterbi.
    """
    cm_cap = cm_buf.shape[0]
    norm_cap = norm_buf.shape[0]
    out_cap = out_ids.shape[0]
    for d in range(first_doc, n_docs):
        ds = doc_starts[d]
        de = doc_ends[d]
        n_out = out_pos[0]
        n_added = find_added_tokens(buf, ds, de, at_first, at_child_start, at_child_count, at_edge_byte,
                                    at_edge_target, at_token, at_starts, at_ends, at_ids)
        pos = ds
        for a in range(n_added + 1):
            seg_end = at_starts[a] if a < n_added else de
            if seg_end > pos:
                # charsmap: alignment = input offset of the rule that wrote each byte (units for the
                # whitespace rules); without a charsmap every byte is its own unit
                m = 0
                if has_charsmap:
                    n_ud = find_added_tokens(buf, pos, seg_end, ud_first, ud_child_start, ud_child_count,
                                             ud_edge_byte, ud_edge_target, ud_token, ud_starts, ud_ends, ud_ids)
                    q = pos
                    for u in range(n_ud + 1):
                        gap_end = ud_starts[u] if u < n_ud else seg_end
                        if gap_end > q:
                            reached, m, _ = spm_normalize(buf, q, gap_end, cm_units, cm_strings, cm_max_step,
                                                          cm_buf, cm_src, m)
                            if reached < gap_end:
                                need[0] = 2 * cm_cap + cm_max_step * (seg_end - reached)
                                return d, STATUS_GROW_SCRATCH
                        if u < n_ud:
                            if m + (ud_ends[u] - ud_starts[u]) + 1 > cm_cap:
                                need[0] = 2 * cm_cap + (seg_end - pos)
                                return d, STATUS_GROW_SCRATCH
                            for k in range(ud_starts[u], ud_ends[u]):
                                cm_buf[m] = buf[k]
                                cm_src[m] = ud_starts[u]  # one unit: sentencepiece consumes it whole
                                m += 1
                            q = ud_ends[u]
                    if m + 1 > cm_cap:
                        need[0] = 2 * cm_cap
                        return d, STATUS_GROW_SCRATCH
                    cm_src[m] = seg_end
                else:
                    if seg_end - pos + 1 > cm_cap:
                        need[0] = seg_end - pos + 1
                        return d, STATUS_GROW_SCRATCH
                    m = _copy_unnormalized(buf, pos, seg_end, cm_buf, cm_src)
                    cm_src[m] = seg_end
                if 3 * m + 4 > norm_cap:
                    need[0] = 3 * m + 4
                    return d, STATUS_GROW_SCRATCH
                n = sentencepiece_whitespace(cm_buf, cm_src, m, ws_flags, norm_buf, norm_align)
                if n > 0:
                    if n_out + n + n_added + 1 > out_cap:
                        need[0] = n + n_added + 1 + (de - seg_end) * 3 * cm_max_step
                        return d, STATUS_GROW_OUT
                    one_start[0] = 0
                    one_end[0] = n
                    got = unigram_encode(norm_buf, one_start, one_end, 1, da, scores, id_flags, byte_ids,
                                         arith, unk_id, unk_score, byte_fallback,
                                         out_ids[n_out:], tok_starts, tok_ends,
                                         best_score, best_start, best_id, path_start, path_end)
                    if got == MISSING_UNK:
                        return d, STATUS_MISSING_UNK
                    n_out += got
            if a < n_added:
                if n_out + 1 > out_cap:
                    need[0] = n_added + 1
                    return d, STATUS_GROW_OUT
                out_ids[n_out] = at_ids[a]
                n_out += 1
                pos = at_ends[a]
        out_pos[0] = n_out
        doc_out_end[d] = n_out
    return n_docs, STATUS_DONE


# Metaspace prepend schemes as the HF fused kernel takes them
PREPEND_ALWAYS = 0
PREPEND_FIRST = 1
PREPEND_NEVER = 2


@njit(cache=True, nogil=True)
def encode_docs_unigram_hf(buf, doc_starts, doc_ends, first_doc, n_docs,
                           at_first, at_child_start, at_child_count, at_edge_byte, at_edge_target, at_token,
                           at_starts, at_ends, at_ids,
                           has_charsmap, cm_units, cm_strings, cm_props, cm_max_rep, cm_buf, cm_src,
                           ws_split, char_flags, has_metaspace, rep, prepend_scheme, meta_split, prepend,
                           word_starts, word_ends, one_start, one_end, ms_buf, ms_align, piece_starts, piece_ends,
                           da, scores, id_flags, byte_ids, arith, unk_id, unk_score, byte_fallback,
                           best_score, best_start, best_id, path_start, path_end, tok_starts, tok_ends,
                           out_ids, out_pos, doc_out_end, need):
    """HF ``tokenizers`` pipeline Precompiled -> [WhitespaceSplit] -> [Metaspace] -> Unigram for
    documents ``first_doc..n_docs-1``; the same protocol as :func:`encode_docs_unigram_spm`.

    Per segment between raw added tokens: HF's grapheme-wise charsmap (``hf_normalize``), whitespace
    split (``bert_pre_tokenize`` without punctuation), Metaspace (``metaspace_pieces``; "first"
    prepends to the words from the first source character left in the document's normalized text)
    and the Viterbi per piece. Capacities
    checked here: ``cm_*`` the charsmap output; ``word_*``, ``prepend`` its length + 1; ``ms_*``,
    ``piece_*``, ``best_*``, ``path_*``, ``tok_*`` len(rep) * (2 * charsmap output + 2).
    """
    cm_cap = cm_buf.shape[0]
    ms_cap = ms_buf.shape[0]
    out_cap = out_ids.shape[0]
    r = rep.shape[0]
    for d in range(first_doc, n_docs):
        ds = doc_starts[d]
        de = doc_ends[d]
        n_out = out_pos[0]
        n_added = find_added_tokens(buf, ds, de, at_first, at_child_start, at_child_count, at_edge_byte,
                                    at_edge_target, at_token, at_starts, at_ends, at_ids)
        pos = ds
        for a in range(n_added + 1):
            seg_end = at_starts[a] if a < n_added else de
            if seg_end > pos:
                m = 0
                if has_charsmap:
                    reached, m, _, more = hf_normalize(buf, pos, seg_end, cm_units, cm_strings, cm_props,
                                                       cm_max_rep, cm_buf, cm_src, 0)
                    if reached < seg_end:
                        need[0] = 2 * cm_cap + more + 4 * (seg_end - reached)
                        return d, STATUS_GROW_SCRATCH
                else:
                    if seg_end - pos > cm_cap:
                        need[0] = seg_end - pos
                        return d, STATUS_GROW_SCRATCH
                    m = _copy_unnormalized(buf, pos, seg_end, cm_buf, cm_src)
                if r * (2 * m + 2) + 1 > ms_cap or m + 1 > word_starts.shape[0]:
                    need[0] = r * (2 * m + 2) + 1
                    return d, STATUS_GROW_SCRATCH
                if m > 0:
                    n_words = 1
                    word_starts[0] = 0
                    word_ends[0] = m
                    if ws_split:
                        one_start[0] = 0
                        one_end[0] = m
                        n_words = bert_pre_tokenize(cm_buf, one_start, one_end, 1, char_flags, False,
                                                    word_starts, word_ends)
                    if has_metaspace:
                        for w in range(n_words):
                            if prepend_scheme == PREPEND_ALWAYS:
                                prepend[w] = True
                            elif prepend_scheme == PREPEND_FIRST:
                                # HF's Precompiled shifts later offsets over characters it deleted
                                # (Strip does not, but it never reaches this kernel): a word from the
                                # source offset of the first normalized byte counts as offset 0
                                prepend[w] = pos == ds and cm_src[word_starts[w]] == cm_src[0]
                            else:
                                prepend[w] = False
                        n_bytes, n_pieces = metaspace_pieces(cm_buf, cm_src, word_starts, word_ends, n_words, rep,
                                                             prepend, meta_split, ms_buf, ms_align,
                                                             piece_starts, piece_ends)
                        text = ms_buf
                    else:
                        n_bytes = m
                        n_pieces = n_words
                        for w in range(n_words):
                            piece_starts[w] = word_starts[w]
                            piece_ends[w] = word_ends[w]
                        text = cm_buf
                    if n_out + n_bytes + n_added + 1 > out_cap:
                        need[0] = n_bytes + n_added + 1 + (de - seg_end) * 4 * (cm_max_rep + r)
                        return d, STATUS_GROW_OUT
                    got = unigram_encode(text, piece_starts, piece_ends, n_pieces, da, scores, id_flags, byte_ids,
                                         arith, unk_id, unk_score, byte_fallback,
                                         out_ids[n_out:], tok_starts, tok_ends,
                                         best_score, best_start, best_id, path_start, path_end)
                    if got == MISSING_UNK:
                        return d, STATUS_MISSING_UNK
                    n_out += got
            if a < n_added:
                if n_out + 1 > out_cap:
                    need[0] = n_added + 1
                    return d, STATUS_GROW_OUT
                out_ids[n_out] = at_ids[a]
                n_out += 1
                pos = at_ends[a]
        out_pos[0] = n_out
        doc_out_end[d] = n_out
    return n_docs, STATUS_DONE
