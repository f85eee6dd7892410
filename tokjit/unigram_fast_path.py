"""The fused encode path for SentencePiece Unigram ``.model`` tokenizers (see
:mod:`tokjit.kernels.unigram_fused`).

Chosen by :func:`unigram_fused_path_for` when the pipeline is exactly: a ``SentencePieceNormalizer``
(with or without charsmap), no pre-tokenizer, a ``Unigram`` model, no added tokens matched in the
normalized text, and raw added tokens without lstrip/rstrip/single_word. Batches use the document
chunking and threading of :class:`tokjit.fast_path.FusedPath`.
"""

from __future__ import annotations

import threading

import numpy as np

from .added_tokens import AddedTokenMatcher
from .errors import InputError
from .fast_path import FusedPath, doc_sizes
from .kernels import unigram_fused as kernel
from .sentencepiece_normalizer import SentencePieceNormalizer
from .unigram import UnigramModel

_NO_USER_DEFINED = AddedTokenMatcher([])  # an empty trie for models without protected pieces
_EMPTY_U32 = np.zeros(1, np.uint32)
_EMPTY_U8 = np.zeros(1, np.uint8)
# stands in for the word cache's arrays (same dtypes and shapes' rank) when a model cannot use it
_NO_WORD_CACHE = (np.zeros((1, 8), np.int64), np.zeros((1, 2), np.float64), np.zeros(1, np.uint8),
                  np.zeros(1, np.int32), np.zeros(1, np.float32), np.zeros(4, np.int64))


def unigram_fused_path_for(tok) -> "FusedUnigram | None":
    if type(tok.normalizer) is not SentencePieceNormalizer or type(tok.model) is not UnigramModel:
        return None
    if tok.pre_tokenizer is not None or not (tok._match_all_norm.empty and tok._match_plain_norm.empty):
        return None
    if tok._match_all.has_flags or tok._match_plain.has_flags:
        return None
    return FusedUnigram(tok)


class _Scratch:
    """Per-thread buffers: ``raw`` sized by the longest document, ``norm`` by the normalized text."""

    def __init__(self):
        self.raw_cap = -1
        self.cm_cap = -1
        self.norm_cap = -1
        self.one_start = np.zeros(1, np.int64)  # a one-piece span for kernels that take piece arrays
        self.one_end = np.zeros(1, np.int64)

    def ensure_raw(self, longest: int):
        if longest + 1 <= self.raw_cap:
            return
        cap = max(longest + 1, 2 * self.raw_cap, 1024)
        for name in ("at_starts", "at_ends", "at_ids", "ud_starts", "ud_ends", "ud_ids"):
            setattr(self, name, np.empty(cap, np.int64))
        self.raw_cap = cap

    def ensure_charsmap(self, n: int):
        if n <= self.cm_cap:
            return
        cap = max(n, 2 * self.cm_cap, 4096)
        self.cm_buf = np.empty(cap, np.uint8)
        self.cm_src = np.empty(cap, np.int64)
        self.cm_cap = cap

    def ensure_norm(self, n: int):
        if n <= self.norm_cap:
            return
        cap = max(n, 2 * self.norm_cap, 4096)
        self.norm_buf = np.empty(cap, np.uint8)
        self.norm_align = np.empty(cap + 1, np.int64)
        self.best_score = np.empty(cap + 1, np.float64)
        for name in ("best_start", "path_start", "path_end", "tok_starts", "tok_ends"):
            setattr(self, name, np.empty(cap + 1, np.int64))
        self.best_id = np.empty(cap + 1, np.int64)
        # tokenizer.json path: words of the charsmap output, Metaspace pieces
        for name in ("word_starts", "word_ends", "piece_starts", "piece_ends"):
            setattr(self, name, np.empty(cap + 1, np.int64))
        self.prepend = np.empty(cap + 1, np.bool_)
        self.norm_cap = cap

    def word_cache(self) -> tuple:
        """The per-thread word cache of ``encode_words_spm`` (kept across calls)."""
        arrays = getattr(self, "_word_cache", None)
        if arrays is None:
            arrays = self._word_cache = (
                np.zeros((kernel.WORD_SLOTS, 8), np.int64), np.zeros((kernel.WORD_SLOTS, 2), np.float64),
                np.zeros(kernel.WORD_POOL_BYTES, np.uint8), np.zeros(kernel.WORD_POOL_IDS, np.int32),
                np.zeros(kernel.WORD_POOL_IDS, np.float32), np.zeros(4, np.int64))
        return arrays


