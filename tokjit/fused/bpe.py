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
from unicodedata import is_normalized

import numpy as np

from tokjit.kernels import fused, structs
from tokjit.fused.threads import utf8_bytes, writable_docs
from tokjit.models.bpe import BPEModel, Workspace
from tokjit.pipeline.pre_tokenizers import BEHAVIORS, ByteLevel, Sequence, Split
from tokjit.thread_pool import thread_pool

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
    from tokjit.fused.spm import spm_fused_path_for
    spm_path = spm_fused_path_for(tok)  # SentencePiece-BPE .model pipelines have their own kernel
    if spm_path is not None:
        return spm_path
    from tokjit.fused.unigram import hf_unigram_fused_path_for, unigram_fused_path_for
    unigram_path = unigram_fused_path_for(tok) or hf_unigram_fused_path_for(tok)  # Unigram pipelines
    if unigram_path is not None:
        return unigram_path
    from tokjit.fused.wordpiece import wordpiece_fused_path_for
    wordpiece_path = wordpiece_fused_path_for(tok)  # BERT-style WordPiece pipelines have their own kernel
    if wordpiece_path is not None:
        return wordpiece_path
    if not isinstance(tok.model, BPEModel):
        return None
    form = None
    if tok.normalizer is not None:
        form = _unicode_form(tok.normalizer)
        if form is None or not (tok._match_all_norm.empty and tok._match_plain_norm.empty):
            return None
    split = _split_regex(tok.pre_tokenizer)
    if split is None:
        return None
    if tok._match_all.has_flags or tok._match_plain.has_flags:
        return None
    return FusedBPE(tok, *split, form)


def _unicode_form(normalizer) -> str | None:
    """"NFC" etc. when the normalizer is exactly one Unicode normal form (Qwen 2/2.5/3 use NFC)."""
    from tokjit.pipeline.normalizers import Sequence as NormSequence, UnicodeForm
    steps = list(normalizer.steps) if type(normalizer) is NormSequence else [normalizer]
    if len(steps) == 1 and type(steps[0]) is UnicodeForm:
        return steps[0].form
    return None


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


class FusedPath:
    """The one driver of every fused family.

    Single text (``encode_list``): the family's ``text_kernel(session, text_bytes)`` runs through its
    raw entry point on this thread's buffers (``_thread``) and returns the id count in ``out``, or a
    negative code that ``_recover`` answers (larger buffers, or the staged pipeline for this text).
    Batch (``encode_texts``): one buffer cut into contiguous chunks of about equal bytes, one chunk
    per thread, each through the family's ``encode_docs``; documents the kernel hands back are encoded
    by the staged pipeline and spliced in (``_splice``).

    A family sets ``tok``, ``text_kernel``, ``_local`` (a ``threading.local``) and ``_entry = None``, and
    implements ``_thread(longest=0)`` and ``encode_docs``."""

    text_kernel = None

    def encode_list(self, text: str, parse_special: bool) -> list[int]:
        """Ids of one text as a list: one kernel call on this thread's buffers, no allocation."""
        try:
            data = text.encode()
        except (UnicodeEncodeError, AttributeError):
            data = utf8_bytes(text)
        try:
            st = self._local.st
        except AttributeError:
            st = self._thread()
        entry = self._entry
        if entry is None:
            entry = self._entry = kernel_entry(self.text_kernel, st.sessions[0], data)
        n = entry(st.sessions[parse_special], data)
        while n < 0:
            st = self._recover(n, st, data, parse_special)
            if type(st) is list:
                return st
            n = entry(st.sessions[parse_special], data)
        return st.out_view[:n].tolist()

    def _recover(self, code: int, st, data: bytes, parse_special: bool):
        """After a negative ``text_kernel`` result: the thread state to retry with, or the ids (a list)."""
        if code == fused.GROW:
            return self._thread(len(data))
        # FALLBACK: the staged pipeline encodes this text (or raises its error)
        return self._encode_staged(data, parse_special)

    def _encode_staged(self, data: bytes, parse_special: bool) -> list[int]:
        ids, _, _ = self.tok._encode_staged(np.frombuffer(bytearray(data), np.uint8), parse_special,
                                            want_spans=False)
        return ids.tolist()

    @staticmethod
    def _splice(ids, doc_out_end, extra):
        """Replace the ids of documents ``extra`` (whatever the kernel wrote for them) with ``extra[d]``."""
        parts, ends, prev, total = [], np.empty_like(doc_out_end), 0, 0
        for d in range(doc_out_end.shape[0]):
            chunk = extra[d] if d in extra else ids[prev:doc_out_end[d]]
            prev = doc_out_end[d]
            parts.append(chunk)
            total += chunk.shape[0]
            ends[d] = total
        return np.concatenate(parts).astype(np.int32) if parts else ids, ends

    def encode_texts(self, texts, parse_special: bool, num_threads: int):
        """(flat ids, offsets of len(texts) + 1) for a list of str, over ``num_threads`` threads."""
        buf, doc_starts, doc_ends = utf8_documents(texts)
        n = doc_starts.shape[0]
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


