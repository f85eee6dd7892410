"""One kernel for the SentencePiece-BPE pipeline over a batch of documents.

For ``.model`` tokenizers without a precompiled charsmap (Llama 2, Mistral, most byte-fallback BPE
models) and the tokenizer.json pipelines that amount to one (Gemma 3): raw-text added tokens (control
pieces, only with ``parse_special``), sentencepiece's whitespace normalization, user-defined pieces
matched in the normalized text, and score-ranked BPE, for many documents in one ``nogil`` call,
exactly as the staged pipeline composes them.

The kernels take one *session* (:data:`SPM_SESSION`): the read-only pipeline of a tokenizer and
parse_special (:data:`SPM_PIPE`) with the calling thread's buffers, so a call unboxes one structure
instead of 60 arrays (see :mod:`tokjit.kernels.structs`).
"""

from __future__ import annotations

import numpy as np
from numba import njit, types
from numba.experimental import structref

from tokjit.kernels.added_tokens import DEFER_TO_STAGED, added_token_matches, ruled_token_matches, trie_arrays
from tokjit.kernels.spm_whitespace import sentencepiece_whitespace_bytes
from tokjit.kernels import structs
from tokjit.kernels.bpe import (FLAG_RESEGMENT_UNUSED, FLAG_SPLIT_SPACE_SYMBOL, bpe_core, piece_part_end,
                                vocab_scalars)
from tokjit.kernels.call_result import (IO_TEXT_AT, KERNEL_FAILED, NOT_TEXT, code_object, deliver, no_session,
                                        release_gil, retake_gil, text_utf8, thread_session)
from tokjit.kernels.fused import FALLBACK, GROW, load_single_text
from tokjit.kernels.memops import prefetch_row
from tokjit.kernels.piece_cache import (MAX_PIECE, cache_emit, cache_find_key, cache_put_key, cacheable_key,
                                        home_row)
from tokjit.kernels.structs import RULES_NONE, borrow, struct_at

_I64 = types.int64[::1]
_U8 = types.uint8[::1]

# raw added tokens (``raw``), user-defined pieces in the normalized text (``user``), the BPE model
# (``raw_rules``: the raw added tokens' lstrip / rstrip or llama.cpp order, see added_tokens.ruled_token_matches)
SPMPipeType, SPMPipe, SPM_PIPE = structs._declare("SPMPipe", [
    ("raw", structs.TRIE), ("raw_rules", structs.ADDED_RULES), ("user", structs.TRIE), ("vocab", structs.BPE_VOCAB),
    ("ws_flags", types.int64),
], __name__)


@njit(cache=True)
def make_spm_pipe(raw, raw_rules, user, vocab, ws_flags):
    s = structref.new(SPM_PIPE)
    s.raw = raw
    s.raw_rules = raw_rules
    s.user = user
    s.vocab = vocab
    s.ws_flags = ws_flags
    return s


# per-thread buffers of the normalized text (sizes: see encode_docs_spm) and the piece loop's
# lookahead ring (``PIECE_RING`` pieces of end, hash and two key words)
SPMBuffersType, SPMBuffers, SPM_BUFFERS = structs._declare("SPMBuffers", [
    ("ud_starts", _I64), ("ud_ends", _I64), ("ud_ids", _I64), ("norm_buf", _U8), ("one_start", _I64),
    ("one_end", _I64), ("ring", _I64),
], __name__)

PIECE_AHEAD = 8  # pieces whose cache rows are prefetched before their lookup
PIECE_RING = 16  # power of two > PIECE_AHEAD


@njit(cache=True)
def make_spm_buffers(ud_starts, ud_ends, ud_ids, norm_buf, one_start, one_end, ring):
    s = structref.new(SPM_BUFFERS)
    s.ud_starts = ud_starts
    s.ud_ends = ud_ends
    s.ud_ids = ud_ids
    s.norm_buf = norm_buf
    s.one_start = one_start
    s.one_end = one_end
    s.ring = ring
    return s


SPMSessionType, SPMSession, SPM_SESSION = structs._declare("SPMSession", [
    ("pipe", SPM_PIPE), ("spans", structs.SPANS), ("bpe", structs.BPE_SCRATCH), ("bufs", SPM_BUFFERS),
], __name__)


@njit(cache=True)
def make_spm_session(pipe, spans, bpe, bufs):
    s = structref.new(SPM_SESSION)
    s.pipe = pipe
    s.spans = spans
    s.bpe = bpe
    s.bufs = bufs
    return s


