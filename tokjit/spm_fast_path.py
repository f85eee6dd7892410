"""The fused encode path for SentencePiece-BPE ``.model`` tokenizers (see :mod:`tokjit.kernels.spm_fused`).

Chosen by :func:`spm_fused_path_for` when the pipeline is exactly: a ``SentencePieceNormalizer``
without charsmap, or tokenizer.json components that amount to one (see :func:`_hf_whitespace_flags`),
no pre-tokenizer, a BPE model, added tokens without lstrip/rstrip/single_word.
Batches use the document chunking and threading of :class:`tokjit.fast_path.FusedPath`.
"""

from __future__ import annotations

import threading

import numpy as np

from .fast_path import FusedPath, PieceCache, doc_sizes
from .kernels.spm_fused import encode_docs_spm
from .models import BPEModel, Workspace
from .sentencepiece_normalizer import WS_DUMMY_PREFIX, WS_ESCAPE, SentencePieceNormalizer


def spm_fused_path_for(tok) -> "FusedSentencePiece | None":
    if not isinstance(tok.model, BPEModel):
        return None
    norm = tok.normalizer
    if isinstance(norm, SentencePieceNormalizer):
        if norm.charsmap is not None or tok.pre_tokenizer is not None:
            return None
        flags = norm.flags
    else:
        flags = _hf_whitespace_flags(tok)
        if flags is None:
            return None
    matchers = (tok._match_all, tok._match_plain, tok._match_all_norm, tok._match_plain_norm)
    if any(m.has_flags for m in matchers):
        return None
    return FusedSentencePiece(tok, flags)


def _hf_whitespace_flags(tok):
    """The sentencepiece whitespace flags a tokenizer.json normalizer / pre-tokenizer pair amounts to,
    or None. ``Replace(" " -> "\u2581")`` is the escape and ``Prepend("\u2581")`` (HF prepends to each
    non-empty segment, as the dummy prefix is added) the dummy prefix, in either order (Mistral,
    Llama 2 conversions); a ``Split`` on the literal " " after it can never match, so it is the no-op
    it is in Gemma 3's file (not inverted: an inverted split with no match would drop the text)."""
    from .normalizers import Prepend, Replace, Sequence as NormSequence
    from .pre_tokenizers import Split

    norm = tok.normalizer
    steps = list(norm.steps) if type(norm) is NormSequence else [norm]
    escape = [s for s in steps if type(s) is Replace and s.needle == " " and s.content == "\u2581"]
    prepend = [s for s in steps if type(s) is Prepend and s.prefix == "\u2581".encode()]
    if len(escape) != 1 or len(prepend) > 1 or len(escape) + len(prepend) != len(steps):
        return None
    pre = tok.pre_tokenizer
    if pre is not None and not (type(pre) is Split and pre.literal == " " and not pre.invert):
        return None
    return np.int64(WS_ESCAPE | (WS_DUMMY_PREFIX if prepend else 0))


class _Scratch:
    def __init__(self):
        self.cap = -1
        self.bpe = Workspace()
        self.cache = PieceCache()

    def ensure(self, longest: int):
        if longest <= self.cap:
            return self
        cap = max(longest, 2 * self.cap, 1024)
        big = 3 * cap + 8
        self.ident = np.arange(cap + 2, dtype=np.int64)
        self.at_starts = np.empty(cap + 1, np.int64)
        self.at_ends = np.empty(cap + 1, np.int64)
        self.at_ids = np.empty(cap + 1, np.int64)
        self.ud_starts = np.empty(big, np.int64)
        self.ud_ends = np.empty(big, np.int64)
        self.ud_ids = np.empty(big, np.int64)
        self.norm_buf = np.empty(big, np.uint8)
        self.norm_align = np.empty(big + 1, np.int64)
        self.one_start = np.zeros(1, np.int64)
        self.one_end = np.zeros(1, np.int64)
        self.bpe.grow(big)
        self.tok_starts = np.empty(big, np.int64)
        self.tok_ends = np.empty(big, np.int64)
        self.cap = cap
        return self


class FusedSentencePiece(FusedPath):
    def __init__(self, tok, ws_flags):
        self.tok = tok
        self.model: BPEModel = tok.model
        self.ws_flags = ws_flags
        self._local = threading.local()

    def _scratch(self, longest: int) -> _Scratch:
        ws = getattr(self._local, "scratch", None)
        if ws is None:
            ws = self._local.scratch = _Scratch()
        return ws.ensure(longest)

    def encode_docs(self, buf: np.ndarray, doc_starts: np.ndarray, doc_ends: np.ndarray,
                    parse_special: bool) -> tuple[np.ndarray, np.ndarray]:
        n_docs, longest, total = doc_sizes(doc_starts, doc_ends)
        ws = self._scratch(longest)
        m = self.model
        bpe = ws.bpe
        rev_left = bpe.rev_left(m.token_flags.shape[0])
        tok = self.tok
        raw = tok._match_all if parse_special else tok._match_plain
        ud = tok._match_all_norm if parse_special else tok._match_plain_norm
        out_ids = np.empty(3 * total + 4 * n_docs + 16, np.int32)
        doc_out_end = np.zeros(n_docs, np.int64)
        v, p = m.vocab, m.pairs
        n = encode_docs_spm(
            buf, doc_starts, doc_ends, np.int64(n_docs), ws.ident, self.ws_flags,
            raw.first_byte, raw.child_start, raw.child_count, raw.edge_byte, raw.edge_target, raw.node_token,
            ws.at_starts, ws.at_ends, ws.at_ids,
            ud.first_byte, ud.child_start, ud.child_count, ud.edge_byte, ud.edge_target, ud.node_token,
            ws.ud_starts, ws.ud_ends, ws.ud_ids,
            ws.norm_buf, ws.norm_align, ws.one_start, ws.one_end,
            v.blob, v.offsets, v.table, m.byte_ids, m.merge_rank, p.slots,
            m.flags, m.unk_id, m.max_len,
            bpe.start, bpe.end, bpe.id, bpe.rank, bpe.prev, bpe.next, bpe.heap,
            m.token_flags, rev_left, m.touched, bpe.stack, m.unsafe_prev,
            ws.tok_starts, ws.tok_ends, out_ids, doc_out_end, *ws.cache.arrays)
        return out_ids[:n], doc_out_end
