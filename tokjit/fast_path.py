"""The fused encode path: one kernel call per document batch for regex-split byte-level BPE.

:class:`FusedBPE` is built by :func:`fused_path_for` when a tokenizer's pipeline is exactly "no
normalizer, one regex split (optionally followed by a byte-level no-op), BPE, added tokens without
lstrip/rstrip/single_word"; every other tokenizer uses the staged pipeline in ``tokenizer.py``. Both
paths produce the same ids (the parity tests run through this one for tiktoken, Llama 3, GPT-4o).

Threading: each Python thread works on its own contiguous chunk of documents with its own
workspaces and calls the ``nogil`` kernel once per chunk; no numba ``parallel`` code is involved,
so concurrent calls from many Python threads are safe.
"""

from __future__ import annotations

import threading

import numpy as np

from .kernels import fused
from .models import BPEModel, Workspace
from .pre_tokenizers import BEHAVIORS, ByteLevel, Sequence, Split
from .thread_pool import thread_pool

STEP_BUDGET_PER_BYTE = 256


def _split_regex(pre) -> tuple[object, int, bool] | None:
    """(compiled regex, behaviour, invert) when ``pre`` is a single regex split."""
    if isinstance(pre, Sequence):
        steps = pre.steps
        if len(steps) == 2 and isinstance(steps[1], ByteLevel) and not steps[1].add_prefix_space \
                and steps[1].split is None:
            return _split_regex(steps[0])
        return None
    if isinstance(pre, Split):
        splitter = getattr(pre, "splitter", None)
        if splitter is None or splitter.compiled is None:
            return None
        return splitter.compiled, pre.behavior, pre.invert
    if isinstance(pre, ByteLevel) and not pre.add_prefix_space and pre.split is not None:
        splitter = pre.splitter
        if splitter.compiled is None:
            return None
        return splitter.compiled, BEHAVIORS["Isolated"], False
    return None


def fused_path_for(tok) -> "FusedBPE | None":
    from .spm_fast_path import spm_fused_path_for
    spm_path = spm_fused_path_for(tok)  # SentencePiece-BPE .model pipelines have their own kernel
    if spm_path is not None:
        return spm_path
    from .unigram_fast_path import hf_unigram_fused_path_for, unigram_fused_path_for
    unigram_path = unigram_fused_path_for(tok) or hf_unigram_fused_path_for(tok)  # Unigram pipelines
    if unigram_path is not None:
        return unigram_path
    from .wordpiece_fast_path import wordpiece_fused_path_for
    wordpiece_path = wordpiece_fused_path_for(tok)  # BERT-style WordPiece pipelines have their own kernel
    if wordpiece_path is not None:
        return wordpiece_path
    if tok.normalizer is not None or not isinstance(tok.model, BPEModel):
        return None
    split = _split_regex(tok.pre_tokenizer)
    if split is None:
        return None
    if tok._match_all.has_flags or tok._match_plain.has_flags:
        return None
    return FusedBPE(tok, *split)


def doc_sizes(doc_starts: np.ndarray, doc_ends: np.ndarray) -> tuple[int, int, int]:
    """(number of documents, longest, total bytes)."""
    lengths = doc_ends - doc_starts
    n_docs = lengths.shape[0]
    return n_docs, int(lengths.max()) if n_docs else 0, int(lengths.sum()) if n_docs else 0


class PieceCache:
    """The arrays of one thread's piece -> ids cache (see ``kernels.fused.encode_piece_cached``),
    kept for the life of the thread; ``arrays`` is the kernel argument order."""

    def __init__(self):
        self.arrays = (
            np.zeros(fused.CACHE_SLOTS, np.int64),  # hash
            np.zeros(fused.CACHE_SLOTS, np.int64),  # start of the piece's bytes in the byte pool
            np.zeros(fused.CACHE_SLOTS, np.int64),  # piece length (0 = empty slot)
            np.zeros(fused.CACHE_SLOTS, np.int64),  # start of its ids in the id pool
            np.zeros(fused.CACHE_SLOTS, np.int64),  # number of ids
            np.zeros(fused.CACHE_POOL_BYTES, np.uint8),
            np.zeros(fused.CACHE_POOL_IDS, np.int32),
            np.zeros(3, np.int64),  # bytes, ids, entries used
        )


class _Workspace:
    def __init__(self):
        self.cap = -1
        self.bpe = Workspace()  # the BPE kernel's scratch, shared layout with the staged path
        self.cache = PieceCache()

    def ensure(self, longest: int):
        if longest <= self.cap:
            return self
        cap = max(longest, 2 * self.cap, 1024)
        self.at_starts = np.empty(cap + 1, np.int64)
        self.at_ends = np.empty(cap + 1, np.int64)
        self.at_ids = np.empty(cap + 1, np.int64)
        self.match_starts = np.empty(cap + 16, np.int64)
        self.match_ends = np.empty(cap + 16, np.int64)
        self.piece_starts = np.empty(2 * cap + 16, np.int64)
        self.piece_ends = np.empty(2 * cap + 16, np.int64)
        self.rx_stack = np.empty(4096, np.int64)
        self.bpe.grow(cap + 1)
        self.tok_starts = np.empty(cap + 1, np.int64)
        self.tok_ends = np.empty(cap + 1, np.int64)
        self.cap = cap
        return self