@njit(cache=True, _nrt=False)
def encode_text_spm(first, text, result):
    """One text (a str, or bytes) through :func:`encode_docs_spm`, as :func:`~tokjit.kernels.fused.encode_text_bpe`
    does: the object ``result`` asks for, or a negative code as an int (GROW: ``spans.io[2]`` = bytes
    needed; NO_SESSION, NOT_TEXT, NOT_BUILT, KERNEL_FAILED); ``first`` finds the thread's SPM_SESSION."""
    session_address = thread_session(first, result)
    if session_address == 0:
        return no_session(first)
    session = struct_at(session_address, SPM_SESSION)
    sp = borrow(session, "spans")
    io = borrow(sp, "io")
    n = text_utf8(io, text, result)
    if n < 0:
        return code_object(io, NOT_TEXT)
    if not load_single_text(sp, io[IO_TEXT_AT], n, 3 * n + 4):
        return code_object(io, GROW)
    gil = release_gil(io, n)
    try:
        count = encode_docs_spm(session, borrow(sp, "text"), borrow(sp, "doc_starts"), borrow(sp, "doc_ends"), 0,
                                1, borrow(sp, "out"), borrow(sp, "doc_out_end"))
        if borrow(sp, "doc_out_end")[0] < 0:
            count = FALLBACK  # its added tokens need the staged pipeline's rules
    except Exception:  # noqa: BLE001 - it must not leave with the GIL released (the caller raises)
        count = KERNEL_FAILED
    retake_gil(io, gil)
    return deliver(io, borrow(sp, "out"), count, result)


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def _find_piece(norm_buf, ps, gap_end, split_space, unsafe_prev, cut_bits, space_end, cache_rows, ring, index):
    """End the piece starting at ``ps`` (at the next cut no merge crosses, with ``split_space``:
    :func:`~tokjit.kernels.bpe.piece_part_end`, which also returns ``space_end`` for the next call),
    keep its end and cache key at ``ring`` slot ``index`` and prefetch its cache row; returns
    (the end, ``space_end``)."""
    pe = gap_end
    if split_space:
        pe, space_end = piece_part_end(norm_buf, ps, gap_end, unsafe_prev, cut_bits, space_end)
    h, w0, w1 = cacheable_key(norm_buf, ps, pe)
    prefetch_row(cache_rows, home_row(cache_rows, h))
    r = 4 * (index & (PIECE_RING - 1))
    ring[r] = pe
    ring[r + 1] = h
    ring[r + 2] = w0
    ring[r + 3] = w1
    return pe, space_end


