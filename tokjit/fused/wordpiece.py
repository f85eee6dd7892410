"""The fused encode path for BERT-style WordPiece tokenizers (see :mod:`tokjit.kernels.wordpiece_fused`).

Chosen by :func:`wordpiece_fused_path_for` when the pipeline is exactly: a ``BertNormalizer``, a
``BertPreTokenizer`` or ``WhitespaceSplit`` pre-tokenizer, a ``WordPiece`` model, and added tokens
without lstrip/rstrip/single_word (raw or normalized). Batches use the document chunking and
threading of :class:`tokjit.fused.bpe.FusedPath`.
"""

from __future__ import annotations

import threading

import numpy as np

from tokjit.compile import TokenTable
from tokjit.fused.driver import FusedPath, doc_sizes
from tokjit.fused.threads import ThreadSpans, field, writable_docs
from tokjit.kernels import structs
from tokjit.kernels import wordpiece_fused as kernel
from tokjit.kernels.wordpiece import MAX_LOCAL
from tokjit.models.bpe import model_mask
from tokjit.models.wordpiece import BertNormalizer, BertPreTokenizer, WhitespaceSplit, WordPieceModel

_PRE_TOKENIZERS = (BertPreTokenizer, WhitespaceSplit)


def wordpiece_fused_path_for(tok) -> "FusedWordPiece | None":
    # exact types: a subclass may change behaviour the kernel does not know about
    if type(tok.normalizer) is not BertNormalizer or type(tok.model) is not WordPieceModel:
        return None
    if type(tok.pre_tokenizer) not in _PRE_TOKENIZERS:
        return None
    matchers = (tok._match_all, tok._match_plain, tok._match_all_norm, tok._match_plain_norm)
    if any(m.has_flags for m in matchers):
        return None
    return FusedWordPiece(tok)


class _WordPieceThread:
    """One thread's buffers for the WordPiece kernel, as numpy arrays and as the structures the kernel
    takes (one session per parse_special); rebuilt larger when a text does not fit."""

    def __init__(self, pipes, cap: int, expansion: int):
        cap = max(cap, 1024)
        norm = expansion * cap + 8
        self.cap = cap
        self.spans = ThreadSpans(text_cap=cap, out_cap=2 * expansion * cap + 16, added_cap=cap + 1,
                                 tok_cap=2 * norm + 2, piece_cap=norm)
        # what encode reads the ids from (encode_to_numpy copies the array, lists read the view)
        self.out, self.out_view = self.spans.out, self.spans.out_view
        self.io = self.spans.io
        run = 4 * cap + 16 + MAX_LOCAL  # bert_normalize keeps its per-character scratch at the end
        self.buffers = kernel.make_wordpiece_buffers(
            np.empty(norm, np.int64), np.empty(norm, np.int64), np.empty(norm, np.int64),
            np.empty(run, np.int64), np.empty(run, np.int64), np.empty(run, np.int64),
            np.empty(norm, np.uint8), np.empty(norm + 1, np.int64), np.zeros(1, np.int64), np.zeros(1, np.int64))
        self.sessions = tuple(kernel.make_wordpiece_session(pipe, self.spans.struct, self.buffers)
                              for pipe in pipes)
        self.session_addrs = structs.addresses(self.sessions)  # what the text kernel takes


class FusedWordPiece(FusedPath):
    def __init__(self, tok):
        self.tok = tok
        self.model: WordPieceModel = tok.model
        normalizer: BertNormalizer = tok.normalizer
        t = normalizer.tables
        self.expansion = int(t.expansion)
        norm = kernel.make_bert_norm(
            field(t.flags, np.uint8), field(t.dec_keys, np.int32), field(t.dec_off, np.int64),
            field(t.dec_data, np.int32), field(t.low_keys, np.int32), field(t.low_off, np.int64),
            field(t.low_data, np.int32), field(t.ccc_keys, np.int32), field(t.ccc_vals, np.uint8),
            np.int64(normalizer.opts), np.int64(self.expansion))
        m = self.model
        # the whole-word shortcut holds when a word's first token is matched from the trie root and
        # cannot be empty (HF); llama.cpp's WPM flavour keeps the plain walk
        whole_words = bool(m.word_node == 0 and m.word_node_token < 0)
        table = TokenTable.build(tok.spec.tokens, model_mask(tok.spec))
        vocab = kernel.make_wordpiece_vocab(
            field(m.trie.edges, np.int64), field(m.word_row, np.int64), np.int64(m.word_node),
            np.int64(m.word_node_token), field(m.cont_row, np.int64), np.int64(m.cont_node), np.int64(m.unk_id),
            np.int64(m.max_chars), whole_words, field(table.blob, np.uint8), field(table.offsets, np.int64),
            field(table.table, np.int32), np.int64(table.max_len))
        isolate_punct = bool(tok.pre_tokenizer.isolate_punct)
        # indexed by parse_special
        self.pipes = (
            kernel.make_wordpiece_pipe(structs.make_trie(tok._match_plain), structs.make_trie(tok._match_plain_norm),
                                       norm, isolate_punct, vocab),
            kernel.make_wordpiece_pipe(structs.make_trie(tok._match_all), structs.make_trie(tok._match_all_norm),
                                       norm, isolate_punct, vocab))
        self._local = threading.local()

    text_kernel = staticmethod(kernel.encode_text_wordpiece)

    def _thread(self, longest: int = 0) -> _WordPieceThread:
        st = getattr(self._local, "st", None)
        if st is None or st.cap < longest:
            st = self._local.st = _WordPieceThread(self.pipes, max(longest, 2 * st.cap if st else 0),
                                                   self.expansion)
        return st

    def encode_docs(self, buf: np.ndarray, doc_starts: np.ndarray, doc_ends: np.ndarray,
                    parse_special: bool) -> tuple[np.ndarray, np.ndarray]:
        """(ids, per-document end offsets into ids) for documents ``buf[doc_starts[i]:doc_ends[i]]``."""
        buf, doc_starts, doc_ends = writable_docs(buf, doc_starts, doc_ends)
        n_docs, longest, total = doc_sizes(doc_starts, doc_ends)
        lengths = doc_ends - doc_starts
        st = self._thread(longest)
        session = st.sessions[parse_special]
        io = st.spans.io
        tok, expansion = self.tok, self.expansion
        # English averages ~4 bytes per id; the kernel asks for more room when a document needs it
        out_ids = np.empty(total // 2 + 2 * expansion * longest + 16, np.int32)
        doc_out_end = np.zeros(n_docs, np.int64)
        io[0] = 0
        extra: dict[int, np.ndarray] = {}
        d = 0
        while d < n_docs:
            d = kernel.encode_docs_wordpiece(session, buf, doc_starts, doc_ends, d, n_docs, out_ids, doc_out_end)
            if d >= n_docs or io[1] == kernel.STATUS_OK:
                break
            if io[1] == kernel.STATUS_OUT_FULL:
                need = int(io[0]) + 2 * expansion * int(lengths[d]) + 2
                grown = np.empty(max(2 * out_ids.shape[0], need), np.int32)
                grown[:io[0]] = out_ids[:io[0]]
                out_ids = grown
                continue
            # the staged path encodes this document (or raises its error); resume after it
            seg = buf[doc_starts[d]:doc_ends[d]]
            ids, _, _ = tok._encode_staged(seg, parse_special, want_spans=False)
            extra[d] = ids
            doc_out_end[d] = io[0]
            d += 1
        ids = out_ids[:io[0]]
        if extra:
            ids, doc_out_end = self._splice(ids, doc_out_end, extra)
        return ids, doc_out_end
