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
from .lookup import bytes_equal, hash_bytes
from .unigram import (ARITH_CERT, ARITH_SPM, ID_USER_DEFINED, MISSING_UNK, SPM_SCORE_RESET, _char_len, _viterbi,
                      emit_path, unigram_encode)
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


# word cache of the sentencepiece Unigram kernel (``encode_words_spm``): slots, longest word, pools
WORD_SLOTS = 1 << 16
WORD_MAX_BYTES = 64
WORD_POOL_BYTES = 1 << 19
WORD_POOL_IDS = 1 << 18
# per-slot int64 fields of ``wc_meta``
WM_HASH, WM_BSTART, WM_BLEN, WM_ISTART, WM_ILEN, WM_PSTART, WM_PLEN, WM_CHARS = 0, 1, 2, 3, 4, 5, 6, 7
# 2**-24: float32's unit roundoff
F32_UNIT = 5.9604644775390625e-08


@njit(cache=True, nogil=True)
def _next_word_end(buf, p, n):
    """First character start after ``p`` (stepping as the Viterbi does) holding U+2581, else ``n``."""
    q = p + _char_len(buf[p])
    while q < n:
        if q + 3 <= n and buf[q] == 0xE2 and buf[q + 1] == 0x96 and buf[q + 2] == 0x81:
            return q
        q += _char_len(buf[q])
    return n


@njit(cache=True, nogil=True)
def _word_slot(buf, p, q, wc_meta, wc_bytes):
    h = hash_bytes(buf, p, q)
    mask = wc_meta.shape[0] - 1
    slot = h & mask
    while wc_meta[slot, WM_BLEN] > 0:
        if wc_meta[slot, WM_HASH] == h and wc_meta[slot, WM_BLEN] == q - p and \
                bytes_equal(wc_bytes, wc_meta[slot, WM_BSTART], buf, p, q - p):
            return slot
        slot = (slot + 1) & mask
    return slot


