"""One kernel for the BERT-style WordPiece pipeline over a batch of documents.

For tokenizer.json / vocab.txt tokenizers whose pipeline is ``BertNormalizer`` ->
``BertPreTokenizer`` or ``WhitespaceSplit`` -> ``WordPiece``: raw-text added tokens, the
normalizer, added tokens matched in the normalized text, the pre-tokenizer and the greedy
longest-match-first walk run for many documents in one ``nogil`` call, composed exactly as the
staged pipeline (``Tokenizer._encode_staged``) composes them, so both give HF's ids.

The kernels take one *session* (:data:`WORDPIECE_SESSION`): the read-only pipeline of a tokenizer
and parse_special (:data:`WORDPIECE_PIPE`) with the calling thread's buffers, so a call unboxes one
structure instead of 60 arrays (see :mod:`tokjit.kernels.structs`).
"""

from __future__ import annotations

from numba import njit, types
from numba.experimental import structref

from tokjit.kernels.added_tokens import added_token_matches, trie_arrays
from tokjit.kernels import structs
from tokjit.kernels.structs import borrow, struct_at
from tokjit.kernels.call_result import (IO_TEXT_AT, KERNEL_FAILED, NOT_TEXT, code_object, deliver, no_session,
                                        release_gil, retake_gil, text_utf8, thread_session)
from tokjit.kernels.fused import FALLBACK, GROW, load_single_text
from tokjit.kernels.lookup import lookup_bytes
from tokjit.kernels.wordpiece import bert_normalize, bert_pre_tokenize, wordpiece_encode

STATUS_OK = 0
STATUS_OUT_FULL = 1  # out_ids too small for the next document: grow and resume there
STATUS_STAGED = 2  # this document needs the staged path (its error, or a huge combining run)

_I64 = types.int64[::1]
_I32 = types.int32[::1]
_U8 = types.uint8[::1]

# BertNormalizer's Unicode tables and options (tokjit.models.wordpiece.bert_tables, BertNormalizer.opts);
# ``expansion`` = the most bytes one input byte can become
BertNormType, BertNorm, BERT_NORM = structs._declare("BertNorm", [
    ("flags", _U8), ("dec_keys", _I32), ("dec_off", _I64), ("dec_data", _I32), ("low_keys", _I32),
    ("low_off", _I64), ("low_data", _I32), ("ccc_keys", _I32), ("ccc_vals", _U8), ("opts", types.int64),
    ("expansion", types.int64),
], __name__)


@njit(cache=True)
def make_bert_norm(flags, dec_keys, dec_off, dec_data, low_keys, low_off, low_data, ccc_keys, ccc_vals, opts,
                   expansion):
    s = structref.new(BERT_NORM)
    s.flags = flags
    s.dec_keys = dec_keys
    s.dec_off = dec_off
    s.dec_data = dec_data
    s.low_keys = low_keys
    s.low_off = low_off
    s.low_data = low_data
    s.ccc_keys = ccc_keys
    s.ccc_vals = ccc_vals
    s.opts = opts
    s.expansion = expansion
    return s


# the WordPiece trie (tokjit.models.wordpiece.WordPieceModel) and the vocabulary hash table of whole words
WordPieceVocabType, WordPieceVocab, WORDPIECE_VOCAB = structs._declare("WordPieceVocab", [
    ("edges", types.int64[:, ::1]), ("word_row", _I64), ("word_node", types.int64),
    ("word_node_token", types.int64), ("cont_row", _I64), ("cont_node", types.int64), ("unk_id", types.int64),
    ("max_chars", types.int64), ("whole_words", types.boolean), ("blob", _U8), ("offsets", _I64),
    ("table", _I32), ("max_token_len", types.int64),
], __name__)


@njit(cache=True)
def make_wordpiece_vocab(edges, word_row, word_node, word_node_token, cont_row, cont_node, unk_id, max_chars,
                         whole_words, blob, offsets, table, max_token_len):
    s = structref.new(WORDPIECE_VOCAB)
    s.edges = edges
    s.word_row = word_row
    s.word_node = word_node
    s.word_node_token = word_node_token
    s.cont_row = cont_row
    s.cont_node = cont_node
    s.unk_id = unk_id
    s.max_chars = max_chars
    s.whole_words = whole_words
    s.blob = blob
    s.offsets = offsets
    s.table = table
    s.max_token_len = max_token_len
    return s


# raw added tokens, added tokens matched in the normalized text, normalizer, pre-tokenizer, model
WordPiecePipeType, WordPiecePipe, WORDPIECE_PIPE = structs._declare("WordPiecePipe", [
    ("raw", structs.TRIE), ("norm", structs.TRIE), ("normalizer", BERT_NORM), ("isolate_punct", types.boolean),
    ("vocab", WORDPIECE_VOCAB),
], __name__)


