"""One kernel for the whole byte-level BPE pipeline over a batch of documents.

Tokenizers without a normalizer whose pre-tokenizer is a single regex split (tiktoken encodings,
Llama 3, GPT-4o, Qwen-style tokenizer.json, GPT-2's ``ByteLevel(use_regex)``) run added-token
splitting, the regex, the split behaviour and BPE for many documents in one call, so a batch costs
one GIL release per thread instead of several Python round trips per document.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from tokjit.kernels.added_tokens import (DEFER_TO_STAGED, added_token_matches, ruled_token_matches,
                                        trie_arrays)
from tokjit.kernels.atomics import CLAIMED, FINISHED, N_CHUNKS, fetch_add, wait_for
from tokjit.kernels.split import SPLIT_ISOLATED, SPLIT_REMOVED, apply_split_behavior
from tokjit.kernels.regex_vm import ascii_gap_pieces, ascii_gap_plan, find_matches, split_in_steps
from tokjit.kernels.split_known import DEFER, NOT_TILED, SHAPE_LLAMACPP, SHAPE_VM, split_known
from tokjit.kernels.llamacpp_split import llamacpp_pieces
from tokjit.kernels.atoms import atom_segment_end, maybe_unreachable_key
from tokjit.kernels.call_result import (IO_TEXT_AT, KERNEL_FAILED, NOT_TEXT, code_object, deliver, no_session,
                                        release_gil, retake_gil, text_utf8, thread_session)
from tokjit.kernels.bpe import (FLAG_ATOMS, FLAG_WHOLE_PIECE_FIRST, SCAN_LIMIT, bpe_core, kernel_pair_table,
                                segment_bpe, vocab_scalars)
from tokjit.kernels.memops import copy_from_address, prefetch_row
from tokjit.kernels.piece_cache import (INLINE_IDS, MAX_CACHED, MAX_PIECE, cache_emit, cache_find_key, cache_put_key,
                                        cacheable_key, home_row, met_before, piece_key, piece_words)
from tokjit.kernels.structs import BPE_SESSION, RULES_NONE, STEP_RUN, borrow, struct_at
from tokjit.kernels.utf8 import decode_bmp

STATUS_OK = 0
# redo this document in the staged pipeline: its regex needs memoization, or its added tokens a rule the
# kernel leaves to it
STATUS_STAGED = 1
STATUS_OUT_FULL = 2  # output buffer full: grow and resume at this doc



STEP_BUDGET_PER_BYTE = 256  # backtracking steps per byte before a document goes to the memoizing path

# pieces this long starting with a character of U+3000..U+DFFF (a run of Han, kana, Hangul: lead byte
# E3..ED, after at most a one-byte prefix), and every piece past MAX_PIECE bytes, are looked up and
# kept whole in the piece cache only from their third meeting (piece_cache.met_before), up to
# MAX_CACHED bytes: ~9% of the runs recur in Chinese or Japanese text, and their segments are cached
# anyway. Pieces past MAX_PIECE were never kept before 2026-11-28: 8.4% of the bytes of a new 100 KB
# part of the Chinese corpus are in such pieces met twice before (lines of box-drawing characters
# and runs of spaces, 49-197 bytes), and each went through BPE again every time. Keeping every run
# cost new Japanese 13-15% (llama3, one thread), looking each one up (a miss reads rows past the one
# requested ahead) 7% with cold CPU caches, and keeping them from the second meeting 3.6-4.5%
# (o200k); keeping none left text read again at 96-97 MB/s (o200k, llama3 Japanese) where whole
# pieces give 134-167.
LONG_RUN_BYTES = 16

# new pieces up to this many bytes go to segment_bpe: at most SCAN_LIMIT symbols, and a piece key
# (what the unreachable bit is read by) exists only up to MAX_PIECE bytes
LEAN_PIECE_BYTES = min(SCAN_LIMIT, MAX_PIECE)

# how many pieces ahead the piece loop requests cache rows (one ahead left a hit's load the largest
# stall of an English profile, ~12% of the time; 8 ahead ~6%)
PREFETCH_AHEAD = 16

GROW = -1  # encode_text_bpe: the thread's buffers are too small for this text (need in io[2])
FALLBACK = -2  # encode_text_bpe: the staged pipeline encodes this text (STATUS_STAGED)


@njit(cache=True, _nrt=False)
def encode_text_bpe(first, text, result):
    """One text (a str, or bytes; :data:`~tokjit.kernels.call_result.RAW`) through
    :func:`encode_docs_bpe`; returns the object ``result`` asks for (:func:`~tokjit.kernels.call_result.deliver`:
    the ids as a list or array, or their count), or a negative code as an int: GROW, FALLBACK,
    NOT_TEXT, NOT_BUILT, KERNEL_FAILED. The single-text entry point: three arguments to unbox, no
    allocation, no reference counting (fields are read with ``borrow``); compiled holding the GIL,
    released around a long text's encoding (:mod:`tokjit.kernels.call_result`).
    ``first`` is the tokenizer path's thread table, where the calling thread's BPE_SESSION is found
    (:func:`~tokjit.kernels.call_result.thread_session`; NO_SESSION when it is not there), or with
    SESSION_GIVEN in ``result`` that session's address (:func:`~tokjit.kernels.structs.addresses`):
    an int, which numba unboxes ~0.1 us faster than the structure."""
    session_address = thread_session(first, result)
    if session_address == 0:
        return no_session(first)
    session = struct_at(session_address, BPE_SESSION)
    sp = borrow(session, "spans")
    io = borrow(sp, "io")
    n = text_utf8(io, text, result)
    if n < 0:
        return code_object(io, NOT_TEXT)
    if not load_single_text(sp, io[IO_TEXT_AT], n, n + 1):
        return code_object(io, GROW)
    gil = release_gil(io, n)
    try:
        done = encode_docs_bpe(session, borrow(sp, "text"), borrow(sp, "doc_starts"), borrow(sp, "doc_ends"), 0, 1,
                               borrow(sp, "out"), borrow(sp, "doc_out_end"))
    except Exception:  # noqa: BLE001 - it must not leave with the GIL released (the caller raises)
        done = KERNEL_FAILED
    retake_gil(io, gil)
    return deliver(io, borrow(sp, "out"), io[0] if done >= 1 else FALLBACK if done == 0 else KERNEL_FAILED, result)


@njit(cache=True, nogil=True, _nrt=False)
def load_single_text(sp, address, n, out_needed):
    """Copy the ``n`` bytes of text at ``address`` into the thread's text buffer ``sp.text`` as the only
    document of a batch; False (with ``sp.io[2]`` = ``n``, for the driver to grow the buffers) when
    the text or ``out_needed`` ids do not fit. The preamble of every family's single-text kernel."""
    buf = borrow(sp, "text")
    io = borrow(sp, "io")
    if n > buf.shape[0] or out_needed > borrow(sp, "out").shape[0]:
        io[2] = n
        return False
    copy_from_address(buf, 0, address, n)
    borrow(sp, "doc_starts")[0] = 0
    borrow(sp, "doc_ends")[0] = n
    io[0] = 0
    return True