def _run(call, ws: "_Scratch", n_docs: int, total: int) -> tuple[np.ndarray, np.ndarray]:
    """Drive a Unigram batch kernel: resume after growing whatever it reports too small."""
    out_ids = np.empty(2 * total + 2 * n_docs + 16, np.int32)
    out_pos = np.zeros(1, np.int64)
    doc_out_end = np.zeros(n_docs, np.int64)
    need = np.zeros(1, np.int64)
    d = 0
    while True:
        d, status = call(d, out_ids, out_pos, doc_out_end, need)
        if status == kernel.STATUS_DONE:
            return out_ids[:out_pos[0]], doc_out_end
        if status == kernel.STATUS_GROW_SCRATCH:
            ws.ensure_charsmap(int(need[0]))
            ws.ensure_norm(int(need[0]))
        elif status == kernel.STATUS_GROW_OUT:
            grown = np.empty(max(2 * out_ids.shape[0], int(out_pos[0] + need[0]) + 16), np.int32)
            grown[:out_pos[0]] = out_ids[:out_pos[0]]
            out_ids = grown
        else:
            raise InputError("the text contains a character this Unigram model has no piece for, and the "
                             "model defines no unk_id")


class FusedUnigram(FusedPath):
    def __init__(self, tok):
        self.tok = tok
        self.model: UnigramModel = tok.model
        norm: SentencePieceNormalizer = tok.normalizer
        self.ws_flags = norm.flags
        cm = norm.charsmap
        self.has_charsmap = cm is not None
        self.cm_units = cm.units if cm is not None else _EMPTY_U32
        self.cm_strings = cm.strings if cm is not None else _EMPTY_U8
        self.cm_max_step = np.int64(max(cm.max_replacement, 4) if cm is not None else 4)
        self.protect = norm.protect  # user-defined pieces the charsmap must not touch, or None
        self.word_cache = _word_cache_allowed(tok)
        self._local = threading.local()

    def _scratch(self) -> _Scratch:
        ws = getattr(self._local, "scratch", None)
        if ws is None:
            ws = self._local.scratch = _Scratch()
        return ws

    def encode_docs(self, buf: np.ndarray, doc_starts: np.ndarray, doc_ends: np.ndarray,
                    parse_special: bool) -> tuple[np.ndarray, np.ndarray]:
        n_docs, longest, total = doc_sizes(doc_starts, doc_ends)
        ws = self._scratch()
        ws.ensure_raw(longest)
        ws.ensure_charsmap(2 * longest + 16)
        ws.ensure_norm(6 * longest + 16)
        m = self.model
        at = self.tok._match_all if parse_special else self.tok._match_plain
        ud = self.protect if self.protect is not None else _NO_USER_DEFINED

        def call(d, out_ids, out_pos, doc_out_end, need):
            return kernel.encode_docs_unigram_spm(
                buf, doc_starts, doc_ends, np.int64(d), np.int64(n_docs), self.ws_flags,
                at.first_byte, at.child_start, at.child_count, at.edge_byte, at.edge_target, at.node_token,
                ws.at_starts, ws.at_ends, ws.at_ids,
                ud.first_byte, ud.child_start, ud.child_count, ud.edge_byte, ud.edge_target, ud.node_token,
                ws.ud_starts, ws.ud_ends, ws.ud_ids,
                self.has_charsmap, self.cm_units, self.cm_strings, self.cm_max_step, ws.cm_buf, ws.cm_src,
                ws.norm_buf, ws.norm_align, ws.one_start, ws.one_end,
                m.trie.da, m.scores, m.id_flags, m.byte_ids, m.arith, m.unk_id, m.unk_score, m.byte_fallback,
                ws.best_score, ws.best_start, ws.best_id, ws.path_start, ws.path_end, ws.tok_starts, ws.tok_ends,
                out_ids, out_pos, doc_out_end, need, self.word_cache,
                *(ws.word_cache() if self.word_cache else _NO_WORD_CACHE))
        return _run(call, ws, n_docs, total)


def _word_cache_allowed(tok) -> bool:
    """Whether sentencepiece's Viterbi may run word by word (``kernels.unigram_fused.encode_words_spm``):
    float32 arithmetic, an unknown piece, U+2581 a piece of its own and never inside another piece,
    so no piece and no run of unknown characters crosses a word start."""
    from .kernels.unigram import ARITH_SPM
    m = tok.model
    if m.arith != ARITH_SPM or m.unk_id < 0:
        return False
    space = "\u2581".encode("utf-8")
    matchable = m.matchable
    have_space = False
    for i in np.flatnonzero(matchable).tolist():
        piece = tok.spec.tokens[i]
        if piece.find(space, 1) >= 0:
            return False
        have_space = have_space or piece == space
    return have_space



# ---------------------------------------------------------------------------------------------------
# tokenizer.json: Precompiled -> [WhitespaceSplit] -> [Metaspace] -> Unigram
# ---------------------------------------------------------------------------------------------------