@njit(cache=True)
def make_wordpiece_pipe(raw, norm, normalizer, isolate_punct, vocab):
    s = structref.new(WORDPIECE_PIPE)
    s.raw = raw
    s.norm = norm
    s.normalizer = normalizer
    s.isolate_punct = isolate_punct
    s.vocab = vocab
    return s


# per-thread buffers of the normalized text (sizes: see encode_docs_wordpiece)
WordPieceBuffersType, WordPieceBuffers, WORDPIECE_BUFFERS = structs._declare("WordPieceBuffers", [
    ("nt_starts", _I64), ("nt_ends", _I64), ("nt_ids", _I64), ("run_cp", _I64), ("run_src", _I64),
    ("run_ccc", _I64), ("norm_buf", _U8), ("norm_align", _I64), ("one_start", _I64), ("one_end", _I64),
], __name__)


@njit(cache=True)
def make_wordpiece_buffers(nt_starts, nt_ends, nt_ids, run_cp, run_src, run_ccc, norm_buf, norm_align,
                           one_start, one_end):
    s = structref.new(WORDPIECE_BUFFERS)
    s.nt_starts = nt_starts
    s.nt_ends = nt_ends
    s.nt_ids = nt_ids
    s.run_cp = run_cp
    s.run_src = run_src
    s.run_ccc = run_ccc
    s.norm_buf = norm_buf
    s.norm_align = norm_align
    s.one_start = one_start
    s.one_end = one_end
    return s


WordPieceSessionType, WordPieceSession, WORDPIECE_SESSION = structs._declare("WordPieceSession", [
    ("pipe", WORDPIECE_PIPE), ("spans", structs.SPANS), ("bufs", WORDPIECE_BUFFERS),
], __name__)


@njit(cache=True)
def make_wordpiece_session(pipe, spans, bufs):
    s = structref.new(WORDPIECE_SESSION)
    s.pipe = pipe
    s.spans = spans
    s.bufs = bufs
    return s


@njit(cache=True, _nrt=False)
def encode_text_wordpiece(first, text, result):
    """One text (a str, or bytes) through :func:`encode_docs_wordpiece`, as
    :func:`~tokjit.kernels.fused.encode_text_bpe` does: the object ``result`` asks for, or a negative
    code as an int (GROW: ``spans.io[2]`` = bytes needed; FALLBACK when the text needs the staged
    path, its error or a huge combining run; NOT_TEXT, NOT_BUILT, KERNEL_FAILED).
    ``first`` finds the thread's WORDPIECE_SESSION."""
    session_address = thread_session(first, result)
    if session_address == 0:
        return no_session(first)
    session = struct_at(session_address, WORDPIECE_SESSION)
    sp = borrow(session, "spans")
    io = borrow(sp, "io")
    n = text_utf8(io, text, result)
    if n < 0:
        return code_object(io, NOT_TEXT)
    expansion = borrow(borrow(borrow(session, "pipe"), "normalizer"), "expansion")
    if not load_single_text(sp, io[IO_TEXT_AT], n, 2 * expansion * n + 2):
        return code_object(io, GROW)
    gil = release_gil(io, n)
    try:
        encode_docs_wordpiece(session, borrow(sp, "text"), borrow(sp, "doc_starts"), borrow(sp, "doc_ends"), 0, 1,
                              borrow(sp, "out"), borrow(sp, "doc_out_end"))
        count = io[0] if io[1] == STATUS_OK else FALLBACK
    except Exception:  # noqa: BLE001 - it must not leave with the GIL released (the caller raises)
        count = KERNEL_FAILED
    retake_gil(io, gil)
    return deliver(io, borrow(sp, "out"), count, result)


