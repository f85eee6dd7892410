"""One kernel for the SentencePiece Unigram pipeline (``.model`` files) over a batch of documents.

Per document, exactly as the staged pipeline composes the same kernels: raw-text added tokens
(control pieces, only with ``parse_special``); for each text segment between them, user-defined
pieces protected from the charsmap, sentencepiece's charsmap (``spm_normalize``), its whitespace
rules (``sentencepiece_whitespace``) and the Viterbi search (``unigram_encode``) over the whole
normalized segment. Scratch sizes depend on how much the charsmap expands the text, so the kernel
stops before a document that does not fit and says how much room it needs; the caller grows the
buffers and resumes there. The tokenizer.json variant (``encode_docs_unigram_hf``) runs HF's
Precompiled -> [WhitespaceSplit] -> [Metaspace] -> Unigram.

The kernels take one *session* (:data:`UNIGRAM_SPM_SESSION` / :data:`UNIGRAM_HF_SESSION`): the
read-only pipeline of a tokenizer and parse_special with the calling thread's buffers, so a call
unboxes one structure instead of 60 arrays (see :mod:`tokjit.kernels.structs`).
"""

from __future__ import annotations

import numpy as np
from numba import njit, types
from numba.experimental import structref

from tokjit.kernels.added_tokens import DEFER_TO_STAGED, added_token_matches, ruled_token_matches
from tokjit.kernels.spm_whitespace import WS_DELETED_UNIT, sentencepiece_whitespace
from tokjit.kernels.split import metaspace_pieces
from tokjit.kernels import structs
from tokjit.kernels.structs import RULES_NONE, borrow, struct_at
from tokjit.kernels.charsmap import hf_normalize, spm_normalize
from tokjit.kernels.call_result import (IO_TEXT_AT, KERNEL_FAILED, NOT_TEXT, code_object, deliver, no_session,
                                        release_gil, retake_gil, text_utf8, thread_session)
from tokjit.kernels.fused import FALLBACK, GROW
from tokjit.kernels.lookup import bytes_equal, hash_bytes
from tokjit.kernels.memops import copy_from_address, prefetch_row
from tokjit.kernels.piece_cache import (MAX_PIECE, cache_emit, cache_find_key, cache_put_key, cacheable_key,
                                        home_row)
from tokjit.kernels.unigram import (ARITH_CERT, ARITH_SPM, ID_USER_DEFINED, MISSING_UNK, SPM_SCORE_RESET, _char_len, _viterbi,
                      emit_path, unigram_encode)
from tokjit.kernels.wordpiece import bert_pre_tokenize

STATUS_DONE = 0
# kernel status in spans.io[1]; io[2] = how much the buffer to grow must hold
STATUS_GROW_SCRATCH = 1  # io[2] = bytes of normalized text one segment needs
STATUS_GROW_OUT = 2  # io[2] = ids one document needs
STATUS_MISSING_UNK = 3
STATUS_GROW_TEXT = 4  # encode_text_unigram_*: io[2] = bytes of the text (the thread's text buffers)
STATUS_STAGED = 5  # encode_docs_unigram_hf: this document's added tokens need the staged pipeline's rules

MISSING = -3  # encode_text_unigram_*: a character has no piece and the model no unk_id

_I64 = types.int64[::1]
_I32 = types.int32[::1]
_U8 = types.uint8[::1]
_F64 = types.float64[::1]

# the Unigram model (tokjit.models.unigram.UnigramModel): double-array trie of pieces, scores, flags
UnigramVocabType, UnigramVocab, UNIGRAM_VOCAB = structs._declare("UnigramVocab", [
    ("da", types.int32[:, ::1]), ("scores", _F64), ("id_flags", _U8), ("byte_ids", _I32), ("arith", types.int64),
    ("unk_id", types.int64), ("unk_score", types.float64), ("byte_fallback", types.boolean),
], __name__)


@njit(cache=True)
def make_unigram_vocab(da, scores, id_flags, byte_ids, arith, unk_id, unk_score, byte_fallback):
    s = structref.new(UNIGRAM_VOCAB)
    s.da = da
    s.scores = scores
    s.id_flags = id_flags
    s.byte_ids = byte_ids
    s.arith = arith
    s.unk_id = unk_id
    s.unk_score = unk_score
    s.byte_fallback = byte_fallback
    return s


# a precompiled charsmap (tokjit.pipeline.charsmap): XCDA units, replacement strings, the most bytes one step
# writes (``max_step``), and for HF's grapheme-wise walk the grapheme properties (``props``)
CharsmapType, Charsmap, CHARSMAP = structs._declare("Charsmap", [
    ("present", types.boolean), ("units", types.uint32[::1]), ("strings", _U8), ("max_step", types.int64),
    ("props", _U8), ("plain", _U8),
], __name__)


@njit(cache=True)
def make_charsmap(present, units, strings, max_step, props, plain):
    s = structref.new(CHARSMAP)
    s.present = present
    s.units = units
    s.strings = strings
    s.max_step = max_step
    s.props = props
    s.plain = plain
    return s


# sentencepiece .model pipeline: raw added tokens, user-defined pieces protected from the charsmap,
# the charsmap, the whitespace flags, the model, and whether the word cache may serve it
UnigramSPMPipeType, UnigramSPMPipe, UNIGRAM_SPM_PIPE = structs._declare("UnigramSPMPipe", [
    ("raw", structs.TRIE), ("user", structs.TRIE), ("charsmap", CHARSMAP), ("ws_flags", types.int64),
    ("vocab", UNIGRAM_VOCAB), ("word_cache", types.boolean),
], __name__)