def _space_collapse(step) -> bool:
    """A Replace that only shortens runs of spaces to one space: a no-op for the words a following
    WhitespaceSplit produces (pegasus writes ``" {2,}"`` -> ``" "``)."""
    from .normalizers import Replace
    if type(step) is not Replace or step.content != " ":
        return False
    if step.needle is not None:
        return len(step.needle) >= 1 and set(step.needle) == {" "}
    return step.regex.pattern in (" {2,}", " +", "  +")


def hf_unigram_fused_path_for(tok) -> "FusedUnigramHF | None":
    from .charsmap import Precompiled
    from .normalizers import Sequence as NormSequence
    from .pre_tokenizers import Metaspace, Sequence as PreSequence
    from .wordpiece import WhitespaceSplit
    from .kernels.unigram import ARITH_HF

    if type(tok.model) is not UnigramModel or tok.model.arith != ARITH_HF:
        return None
    if not (tok._match_all_norm.empty and tok._match_plain_norm.empty):
        return None
    if tok._match_all.has_flags or tok._match_plain.has_flags:
        return None
    pre = tok.pre_tokenizer
    steps = list(pre.steps) if type(pre) is PreSequence else ([] if pre is None else [pre])
    ws_split = bool(steps) and type(steps[0]) is WhitespaceSplit
    if ws_split:
        steps = steps[1:]
    metaspace = None
    if steps and type(steps[0]) is Metaspace:
        metaspace = steps[0]
        steps = steps[1:]
    if steps:
        return None
    norm = tok.normalizer
    norm_steps = list(norm.steps) if type(norm) is NormSequence else ([] if norm is None else [norm])
    charsmap = None
    if norm_steps and type(norm_steps[0]) is Precompiled:
        charsmap = norm_steps[0].charsmap
        norm_steps = norm_steps[1:]
    if any(not (ws_split and _space_collapse(s)) for s in norm_steps):
        return None
    return FusedUnigramHF(tok, charsmap, ws_split, metaspace)


class FusedUnigramHF(FusedUnigram):
    def __init__(self, tok, charsmap, ws_split: bool, metaspace):
        from .charsmap import grapheme_properties
        from .wordpiece import bert_tables

        self.tok = tok
        self.model: UnigramModel = tok.model
        self.has_charsmap = charsmap is not None
        self.cm_units = charsmap.units if charsmap is not None else _EMPTY_U32
        self.cm_strings = charsmap.strings if charsmap is not None else _EMPTY_U8
        self.cm_props = grapheme_properties()
        self.cm_max_rep = np.int64(max(charsmap.max_replacement, 1) if charsmap is not None else 1)
        self.ws_split = ws_split
        self.char_flags = bert_tables().flags
        self.has_metaspace = metaspace is not None
        self.rep = metaspace.rep if metaspace is not None else np.zeros(1, np.uint8)
        scheme = metaspace.scheme if metaspace is not None else "never"
        self.prepend_scheme = np.int64({"always": kernel.PREPEND_ALWAYS, "first": kernel.PREPEND_FIRST,
                                        "never": kernel.PREPEND_NEVER}[scheme])
        self.meta_split = bool(metaspace.split) if metaspace is not None else False
        self._local = threading.local()

    def encode_docs(self, buf: np.ndarray, doc_starts: np.ndarray, doc_ends: np.ndarray,
                    parse_special: bool) -> tuple[np.ndarray, np.ndarray]:
        n_docs, longest, total = doc_sizes(doc_starts, doc_ends)
        ws = self._scratch()
        ws.ensure_raw(longest)
        ws.ensure_charsmap(2 * longest + 16)
        r = int(self.rep.shape[0])
        ws.ensure_norm(r * (4 * longest + 36) + 1)
        m = self.model
        at = self.tok._match_all if parse_special else self.tok._match_plain

        def call(d, out_ids, out_pos, doc_out_end, need):
            return kernel.encode_docs_unigram_hf(
                buf, doc_starts, doc_ends, np.int64(d), np.int64(n_docs),
                at.first_byte, at.child_start, at.child_count, at.edge_byte, at.edge_target, at.node_token,
                ws.at_starts, ws.at_ends, ws.at_ids,
                self.has_charsmap, self.cm_units, self.cm_strings, self.cm_props, self.cm_max_rep,
                ws.cm_buf, ws.cm_src,
                self.ws_split, self.char_flags, self.has_metaspace, self.rep, self.prepend_scheme, self.meta_split,
                ws.prepend, ws.word_starts, ws.word_ends, ws.one_start, ws.one_end,
                ws.norm_buf, ws.norm_align, ws.piece_starts, ws.piece_ends,
                m.trie.da, m.scores, m.id_flags, m.byte_ids, m.arith, m.unk_id, m.unk_score, m.byte_fallback,
                ws.best_score, ws.best_start, ws.best_id, ws.path_start, ws.path_end, ws.tok_starts, ws.tok_ends,
                out_ids, out_pos, doc_out_end, need)
        return _run(call, ws, n_docs, total)