# Compiled without reference counting (fields read with ``borrow``; see kernels.structs)
@njit(cache=True, nogil=True, _nrt=False)
def encode_docs_wordpiece(session, buf, doc_starts, doc_ends, first_doc, last_doc, out_ids, doc_out_end):
    """Encode documents ``first_doc..last_doc-1``; returns the index of the first document not
    finished (``last_doc`` when all are done) and sets the status in ``spans.io[1]``:
    ``STATUS_OUT_FULL`` (grow ``out_ids`` and resume there) or ``STATUS_STAGED`` (the caller encodes
    that document through the staged path, which raises the proper error, and resumes after it).

    ``session`` (:data:`WORDPIECE_SESSION`) holds the compiled tokenizer (``pipe``) and the calling
    thread's buffers (``spans``, ``bufs``). Per document: leftmost-longest raw added tokens (trie
    ``pipe.raw``); every text segment between them is normalized (``bert_normalize``), normalized
    added tokens are matched in the result (trie ``pipe.norm``), and each gap between those is
    pre-tokenized (``bert_pre_tokenize``) and encoded (``wordpiece_encode``); with ``whole_words``
    (HF's flavour: first tokens matched from the trie root, never empty) a word that is itself a
    vocabulary entry (hash table ``vocab.blob/offsets/table``, the ids the trie holds) is emitted in
    one lookup instead of a trie walk of cache misses. A document stops early when a combining run
    outgrows ``run_*`` or a word needs the unknown token and ``unk_id`` < 0. Ids go to ``out_ids``
    from ``spans.io[0]`` (updated); ``doc_out_end[d]`` = end of document ``d``'s ids.
    O(total bytes * longest token).
    Capacities (E = the normalizer's worst expansion per byte, L = longest document): ``norm_buf``,
    ``spans.piece_*``, ``nt_*`` >= E * L + 8, ``norm_align`` one more, ``spans.tok_*`` >= 2 * (E * L + 8) + 2;
    ``run_*`` >= 4 * L + 16; ``spans.at_*`` >= L + 1. A document of n bytes needs 2 * E * n + 2 free
    ids in ``out_ids`` (a word yields at most one id per normalized byte, plus llama.cpp's empty first
    token).
    """
    pipe, sp, bf = borrow(session, "pipe"), borrow(session, "spans"), borrow(session, "bufs")
    t, v = borrow(pipe, "normalizer"), borrow(pipe, "vocab")
    at_first, at_child_start, at_child_count, at_edge_byte, at_edge_target, at_token = \
        trie_arrays(borrow(pipe, "raw"))
    nt_first, nt_child_start, nt_child_count, nt_edge_byte, nt_edge_target, nt_token = \
        trie_arrays(borrow(pipe, "norm"))
    flags, dec_keys, dec_off, dec_data = borrow(t, "flags"), borrow(t, "dec_keys"), borrow(t, "dec_off"), \
        borrow(t, "dec_data")
    low_keys, low_off, low_data = borrow(t, "low_keys"), borrow(t, "low_off"), borrow(t, "low_data")
    ccc_keys, ccc_vals = borrow(t, "ccc_keys"), borrow(t, "ccc_vals")
    norm_opts, expansion, isolate_punct = borrow(t, "opts"), borrow(t, "expansion"), borrow(pipe, "isolate_punct")
    edges, word_row, word_node = borrow(v, "edges"), borrow(v, "word_row"), borrow(v, "word_node")
    word_node_token, cont_row, cont_node = borrow(v, "word_node_token"), borrow(v, "cont_row"), borrow(v, "cont_node")
    unk_id, max_chars, whole_words = borrow(v, "unk_id"), borrow(v, "max_chars"), borrow(v, "whole_words")
    tok_blob, tok_offsets, tok_table = borrow(v, "blob"), borrow(v, "offsets"), borrow(v, "table")
    max_token_len = borrow(v, "max_token_len")
    at_starts, at_ends, at_ids = borrow(sp, "at_starts"), borrow(sp, "at_ends"), borrow(sp, "at_ids")
    tok_starts, tok_ends = borrow(sp, "tok_starts"), borrow(sp, "tok_ends")
    piece_starts, piece_ends, io = borrow(sp, "piece_starts"), borrow(sp, "piece_ends"), borrow(sp, "io")
    nt_starts, nt_ends, nt_ids = borrow(bf, "nt_starts"), borrow(bf, "nt_ends"), borrow(bf, "nt_ids")
    run_cp, run_src, run_ccc = borrow(bf, "run_cp"), borrow(bf, "run_src"), borrow(bf, "run_ccc")
    norm_buf, norm_align = borrow(bf, "norm_buf"), borrow(bf, "norm_align")
    one_start, one_end = borrow(bf, "one_start"), borrow(bf, "one_end")
    io[1] = STATUS_OK
    n_out = io[0]
    cap = out_ids.shape[0]
    for d in range(first_doc, last_doc):
        ds = doc_starts[d]
        de = doc_ends[d]
        if cap - n_out < 2 * expansion * (de - ds) + 2:
            io[1] = STATUS_OUT_FULL
            io[0] = n_out
            return d
        doc_begin = n_out
        n_added = added_token_matches(buf, ds, de, at_first, at_child_start, at_child_count, at_edge_byte,
                                      at_edge_target, at_token, at_starts, at_ends, at_ids)
        pos = ds
        for a in range(n_added + 1):
            seg_end = at_starts[a] if a < n_added else de
            if seg_end > pos:
                m = bert_normalize(buf[pos:seg_end], seg_end - pos, flags,
                                   (dec_keys, dec_off, dec_data, low_keys, low_off, low_data, ccc_keys, ccc_vals),
                                   norm_opts, (run_cp, run_src, run_ccc), norm_buf, norm_align)
                if m < 0:
                    io[1] = STATUS_STAGED
                    io[0] = doc_begin
                    return d
                n_nt = added_token_matches(norm_buf, 0, m, nt_first, nt_child_start, nt_child_count,
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
                                                     cont_node, unk_id, max_chars, 0xC0, out_ids[n_out:],
                                                     tok_starts, tok_ends)
                            if n_ids < 0:
                                io[1] = STATUS_STAGED
                                io[0] = doc_begin
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
    io[0] = n_out
    return last_doc
