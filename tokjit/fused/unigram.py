"""The fused encode path for SentencePiece Unigram ``.model`` tokenizers (see
:mod:`tokjit.kernels.unigram_fused`).

Chosen by :func:`unigram_fused_path_for` when the pipeline is exactly: a ``SentencePieceNormalizer``
(with or without charsmap), no pre-tokenizer, a ``Unigram`` model, no added tokens matched in the
normalized text, and raw added tokens without lstrip/rstrip/single_word. Batches use the document
chunking and threading of :class:`tokjit.fused.bpe.FusedPath`.
"""

from __future__ import annotations

import functools
import threading

import numpy as np

from tokjit.pipeline.added_tokens import AddedTokenMatcher
from tokjit.errors import InputError
from tokjit.fused.driver import FusedPath, doc_sizes
from tokjit.fused.threads import ThreadSpans, field, writable_docs
from tokjit.kernels import structs
from tokjit.kernels.call_result import KERNEL_FAILED, NOT_BUILT
from tokjit.kernels import unigram_fused as kernel
from tokjit.pipeline.sentencepiece_normalizer import SentencePieceNormalizer
from tokjit.models.unigram import UnigramModel

_NO_USER_DEFINED = AddedTokenMatcher([])  # an empty trie for models without protected pieces
_EMPTY_U32 = np.zeros(1, np.uint32)
_EMPTY_U8 = np.zeros(1, np.uint8)


def unigram_fused_path_for(tok) -> "FusedUnigram | None":
    if type(tok.normalizer) is not SentencePieceNormalizer or type(tok.model) is not UnigramModel:
        return None
    if tok.pre_tokenizer is not None or not (tok._match_all_norm.empty and tok._match_plain_norm.empty):
        return None
    if tok._match_all.has_flags or tok._match_plain.has_flags:
        return None
    return FusedUnigram(tok)


def _bigger(cap: int, need: int, floor: int) -> int:
    """``cap`` when it holds ``need``, else at least double it (so repeated growth ends)."""
    return cap if need <= cap else max(need, 2 * cap, floor)


_placeholder_words = None


def _no_word_cache():
    """One-slot stand-in arrays for the word cache of models that cannot use it (never touched)."""
    global _placeholder_words
    if _placeholder_words is None:
        meta = np.zeros((1, 8), np.int64)
        _placeholder_words = kernel.make_word_cache(
            meta, meta.view(np.float64), np.zeros(1, np.uint8),
            np.zeros(1, np.int32), np.zeros(1, np.float32), np.zeros(4, np.int64), np.zeros(1, np.int64))
    return _placeholder_words


def _new_word_cache():
    """The per-thread word cache of ``encode_words_spm`` (kept across calls and buffer growth)."""
    meta = np.zeros((kernel.WORD_SLOTS, 8), np.int64)  # the certificate columns read as float64 (WC_MARGIN)
    return kernel.make_word_cache(
        meta, meta.view(np.float64),
        np.zeros(kernel.WORD_POOL_BYTES, np.uint8), np.zeros(kernel.WORD_POOL_IDS, np.int32),
        np.zeros(kernel.WORD_POOL_IDS, np.float32), np.zeros(4, np.int64), np.zeros(2 * kernel.WORD_RING, np.int64))


class _UnigramThread:
    """One thread's buffers for a Unigram kernel, as numpy arrays and as the structures the kernel
    takes (one session per parse_special). Capacities: ``raw`` the text (added-token and
    user-defined spans), ``cm`` the charsmap output, ``norm`` the normalized text (lattice, token and
    piece spans), ``out_cap`` the ids of one text; replaced by a larger one when a kernel asks."""

    def __init__(self, path: "FusedUnigram", raw: int, cm: int, norm: int, out: int, words):
        self.raw, self.cm, self.norm, self.out_cap = raw, cm, norm, out
        self.spans = ThreadSpans(text_cap=raw, out_cap=out, added_cap=raw, tok_cap=norm + 1, piece_cap=norm + 1)
        # what encode reads the ids from (encode_to_numpy copies the array, lists read the view)
        self.out, self.out_view = self.spans.out, self.spans.out_view
        self.io = self.spans.io
        self.buffers = kernel.make_unigram_buffers(
            np.empty(raw, np.int64), np.empty(raw, np.int64), np.empty(raw, np.int64),
            np.empty(cm, np.uint8), np.empty(cm, np.int64), np.empty(norm, np.uint8), np.empty(norm + 1, np.int64),
            np.empty(norm + 1, np.int64), np.empty(norm + 1, np.int64), np.empty(norm + 1, np.bool_),
            np.zeros(1, np.int64), np.zeros(1, np.int64))
        self.lattice = kernel.make_lattice(
            np.empty(norm + 1, np.float64), np.empty(norm + 1, np.int64), np.empty(norm + 1, np.int64),
            np.empty(norm + 1, np.int64), np.empty(norm + 1, np.int64))
        self.words = words
        self.sessions = tuple(path._session(pipe, self) for pipe in path.pipes)
        self.session_addrs = structs.addresses(self.sessions)  # what the text kernel takes


