"""The fused encode path for BERT-style WordPiece tokenizers (see :mod:`tokjit.kernels.wordpiece_fused`).

Chosen by :func:`wordpiece_fused_path_for` when the pipeline is exactly: a ``BertNormalizer``, a
``BertPreTokenizer`` or ``WhitespaceSplit`` pre-tokenizer, a ``WordPiece`` model, and added tokens
without lstrip/rstrip/single_word (raw or normalized). Batches use the document chunking and
threading of :class:`tokjit.fast_path.FusedPath`.
"""

from __future__ import annotations

import threading

import numpy as np

from .compile import TokenTable
from .fast_path import FusedPath
from .kernels.wordpiece_fused import STATUS_OK, STATUS_OUT_FULL, encode_docs_wordpiece
from .models import model_mask
from .wordpiece import BertNormalizer, BertPreTokenizer, WhitespaceSplit, WordPieceModel

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


class _Scratch:
    def __init__(self):
        self.cap = -1

    def ensure(self, longest: int, expansion: int):
        if longest <= self.cap:
            return self
        cap = max(longest, 2 * self.cap, 1024)
        norm = expansion * cap + 8
        self.at_starts = np.empty(cap + 1, np.int64)
        self.at_ends = np.empty(cap + 1, np.int64)
        self.at_ids = np.empty(cap + 1, np.int64)
        self.nt_starts = np.empty(norm, np.int64)
        self.nt_ends = np.empty(norm, np.int64)
        self.nt_ids = np.empty(norm, np.int64)
        self.run_cp = np.empty(4 * cap + 16, np.int64)
        self.run_src = np.empty(4 * cap + 16, np.int64)
        self.run_ccc = np.empty(4 * cap + 16, np.int64)
        self.norm_buf = np.empty(norm, np.uint8)
        self.norm_align = np.empty(norm + 1, np.int64)
        self.one_start = np.zeros(1, np.int64)
        self.one_end = np.zeros(1, np.int64)
        self.piece_starts = np.empty(norm, np.int64)
        self.piece_ends = np.empty(norm, np.int64)
        self.tok_starts = np.empty(2 * norm + 2, np.int64)
        self.tok_ends = np.empty(2 * norm + 2, np.int64)
        self.cap = cap
        return self


class FusedWordPiece(FusedPath):
    def __init__(self, tok):
        self.tok = tok
        self.model: WordPieceModel = tok.model
        self.normalizer: BertNormalizer = tok.normalizer
        self.isolate_punct = bool(tok.pre_tokenizer.isolate_punct)
        self.expansion = np.int64(self.normalizer.tables.expansion)
        # the whole-word shortcut holds when a word's first token is matched from the trie root and
        # cannot be empty (HF); llama.cpp's WPM flavour keeps the plain walk
        m = self.model
        self.whole_words = bool(m.word_node == 0 and m.word_node_token < 0)
        self.vocab = TokenTable.build(tok.spec.tokens, model_mask(tok.spec))
        self.max_token_len = np.int64(self.vocab.max_len)
        self._local = threading.local()

    def _scratch(self, longest: int) -> _Scratch:
        ws = getattr(self._local, "scratch", None)
        if ws is None:
            ws = self._local.scratch = _Scratch()
        return ws.ensure(longest, int(self.expansion))

    def encode_docs(self, buf: np.ndarray, doc_starts: np.ndarray, doc_ends: np.ndarray,
                    parse_special: bool) -> tuple[np.ndarray, np.ndarray]:
        """(ids, per-document end offsets into ids) for documents ``buf[doc_starts[i]:doc_ends[i]]``."""
        n_docs = doc_starts.shape[0]
        lengths = doc_ends - doc_starts
        longest = int(lengths.max()) if n_docs else 0
        total = int(lengths.sum()) if n_docs else 0
        ws = self._scratch(longest)
        tok, m, t = self.tok, self.model, self.normalizer.tables
        raw = tok._match_all if parse_special else tok._match_plain
        norm = tok._match_all_norm if parse_special else tok._match_plain_norm
        # English averages ~4 bytes per id; the kernel asks for more room when a document needs it
        out_ids = np.empty(total // 2 + 2 * int(self.expansion) * longest + 16, np.int32)
        out_pos = np.zeros(1, np.int64)
        doc_out_end = np.zeros(n_docs, np.int64)
        status = np.zeros(1, np.int64)
        edges = m.trie.edges
        v = self.vocab
        extra: dict[int, np.ndarray] = {}
        d = 0
        while d < n_docs:
            d = encode_docs_wordpiece(
                buf, doc_starts, doc_ends, np.int64(d), np.int64(n_docs),
                raw.first_byte, raw.child_start, raw.child_count, raw.edge_byte, raw.edge_target, raw.node_token,
                ws.at_starts, ws.at_ends, ws.at_ids,
                norm.first_byte, norm.child_start, norm.child_count, norm.edge_byte, norm.edge_target,
                norm.node_token, ws.nt_starts, ws.nt_ends, ws.nt_ids,
                t.flags, t.dec_keys, t.dec_off, t.dec_data, t.low_keys, t.low_off, t.low_data,
                t.ccc_keys, t.ccc_vals, self.normalizer.opts, ws.run_cp, ws.run_src, ws.run_ccc,
                ws.norm_buf, ws.norm_align, self.isolate_punct, ws.one_start, ws.one_end,
                ws.piece_starts, ws.piece_ends,
                edges, m.word_row, m.word_node, m.word_node_token, m.cont_row, m.cont_node, m.unk_id,
                m.max_chars, self.whole_words, v.blob, v.offsets, v.table, self.max_token_len,
                ws.tok_starts, ws.tok_ends, out_ids, out_pos, doc_out_end, self.expansion, status)
            if d >= n_docs or status[0] == STATUS_OK:
                break
            if status[0] == STATUS_OUT_FULL:
                need = int(out_pos[0]) + 2 * int(self.expansion) * int(lengths[d]) + 2
                grown = np.empty(max(2 * out_ids.shape[0], need), np.int32)
                grown[:out_pos[0]] = out_ids[:out_pos[0]]
                out_ids = grown
                continue
            # the staged path encodes this document (or raises its error); resume after it
            seg = buf[doc_starts[d]:doc_ends[d]]
            ids, _, _ = tok._encode_staged(seg, parse_special, want_spans=False)
            extra[d] = ids
            doc_out_end[d] = out_pos[0]
            d += 1
        ids = out_ids[:out_pos[0]]
        if extra:
            ids, doc_out_end = self._splice(ids, doc_out_end, extra)
        return ids, doc_out_end
