"""The numba structures a kernel call takes: one read-only pipeline per tokenizer, one scratch per thread.

A numba call types and unboxes every argument: 65 arrays cost ~5.5 us per call, so the fused
kernels take a few ``StructRef`` objects instead (one pointer to unbox each). Field types are fixed
here, not inferred from whatever arrays a loader produced, so every tokenizer of a family compiles to
the same kernel signature; a builder coerces its arrays to these dtypes (no copy when they already
match) and the constructor refuses anything else at typing time.

Constructors are ``@njit(cache=True)`` functions written out per structure: numba's generic
``StructRefProxy`` constructor is compiled anew in every process, ~0.4 s of start-up each.

Kernels read a structure's fields once into locals at their top and pass those to the inner
kernels, so the hot loops see plain arrays.
"""

from __future__ import annotations

import numpy as np
from numba import njit, types
from numba.experimental import structref

_I64 = types.int64[::1]
_I32 = types.int32[::1]
_U8 = types.uint8[::1]
_BOOL = types.bool_[::1]


def _declare(name: str, fields: list[tuple[str, types.Type]], module: str = __name__):
    """A StructRef type class, its boxed proxy class, and the concrete type with ``fields``. The caller
    binds them in ``module`` as ``<name>Type`` and ``<name>``."""
    # classes made here must say which module holds them: numba pickles struct types into its
    # cache by reference, and a class it cannot find again would be pickled by value and come back
    # as a stranger without a data model
    type_class = type(name + "Type", (types.StructRef,), {"__module__": module})
    structref.register(type_class)
    proxy = type(name, (structref.StructRefProxy,),
                 {"__module__": module, "__doc__": f"Boxed {name} (opaque from Python)."})
    structref.define_boxing(type_class, proxy)
    structref.define_attributes(type_class)
    return type_class, proxy, type_class(fields)


# -------------------------------------------------------------------------------------------------
# added-token trie (tokjit.added_tokens.AddedTokenMatcher)

TrieType, Trie, TRIE = _declare("Trie", [
    ("first_byte", _BOOL), ("child_start", _I64), ("child_count", _I64), ("edge_byte", _U8),
    ("edge_target", _I64), ("node_token", _I64),
])


@njit(cache=True)
def _new_trie(first_byte, child_start, child_count, edge_byte, edge_target, node_token):
    s = structref.new(TRIE)
    s.first_byte = first_byte
    s.child_start = child_start
    s.child_count = child_count
    s.edge_byte = edge_byte
    s.edge_target = edge_target
    s.node_token = node_token
    return s


def make_trie(matcher) -> Trie:
    m = matcher
    return _new_trie(_arr(m.first_byte, np.bool_), _arr(m.child_start, np.int64), _arr(m.child_count, np.int64),
                     _arr(m.edge_byte, np.uint8), _arr(m.edge_target, np.int64), _arr(m.node_token, np.int64))


# -------------------------------------------------------------------------------------------------
# compiled split regex (tokjit.pretokenize.regex_compiler.Program) and the split behaviour

RegexType, Regex, REGEX = _declare("Regex", [
    ("prog", types.int32[:, ::1]), ("rep_info", types.int32[:, ::1]), ("cls_ascii", types.uint8[:, ::1]),
    ("cls_mask", types.uint64[::1]), ("cls_neg", _U8), ("cls_roff", _I32), ("cls_ranges", _I32),
    ("gc", _U8), ("n_memo", types.int64), ("behavior", types.int64), ("invert", types.boolean),
])


@njit(cache=True)
def _new_regex(prog, rep_info, cls_ascii, cls_mask, cls_neg, cls_roff, cls_ranges, gc, n_memo, behavior,
               invert):
    s = structref.new(REGEX)
    s.prog = prog
    s.rep_info = rep_info
    s.cls_ascii = cls_ascii
    s.cls_mask = cls_mask
    s.cls_neg = cls_neg
    s.cls_roff = cls_roff
    s.cls_ranges = cls_ranges
    s.gc = gc
    s.n_memo = n_memo
    s.behavior = behavior
    s.invert = invert
    return s


def make_regex(program, behavior: int, invert: bool) -> Regex:
    p = program
    return _new_regex(_arr(p.prog, np.int32), _arr(p.rep_info, np.int32), _arr(p.cls_ascii, np.uint8),
                      _arr(p.cls_mask, np.uint64), _arr(p.cls_neg, np.uint8), _arr(p.cls_roff, np.int32),
                      _arr(p.cls_ranges, np.int32), _arr(p.gc, np.uint8), np.int64(p.n_memo),
                      np.int64(behavior), bool(invert))


# -------------------------------------------------------------------------------------------------
# BPE vocabulary (tokjit.models.BPEModel)

BPEVocabType, BPEVocab, BPE_VOCAB = _declare("BPEVocab", [
    ("blob", _U8), ("offsets", _I64), ("table", _I32), ("byte_ids", _I32), ("merge_rank", _I64),
    ("pair_slots", _I64), ("flags", types.int64), ("unk_id", types.int64), ("max_len", types.int64),
    ("token_flags", _U8), ("unsafe_prev", _I64),
])


@njit(cache=True)
def _new_bpe_vocab(blob, offsets, table, byte_ids, merge_rank, pair_slots, flags, unk_id, max_len,
                   token_flags, unsafe_prev):
    s = structref.new(BPE_VOCAB)
    s.blob = blob
    s.offsets = offsets
    s.table = table
    s.byte_ids = byte_ids
    s.merge_rank = merge_rank
    s.pair_slots = pair_slots
    s.flags = flags
    s.unk_id = unk_id
    s.max_len = max_len
    s.token_flags = token_flags
    s.unsafe_prev = unsafe_prev
    return s