@njit(cache=True)
def make_unigram_spm_pipe(raw, user, charsmap, ws_flags, vocab, word_cache):
    s = structref.new(UNIGRAM_SPM_PIPE)
    s.raw = raw
    s.user = user
    s.charsmap = charsmap
    s.ws_flags = ws_flags
    s.vocab = vocab
    s.word_cache = word_cache
    return s


# tokenizer.json pipeline: raw added tokens, Precompiled, WhitespaceSplit (``char_flags`` are the
# BERT character classes it splits on), Metaspace (replacement bytes, prepend scheme, split), the model
UnigramHFPipeType, UnigramHFPipe, UNIGRAM_HF_PIPE = structs._declare("UnigramHFPipe", [
    ("raw", structs.TRIE), ("raw_rules", structs.ADDED_RULES), ("charsmap", CHARSMAP), ("ws_split", types.boolean),
    ("char_flags", _U8),
    ("has_metaspace", types.boolean), ("rep", _U8), ("prepend_scheme", types.int64), ("meta_split", types.boolean),
    ("vocab", UNIGRAM_VOCAB),
], __name__)


@njit(cache=True)
def make_unigram_hf_pipe(raw, raw_rules, charsmap, ws_split, char_flags, has_metaspace, rep, prepend_scheme,
                         meta_split, vocab):
    s = structref.new(UNIGRAM_HF_PIPE)
    s.raw = raw
    s.raw_rules = raw_rules
    s.charsmap = charsmap
    s.ws_split = ws_split
    s.char_flags = char_flags
    s.has_metaspace = has_metaspace
    s.rep = rep
    s.prepend_scheme = prepend_scheme
    s.meta_split = meta_split
    s.vocab = vocab
    return s


# per-thread buffers: user-defined piece spans (raw text size), charsmap output, normalized text,
# words and their Metaspace prepend flags, a one-piece span
UnigramBuffersType, UnigramBuffers, UNIGRAM_BUFFERS = structs._declare("UnigramBuffers", [
    ("ud_starts", _I64), ("ud_ends", _I64), ("ud_ids", _I64), ("cm_buf", _U8), ("cm_src", _I64),
    ("norm_buf", _U8), ("norm_align", _I64), ("word_starts", _I64), ("word_ends", _I64),
    ("prepend", types.bool_[::1]), ("one_start", _I64), ("one_end", _I64),
], __name__)


@njit(cache=True)
def make_unigram_buffers(ud_starts, ud_ends, ud_ids, cm_buf, cm_src, norm_buf, norm_align, word_starts, word_ends,
                         prepend, one_start, one_end):
    s = structref.new(UNIGRAM_BUFFERS)
    s.ud_starts = ud_starts
    s.ud_ends = ud_ends
    s.ud_ids = ud_ids
    s.cm_buf = cm_buf
    s.cm_src = cm_src
    s.norm_buf = norm_buf
    s.norm_align = norm_align
    s.word_starts = word_starts
    s.word_ends = word_ends
    s.prepend = prepend
    s.one_start = one_start
    s.one_end = one_end
    return s


# per-thread Viterbi lattice over the normalized text (best score, start and id per end; the path)
LatticeType, Lattice, LATTICE = structs._declare("Lattice", [
    ("best_score", _F64), ("best_start", _I64), ("best_id", _I64), ("path_start", _I64), ("path_end", _I64),
], __name__)


@njit(cache=True)
def make_lattice(best_score, best_start, best_id, path_start, path_end):
    s = structref.new(LATTICE)
    s.best_score = best_score
    s.best_start = best_start
    s.best_id = best_id
    s.path_start = path_start
    s.path_end = path_end
    return s


# per-thread word cache of encode_words_spm (see there; kept for the life of the thread); ``cert`` is a
# float64 view of ``meta`` (see WM_HASH)
WordCacheType, WordCache, WORD_CACHE = structs._declare("WordCache", [
    ("meta", types.int64[:, ::1]), ("cert", types.float64[:, ::1]), ("bytes", _U8), ("ids", _I32),
    ("scores", types.float32[::1]), ("fill", _I64), ("ring", _I64),
], __name__)


@njit(cache=True)
def make_word_cache(meta, cert, bytes_, ids, scores, fill, ring):
    s = structref.new(WORD_CACHE)
    s.meta = meta
    s.cert = cert
    s.bytes = bytes_
    s.ids = ids
    s.scores = scores
    s.fill = fill
    s.ring = ring
    return s


# one thread's view of one pipeline: what a single-text call unboxes
UnigramSPMSessionType, UnigramSPMSession, UNIGRAM_SPM_SESSION = structs._declare("UnigramSPMSession", [
    ("pipe", UNIGRAM_SPM_PIPE), ("spans", structs.SPANS), ("bufs", UNIGRAM_BUFFERS), ("lattice", LATTICE),
    ("words", WORD_CACHE),
], __name__)


@njit(cache=True)
def make_unigram_spm_session(pipe, spans, bufs, lattice, words):
    s = structref.new(UNIGRAM_SPM_SESSION)
    s.pipe = pipe
    s.spans = spans
    s.bufs = bufs
    s.lattice = lattice
    s.words = words
    return s