class FusedBPE:
    def __init__(self, tok, regex, behavior: int, invert: bool):
        self.tok = tok
        self.regex = regex
        self.behavior = np.int64(behavior)
        self.invert = bool(invert)
        self.model: BPEModel = tok.model
        self._local = threading.local()

    def _workspace(self, longest: int) -> _Workspace:
        ws = getattr(self._local, "ws", None)
        if ws is None:
            ws = self._local.ws = _Workspace()
        return ws.ensure(longest)

    def encode_docs(self, buf: np.ndarray, doc_starts: np.ndarray, doc_ends: np.ndarray,
                    parse_special: bool) -> tuple[np.ndarray, np.ndarray]:
        """(ids, per-document end offsets into ids) for documents ``buf[doc_starts[i]:doc_ends[i]]``."""
        n_docs, longest, total = doc_sizes(doc_starts, doc_ends)
        ws = self._workspace(longest)
        m = self.model
        bpe = ws.bpe
        rev_left = bpe.rev_left(m.token_flags.shape[0])
        matcher = self.tok._match_all if parse_special else self.tok._match_plain
        prog = self.regex.program
        params = np.array([0, STEP_BUDGET_PER_BYTE * (longest + 1) + 100_000, prog.n_memo], np.int64)
        out_ids = np.empty(total + 1, np.int32)
        out_pos = np.zeros(1, np.int64)
        doc_out_end = np.zeros(n_docs, np.int64)
        status = np.zeros(1, np.int64)
        v, p = m.vocab, m.pairs
        extra: dict[int, np.ndarray] = {}
        d = 0
        while d < n_docs:
            d = fused.encode_docs_bpe(
                buf, doc_starts, doc_ends, np.int64(d), np.int64(n_docs),
                matcher.first_byte, matcher.child_start, matcher.child_count, matcher.edge_byte,
                matcher.edge_target, matcher.node_token, ws.at_starts, ws.at_ends, ws.at_ids,
                prog.prog, prog.rep_info, prog.cls_ascii, prog.cls_mask, prog.cls_neg, prog.cls_roff,
                prog.cls_ranges, prog.gc, params, ws.rx_stack, ws.match_starts, ws.match_ends,
                self.behavior, self.invert, ws.piece_starts, ws.piece_ends,
                v.blob, v.offsets, v.table, m.byte_ids, m.merge_rank, p.slots,
                m.flags, m.unk_id, m.max_len,
                bpe.start, bpe.end, bpe.id, bpe.rank, bpe.prev, bpe.next, bpe.heap,
                m.token_flags, rev_left, m.touched, bpe.stack, m.unsafe_prev,
                ws.tok_starts, ws.tok_ends, out_ids, out_pos, doc_out_end, status, *ws.cache.arrays)
            if d < n_docs:
                # a pathological document for the backtracking budget: the staged path (with
                # memoization) encodes it; the fused kernel resumes after it
                seg = buf[doc_starts[d]:doc_ends[d]]
                ids, _, _ = self.tok._encode_staged(seg, parse_special, want_spans=False)
                extra[d] = ids
                doc_out_end[d] = out_pos[0]
                d += 1
        ids = out_ids[:out_pos[0]]
        if extra:
            ids, doc_out_end = self._splice(ids, doc_out_end, extra)
        return ids, doc_out_end

    @staticmethod
    def _splice(ids, doc_out_end, extra):
        parts, ends, prev, total = [], np.empty_like(doc_out_end), 0, 0
        for d in range(doc_out_end.shape[0]):
            chunk = extra[d] if d in extra else ids[prev:doc_out_end[d]]
            if d not in extra:
                prev = doc_out_end[d]
            parts.append(chunk)
            total += chunk.shape[0]
            ends[d] = total
        return np.concatenate(parts).astype(np.int32) if parts else ids, ends

    def encode_texts(self, texts, parse_special: bool, num_threads: int):
        """(flat ids, offsets of len(texts) + 1) for a list of str, over ``num_threads`` threads."""
        from .tokenizer import text_to_utf8

        encoded = []
        for t in texts:
            try:
                encoded.append(t.encode("utf-8"))
            except (UnicodeEncodeError, AttributeError):
                encoded.append(text_to_utf8(t).tobytes())
        n = len(encoded)
        lengths = np.fromiter(map(len, encoded), np.int64, count=n)
        doc_ends = np.cumsum(lengths)
        doc_starts = doc_ends - lengths
        buf = np.frombuffer(b"".join(encoded), np.uint8)
        offsets = np.zeros(n + 1, np.int64)
        if n == 0:
            return np.zeros(0, np.int32), offsets
        total = int(doc_ends[-1])
        n_chunks = 1 if num_threads <= 1 or n < 2 else min(n, num_threads * 4)
        if n_chunks == 1:
            ids, ends = self.encode_docs(buf, doc_starts, doc_ends, parse_special)
            offsets[1:] = ends
            return ids, offsets
        # contiguous chunks of about equal bytes
        cuts = np.searchsorted(doc_ends, np.linspace(0, total, n_chunks + 1)[1:-1], side="left")
        bounds = np.unique(np.concatenate([[0], cuts, [n]]))

        def run(i):
            lo, hi = int(bounds[i]), int(bounds[i + 1])
            return self.encode_docs(buf, doc_starts[lo:hi], doc_ends[lo:hi], parse_special)

        pool = thread_pool(min(num_threads, len(bounds) - 1))
        results = list(pool.map(run, range(len(bounds) - 1)))
        base = 0
        for i, (ids, ends) in enumerate(results):
            offsets[bounds[i] + 1:bounds[i + 1] + 1] = ends + base
            base += ids.shape[0]
        return np.concatenate([r[0] for r in results]), offsets