def make_bpe_vocab(model) -> BPEVocab:
    m, v = model, model.vocab
    return _new_bpe_vocab(_arr(v.blob, np.uint8), _arr(v.offsets, np.int64), _arr(v.table, np.int32),
                          _arr(m.byte_ids, np.int32), _arr(m.merge_rank, np.int64), _arr(m.pairs.slots, np.int64),
                          np.int64(m.flags), np.int64(m.unk_id), np.int64(m.max_len),
                          _arr(m.token_flags, np.uint8), _arr(m.unsafe_prev, np.int64))


# -------------------------------------------------------------------------------------------------
# per-thread BPE scratch: merge workspace + piece cache

BPEScratchType, BPEScratch, BPE_SCRATCH = _declare("BPEScratch", [
    ("start", _I64), ("end", _I64), ("id", _I32), ("rank", _I64), ("prev", _I64), ("next", _I64),
    ("heap", _I64), ("stack", _I64), ("rev_left", _I32), ("touched", _I64),
    ("cache_hash", _I64), ("cache_bstart", _I64), ("cache_blen", _I64), ("cache_istart", _I64),
    ("cache_ilen", _I64), ("cache_bytes", _U8), ("cache_ids", _I32), ("cache_fill", _I64),
])


@njit(cache=True)
def _new_bpe_scratch(start, end, id_, rank, prev, next_, heap, stack, rev_left, touched,
                     cache_hash, cache_bstart, cache_blen, cache_istart, cache_ilen, cache_bytes, cache_ids,
                     cache_fill):
    s = structref.new(BPE_SCRATCH)
    s.start = start
    s.end = end
    s.id = id_
    s.rank = rank
    s.prev = prev
    s.next = next_
    s.heap = heap
    s.stack = stack
    s.rev_left = rev_left
    s.touched = touched
    s.cache_hash = cache_hash
    s.cache_bstart = cache_bstart
    s.cache_blen = cache_blen
    s.cache_istart = cache_istart
    s.cache_ilen = cache_ilen
    s.cache_bytes = cache_bytes
    s.cache_ids = cache_ids
    s.cache_fill = cache_fill
    return s


def make_bpe_scratch(workspace, rev_left, touched, cache) -> BPEScratch:
    """From a :class:`tokjit.models.Workspace`, the per-id ``rev_left``, ``touched`` and a piece cache."""
    w = workspace
    return _new_bpe_scratch(w.start, w.end, w.id, w.rank, w.prev, w.next, w.heap, w.stack, rev_left, touched,
                            *cache.arrays)


# -------------------------------------------------------------------------------------------------
# per-thread buffers every fused driver shares: the text, spans of added tokens and pieces, the ids

SpansType, Spans, SPANS = _declare("Spans", [
    ("text", _U8), ("doc_starts", _I64), ("doc_ends", _I64), ("out", _I32), ("doc_out_end", _I64),
    ("io", _I64),
    ("at_starts", _I64), ("at_ends", _I64), ("at_ids", _I64),
    ("match_starts", _I64), ("match_ends", _I64), ("piece_starts", _I64), ("piece_ends", _I64),
    ("rx_stack", _I64), ("rx_params", _I64), ("tok_starts", _I64), ("tok_ends", _I64),
])


@njit(cache=True)
def _new_spans(text, doc_starts, doc_ends, out, doc_out_end, io, at_starts, at_ends, at_ids, match_starts,
               match_ends, piece_starts, piece_ends, rx_stack, rx_params, tok_starts, tok_ends):
    s = structref.new(SPANS)
    s.text = text
    s.doc_starts = doc_starts
    s.doc_ends = doc_ends
    s.out = out
    s.doc_out_end = doc_out_end
    s.io = io
    s.at_starts = at_starts
    s.at_ends = at_ends
    s.at_ids = at_ids
    s.match_starts = match_starts
    s.match_ends = match_ends
    s.piece_starts = piece_starts
    s.piece_ends = piece_ends
    s.rx_stack = rx_stack
    s.rx_params = rx_params
    s.tok_starts = tok_starts
    s.tok_ends = tok_ends
    return s


def make_spans(b) -> Spans:
    """From an object holding the arrays under the field names (see ``tokjit.fast_path._Buffers``)."""
    return _new_spans(b.text, b.doc_starts, b.doc_ends, b.out, b.doc_out_end, b.io, b.at_starts, b.at_ends,
                      b.at_ids, b.match_starts, b.match_ends, b.piece_starts, b.piece_ends, b.rx_stack,
                      b.rx_params, b.tok_starts, b.tok_ends)


def _arr(a, dtype) -> np.ndarray:
    return np.ascontiguousarray(a, dtype=dtype)


# -------------------------------------------------------------------------------------------------
# byte-level BPE pipeline: added tokens -> split regex -> BPE (one per tokenizer and parse_special)

BPEPipeType, BPEPipe, BPE_PIPE = _declare("BPEPipe", [("trie", TRIE), ("regex", REGEX), ("vocab", BPE_VOCAB)])


@njit(cache=True)
def make_bpe_pipe(trie, regex, vocab):
    s = structref.new(BPE_PIPE)
    s.trie = trie
    s.regex = regex
    s.vocab = vocab
    return s


# one thread's view of one pipeline: what a single-text call unboxes (one structure, ~0.1 us)
BPESessionType, BPESession, BPE_SESSION = _declare("BPESession", [
    ("pipe", BPE_PIPE), ("spans", SPANS), ("bpe", BPE_SCRATCH),
])


@njit(cache=True)
def make_bpe_session(pipe, spans, bpe):
    s = structref.new(BPE_SESSION)
    s.pipe = pipe
    s.spans = spans
    s.bpe = bpe
    return s