# ``cache``: the thread's piece -> ids cache (tokjit.kernels.piece_cache): HF runs the Viterbi on
# each pre-tokenized piece alone, so a piece's ids depend on its bytes only
UnigramHFSessionType, UnigramHFSession, UNIGRAM_HF_SESSION = structs._declare("UnigramHFSession", [
    ("pipe", UNIGRAM_HF_PIPE), ("spans", structs.SPANS), ("bufs", UNIGRAM_BUFFERS), ("lattice", LATTICE),
    ("cache", structs.PIECE_CACHE),
], __name__)


@njit(cache=True)
def make_unigram_hf_session(pipe, spans, bufs, lattice, cache):
    s = structref.new(UNIGRAM_HF_SESSION)
    s.pipe = pipe
    s.spans = spans
    s.bufs = bufs
    s.lattice = lattice
    s.cache = cache
    return s


@njit(cache=True, nogil=True, _nrt=False)
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
WORD_AHEAD = 8  # words whose rows are prefetched before their lookup
PIECE_AHEAD = 8  # encode_docs_unigram_hf: pieces whose cache rows are prefetched before their lookup
WORD_RING = 16  # power of two > WORD_AHEAD: slots of the lookahead ring (end, hash per word)
# A slot is one 64-byte row, so a lookup touches one cache line: int64 fields of ``wc_meta``, the word's
# bytes (``WM_BYTES``: length in bits 0-7, 0 = empty slot, pool offset above) and its node scores
# (``WM_PATH``: count in bits 0-7, pool offset above) packed, and the certificate as float64 in the
# last two columns, read through ``wc_cert``, a float64 view of the same rows
WM_HASH, WM_BYTES, WM_ISTART, WM_ILEN, WM_PATH, WM_CHARS, WC_MARGIN, WC_LARGEST = 0, 1, 2, 3, 4, 5, 6, 7
# 2**-24: float32's unit roundoff
F32_UNIT = 5.9604644775390625e-08


@njit(cache=True, nogil=True, _nrt=False)
def _next_word_end(buf, p, n):
    """First character start after ``p`` (stepping as the Viterbi does) holding U+2581, else ``n``."""
    q = p + _char_len(buf[p])
    while q < n:
        if q + 3 <= n and buf[q] == 0xE2 and buf[q + 1] == 0x96 and buf[q + 2] == 0x81:
            return q
        q += _char_len(buf[q])
    return n


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def _word_ahead(buf, p, n, wc_meta):
    """(end, hash) of the word starting at ``p`` (hash 0 past ``WORD_MAX_BYTES``, which is never
    cached), prefetching the first row :func:`_word_slot` reads for it."""
    q = _next_word_end(buf, p, n) if p < n else n
    if q - p > WORD_MAX_BYTES:
        return q, np.int64(0)
    h = hash_bytes(buf, p, q)
    prefetch_row(wc_meta, h & (wc_meta.shape[0] - 1))
    return q, h


@njit(cache=True, nogil=True, _nrt=False)
def _word_slot(h, buf, p, q, wc_meta, wc_bytes):
    """The slot of word ``buf[p:q]`` (hash ``h``): where it is, or the empty slot it would take."""
    mask = wc_meta.shape[0] - 1
    slot = h & mask
    while wc_meta[slot, WM_BYTES] > 0:
        packed = wc_meta[slot, WM_BYTES]
        if wc_meta[slot, WM_HASH] == h and (packed & 0xFF) == q - p and \
                bytes_equal(wc_bytes, packed >> 8, buf, p, q - p):
            return slot
        slot = (slot + 1) & mask
    return slot