def _vocab(model: UnigramModel):
    m = model
    return kernel.make_unigram_vocab(field(m.trie.da, np.int32), field(m.scores, np.float64),
                                     field(m.id_flags, np.uint8), field(m.byte_ids, np.int32), np.int64(m.arith),
                                     np.int64(m.unk_id), float(m.unk_score), bool(m.byte_fallback))


def _charsmap(cm, max_step: int, props):
    if cm is None:
        return kernel.make_charsmap(False, _EMPTY_U32, _EMPTY_U8, np.int64(max_step), _EMPTY_U8, _EMPTY_U8)
    return kernel.make_charsmap(True, field(cm.units, np.uint32), field(cm.strings, np.uint8), np.int64(max_step),
                                props, field(cm.plain, np.uint8))


def _missing_unk() -> InputError:
    return InputError("the text contains a character this Unigram model has no piece for, and the "
                      "model defines no unk_id")


class FusedUnigram(FusedPath):
    """sentencepiece .model pipeline; :class:`FusedUnigramHF` reuses the driver with its own pipeline."""

    text_kernel = staticmethod(kernel.encode_text_unigram_spm)
    docs_kernel = staticmethod(kernel.encode_docs_unigram_spm)

    def __init__(self, tok):
        self.tok = tok
        self.model: UnigramModel = tok.model
        norm: SentencePieceNormalizer = tok.normalizer
        cm = norm.charsmap
        charsmap = _charsmap(cm, max(cm.max_replacement, 4) if cm is not None else 4, _EMPTY_U8)
        user = structs.make_trie(norm.protect if norm.protect is not None else _NO_USER_DEFINED)
        self.word_cache = _word_cache_allowed(tok)
        vocab = _vocab(self.model)
        ws_flags = np.int64(norm.flags)
        # indexed by parse_special
        self.pipes = tuple(kernel.make_unigram_spm_pipe(structs.make_trie(raw), user, charsmap, ws_flags, vocab,
                                                        self.word_cache)
                           for raw in (tok._match_plain, tok._match_all))
        self._local = threading.local()

    def _session(self, pipe, st: _UnigramThread):
        return kernel.make_unigram_spm_session(pipe, st.spans.struct, st.buffers, st.lattice, st.words)

    def _words(self):
        return _new_word_cache() if self.word_cache else _no_word_cache()

    def _norm_for(self, longest: int) -> int:
        """Normalized-text room for a document of ``longest`` bytes (charsmap, then whitespace rules)."""
        return 6 * longest + 16

    def _thread(self, longest: int = 0, cm: int = 0, norm: int = 0, out: int = 0) -> _UnigramThread:
        """This thread's buffers, replaced by larger ones when any is below what is asked."""
        st = getattr(self._local, "st", None)
        raw = longest + 1
        cm = max(cm, 2 * longest + 16)
        norm = max(norm, self._norm_for(longest))
        out = max(out, 2 * longest + 18)
        if st is None:
            st = _UnigramThread(self, max(raw, 1024), max(cm, 4096), max(norm, 4096), max(out, 2 * 1024 + 18),
                                self._words())
        elif raw > st.raw or cm > st.cm or norm > st.norm or out > st.out_cap:
            st = _UnigramThread(self, _bigger(st.raw, raw, 1024), _bigger(st.cm, cm, 4096),
                                _bigger(st.norm, norm, 4096), _bigger(st.out_cap, out, 2 * 1024 + 18), st.words)
        else:
            return st
        self._local.st = st
        return st

    def _recover(self, code: int, st, data: bytes, parse_special: bool):
        if code in (NOT_BUILT, KERNEL_FAILED):
            return super()._recover(code, st, data, parse_special)
        if code == kernel.MISSING:
            raise _missing_unk()
        status, need = int(st.spans.io[1]), int(st.spans.io[2])
        if status == kernel.STATUS_STAGED:
            return self._encode_staged(data, parse_special)
        if status == kernel.STATUS_GROW_TEXT:
            return self._thread(need)
        if status == kernel.STATUS_GROW_SCRATCH:
            return self._thread(cm=need, norm=need)
        return self._thread(out=need + 16)

    def encode_docs(self, buf: np.ndarray, doc_starts: np.ndarray, doc_ends: np.ndarray,
                    parse_special: bool) -> tuple[np.ndarray, np.ndarray]:
        """(ids, per-document end offsets into ids) for documents ``buf[doc_starts[i]:doc_ends[i]]``;
        resumes after growing whatever the kernel reports too small."""
        buf, doc_starts, doc_ends = writable_docs(buf, doc_starts, doc_ends)
        n_docs, longest, total = doc_sizes(doc_starts, doc_ends)
        st = self._thread(longest)
        out_ids = np.empty(2 * total + 2 * n_docs + 16, np.int32)
        doc_out_end = np.zeros(n_docs, np.int64)
        st.spans.io[0] = 0
        d = 0
        while True:
            d = self.docs_kernel(st.sessions[parse_special], buf, doc_starts, doc_ends, d, n_docs, out_ids,
                                 doc_out_end)
            io = st.spans.io
            status, out_pos, need = int(io[1]), int(io[0]), int(io[2])
            if status == kernel.STATUS_DONE:
                return out_ids[:out_pos], doc_out_end
            if status == kernel.STATUS_GROW_SCRATCH:
                st = self._thread(longest, cm=need, norm=need)
                st.spans.io[0] = out_pos
            elif status == kernel.STATUS_GROW_OUT:
                out_ids = _grown(out_ids, out_pos, need)
            elif status == kernel.STATUS_STAGED:
                # document d's added tokens need the staged pipeline's rules; the kernel resumes after it
                ids = self.tok._encode_staged(buf[doc_starts[d]:doc_ends[d]], parse_special, want_spans=False)[0]
                if out_pos + ids.shape[0] > out_ids.shape[0]:
                    out_ids = _grown(out_ids, out_pos, ids.shape[0])
                out_ids[out_pos:out_pos + ids.shape[0]] = ids
                doc_out_end[d] = st.spans.io[0] = out_pos + ids.shape[0]
                d += 1
                if d == n_docs:
                    return out_ids[:doc_out_end[-1]], doc_out_end
            else:
                raise _missing_unk()