def utf8_documents(texts) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(writable uint8 buffer, starts, ends) of the UTF-8 of ``texts``; lone surrogates become U+FFFD
    (``text_to_utf8``). The buffer is writable so every kernel sees one array type."""
    from tokjit.tokenizer import text_to_utf8
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
    buf = np.frombuffer(bytearray(b"".join(encoded)), np.uint8)
    return buf, doc_starts, doc_ends


class _BPEThread:
    """One thread's buffers for the byte-level BPE kernel, as numpy arrays (kept so Python can read
    ``out``) and as the two structures the kernel takes; rebuilt larger when a text does not fit."""

    def __init__(self, model: BPEModel, pipes, cap: int, cache: PieceCache | None = None):
        cap = max(cap, 1024)
        self.cap = cap
        self.text = np.empty(cap, np.uint8)
        self.doc_starts = np.zeros(1, np.int64)
        self.doc_ends = np.zeros(1, np.int64)
        self.out = np.empty(cap + 1, np.int32)
        self.out_view = memoryview(self.out)
        self.doc_out_end = np.zeros(1, np.int64)
        self.io = np.zeros(4, np.int64)
        self.at_starts = np.empty(cap + 1, np.int64)
        self.at_ends = np.empty(cap + 1, np.int64)
        self.at_ids = np.empty(cap + 1, np.int64)
        self.match_starts = np.empty(cap + 16, np.int64)
        self.match_ends = np.empty(cap + 16, np.int64)
        self.piece_starts = np.empty(2 * cap + 16, np.int64)
        self.piece_ends = np.empty(2 * cap + 16, np.int64)
        self.rx_stack = np.empty(4096, np.int64)
        self.rx_params = np.zeros(3, np.int64)
        self.tok_starts = np.empty(cap + 1, np.int64)
        self.tok_ends = np.empty(cap + 1, np.int64)
        self.spans = structs.make_spans(self)
        ws = Workspace()
        ws.grow(cap + 1)
        self.cache = cache if cache is not None else PieceCache()  # kept when the buffers grow
        self.bpe = structs.make_bpe_scratch(ws, ws.rev_left(model.token_flags.shape[0]),
                                            np.zeros(model.touched.shape[0], np.int64), self.cache)
        # indexed by parse_special
        self.sessions = tuple(structs.make_bpe_session(pipe, self.spans, self.bpe) for pipe in pipes)


class FusedBPE(FusedPath):
    """Byte-level BPE after one split regex, optionally after a Unicode normal form (``form``).

    A normal form runs as a check, not a rewrite: most text already is in that form, and for such
    text normalizing changes nothing, so the kernel's ids are HF's. Text that is not (``unicodedata.
    is_normalized``, a quick C scan) goes through the staged pipeline, which normalizes each
    segment between added tokens as HF does."""

    def __init__(self, tok, regex, behavior: int, invert: bool, form: str | None = None):
        self.tok = tok
        self.form = form
        self.model: BPEModel = tok.model
        vocab = structs.make_bpe_vocab(self.model)
        rx = structs.make_regex(regex.program, behavior, invert)
        # indexed by parse_special
        self.pipes = (structs.make_bpe_pipe(structs.make_trie(tok._match_plain), rx, vocab),
                      structs.make_bpe_pipe(structs.make_trie(tok._match_all), rx, vocab))
        self._local = threading.local()
        self._entry = None

    text_kernel = staticmethod(fused.encode_text_bpe)

    def _thread(self, longest: int = 0) -> _BPEThread:
        st = getattr(self._local, "st", None)
        if st is None or st.cap < longest:
            st = self._local.st = _BPEThread(self.model, self.pipes, max(longest, 2 * st.cap if st else 0),
                                             st.cache if st else None)
        return st

    def encode_list(self, text: str, parse_special: bool) -> list[int]:
        if self.form is not None and not (type(text) is str and is_normalized(self.form, text)):
            return self._encode_staged(utf8_bytes(text), parse_special)
        return FusedPath.encode_list(self, text, parse_special)

    def encode_docs(self, buf: np.ndarray, doc_starts: np.ndarray, doc_ends: np.ndarray,
                    parse_special: bool) -> tuple[np.ndarray, np.ndarray]:
        """(ids, per-document end offsets into ids) for documents ``buf[doc_starts[i]:doc_ends[i]]``."""
        buf, doc_starts, doc_ends = writable_docs(buf, doc_starts, doc_ends)
        n_docs, longest, total = doc_sizes(doc_starts, doc_ends)
        st = self._thread(longest)
        session = st.sessions[parse_special]
        out_ids = np.empty(total + 1, np.int32)
        doc_out_end = np.zeros(n_docs, np.int64)
        st.io[0] = 0
        extra: dict[int, np.ndarray] = {}
        d = 0
        while d < n_docs:
            d = fused.encode_docs_bpe(session, buf, doc_starts, doc_ends, d, n_docs, out_ids, doc_out_end)
            if d < n_docs:
                # a pathological document for the backtracking budget: the staged path (with
                # memoization) encodes it; the fused kernel resumes after it
                seg = buf[doc_starts[d]:doc_ends[d]]
                ids, _, _ = self.tok._encode_staged(seg, parse_special, want_spans=False)
                extra[d] = ids
                doc_out_end[d] = st.io[0]
                d += 1
        if self.form is not None:
            for d in range(n_docs):
                text = buf[doc_starts[d]:doc_ends[d]].tobytes().decode("utf-8", "replace")
                if d not in extra and not is_normalized(self.form, text):
                    seg = buf[doc_starts[d]:doc_ends[d]]
                    extra[d] = self.tok._encode_staged(seg, parse_special, want_spans=False)[0]
        ids = out_ids[:st.io[0]]
        if extra:
            ids, doc_out_end = self._splice(ids, doc_out_end, extra)
        return ids, doc_out_end


def kernel_entry(dispatcher, *args):
    """The compiled entry point of ``dispatcher`` for the types of ``args`` (loaded from numba's cache,
    or compiled now, which ``kernels.compile_notice`` announces): calling it skips numba's per-call
    dispatch (typing every argument, ~0.2 us per structure). Only ever called with those types."""
    from numba import typeof
    sig = tuple(typeof(a) for a in args)
    overload = dispatcher.overloads.get(sig)
    if overload is None:
        dispatcher.compile(sig)
        overload = dispatcher.overloads[sig]
    return overload.entry_point
