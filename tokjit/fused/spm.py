"""The fused encode path for SentencePiece-BPE ``.model`` tokenizers (see :mod:`tokjit.kernels.spm_fused`).

Chosen by :func:`spm_fused_path_for` when the pipeline is exactly: a ``SentencePieceNormalizer``
without charsmap, or tokenizer.json components that amount to one (see :func:`_hf_whitespace_flags`),
no pre-tokenizer, a BPE model, added tokens without lstrip/rstrip/single_word.
Batches use the document chunking and threading of :class:`tokjit.fused.bpe.FusedPath`.
"""

from __future__ import annotations

import threading

import numpy as np

from tokjit.fused.driver import FusedPath, doc_sizes
from tokjit.fused.threads import ThreadSpans, writable_docs
from tokjit.kernels import spm_fused as kernel
from tokjit.kernels import structs
from tokjit.models.bpe import BPEModel, Workspace
from tokjit.kernels.spm_whitespace import WS_DUMMY_PREFIX, WS_ESCAPE
from tokjit.pipeline.sentencepiece_normalizer import SentencePieceNormalizer


def spm_fused_path_for(tok) -> "FusedSentencePiece | None":
    # (HF's BPE affixes mark a word's ends, which the kernel's cuts before U+2581 would move)
    if not isinstance(tok.model, BPEModel) or tok.model.affixed:
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
    # rules of the raw added tokens run in the kernel (or send a document to the staged pipeline);
    # the normalized ones' would have to follow the normalization: staged
    if tok._match_all_norm.has_flags or tok._match_plain_norm.has_flags:
        return None
    return FusedSentencePiece(tok, flags)


def _hf_whitespace_flags(tok):
    """The sentencepiece whitespace flags a tokenizer.json normalizer / pre-tokenizer pair amounts to,
    or None. ``Replace(" " -> "\u2581")`` is the escape and ``Prepend("\u2581")`` (HF prepends to each
    non-empty segment, as the dummy prefix is added) the dummy prefix, in either order (Mistral,
    Llama 2 conversions); a ``Split`` on the literal " " after it can never match, so it is the no-op
    it is in Gemma 3's file (not inverted: an inverted split with no match would drop the text)."""
    from tokjit.pipeline.normalizers import Prepend, Replace, Sequence as NormSequence
    from tokjit.pipeline.pre_tokenizers import Split

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


class _SPMThread:
    """One thread's buffers for the SentencePiece-BPE kernel, as numpy arrays and as the structures
    the kernel takes (one session per parse_special); rebuilt larger when a text does not fit, keeping
    the piece cache."""

    def __init__(self, model: BPEModel, pipes, cap: int, cache: structs.PieceCache | None = None,
                 workspace: Workspace | None = None):
        cap = max(cap, 1024)
        big = 3 * cap + 8
        self.cap = cap
        self.spans = ThreadSpans(text_cap=cap, out_cap=3 * cap + 16, added_cap=cap + 1, tok_cap=big)
        # what encode reads the ids from (encode_to_numpy copies the array, lists read the view)
        self.out, self.out_view = self.spans.out, self.spans.out_view
        self.io = self.spans.io
        self.buffers = kernel.make_spm_buffers(
            np.empty(big, np.int64), np.empty(big, np.int64), np.empty(big, np.int64), np.empty(big, np.uint8),
            np.zeros(1, np.int64), np.zeros(1, np.int64), np.zeros(4 * kernel.PIECE_RING, np.int64))
        # kept when the buffers grow: its per-id and per-rank arrays do not depend on the capacity
        ws = self.workspace = workspace if workspace is not None else Workspace()
        ws.grow(big)
        self.cache = cache if cache is not None else structs.make_piece_cache()
        # rev_left and touched are written by the BPE kernel: one per thread, never the model's
        self.bpe = structs.make_bpe_scratch(ws, model, np.zeros(model.touched.shape[0], np.int64), self.cache)
        self.sessions = tuple(kernel.make_spm_session(pipe, self.spans.struct, self.bpe, self.buffers)
                              for pipe in pipes)
        self.session_addrs = structs.addresses(self.sessions)  # what the text kernel takes


class FusedSentencePiece(FusedPath):
    def __init__(self, tok, ws_flags):
        self.tok = tok
        self.model: BPEModel = tok.model
        vocab = self.model.kernel_vocab()
        flags = np.int64(ws_flags)
        # indexed by parse_special
        self.pipes = tuple(
            kernel.make_spm_pipe(structs.make_trie(raw), structs.make_added_rules(raw), structs.make_trie(norm),
                                 vocab, flags)
            for raw, norm in ((tok._match_plain, tok._match_plain_norm), (tok._match_all, tok._match_all_norm)))
        self._local = threading.local()

    text_kernel = staticmethod(kernel.encode_text_spm)

    def _thread(self, longest: int = 0) -> _SPMThread:
        st = getattr(self._local, "st", None)
        if st is None or st.cap < longest:
            st = self._local.st = _SPMThread(self.model, self.pipes, max(longest, 2 * st.cap if st else 0),
                                             st.cache if st else None, st.workspace if st else None)
        return st

    def encode_docs(self, buf: np.ndarray, doc_starts: np.ndarray, doc_ends: np.ndarray,
                    parse_special: bool) -> tuple[np.ndarray, np.ndarray]:
        """(ids, per-document end offsets into ids) for documents ``buf[doc_starts[i]:doc_ends[i]]``."""
        buf, doc_starts, doc_ends = writable_docs(buf, doc_starts, doc_ends)
        n_docs, longest, total = doc_sizes(doc_starts, doc_ends)
        st = self._thread(longest)
        out_ids = np.empty(3 * total + 4 * n_docs + 16, np.int32)
        doc_out_end = np.zeros(n_docs, np.int64)
        n = kernel.encode_docs_spm(st.sessions[parse_special], buf, doc_starts, doc_ends, 0, n_docs, out_ids,
                                   doc_out_end)
        staged = np.flatnonzero(doc_out_end < 0).tolist()
        if not staged:
            return out_ids[:n], doc_out_end
        # documents whose added tokens need the staged pipeline's rules (the kernel wrote none of their ids)
        extra = {}
        for d in staged:
            doc_out_end[d] = -1 - doc_out_end[d]
            seg = buf[doc_starts[d]:doc_ends[d]]
            extra[d] = self.tok._encode_staged(seg, parse_special, want_spans=False)[0]
        return self._splice(out_ids[:n], doc_out_end, extra)