# Compiled without reference counting (fields read with ``borrow``; see kernels.structs)
@njit(cache=True, nogil=True, _nrt=False)
def encode_docs_spm(session, buf, doc_starts, doc_ends, first_doc, last_doc, out_ids, doc_out_end):
    """Encode documents ``first_doc..last_doc-1`` of ``buf``; returns the number of ids written to
    ``out_ids`` (from index 0; ``doc_out_end[d]`` is the end of document ``d``'s ids).

    ``session`` (:data:`SPM_SESSION`) holds the compiled tokenizer (``pipe``) and the calling thread's
    buffers (``spans``, ``bpe``, ``bufs``). Per document: added tokens in the raw text (trie
    ``pipe.raw``, leftmost-longest); each text segment between them is normalized
    (``sentencepiece_whitespace_bytes``), user-defined pieces are matched in the result (trie ``pipe.user``)
    and the gaps are BPE-encoded as single pieces (``bpe_encode``). With ``FLAG_SPLIT_SPACE_SYMBOL`` a
    gap is cut before U+2581 where no merge can cross (the cuts ``bpe_encode`` makes itself), and
    unless UNUSED pieces are resegmented each part goes through the thread's piece cache (as
    ``kernels.fused`` keeps it): words repeat, so most parts copy ids instead of merging.
    O(normalized bytes) apart from BPE's own bounds.
    A document whose raw added tokens need the staged pipeline's rules (``ruled_token_matches``) gets no
    ids and ``doc_out_end[d] = -1 - ids before it``.
    Capacities: ``out_ids`` >= 3 * total bytes + 4 * documents; ``bufs.norm_buf``, ``bufs.ud_*``,
    ``spans.tok_*`` and the BPE workspaces >= 3 * longest document + 4; ``spans.at_*`` >= longest + 1.
    """
    pipe, sp = borrow(session, "pipe"), borrow(session, "spans")
    bs, bf = borrow(session, "bpe"), borrow(session, "bufs")
    raw, raw_rules = borrow(pipe, "raw"), borrow(pipe, "raw_rules")
    ruled = borrow(raw_rules, "mode") != RULES_NONE
    at, ud, v = trie_arrays(raw), trie_arrays(borrow(pipe, "user")), borrow(pipe, "vocab")
    ws_flags = borrow(pipe, "ws_flags")
    v_scalars = vocab_scalars(v)
    flags, unsafe_prev, cut_bits = v_scalars[0], borrow(v, "unsafe_prev"), borrow(v, "cut_bits")
    at_starts, at_ends, at_ids = borrow(sp, "at_starts"), borrow(sp, "at_ends"), borrow(sp, "at_ids")
    tok_starts, tok_ends = borrow(sp, "tok_starts"), borrow(sp, "tok_ends")
    ud_starts = borrow(bf, "ud_starts")
    ud_ends, ud_ids = borrow(bf, "ud_ends"), borrow(bf, "ud_ids")
    norm_buf = borrow(bf, "norm_buf")
    one_start, one_end, ring = borrow(bf, "one_start"), borrow(bf, "one_end"), borrow(bf, "ring")
    cache = borrow(bs, "cache")
    cache_rows, cache_bytes, cache_ids = borrow(cache, "rows"), borrow(cache, "byte_pool"), borrow(cache, "id_pool")
    cache_fill = borrow(cache, "fill")
    split_space = (flags & FLAG_SPLIT_SPACE_SYMBOL) != 0
    cached = (flags & FLAG_RESEGMENT_UNUSED) == 0
    n_out = 0
    for d in range(first_doc, last_doc):
        ds = doc_starts[d]
        de = doc_ends[d]
        if ruled:
            # the user-defined spans are free until the segments: occurrences there, claimed bytes in
            # norm_buf
            n_added = ruled_token_matches(raw, raw_rules, buf, ds, de, ud_starts, ud_ends, ud_ids, norm_buf,
                                          at_starts, at_ends, at_ids)
            if n_added == DEFER_TO_STAGED:
                doc_out_end[d] = -1 - n_out  # the caller encodes it staged (and undoes the mark)
                continue
        else:
            n_added = added_token_matches(buf, ds, de, *at, at_starts, at_ends, at_ids)
        pos = ds
        for a in range(n_added + 1):
            seg_end = at_starts[a] if a < n_added else de
            if seg_end > pos:
                m = sentencepiece_whitespace_bytes(buf, pos, seg_end, ws_flags, norm_buf)
                n_ud = added_token_matches(norm_buf, 0, m, *ud, ud_starts, ud_ends, ud_ids)
                q = 0
                for u in range(n_ud + 1):
                    gap_end = ud_starts[u] if u < n_ud else m
                    if gap_end > q and cached:
                        # pieces are found PIECE_AHEAD ahead (end and key kept in ``ring``) and their
                        # cache rows prefetched, so a row's trip from memory overlaps the work on the
                        # pieces before it (one ahead is too short a wait for short words)
                        found = q
                        n_found = 0
                        space_end = np.int64(-1)
                        while n_found < PIECE_AHEAD and found < gap_end:
                            found, space_end = _find_piece(norm_buf, found, gap_end, split_space, unsafe_prev,
                                                           cut_bits, space_end, cache_rows, ring, n_found)
                            n_found += 1
                        k = 0
                        ps = q
                        while ps < gap_end:
                            r = 4 * (k & (PIECE_RING - 1))
                            pe, h, w0, w1 = ring[r], ring[r + 1], ring[r + 2], ring[r + 3]
                            k += 1
                            if found < gap_end:
                                found, space_end = _find_piece(norm_buf, found, gap_end, split_space,
                                                               unsafe_prev, cut_bits, space_end, cache_rows,
                                                               ring, n_found)
                                n_found += 1
                            # the piece cache probe and copy are inlined (a call would incref/decref
                            # every array argument per piece)
                            cacheable = pe - ps <= MAX_PIECE
                            row = cache_find_key(cache_rows, cache_bytes, norm_buf, ps, pe, h, w0, w1, False) \
                                if cacheable else -1
                            if row >= 0:
                                n_out += cache_emit(cache_rows, cache_ids, row, out_ids, n_out)
                            else:
                                one_start[0] = ps
                                one_end[0] = pe
                                n_ids = bpe_core(v, v_scalars, bs, norm_buf, one_start, one_end, 0, 1,
                                                 out_ids[n_out:], tok_starts, tok_ends)
                                if cacheable:
                                    cache_put_key(cache_rows, cache_bytes, cache_ids, cache_fill, norm_buf, ps, pe,
                                                  out_ids, n_out, n_ids, h, w0, w1)
                                n_out += n_ids
                            ps = pe
                    elif gap_end > q:
                        one_start[0] = q
                        one_end[0] = gap_end
                        n_out += bpe_core(v, v_scalars, bs, norm_buf, one_start, one_end, 0, 1,
                                          out_ids[n_out:], tok_starts, tok_ends)
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