@njit(cache=True, nogil=True, _nrt=False)
def encode_words_spm(buf, n, vocab, lattice, words, out_ids, n_out, tok_starts, tok_ends):
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
    ``vocab`` is the model (:data:`UNIGRAM_VOCAB`), ``lattice`` the Viterbi's buffers, ``words`` the
    cache (:data:`WORD_CACHE`).
    """
    return _words_spm_core(buf, n,
                           (borrow(vocab, "da"), borrow(vocab, "scores"), borrow(vocab, "id_flags"),
                            borrow(vocab, "byte_ids")),
                           (borrow(vocab, "unk_id"), borrow(vocab, "unk_score"), borrow(vocab, "byte_fallback")),
                           (borrow(lattice, "best_score"), borrow(lattice, "best_start"), borrow(lattice, "best_id"),
                            borrow(lattice, "path_start"), borrow(lattice, "path_end")),
                           (borrow(words, "meta"), borrow(words, "cert"), borrow(words, "bytes"), borrow(words, "ids"),
                            borrow(words, "scores"), borrow(words, "fill"), borrow(words, "ring")),
                           out_ids, n_out, tok_starts, tok_ends)


# without numba's reference counting (see kernels.fused.encode_docs_bpe): the Viterbi's inlined helpers
# take arrays and would pay an atomic incref/decref per call
@njit(cache=True, nogil=True, _nrt=False)
def _words_spm_core(buf, n, vocab, vocab_scalars, lattice, words, out_ids, n_out, tok_starts, tok_ends):
    """:func:`encode_words_spm` over tuples of arrays."""
    da, scores, id_flags, byte_ids = vocab
    unk_id, unk_score, byte_fallback = vocab_scalars
    best_score, best_start, best_id, path_start, path_end = lattice
    wc_meta, wc_cert, wc_bytes, wc_ids, wc_scores, wc_fill, ring = words
    unk32 = np.float32(unk_score)
    h = 0.0  # a float32 value: the best path score at the current word start
    p = 0
    # words are found WORD_AHEAD ahead (end and hash kept in ``ring``) and their cache rows prefetched,
    # so a row's trip from memory (the 4 MB table misses the core's own caches) overlaps the work on
    # the words before it; one word ahead is too short a wait for the short words of code and prose
    found_end = 0
    n_found = 0
    while n_found < WORD_AHEAD and found_end < n:
        found_end, found_hash = _word_ahead(buf, found_end, n, wc_meta)
        ring[2 * n_found] = found_end
        ring[2 * n_found + 1] = found_hash
        n_found += 1
    w = 0
    while p < n:
        r = 2 * (w & (WORD_RING - 1))
        q = ring[r]
        word_hash = ring[r + 1]
        w += 1
        if found_end < n:
            found_end, found_hash = _word_ahead(buf, found_end, n, wc_meta)
            r = 2 * (n_found & (WORD_RING - 1))
            ring[r] = found_end
            ring[r + 1] = found_hash
            n_found += 1
        if h < -SPM_SCORE_RESET or h > SPM_SCORE_RESET:
            h = 0.0  # the Viterbi's score reset at the word start (nothing else is reached yet)
        size = q - p
        slot = -1
        if size <= WORD_MAX_BYTES:
            slot = _word_slot(word_hash, buf, p, q, wc_meta, wc_bytes)
            if wc_meta[slot, WM_BYTES] > 0:
                certain = _certain(h, wc_cert[slot, WC_MARGIN], wc_cert[slot, WC_LARGEST], wc_meta[slot, WM_CHARS])
                if certain and wc_meta[slot, WM_ILEN] >= 0:
                    i0 = wc_meta[slot, WM_ISTART]
                    n_ids = wc_meta[slot, WM_ILEN]
                    for k in range(n_ids):
                        out_ids[n_out + k] = wc_ids[i0 + k]
                    n_out += n_ids
                    h32 = np.float32(h)
                    s0 = wc_meta[slot, WM_PATH] >> 8
                    for k in range(wc_meta[slot, WM_PATH] & 0xFF):
                        h32 = wc_scores[s0 + k] + h32
                    h = np.float64(h32)
                    p = q
                    continue
                if not certain:
                    slot = -1  # known, and its path not certain for this h: the float32 Viterbi decides
        if slot >= 0:
            # a word met for the first time (or known but without its ids): the Viterbi in exact
            # arithmetic from 0 gives the path and its certificate at once; when the certificate holds
            # for this h, that path is the float32 Viterbi's and the word is cached with it
            margin, largest = _viterbi(buf, p, q, da, scores, id_flags, ARITH_CERT, unk_id, unk_score,
                                       best_score, best_start, best_id, 0.0, False)
            chars = 0
            for k in range(p, q):
                if (buf[k] & 0xC0) != 0x80:
                    chars += 1
            if _certain(h, margin, largest, chars):
                first = n_out
                got, n_path = emit_path(buf, p, q, best_start, best_id, da, byte_ids, ARITH_SPM, unk_id,
                                        byte_fallback, out_ids[n_out:], tok_starts, tok_ends, 0,
                                        path_start, path_end)
                if got < 0:
                    return MISSING_UNK
                n_out += got
                slot = _word_reserve(buf, p, q, word_hash, slot, got, n_path, chars, margin, largest, words)
                i0 = wc_meta[slot, WM_ISTART]
                for k in range(got):
                    wc_ids[i0 + k] = out_ids[first + k]
                s0 = wc_meta[slot, WM_PATH] >> 8
                h32 = np.float32(h)
                for j in range(n_path):  # node scores from the first node on, as the Viterbi adds them
                    node = n_path - 1 - j
                    length = path_end[node] - path_start[node]
                    tid = best_id[path_end[node]]
                    if tid == unk_id:
                        score32 = unk32
                    elif id_flags[tid] & ID_USER_DEFINED:
                        score32 = np.float32(0.1 * (length - 1))
                    else:
                        score32 = np.float32(scores[tid])
                    wc_scores[s0 + j] = score32
                    h32 = score32 + h32
                h = np.float64(h32)
                p = q
                continue
            # not certain for this h: remember the certificate without ids (a later, smaller h may
            # meet it and fill them in; a tie, margin 0, never does), so the exact pass runs once
            _word_reserve(buf, p, q, word_hash, slot, -1, 0, chars, margin, largest, words)
        _viterbi(buf, p, q, da, scores, id_flags, ARITH_SPM, unk_id, unk_score, best_score, best_start, best_id, h,
                 False)
        h_end = best_score[size]
        got, n_path = emit_path(buf, p, q, best_start, best_id, da, byte_ids, ARITH_SPM, unk_id, byte_fallback,
                                out_ids[n_out:], tok_starts, tok_ends, 0, path_start, path_end)
        if got < 0:
            return MISSING_UNK
        n_out += got
        h = h_end
        p = q
    return n_out


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def _certain(h, margin, largest, chars):
    """Whether a word's exact-arithmetic path (comparison ``margin``, largest ``|score|``, ``chars``
    characters) is also the float32 Viterbi's when the path arrives with score ``h``: no score reset
    inside the word, and every comparison farther apart than the float32 error the sums can carry
    (4x over)."""
    magnitude = abs(h) + largest
    return magnitude + 1.0 < SPM_SCORE_RESET and margin > 4.0 * chars * F32_UNIT * magnitude


@njit(cache=True, nogil=True, _nrt=False)
def _word_reserve(buf, p, q, word_hash, slot, n_ids, n_path, chars, margin, largest, words):
    """Make ``slot`` (from :func:`_word_slot`) the entry of word ``buf[p:q]`` (hash ``word_hash``) with
    its certificate (``chars``, ``margin``, ``largest``; see :func:`_certain`) and room for ``n_ids`` ids
    (-1: none, a certificate only) and ``n_path`` node scores in the pools; the slot to use. A word
    already there is given new room (its ids being filled in). When a pool or the table is full, every
    entry is dropped first (O(slots), amortized over the pools' size)."""
    wc_meta, wc_cert, wc_bytes, wc_ids, wc_scores, wc_fill, _ = words
    size = q - p
    need_ids = max(n_ids, 0)
    if wc_fill[0] + size > wc_bytes.shape[0] or wc_fill[1] + need_ids > wc_ids.shape[0] or \
            wc_fill[2] + n_path > wc_scores.shape[0] or 2 * (wc_fill[3] + 1) > wc_meta.shape[0]:
        for i in range(wc_meta.shape[0]):
            wc_meta[i, WM_BYTES] = 0
        wc_fill[0] = 0
        wc_fill[1] = 0
        wc_fill[2] = 0
        wc_fill[3] = 0
        slot = _word_slot(word_hash, buf, p, q, wc_meta, wc_bytes)
    if wc_meta[slot, WM_BYTES] == 0:
        b0 = wc_fill[0]
        for k in range(size):
            wc_bytes[b0 + k] = buf[p + k]
        wc_meta[slot, WM_HASH] = word_hash
        wc_meta[slot, WM_BYTES] = size | (b0 << 8)
        wc_fill[0] = b0 + size
        wc_fill[3] += 1
    wc_meta[slot, WM_ISTART] = wc_fill[1]
    wc_meta[slot, WM_ILEN] = n_ids
    wc_meta[slot, WM_PATH] = n_path | (wc_fill[2] << 8)
    wc_meta[slot, WM_CHARS] = chars
    wc_cert[slot, WC_MARGIN] = margin
    wc_cert[slot, WC_LARGEST] = largest
    wc_fill[1] += need_ids
    wc_fill[2] += n_path
    return slot


@njit(cache=True, _nrt=False)
def encode_text_unigram_spm(first, text, result):
    """One text (a str, or bytes) through :func:`encode_docs_unigram_spm`, as
    :func:`~tokjit.kernels.fused.encode_text_bpe` does: the object ``result`` asks for, or a negative
    code as an int (GROW: ``spans.io[1]`` says which buffer, ``io[2]`` how much; MISSING, NO_SESSION,
    NOT_TEXT, NOT_BUILT, KERNEL_FAILED); ``first`` finds the thread's UNIGRAM_SPM_SESSION."""
    session_address = thread_session(first, result)
    if session_address == 0:
        return no_session(first)
    session = struct_at(session_address, UNIGRAM_SPM_SESSION)
    sp = borrow(session, "spans")
    io = borrow(sp, "io")
    n = text_utf8(io, text, result)
    if n < 0:
        return code_object(io, NOT_TEXT)
    if not _load_text(sp, io[IO_TEXT_AT], n):
        return code_object(io, GROW)
    gil = release_gil(io, n)
    try:
        encode_docs_unigram_spm(session, borrow(sp, "text"), borrow(sp, "doc_starts"), borrow(sp, "doc_ends"),
                               0, 1, borrow(sp, "out"), borrow(sp, "doc_out_end"))
        count = _text_result(io)
    except Exception:  # noqa: BLE001 - it must not leave with the GIL released (the caller raises)
        count = KERNEL_FAILED
    retake_gil(io, gil)
    return deliver(io, borrow(sp, "out"), count, result)


@njit(cache=True, nogil=True, _nrt=False)
def _load_text(sp, address, n):
    """Copy the ``n`` bytes of text at ``address`` into the thread's text buffer as document 0; False
    (and STATUS_GROW_TEXT) when it does not fit."""
    buf = borrow(sp, "text")
    io = borrow(sp, "io")
    io[0] = 0
    if n + 1 > buf.shape[0] or n + 1 > borrow(sp, "at_starts").shape[0]:
        io[1] = STATUS_GROW_TEXT
        io[2] = n
        return False
    copy_from_address(buf, 0, address, n)
    borrow(sp, "doc_starts")[0] = 0
    borrow(sp, "doc_ends")[0] = n
    return True


@njit(cache=True, nogil=True, _nrt=False)
def _text_result(io):
    status = io[1]
    if status == STATUS_DONE:
        return io[0]
    if status == STATUS_MISSING_UNK:
        return MISSING
    if status == STATUS_STAGED:
        return FALLBACK
    return GROW


@njit(cache=True, nogil=True, _nrt=False)
def encode_docs_unigram_spm(session, buf, doc_starts, doc_ends, first_doc, last_doc, out_ids, doc_out_end):
    """Encode documents ``first_doc..last_doc-1`` appending ids at ``spans.io[0]``; returns the next
    document and sets the status in ``spans.io[1]`` (what to grow: ``io[2]``). A document is written
    whole or not at all.

    ``session`` (:data:`UNIGRAM_SPM_SESSION`) holds the compiled tokenizer (``pipe``) and the calling
    thread's buffers. Capacities the caller guarantees: ``spans.at_*`` and ``bufs.ud_*`` >= longest
    document + 1; the rest are checked here against the actual sizes (``bufs.cm_*`` hold the charsmap
    output, ``bufs.norm_*``, the lattice and ``spans.tok_*`` the whitespace-normalized segment,
    ``out_ids`` the ids). O(normalized bytes * longest piece), as the Viterbi. With
    ``pipe.word_cache`` (the builder checked the vocabulary allows it) the Viterbi runs word by word
    through ``encode_words_spm``'s cache (``session.words``).
    """
    pipe, sp, bf, lattice, words = borrow(session, "pipe"), borrow(session, "spans"), borrow(session, "bufs"), \
        borrow(session, "lattice"), borrow(session, "words")
    at, ud, cm, vocab = borrow(pipe, "raw"), borrow(pipe, "user"), borrow(pipe, "charsmap"), borrow(pipe, "vocab")
    ws_flags, word_cache = borrow(pipe, "ws_flags"), borrow(pipe, "word_cache")
    at_first, at_child_start, at_child_count = borrow(at, "first_byte"), borrow(at, "child_start"), \
        borrow(at, "child_count")
    at_edge_byte, at_edge_target, at_token = borrow(at, "edge_byte"), borrow(at, "edge_target"), \
        borrow(at, "node_token")
    ud_first, ud_child_start, ud_child_count = borrow(ud, "first_byte"), borrow(ud, "child_start"), \
        borrow(ud, "child_count")
    ud_edge_byte, ud_edge_target, ud_token = borrow(ud, "edge_byte"), borrow(ud, "edge_target"), \
        borrow(ud, "node_token")
    cm_plain = borrow(cm, "plain")
    has_charsmap, cm_units, cm_strings, cm_max_step = borrow(cm, "present"), borrow(cm, "units"), \
        borrow(cm, "strings"), borrow(cm, "max_step")
    da, scores, id_flags, byte_ids, arith = borrow(vocab, "da"), borrow(vocab, "scores"), borrow(vocab, "id_flags"), \
        borrow(vocab, "byte_ids"), borrow(vocab, "arith")
    unk_id, unk_score, byte_fallback = borrow(vocab, "unk_id"), borrow(vocab, "unk_score"), \
        borrow(vocab, "byte_fallback")
    at_starts, at_ends, at_ids, tok_starts, tok_ends, io = \
        borrow(sp, "at_starts"), borrow(sp, "at_ends"), borrow(sp, "at_ids"), borrow(sp, "tok_starts"), \
        borrow(sp, "tok_ends"), borrow(sp, "io")
    ud_starts, ud_ends, ud_ids, cm_buf, cm_src = borrow(bf, "ud_starts"), borrow(bf, "ud_ends"), \
        borrow(bf, "ud_ids"), borrow(bf, "cm_buf"), borrow(bf, "cm_src")
    norm_buf, norm_align, one_start, one_end = borrow(bf, "norm_buf"), borrow(bf, "norm_align"), \
        borrow(bf, "one_start"), borrow(bf, "one_end")
    best_score, best_start, best_id = borrow(lattice, "best_score"), borrow(lattice, "best_start"), \
        borrow(lattice, "best_id")
    path_start, path_end = borrow(lattice, "path_start"), borrow(lattice, "path_end")
    cm_cap = cm_buf.shape[0]
    norm_cap = norm_buf.shape[0]
    out_cap = out_ids.shape[0]
    for d in range(first_doc, last_doc):
        ds = doc_starts[d]
        de = doc_ends[d]
        n_out = io[0]
        n_added = added_token_matches(buf, ds, de, at_first, at_child_start, at_child_count, at_edge_byte,
                                      at_edge_target, at_token, at_starts, at_ends, at_ids)
        pos = ds
        for a in range(n_added + 1):
            seg_end = at_starts[a] if a < n_added else de
            if seg_end > pos:
                # charsmap: alignment = input offset of the rule that wrote each byte (units for the
                # whitespace rules); without a charsmap every byte is its own unit
                m = 0
                seg_flags = ws_flags
                if has_charsmap:
                    n_ud = added_token_matches(buf, pos, seg_end, ud_first, ud_child_start, ud_child_count,
                                               ud_edge_byte, ud_edge_target, ud_token, ud_starts, ud_ends, ud_ids)
                    q = pos
                    for u in range(n_ud + 1):
                        gap_end = ud_starts[u] if u < n_ud else seg_end
                        if gap_end > q:
                            reached, m, _, deleted = spm_normalize(buf, q, gap_end, cm_units, cm_strings, cm_plain,
                                                                   cm_max_step, cm_buf, cm_src, m)
                            if deleted:
                                seg_flags |= WS_DELETED_UNIT
                            if reached < gap_end:
                                io[2] = 2 * cm_cap + cm_max_step * (seg_end - reached)
                                io[1] = STATUS_GROW_SCRATCH
                                return d
                        if u < n_ud:
                            if m + (ud_ends[u] - ud_starts[u]) + 1 > cm_cap:
                                io[2] = 2 * cm_cap + (seg_end - pos)
                                io[1] = STATUS_GROW_SCRATCH
                                return d
                            for k in range(ud_starts[u], ud_ends[u]):
                                cm_buf[m] = buf[k]
                                cm_src[m] = ud_starts[u]  # one unit: sentencepiece consumes it whole
                                m += 1
                            q = ud_ends[u]
                    if m + 1 > cm_cap:
                        io[2] = 2 * cm_cap
                        io[1] = STATUS_GROW_SCRATCH
                        return d
                    cm_src[m] = seg_end
                else:
                    if seg_end - pos + 1 > cm_cap:
                        io[2] = seg_end - pos + 1
                        io[1] = STATUS_GROW_SCRATCH
                        return d
                    m = _copy_unnormalized(buf, pos, seg_end, cm_buf, cm_src)
                    cm_src[m] = seg_end
                if 3 * m + 4 > norm_cap:
                    io[2] = 3 * m + 4
                    io[1] = STATUS_GROW_SCRATCH
                    return d
                n = sentencepiece_whitespace(cm_buf, cm_src, m, seg_flags, norm_buf, norm_align)
                if n > 0:
                    if n_out + n + n_added + 1 > out_cap:
                        io[2] = n + n_added + 1 + (de - seg_end) * 3 * cm_max_step
                        io[1] = STATUS_GROW_OUT
                        return d
                    if word_cache:
                        got = encode_words_spm(norm_buf, n, vocab, lattice, words, out_ids, n_out, tok_starts,
                                               tok_ends)
                        if got == MISSING_UNK:
                            io[1] = STATUS_MISSING_UNK
                            return d
                        n_out = got
                    else:
                        one_start[0] = 0
                        one_end[0] = n
                        got = unigram_encode(norm_buf, one_start, one_end, 1, (da, scores, id_flags, byte_ids),
                                             (arith, unk_id, unk_score, byte_fallback, False), out_ids[n_out:],
                                             tok_starts, tok_ends,
                                             (best_score, best_start, best_id, path_start, path_end))
                        if got == MISSING_UNK:
                            io[1] = STATUS_MISSING_UNK
                            return d
                        n_out += got
            if a < n_added:
                if n_out + 1 > out_cap:
                    io[2] = n_added + 1
                    io[1] = STATUS_GROW_OUT
                    return d
                out_ids[n_out] = at_ids[a]
                n_out += 1
                pos = at_ends[a]
        io[0] = n_out
        doc_out_end[d] = n_out
    io[1] = STATUS_DONE
    return last_doc


# Metaspace prepend schemes as the HF fused kernel takes them
PREPEND_ALWAYS = 0
PREPEND_FIRST = 1
PREPEND_NEVER = 2


@njit(cache=True, _nrt=False)
def encode_text_unigram_hf(first, text, result):
    """:func:`encode_text_unigram_spm` for :func:`encode_docs_unigram_hf` (a UNIGRAM_HF_SESSION)."""
    session_address = thread_session(first, result)
    if session_address == 0:
        return no_session(first)
    session = struct_at(session_address, UNIGRAM_HF_SESSION)
    sp = borrow(session, "spans")
    io = borrow(sp, "io")
    n = text_utf8(io, text, result)
    if n < 0:
        return code_object(io, NOT_TEXT)
    if not _load_text(sp, io[IO_TEXT_AT], n):
        return code_object(io, GROW)
    gil = release_gil(io, n)
    try:
        encode_docs_unigram_hf(session, borrow(sp, "text"), borrow(sp, "doc_starts"), borrow(sp, "doc_ends"),
                               0, 1, borrow(sp, "out"), borrow(sp, "doc_out_end"))
        count = _text_result(io)
    except Exception:  # noqa: BLE001 - it must not leave with the GIL released (the caller raises)
        count = KERNEL_FAILED
    retake_gil(io, gil)
    return deliver(io, borrow(sp, "out"), count, result)


@njit(cache=True, nogil=True, _nrt=False)
def encode_docs_unigram_hf(session, buf, doc_starts, doc_ends, first_doc, last_doc, out_ids, doc_out_end):
    """HF ``tokenizers`` pipeline Precompiled -> [WhitespaceSplit] -> [Metaspace] -> Unigram for
    documents ``first_doc..last_doc-1``; the same protocol as :func:`encode_docs_unigram_spm`, with
    ``session`` a :data:`UNIGRAM_HF_SESSION`.

    Per segment between raw added tokens: HF's grapheme-wise charsmap (``hf_normalize``), whitespace
    split (``bert_pre_tokenize`` without punctuation), Metaspace (``metaspace_pieces``; "first"
    prepends to the words from the first source character left in the document's normalized text)
    and the Viterbi per piece, through the thread's piece cache (``session.cache``; words repeat, and
    HF's Viterbi sees one piece at a time, so its ids are the piece's alone). Capacities
    checked here: ``bufs.cm_*`` the charsmap output; ``bufs.word_*``, ``bufs.prepend`` its length + 1;
    ``bufs.norm_*`` (the Metaspace output), ``spans.piece_*``, the lattice, ``spans.tok_*``
    len(rep) * (2 * charsmap output + 2).
    """
    pipe, sp, bf, lattice = borrow(session, "pipe"), borrow(session, "spans"), borrow(session, "bufs"), \
        borrow(session, "lattice")
    at, cm, vocab = borrow(pipe, "raw"), borrow(pipe, "charsmap"), borrow(pipe, "vocab")
    raw_rules = borrow(pipe, "raw_rules")
    ruled = borrow(raw_rules, "mode") != RULES_NONE
    at_first, at_child_start, at_child_count = borrow(at, "first_byte"), borrow(at, "child_start"), \
        borrow(at, "child_count")
    at_edge_byte, at_edge_target, at_token = borrow(at, "edge_byte"), borrow(at, "edge_target"), \
        borrow(at, "node_token")
    has_charsmap, cm_units, cm_strings, cm_props, cm_max_rep = borrow(cm, "present"), borrow(cm, "units"), \
        borrow(cm, "strings"), borrow(cm, "props"), borrow(cm, "max_step")
    ws_split, char_flags, has_metaspace, rep = borrow(pipe, "ws_split"), borrow(pipe, "char_flags"), \
        borrow(pipe, "has_metaspace"), borrow(pipe, "rep")
    prepend_scheme, meta_split = borrow(pipe, "prepend_scheme"), borrow(pipe, "meta_split")
    da, scores, id_flags, byte_ids, arith = borrow(vocab, "da"), borrow(vocab, "scores"), borrow(vocab, "id_flags"), \
        borrow(vocab, "byte_ids"), borrow(vocab, "arith")
    unk_id, unk_score, byte_fallback = borrow(vocab, "unk_id"), borrow(vocab, "unk_score"), \
        borrow(vocab, "byte_fallback")
    at_starts, at_ends, at_ids, tok_starts, tok_ends, io = \
        borrow(sp, "at_starts"), borrow(sp, "at_ends"), borrow(sp, "at_ids"), borrow(sp, "tok_starts"), \
        borrow(sp, "tok_ends"), borrow(sp, "io")
    piece_starts, piece_ends = borrow(sp, "piece_starts"), borrow(sp, "piece_ends")
    cm_buf, cm_src, ms_buf, ms_align = borrow(bf, "cm_buf"), borrow(bf, "cm_src"), borrow(bf, "norm_buf"), \
        borrow(bf, "norm_align")
    word_starts, word_ends, prepend = borrow(bf, "word_starts"), borrow(bf, "word_ends"), borrow(bf, "prepend")
    one_start, one_end = borrow(bf, "one_start"), borrow(bf, "one_end")
    best_score, best_start, best_id = borrow(lattice, "best_score"), borrow(lattice, "best_start"), \
        borrow(lattice, "best_id")
    path_start, path_end = borrow(lattice, "path_start"), borrow(lattice, "path_end")
    cache = borrow(session, "cache")
    cache_rows, cache_bytes, cache_ids, cache_fill = borrow(cache, "rows"), borrow(cache, "byte_pool"), \
        borrow(cache, "id_pool"), borrow(cache, "fill")
    cm_cap = cm_buf.shape[0]
    ms_cap = ms_buf.shape[0]
    out_cap = out_ids.shape[0]
    r = rep.shape[0]
    for d in range(first_doc, last_doc):
        ds = doc_starts[d]
        de = doc_ends[d]
        n_out = io[0]
        if ruled:
            # the token and piece spans and the charsmap output are free until the segments
            n_added = ruled_token_matches(at, raw_rules, buf, ds, de, tok_starts, piece_starts, piece_ends, cm_buf,
                                          at_starts, at_ends, at_ids)
            if n_added == DEFER_TO_STAGED:
                io[1] = STATUS_STAGED
                return d
        else:
            n_added = added_token_matches(buf, ds, de, at_first, at_child_start, at_child_count, at_edge_byte,
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
                        io[2] = 2 * cm_cap + more + 4 * (seg_end - reached)
                        io[1] = STATUS_GROW_SCRATCH
                        return d
                else:
                    if seg_end - pos > cm_cap:
                        io[2] = seg_end - pos
                        io[1] = STATUS_GROW_SCRATCH
                        return d
                    m = _copy_unnormalized(buf, pos, seg_end, cm_buf, cm_src)
                if r * (2 * m + 2) + 1 > ms_cap or m + 1 > word_starts.shape[0]:
                    io[2] = r * (2 * m + 2) + 1
                    io[1] = STATUS_GROW_SCRATCH
                    return d
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
                        io[2] = n_bytes + n_added + 1 + (de - seg_end) * 4 * (cm_max_rep + r)
                        io[1] = STATUS_GROW_OUT
                        return d
                    # the piece cache first; the row of the piece PIECE_AHEAD on is requested meanwhile
                    for q in range(min(n_pieces, PIECE_AHEAD)):
                        prefetch_row(cache_rows, home_row(cache_rows, cacheable_key(text, piece_starts[q],
                                                                                    piece_ends[q])[0]))
                    for q in range(n_pieces):
                        if q + PIECE_AHEAD < n_pieces:
                            ahead = cacheable_key(text, piece_starts[q + PIECE_AHEAD], piece_ends[q + PIECE_AHEAD])
                            prefetch_row(cache_rows, home_row(cache_rows, ahead[0]))
                        ps, pe = piece_starts[q], piece_ends[q]
                        h, w0, w1 = cacheable_key(text, ps, pe)
                        cacheable = ps < pe <= ps + MAX_PIECE
                        if cacheable:
                            row = cache_find_key(cache_rows, cache_bytes, text, ps, pe, h, w0, w1, False)
                            if row >= 0:
                                n_out += cache_emit(cache_rows, cache_ids, row, out_ids, n_out)
                                continue
                        got = unigram_encode(text, piece_starts[q:q + 1], piece_ends[q:q + 1], 1,
                                             (da, scores, id_flags, byte_ids),
                                             (arith, unk_id, unk_score, byte_fallback, False), out_ids[n_out:],
                                             tok_starts, tok_ends,
                                             (best_score, best_start, best_id, path_start, path_end))
                        if got == MISSING_UNK:
                            io[1] = STATUS_MISSING_UNK
                            return d
                        if cacheable:
                            cache_put_key(cache_rows, cache_bytes, cache_ids, cache_fill, text, ps, pe, out_ids, n_out,
                                          got, h, w0, w1)
                        n_out += got
            if a < n_added:
                if n_out + 1 > out_cap:
                    io[2] = n_added + 1
                    io[1] = STATUS_GROW_OUT
                    return d
                out_ids[n_out] = at_ids[a]
                n_out += 1
                pos = at_ends[a]
        io[0] = n_out
        doc_out_end[d] = n_out
    io[1] = STATUS_DONE
    return last_doc