@njit(cache=True, nogil=True)
def encode_words_spm(buf, n, da, scores, id_flags, byte_ids, unk_id, unk_score, byte_fallback,
                     out_ids, n_out, tok_starts, tok_ends, best_score, best_start, best_id, path_start, path_end,
                     wc_meta, wc_cert, wc_bytes, wc_ids, wc_scores, wc_fill):
    """sentencepiece's Viterbi over normalized ``buf[:n]`` (float32, ``ARITH_SPM``), word by word, with
    a per-thread cache of word -> ids; appends at ``out_ids[n_out:]`` and returns the new count.

    Exact because: no vocabulary piece has U+2581 after its first character (the caller checks), so
    every path passes through each U+2581 and the text splits into words whose Viterbi depends on the
    rest only through the path score ``h`` arriving at the word (and the score reset, replayed). A
    word's float32 decisions can still depend on ``h`` through rounding, so a word is cached with a
    certificate: every comparison its Viterbi makes, summed exactly, differs by more than the float32
    error the sums can carry at magnitude ``|h| + largest`` (``chars * 2**-24 * magnitude``, 4x over),
    and no score reset falls inside it. A hit that meets the certificate for the current ``h`` copies
    the ids and refolds ``h`` over the cached float32 piece scores, as the Viterbi sums them; anything
    else runs the Viterbi on the word from ``h``. O(bytes) for hits, the Viterbi's cost for the rest.
    """
    unk32 = np.float32(unk_score)
    h = 0.0  # a float32 value: the best path score at the current word start
    p = 0
    while p < n:
        q = _next_word_end(buf, p, n)
        if h < -SPM_SCORE_RESET or h > SPM_SCORE_RESET:
            h = 0.0  # the Viterbi's score reset at the word start (nothing else is reached yet)
        size = q - p
        slot = -1
        if size <= WORD_MAX_BYTES:
            slot = _word_slot(buf, p, q, wc_meta, wc_bytes)
            if wc_meta[slot, WM_BLEN] > 0:
                magnitude = abs(h) + wc_cert[slot, 1]
                if magnitude + 1.0 < SPM_SCORE_RESET and \
                        wc_cert[slot, 0] > 4.0 * wc_meta[slot, WM_CHARS] * F32_UNIT * magnitude:
                    i0 = wc_meta[slot, WM_ISTART]
                    n_ids = wc_meta[slot, WM_ILEN]
                    for k in range(n_ids):
                        out_ids[n_out + k] = wc_ids[i0 + k]
                    n_out += n_ids
                    h32 = np.float32(h)
                    s0 = wc_meta[slot, WM_PSTART]
                    for k in range(wc_meta[slot, WM_PLEN]):
                        h32 = wc_scores[s0 + k] + h32
                    h = np.float64(h32)
                    p = q
                    continue
                slot = -1  # cached, but not certain for this h: compute, keep the entry
        _viterbi(buf, p, q, da, scores, id_flags, ARITH_SPM, unk_id, unk_score, best_score, best_start, best_id, h)
        h_end = best_score[size]
        first = n_out
        got, n_path = emit_path(buf, p, q, best_start, best_id, da, byte_ids, ARITH_SPM, unk_id, byte_fallback,
                                out_ids[n_out:], tok_starts, tok_ends, 0, path_start, path_end)
        if got < 0:
            return MISSING_UNK
        n_out += got
        if slot >= 0:
            margin, largest = _viterbi(buf, p, q, da, scores, id_flags, ARITH_CERT, unk_id, unk_score,
                                       best_score, best_start, best_id, 0.0)
            magnitude = abs(h) + largest
            chars = 0
            for k in range(p, q):
                if (buf[k] & 0xC0) != 0x80:
                    chars += 1
            # the exact path must be the one just emitted (it is, when the certificate holds)
            same = magnitude + 1.0 < SPM_SCORE_RESET and margin > 4.0 * chars * F32_UNIT * magnitude
            k = size
            j = 0
            while same and k > 0:
                if j >= n_path or best_start[k] != path_start[j] or path_end[j] != k:
                    same = False
                k = best_start[k]
                j += 1
            if same and j == n_path:
                n_ids = n_out - first
                if wc_fill[0] + size > wc_bytes.shape[0] or wc_fill[1] + n_ids > wc_ids.shape[0] or \
                        wc_fill[2] + n_path > wc_scores.shape[0] or 2 * wc_fill[3] > wc_meta.shape[0]:
                    for i in range(wc_meta.shape[0]):
                        wc_meta[i, WM_BLEN] = 0
                    wc_fill[0] = 0
                    wc_fill[1] = 0
                    wc_fill[2] = 0
                    wc_fill[3] = 0
                    slot = _word_slot(buf, p, q, wc_meta, wc_bytes)
                b0 = wc_fill[0]
                for k in range(size):
                    wc_bytes[b0 + k] = buf[p + k]
                i0 = wc_fill[1]
                for k in range(n_ids):
                    wc_ids[i0 + k] = out_ids[first + k]
                s0 = wc_fill[2]
                for j in range(n_path):  # node scores from the first node on, as the Viterbi adds them
                    node = n_path - 1 - j
                    length = path_end[node] - path_start[node]
                    tid = best_id[path_end[node]]
                    if tid == unk_id:
                        wc_scores[s0 + j] = unk32
                    elif id_flags[tid] & ID_USER_DEFINED:
                        wc_scores[s0 + j] = np.float32(0.1 * (length - 1))
                    else:
                        wc_scores[s0 + j] = np.float32(scores[tid])
                wc_meta[slot, WM_HASH] = hash_bytes(buf, p, q)
                wc_meta[slot, WM_BSTART] = b0
                wc_meta[slot, WM_BLEN] = size
                wc_meta[slot, WM_ISTART] = i0
                wc_meta[slot, WM_ILEN] = n_ids
                wc_meta[slot, WM_PSTART] = s0
                wc_meta[slot, WM_PLEN] = n_path
                wc_meta[slot, WM_CHARS] = chars
                wc_cert[slot, 0] = margin
                wc_cert[slot, 1] = largest
                wc_fill[0] = b0 + size
                wc_fill[1] = i0 + n_ids
                wc_fill[2] = s0 + n_path
                wc_fill[3] += 1
        h = h_end
        p = q
    return n_out


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
                            out_ids, out_pos, doc_out_end, need,
                            word_cache, wc_meta, wc_cert, wc_bytes, wc_ids, wc_scores, wc_fill):
    """Encode documents ``first_doc..n_docs-1`` appending ids at ``out_pos[0]``; returns
    ``(next document, status)``. A document is written whole or not at all.

    Capacities the caller guarantees: ``at_*`` and ``ud_*`` >= longest document + 1; the rest are
    checked here against the actual sizes (``cm_*`` hold the charsmap output, ``norm_*``, ``best_*``,
    ``path_*`` and ``tok_*`` the whitespace-normalized segment, ``out_ids`` the ids). O(normalized bytes
    * longest piece), as the Viterbi. With ``word_cache`` (the caller checked the vocabulary allows
    it) the Viterbi runs word by word through ``encode_words_spm``'s cache.
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
                    if word_cache:
                        got = encode_words_spm(norm_buf, n, da, scores, id_flags, byte_ids, unk_id, unk_score,
                                               byte_fallback, out_ids, n_out, tok_starts, tok_ends,
                                               best_score, best_start, best_id, path_start, path_end,
                                               wc_meta, wc_cert, wc_bytes, wc_ids, wc_scores, wc_fill)
                        if got == MISSING_UNK:
                            return d, STATUS_MISSING_UNK
                        n_out = got
                    else:
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