# encode_chunks_bpe / finish_chunks: not every chunk is finished yet (the caller checks the other
# threads and calls finish_chunks again), or every chunk is but one stopped at a document the kernel
# hands back (the caller assembles the ids)
CHUNKS_RUNNING = -1
CHUNKS_STOPPED = -2
WAIT_SPINS = 1 << 16  # ~2-5 ms of ``pause`` between two looks at the other threads
# ids a chunk's region holds past one per byte: a cache hit writes INLINE_IDS ids whatever its count
# (cache_emit), so a chunk whose every byte is an id may write up to INLINE_IDS - 1 slots past its
# last id, which must not be the next chunk's first ids (another thread may have written them)
CHUNK_SLACK = INLINE_IDS


@njit(cache=True, nogil=True, _nrt=False)
def cut_chunks(doc_starts, doc_ends, max_chunks, min_bytes, chunks):
    """Cut documents into at most ``max_chunks`` runs of about equal bytes (at least ``min_bytes`` each
    where the batch allows): ``chunks[c, 0:2]`` = first and end document. Returns (number of chunks,
    longest document in bytes). O(documents)."""
    n_docs = doc_ends.shape[0]
    longest = 0
    for d in range(n_docs):
        longest = max(longest, doc_ends[d] - doc_starts[d])
    if n_docs == 0:
        return 0, 0
    first_byte = doc_starts[0]
    total = doc_ends[n_docs - 1] - first_byte
    n_chunks = max(1, min(max_chunks, n_docs, total // max(min_bytes, 1)))
    # chunk c's share of the bytes falls linearly, as 2 (n - c) - 1 of n^2: the chunks claimed last
    # are the smallest, so the threads finish close together
    c = 0
    chunks[0, 0] = 0
    through = 2 * n_chunks - 1  # the shares of chunks 0..c
    for d in range(n_docs):
        # close chunk c after the document that reaches its share of the bytes
        if c + 1 < n_chunks and (doc_ends[d] - first_byte) * n_chunks * n_chunks >= through * total \
                and d + 1 < n_docs:
            chunks[c, 1] = d + 1
            c += 1
            chunks[c, 0] = d + 1
            through += 2 * (n_chunks - c) - 1
    chunks[c, 1] = n_docs
    return c + 1, longest


@njit(cache=True, nogil=True, _nrt=False)
def encode_chunks_bpe(session, buf, doc_starts, doc_ends, chunks, out_ids, doc_out_end, counters, wait):
    """One thread's share of a batch cut into chunks (:func:`cut_chunks`, ``counters[N_CHUNKS]`` of them):
    claim the next chunk (``counters[CLAIMED]``, shared by every thread of the batch) until none is
    left, and encode its documents with :func:`encode_docs_bpe`. ``chunks[c]`` = first document, end
    document (read), first document not finished and end of its ids in ``out_ids`` (written); chunk
    ``c``'s ids start at ``doc_starts[first] + c * CHUNK_SLACK`` (room for one id per byte plus
    :data:`CHUNK_SLACK`). With ``wait``, then :func:`finish_chunks`. Returns 0 (without ``wait``),
    or what ``finish_chunks`` returns.
    O(bytes of the chunks claimed)."""
    io = borrow(borrow(session, "spans"), "io")
    n_chunks = counters[N_CHUNKS]
    while True:
        c = fetch_add(counters, CLAIMED, 1)
        if c < 0 or c >= n_chunks:
            break
        first = chunks[c, 0]
        io[0] = doc_starts[first] + c * CHUNK_SLACK
        chunks[c, 2] = encode_docs_bpe(session, buf, doc_starts, doc_ends, first, chunks[c, 1], out_ids,
                                       doc_out_end)
        chunks[c, 3] = io[0]
        fetch_add(counters, FINISHED, 1)
    if wait:
        return finish_chunks(doc_starts, chunks, out_ids, doc_out_end, counters)
    return 0


@njit(cache=True, nogil=True, _nrt=False)
def finish_chunks(doc_starts, chunks, out_ids, doc_out_end, counters):
    """Wait (spinning, at most ``WAIT_SPINS``) until every chunk is finished, then move each chunk's
    ids down behind the previous one's and make ``doc_out_end`` count from the start of ``out_ids``;
    returns the number of ids. CHUNKS_RUNNING when the wait ran out, CHUNKS_STOPPED (nothing moved)
    when a chunk stopped before its end. The caller is woken by no one: the last thread to finish a
    chunk is seen here within a few hundred nanoseconds. O(ids)."""
    n_chunks = counters[N_CHUNKS]
    if not wait_for(counters, FINISHED, n_chunks, WAIT_SPINS):
        return CHUNKS_RUNNING
    for c in range(n_chunks):
        if chunks[c, 2] < chunks[c, 1]:
            return CHUNKS_STOPPED
    at = 0
    for c in range(n_chunks):
        base = doc_starts[chunks[c, 0]] + c * CHUNK_SLACK
        shift = base - at
        for i in range(base, chunks[c, 3]):
            out_ids[i - shift] = out_ids[i]
        for d in range(chunks[c, 0], chunks[c, 1]):
            doc_out_end[d] -= shift
        at += chunks[c, 3] - base
    return at


@njit(cache=True, nogil=True, _nrt=False)
def encode_docs_bpe(session, buf, doc_starts, doc_ends, first_doc, last_doc, out_ids, doc_out_end):
    """Encode documents ``first_doc..last_doc-1`` of ``buf``; returns the index of the first document
    not finished (``last_doc`` when all are done) and sets ``sp.io[1]`` to the status.

    ``session`` (:data:`~tokjit.kernels.structs.BPE_SESSION`) holds the compiled tokenizer (``pipe``)
    and the calling thread's buffers (``spans``, ``bpe``). Per document:
    leftmost-longest added-token matches (trie), then for every gap the regex matches
    (``find_matches``), the HF split behaviour and BPE (``bpe_encode``), exactly as the staged
    pipeline does. Ids are appended to ``out_ids`` from ``sp.io[0]``; ``doc_out_end[d]`` is the end of
    document ``d``'s ids. O(total bytes) apart from BPE's own bounds. ``sp`` must hold the longest
    document: matches/pieces >= 2 * bytes + 16, ``bs`` and ``tok_*`` >= bytes + 1.

    A piece's ids depend only on its bytes, so short pieces are remembered in the thread's piece cache
    (:mod:`tokjit.kernels.piece_cache`; text repeats words): a hit copies the ids instead of merging again.
    A piece the cache does not know is cut where runs of atoms may be cut (:mod:`tokjit.kernels.atoms`;
    a Han run becomes segments of a few characters), and each segment goes through the cache and BPE
    on its own; the piece as a whole is remembered too.

    Runs without numba's reference counting (fields are read with ``borrow``, the session keeps them
    alive, nothing is allocated): with counting on, each helper that takes an array paid an atomic
    incref/decref per piece. One function, not a wrapper around a core: numba optimizes and emits the
    machine code of everything a compiled function calls once more for each calling layer.
    """
    pipe, sp, bs = borrow(session, "pipe"), borrow(session, "spans"), borrow(session, "bpe")
    t, rx, v, c = borrow(pipe, "trie"), borrow(pipe, "regex"), borrow(pipe, "vocab"), borrow(bs, "cache")
    rules = borrow(pipe, "rules")
    ruled = borrow(rules, "mode") != RULES_NONE
    at_first, at_child_start, at_child_count, at_edge_byte, at_edge_target, at_token = trie_arrays(t)
    rx_prog, rx_rep, rx_ascii, rx_mask, rx_neg, rx_roff, rx_ranges, rx_gc, rx_roles = (
        borrow(rx, "prog"), borrow(rx, "rep_info"), borrow(rx, "cls_ascii"), borrow(rx, "cls_mask"),
        borrow(rx, "cls_neg"), borrow(rx, "cls_roff"), borrow(rx, "cls_ranges"), borrow(rx, "gc"), borrow(rx, "roles"))
    vm_word, behavior, invert, shape, shape_flags, max_digits = (
        borrow(rx, "vm_word"), borrow(rx, "behavior"), borrow(rx, "invert"), borrow(rx, "shape"),
        borrow(rx, "shape_flags"), borrow(rx, "max_digits"))
    at_starts, at_ends, at_ids, match_starts, match_ends, piece_starts, piece_ends, rx_stack, rx_params, \
        tok_starts, tok_ends, io = (
            borrow(sp, "at_starts"), borrow(sp, "at_ends"), borrow(sp, "at_ids"), borrow(sp, "match_starts"),
            borrow(sp, "match_ends"), borrow(sp, "piece_starts"), borrow(sp, "piece_ends"), borrow(sp, "rx_stack"),
            borrow(sp, "rx_params"), borrow(sp, "tok_starts"), borrow(sp, "tok_ends"), borrow(sp, "io"))
    cache_rows, cache_bytes, cache_ids, cache_fill = (borrow(c, "rows"), borrow(c, "byte_pool"), borrow(c, "id_pool"),
                                                      borrow(c, "fill"))
    cache_admit = borrow(c, "admit")
    scalars = vocab_scalars(v)
    flags, unk_id, max_len = scalars
    atom_ids, edge_bits, pair_bits = borrow(v, "atom_ids"), borrow(v, "edge_bits"), borrow(v, "pair_bits")
    segmenting = (flags & FLAG_ATOMS) != 0
    whole_first = (flags & FLAG_WHOLE_PIECE_FIRST) != 0
    byte_ids, pair_table = borrow(v, "byte_ids"), kernel_pair_table(v)
    unreachable_bits, seg_ids, seg_ranks = borrow(v, "unreachable_bits"), borrow(bs, "id"), borrow(bs, "rank")
    pair_cache = borrow(c, "pairs")
    isolated = np.int64(1) if behavior == SPLIT_ISOLATED and not invert else np.int64(0)
    # a sequence of splits, or one split that is a class repeated, goes step by step (split_in_steps
    # finds a class's runs without the VM)
    stepwise = borrow(rx, "steps").shape[0] > 1 or borrow(rx, "steps")[0, STEP_RUN] > 0
    gap_plan = ascii_gap_plan(rx)  # a sequence of splits in one pass: plain ASCII is cut by one scanner
    # tiktoken's way, as a split: the matches are the pieces and what no alternative matches is dropped
    # (HF's Removed with invert), so the scanner's matches are the pieces whether they tile or not
    matches_only = behavior == SPLIT_REMOVED and invert
    # a segment is never looked up whole: "the piece is a token" is a rule about the whole piece
    segment_scalars = (flags & ~FLAG_WHOLE_PIECE_FIRST, unk_id, max_len)
    rx_params[0] = 0
    rx_params[2] = vm_word
    io[1] = STATUS_OK
    n_out = io[0]
    cap = out_ids.shape[0]
    for d in range(first_doc, last_doc):
        ds = doc_starts[d]
        de = doc_ends[d]
        if cap - n_out < de - ds:
            io[1] = STATUS_OUT_FULL
            io[0] = n_out
            return d
        rx_params[1] = STEP_BUDGET_PER_BYTE * (de - ds + 1) + 100_000
        if ruled:
            # the scratch spans are free until the pieces: occurrences in the piece arrays (twice the
            # text's bytes: a run of spaces occurs as every token of spaces it holds) and the match
            # arrays' bytes, claimed bytes in tok_starts'
            n_added = ruled_token_matches(t, rules, buf, ds, de, piece_starts, piece_ends, match_starts.view(np.int32),
                                          tok_starts.view(np.uint8), at_starts, at_ends, at_ids)
            if n_added == DEFER_TO_STAGED:
                io[1] = STATUS_STAGED
                io[0] = n_out
                return d
        else:
            n_added = added_token_matches(buf, ds, de, at_first, at_child_start, at_child_count, at_edge_byte,
                                          at_edge_target, at_token, at_starts, at_ends, at_ids)
        doc_begin = n_out
        pos = ds
        for a in range(n_added + 1):
            seg_end = at_starts[a] if a < n_added else de
            if seg_end > pos:
                n_p = NOT_TILED
                if shape == SHAPE_LLAMACPP or stepwise:
                    # llama.cpp's steps (kernels.llamacpp_split; the plan in the shape flags), or a
                    # sequence of splits (each pattern on the pieces of the one before, the VM for all):
                    # the span arrays the piece loop uses later are their scratch
                    if shape == SHAPE_LLAMACPP:
                        n_p = llamacpp_pieces(rx, buf, pos, seg_end, rx_params, match_starts, match_ends, rx_stack,
                                              tok_starts, tok_ends, piece_starts, piece_ends)
                    else:
                        n_p = ascii_gap_pieces(gap_plan, rx_roles, buf, pos, seg_end, piece_starts, piece_ends)
                        if n_p < 0:
                            n_p = split_in_steps(rx, buf, pos, seg_end, rx_params, match_starts, match_ends,
                                                 rx_stack, tok_starts, tok_ends, piece_starts, piece_ends)
                    if n_p < 0:
                        io[1] = STATUS_STAGED
                        io[0] = doc_begin
                        return d
                elif shape != SHAPE_VM and (isolated != 0 or matches_only):
                    # matches that cover the segment are its pieces under Isolated, and all matches are
                    # under matches_only: the scanner writes them where the pieces go (no copy through
                    # apply_split_behavior: +9% on cached English)
                    n_p = split_known(shape, shape_flags, max_digits, rx_roles, buf, pos, seg_end, piece_starts,
                                      piece_ends, isolated)
                if n_p < 0:
                    # no pieces yet: the matches (the scanner's, unless it deferred to the VM), then the
                    # split behaviour
                    n_m = DEFER
                    if shape != SHAPE_VM and n_p != DEFER:
                        n_m = split_known(shape, shape_flags, max_digits, rx_roles, buf, pos, seg_end, match_starts,
                                          match_ends, np.int64(0))
                    if n_m == DEFER:
                        n_m = find_matches(buf, pos, seg_end, rx_prog, rx_rep, rx_ascii, rx_mask, rx_neg, rx_roff,
                                           rx_ranges, rx_gc, rx_params, match_starts, match_ends, rx_stack)
                    if n_m < 0:
                        io[1] = STATUS_STAGED
                        io[0] = doc_begin
                        return d
                    n_p = apply_split_behavior(pos, seg_end, match_starts, match_ends, n_m, behavior, invert,
                                               piece_starts, piece_ends, 0)
                # the cache row of the piece PREFETCH_AHEAD pieces on is requested while this one is
                # handled: a hit takes ~20 ns, a row's trip from memory several times that
                # (the matches are spent: match_starts keeps each piece's hash from the request to the lookup)
                for q in range(min(n_p, PREFETCH_AHEAD)):
                    match_starts[q] = cacheable_key(buf, piece_starts[q], piece_ends[q])[0]
                    prefetch_row(cache_rows, home_row(cache_rows, match_starts[q]))
                for q in range(n_p):
                    ps = piece_starts[q]
                    pe = piece_ends[q]
                    if q + PREFETCH_AHEAD < n_p:
                        ahead = q + PREFETCH_AHEAD
                        match_starts[ahead] = cacheable_key(buf, piece_starts[ahead], piece_ends[ahead])[0]
                        prefetch_row(cache_rows, home_row(cache_rows, match_starts[ahead]))
                    if segmenting and pe - ps == 1:
                        # one byte is one symbol, its byte's token (segmenting implies every byte is
                        # one): ~15% of the pieces of English, code and Chinese skip the cache's row
                        out_ids[n_out] = byte_ids[buf[ps]]
                        n_out += 1
                        continue
                    h = match_starts[q]
                    w0, w1 = piece_words(buf, ps, pe)
                    if pe <= ps:
                        continue
                    cacheable = pe - ps <= MAX_PIECE
                    if pe - ps <= MAX_CACHED and (not cacheable or segmenting and pe - ps >= LONG_RUN_BYTES and (
                            0xE3 <= buf[ps] <= 0xED or 0xE3 <= buf[ps + 1] <= 0xED)):
                        if not cacheable:
                            h = piece_key(buf, ps, pe)[0]  # past MAX_PIECE the row was not requested
                        cacheable = met_before(cache_admit, h)
                    if cacheable:
                        row = cache_find_key(cache_rows, cache_bytes, buf, ps, pe, h, w0, w1, True)
                        if row >= 0:
                            n_out += cache_emit(cache_rows, cache_ids, row, out_ids, n_out)
                            continue
                    if segmenting and pe - ps > 3 and (buf[ps] >= 0xC2 or buf[ps + 1] >= 0xC2):
                        se = atom_segment_end(buf, ps, pe, atom_ids, edge_bits, pair_bits)
                        # a cut is never inside a token (every character pair of a token is in
                        # pair_bits), so a piece with a cut is no token: "the piece is a token" is moot
                        if se < pe:
                            n_ids = _encode_segments(v, segment_scalars, bs, buf, ps, se, pe, piece_starts,
                                                     piece_ends, n_p, out_ids, n_out, tok_starts, tok_ends)
                            if cacheable:
                                cache_put_key(cache_rows, cache_bytes, cache_ids, cache_fill, buf, ps, pe, out_ids,
                                              n_out, n_ids, h, w0, w1)
                            n_out += n_ids
                            continue
                    # a short new piece (most new words) goes to segment_bpe, bpe_core's work for it
                    # without its fixed cost, unless it may be a token BPE cannot build (then the
                    # whole-piece rule needs bpe_core's lookup); the atoms make the same symbols
                    n_ids = -1
                    if segmenting and pe - ps <= LEAN_PIECE_BYTES and not (
                            whole_first and maybe_unreachable_key(unreachable_bits, h)):
                        n_ids = segment_bpe(buf, ps, pe, atom_ids, edge_bits, byte_ids, pair_table, pair_cache,
                                            seg_ids, seg_ranks, out_ids, n_out)
                    if n_ids < 0:
                        n_ids = bpe_core(v, scalars, bs, buf, piece_starts, piece_ends, q, 1, out_ids[n_out:],
                                         tok_starts, tok_ends)
                    if cacheable:
                        cache_put_key(cache_rows, cache_bytes, cache_ids, cache_fill, buf, ps, pe, out_ids, n_out,
                                      n_ids, h, w0, w1)
                    n_out += n_ids
            if a < n_added:
                out_ids[n_out] = at_ids[a]
                n_out += 1
                pos = at_ends[a]
        doc_out_end[d] = n_out
    io[0] = n_out
    return last_doc


@njit(cache=True, nogil=True, _nrt=False)
def _encode_segments(vocab, segment_scalars, scratch, buf, ps, first_end, pe, piece_starts, piece_ends, spare,
                     out_ids, at, tok_starts, tok_ends):
    """Ids of piece ``buf[ps:pe]`` cut into segments (the first ends at ``first_end``), each from the
    scratch's piece cache or BPE, written from ``out_ids[at]``; returns their number.
    ``piece_starts[spare:]`` / ``piece_ends[spare:]`` (unused entries, room for one per byte) hold the
    segments. A segment that may be a token BPE cannot build stays out of the cache
    (``vocab.unreachable_bits``, see :func:`~tokjit.kernels.atoms.mark_unreachable`). Structures, not
    their arrays, are passed, as to :func:`bpe_core`: it is called once per new CJK piece."""
    c = borrow(scratch, "cache")
    cache_rows, cache_bytes, cache_ids, cache_fill = (borrow(c, "rows"), borrow(c, "byte_pool"), borrow(c, "id_pool"),
                                                      borrow(c, "fill"))
    atom_ids, edge_bits = borrow(vocab, "atom_ids"), borrow(vocab, "edge_bits")
    pair_bits, unreachable_bits = borrow(vocab, "pair_bits"), borrow(vocab, "unreachable_bits")
    byte_ids, pair_table = borrow(vocab, "byte_ids"), kernel_pair_table(vocab)
    seg_ids, seg_ranks, pair_cache = borrow(scratch, "id"), borrow(scratch, "rank"), borrow(c, "pairs")
    # the segments first, into the unused piece entries, each one's cache row requested as it is cut:
    # a new piece's segments are mostly new too, and a lookup's row is as far away as a piece's
    n_seg = 0
    s = ps
    e = first_end
    while True:
        piece_starts[spare + n_seg] = s
        piece_ends[spare + n_seg] = e
        n_seg += 1
        if e - s > 4:  # not one character alone (no lookup for those)
            prefetch_row(cache_rows, home_row(cache_rows, cacheable_key(buf, s, e)[0]))
        if e >= pe:
            break
        s = e
        e = atom_segment_end(buf, s, pe, atom_ids, edge_bits, pair_bits)
    n = 0
    for j in range(spare, spare + n_seg):
        s = piece_starts[j]
        e = piece_ends[j]
        cp, step = decode_bmp(buf, s, e)
        if step == e - s and cp >= 0:
            # one character alone between cuts: an atom (a cut has an atom on each side), which
            # BPE forms whole (A1), so its id is the atom's token
            out_ids[at + n] = atom_ids[cp]
            n += 1
            continue
        h, w0, w1 = cacheable_key(buf, s, e)  # one key for the unreachable bit, the lookup and the put
        cacheable = e - s <= MAX_PIECE and not maybe_unreachable_key(unreachable_bits, h)
        row = cache_find_key(cache_rows, cache_bytes, buf, s, e, h, w0, w1, False) if cacheable else -1
        if row >= 0:
            n += cache_emit(cache_rows, cache_ids, row, out_ids, at + n)
            continue
        k = segment_bpe(buf, s, e, atom_ids, edge_bits, byte_ids, pair_table, pair_cache, seg_ids, seg_ranks,
                        out_ids, at + n)
        if k < 0:
            k = bpe_core(vocab, segment_scalars, scratch, buf, piece_starts, piece_ends, j, 1, out_ids[at + n:],
                         tok_starts, tok_ends)
        if cacheable:
            cache_put_key(cache_rows, cache_bytes, cache_ids, cache_fill, buf, s, e, out_ids, at + n, k, h, w0, w1)
        n += k
    return n