def _grown(out_ids: np.ndarray, used: int, need: int) -> np.ndarray:
    """A larger copy of ``out_ids`` (its first ``used`` ids) with room for ``need`` more, at least twice
    the size."""
    grown = np.empty(max(2 * out_ids.shape[0], used + need + 16), np.int32)
    grown[:used] = out_ids[:used]
    return grown


def _word_cache_allowed(tok) -> bool:
    """Whether sentencepiece's Viterbi may run word by word (``kernels.unigram_fused.encode_words_spm``):
    float32 arithmetic, an unknown piece, U+2581 a piece of its own and never inside another piece,
    so no piece and no run of unknown characters crosses a word start."""
    from tokjit.kernels.unigram import ARITH_SPM
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
    from tokjit.pipeline.normalizers import Replace
    if type(step) is not Replace or step.content != " ":
        return False
    if step.needle is not None:
        return len(step.needle) >= 1 and set(step.needle) == {" "}
    return step.regex.pattern in (" {2,}", " +", "  +")


def hf_unigram_fused_path_for(tok) -> "FusedUnigramHF | None":
    from tokjit.pipeline.charsmap import Precompiled
    from tokjit.pipeline.normalizers import Sequence as NormSequence
    from tokjit.pipeline.pre_tokenizers import Metaspace, Sequence as PreSequence
    from tokjit.models.wordpiece import WhitespaceSplit
    from tokjit.kernels.unigram import ARITH_HF

    if type(tok.model) is not UnigramModel or tok.model.arith != ARITH_HF:
        return None
    if not (tok._match_all_norm.empty and tok._match_plain_norm.empty):
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


@functools.cache
def _grapheme_properties() -> np.ndarray:
    """The grapheme property table as a struct field takes it (writable; built once per process)."""
    from tokjit.pipeline.charsmap import grapheme_properties
    return field(grapheme_properties(), np.uint8)


class FusedUnigramHF(FusedUnigram):
    text_kernel = staticmethod(kernel.encode_text_unigram_hf)
    docs_kernel = staticmethod(kernel.encode_docs_unigram_hf)

    def __init__(self, tok, charsmap, ws_split: bool, metaspace):
        from tokjit.models.wordpiece import bert_tables

        self.tok = tok
        self.model: UnigramModel = tok.model
        cm = _charsmap(charsmap, max(charsmap.max_replacement, 1) if charsmap is not None else 1,
                       _grapheme_properties() if charsmap is not None else _EMPTY_U8)
        rep = metaspace.rep if metaspace is not None else np.zeros(1, np.uint8)
        self.rep_len = int(rep.shape[0])
        scheme = metaspace.scheme if metaspace is not None else "never"
        prepend_scheme = np.int64({"always": kernel.PREPEND_ALWAYS, "first": kernel.PREPEND_FIRST,
                                   "never": kernel.PREPEND_NEVER}[scheme])
        meta_split = bool(metaspace.split) if metaspace is not None else False
        vocab = _vocab(self.model)
        char_flags = field(bert_tables().flags, np.uint8)
        self.word_cache = False
        # indexed by parse_special
        self.pipes = tuple(kernel.make_unigram_hf_pipe(structs.make_trie(raw), structs.make_added_rules(raw), cm,
                                                       bool(ws_split), char_flags,
                                                       metaspace is not None, field(rep, np.uint8), prepend_scheme,
                                                       meta_split, vocab)
                           for raw in (tok._match_plain, tok._match_all))
        self._local = threading.local()

    def _session(self, pipe, st: _UnigramThread):
        return kernel.make_unigram_hf_session(pipe, st.spans.struct, st.buffers, st.lattice, st.words)

    def _words(self):
        # the thread's piece cache (kept across buffer growth, as the sentencepiece word cache is)
        return structs.piece_cache_arrays()[0]

    def _norm_for(self, longest: int) -> int:
        # Metaspace writes len(rep) bytes per space and per prepended word
        return self.rep_len * (4 * longest + 36) + 1
