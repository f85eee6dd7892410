"""The fused path of regex-split byte-level BPE: one kernel call per text or per batch chunk.

:class:`FusedBPE` is built by :func:`bpe_fused_path_for` when a tokenizer's pipeline is exactly "no
normalizer (or one Unicode normal form), one regex split (optionally followed by a byte-level no-op),
BPE, added tokens without lstrip/rstrip/single_word"; other BPE tokenizers use the staged pipeline in
``tokenizer.py``. Both paths produce the same ids (the parity tests run through this one for tiktoken,
Llama 3, GPT-4o, Qwen).
"""

from __future__ import annotations

import threading
import unicodedata
from unicodedata import is_normalized

import numpy as np

from tokjit.kernels import fused, structs
from tokjit.kernels.atomics import COUNTERS, N_CHUNKS
from tokjit.kernels.normal_form import (MAX_MARK_RUN, normal_form_suspects, order_marks_in_place, quick_check_table,
                                       quick_check_yes_bits)
from tokjit.kernels.llamacpp_split import (PLAN_GPT2, PLAN_LLAMA3, PLAN_STEPS, PLAN_VIEW_REGEX,
                                          PLAN_VIEW_REGEX_COLLAPSED, plan_word)
from tokjit.kernels.split_known import SHAPE_LLAMACPP, SHAPE_VM
from tokjit.regex.class_runs import class_run, stream_plan
from tokjit.regex.known import recognize
from tokjit.fused.driver import FusedPath, byte_documents, doc_sizes
from tokjit.fused.threads import result_io, writable_docs
from tokjit.thread_pool import thread_pool
from tokjit.models.bpe import BPEModel, Workspace
from tokjit.pipeline.llamacpp import LlamaCppRegexSplit, cpt_flags
from tokjit.pipeline.pre_tokenizers import BEHAVIORS, ByteLevel, RegexSplitStep, Sequence
from tokjit.regex.compiled import CompiledRegex

def _split_regex(pre) -> tuple[object, int, bool, list] | None:
    """(compiled regex, behaviour, invert, the splits after it) when ``pre`` is a regex split, or a
    sequence of them (each ``(compiled regex, behaviour, invert)``), optionally followed by a
    byte-level step that only maps bytes."""
    if isinstance(pre, Sequence):
        steps = list(pre.steps)
        if len(steps) >= 2 and isinstance(steps[-1], ByteLevel) and not steps[-1].add_prefix_space \
                and steps[-1].split is None:
            steps.pop()
        if any(isinstance(step, ByteLevel) for step in steps[:-1]):
            return None  # the splits after it read GPT-2's byte alphabet (staged: Sequence, byte_level_view)
        splits = [_one_split(step) for step in steps]
        if not splits or any(split is None for split in splits):
            return None
        return (*splits[0], splits[1:])
    split = _one_split(pre)
    return None if split is None else (*split, [])


def _one_split(pre) -> tuple[object, int, bool] | None:
    """(compiled regex, behaviour, invert) when ``pre`` is one regex split our engine compiles: a Split,
    or Digits and Punctuation, which are regex splits of a character class."""
    if isinstance(pre, RegexSplitStep):
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


def _llamacpp_plan(pre) -> tuple[int, list] | None:
    """(plan, compiled regexes of its std::regex steps in order) when ``pre`` is a GGUF pre-tokenizer
    the fused kernel runs itself (:func:`~tokjit.kernels.llamacpp_split.llamacpp_pieces`): any
    sequence of std::regex patterns our engine compiles, each on its view of the text, and llama.cpp's
    hand-written GPT-2 and Llama 3 splitters (pre types gpt-2, llama-bpe, qwen2, deepseek-llm, falcon
    and the like); else ``None`` (other hand-written splitters, patterns our engine does not compile)."""
    if not isinstance(pre, LlamaCppRegexSplit) or not 1 <= len(pre.steps) <= PLAN_STEPS:
        return None
    kinds, regexes = [], []
    for kind, arg in pre.steps:
        if kind == "regex":
            if arg.compiled is None:
                return None
            kinds.append(PLAN_VIEW_REGEX_COLLAPSED if arg.collapse else PLAN_VIEW_REGEX)
            regexes.append(arg.compiled)
        elif kind == "custom":
            kinds.append(PLAN_LLAMA3 if arg == 1 else PLAN_GPT2)
        else:
            return None
    return plan_word(kinds), regexes


def bpe_fused_path_for(tok) -> "FusedBPE | None":
    """The fused path of a byte-level BPE pipeline: no normalizer or one Unicode normal form, one
    regex split or llama.cpp's GPT-2 / Llama 3 splitter (added tokens with any rules: the kernel applies
    them, :func:`~tokjit.kernels.added_tokens.ruled_token_matches`); ``None`` for anything else."""
    if not isinstance(tok.model, BPEModel):
        return None
    form = None
    if tok.normalizer is not None:
        form = _unicode_form(tok.normalizer)
        if form is None or not (tok._match_all_norm.empty and tok._match_plain_norm.empty):
            return None
    split = _split_regex(tok.pre_tokenizer)
    plan = _llamacpp_plan(tok.pre_tokenizer) if split is None else None
    if split is None and plan is None:
        return None
    if plan is not None:
        return FusedBPE(tok, None, BEHAVIORS["Isolated"], False, form=form, llamacpp_plan=plan)
    return FusedBPE(tok, *split, form=form)


def _unicode_form(normalizer) -> str | None:
    """"NFC" etc. when the normalizer is exactly one Unicode normal form (Qwen 2/2.5/3 use NFC)."""
    from tokjit.pipeline.normalizers import Sequence as NormSequence, UnicodeForm
    steps = list(normalizer.steps) if type(normalizer) is NormSequence else [normalizer]
    if len(steps) == 1 and type(steps[0]) is UnicodeForm:
        return steps[0].form
    return None


# chunks a batch shared between threads is cut into: small enough that the threads finish within
# ~one chunk of each other, at most CHUNKS_PER_THREAD per thread (claiming one costs an atomic add)
CHUNK_BYTES = 4096
CHUNKS_PER_THREAD = 16
# a helper grows its buffers ahead of need to its caller's size, up to documents of this many bytes
# (~24 MB of buffers); for longer ones it grows when a batch brings one, as it takes milliseconds to
# encode anyway
HELPER_PREGROW_BYTES = 256 * 1024


class _BPEThread:
    """One thread's buffers for the byte-level BPE kernel, as numpy arrays (kept so Python can read
    ``out``) and as the two structures the kernel takes; rebuilt larger when a text does not fit."""

    def __init__(self, model: BPEModel, pipes, cap: int, cache: tuple | None = None,
                 workspace: Workspace | None = None):
        cap = max(cap, 1024)
        self.cap = cap
        self.text = np.empty(cap, np.uint8)
        self.doc_starts = np.zeros(1, np.int64)
        self.doc_ends = np.zeros(1, np.int64)
        self.out = np.empty(cap + 1, np.int32)
        self.out_view = memoryview(self.out)
        self.doc_out_end = np.zeros(1, np.int64)
        result_io(self)
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
        # a thread growing keeps its workspace: its per-id and per-rank arrays (~1 MB for a vocabulary of
        # 128K) do not depend on the capacity, and allocating them again made growing cost ~0.6 ms
        ws = self.workspace = workspace if workspace is not None else Workspace()
        ws.grow(cap + 1)
        # (the cache and its arrays) kept when the buffers grow, or copied from another thread's
        # (FusedBPE.encode_chunks); a new one starts from the vocabulary's seed
        self.cache, self.cache_arrays = structs.piece_cache_arrays(seed=model.piece_cache_seed()) \
            if cache is None else structs.piece_cache_arrays(arrays=cache[1])
        self.bpe = structs.make_bpe_scratch(ws, model, np.zeros(model.touched.shape[0], np.int64), self.cache)
        # indexed by parse_special
        self.sessions = tuple(structs.make_bpe_session(pipe, self.spans, self.bpe) for pipe in pipes)
        self.session_addrs = structs.addresses(self.sessions)  # what the text kernel takes


class FusedBPE(FusedPath):
    """Byte-level BPE after one split regex, optionally after a Unicode normal form (``form``).

    A normal form runs as a check, not a rewrite: most text already is in that form, and for such
    text normalizing changes nothing, so the kernel's ids are HF's. Text that is not (``unicodedata.
    is_normalized``, a quick C scan) goes through the staged pipeline, which normalizes each
    segment between added tokens as HF does; in a batch, text whose only fault is the order of its
    marks is put in the form in place first (``prepare_documents``)."""

    def __init__(self, tok, regex, behavior: int, invert: bool, more: list = (), form: str | None = None,
                 llamacpp_plan: tuple[int, list] | None = None):
        self.tok = tok
        self.form = form  # checked by the driver's single-text call (FusedPath._encode_function)
        self.model: BPEModel = tok.model
        vocab = self.model.kernel_vocab()
        if llamacpp_plan is not None:
            # llama.cpp's steps: the kernel reads the plan, the programs of its std::regex steps in
            # order and the code point flags (a placeholder program for a plan without one)
            plan, regexes = llamacpp_plan
            known = (SHAPE_LLAMACPP, plan, 0, cpt_flags())
            regexes = regexes or [CompiledRegex(".", syntax="python")]
            regex, more = regexes[0], [(r, behavior, invert) for r in regexes[1:]]
            program = regex.program
        else:
            # a sequence of splits runs step by step (split_in_steps), each step's pattern through its
            # scanner where it has one; one pattern may have a scanner
            known = recognize(regex.program) if not more else None
            program = regex.program
        programs = [program] + [r.program for r, _, _ in more]
        known_steps = [recognize(q) for q in programs] if more and llamacpp_plan is None else None
        runs = [class_run(q) for q in programs]
        streams = stream_plan(programs, [behavior] + [b for _, b, _ in more], [invert] + [i for _, _, i in more],
                              runs) if more and llamacpp_plan is None else None
        self.shape = known[0] if known is not None else SHAPE_VM
        rx = self.regex = structs.make_regex(program, behavior, invert, known, [(r.program, b, i) for r, b, i in more],
                                             known_steps, runs, streams)
        # indexed by parse_special
        self.pipes = (structs.make_bpe_pipe(tok._match_plain, rx, vocab),
                      structs.make_bpe_pipe(tok._match_all, rx, vocab))
        self._order_marks = None if form is not None else False  # prepare_documents decides, once
        self._local = threading.local()
        self._states = 0  # threads that have made their buffers
        self._widest = 0  # the largest capacity of any thread's buffers (helpers grow to it)

    text_kernel = staticmethod(fused.encode_text_bpe)
    # a batch shared by the kernels costs less to hand out than Python's chunks (MIN_BYTES_PER_THREAD):
    # o200k, new text, two threads against one on batches of 16 KB: Japanese 1.14x, English 1.28x;
    # 24 KB 1.28x / 1.46x; 12 KB 1.01x / 1.27x
    min_bytes_per_thread = 8 * 1024

    def _kernel_text(self, data: bytes, parse_special: bool) -> bytes | None:
        """UTF-8 the kernel encodes to the staged pipeline's ids for ``data``: ``data`` itself when it
        is in the tokenizer's normal form (text that is not valid UTF-8: when its decoding with
        replacement characters is), its normalization when no added token occurs in the text
        before or after normalizing (the staged pipeline matches raw added tokens before normalizing
        and normalized ones after; without any, both are the pre-tokenizer and BPE on the normalized
        text), else None: the staged pipeline."""
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            return data if is_normalized(self.form, data.decode("utf-8", "replace")) else None
        norm = unicodedata.normalize(self.form, text)
        if norm == text:
            return data
        norm_data = norm.encode("utf-8")
        tok = self.tok
        raw = tok._match_all if parse_special else tok._match_plain
        after = tok._match_all_norm if parse_special else tok._match_plain_norm
        for matcher, sample in ((raw, data), (raw, norm_data), (after, norm_data)):
            if not matcher.empty and matcher.find(np.frombuffer(sample, np.uint8), 0, len(sample))[0].shape[0]:
                return None
        return norm_data

    def _encode_staged(self, data: bytes, parse_special: bool) -> list[int]:
        # the driver sends here text not in the form, and text the kernel handed back (FALLBACK)
        norm = self._kernel_text(data, parse_special) if self.form is not None else None
        if norm is None or norm is data:
            return super()._encode_staged(data, parse_special)
        return self.encode_docs(*byte_documents([norm]), parse_special)[0].tolist()

    def encode_chunks(self, buf: np.ndarray, doc_starts: np.ndarray, doc_ends: np.ndarray, parse_special: bool,
                       threads: int, suspect: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """``encode_docs`` over ``threads`` threads, for the driver's own packed batch (writable uint8,
        int64 spans): the batch is cut into chunks of about equal bytes (at most ``CHUNKS_PER_THREAD``
        per thread, ``CHUNK_BYTES`` or more each) that the threads' kernels claim one by one
        (:func:`~tokjit.kernels.fused.encode_chunks_bpe`), each thread in one call without the GIL; the
        calling thread's call returns when every chunk is done, with the ids moved together. A chunk
        whose kernel stopped at a document (the regex needs the memoizing path) is finished here by
        ``encode_docs``; with a normal form, documents not in it are re-encoded as ``encode_docs``
        does (``_in_normal_form``; ``suspect``: as ``encode_docs`` takes it)."""
        n_docs = doc_ends.shape[0]
        max_chunks = threads * CHUNKS_PER_THREAD
        chunks = np.empty((max_chunks, 4), np.int64)
        n_chunks, longest = fused.cut_chunks(doc_starts, doc_ends, max_chunks, CHUNK_BYTES, chunks)
        chunks = chunks[:n_chunks]
        out_ids = np.empty(int(doc_ends[-1] - doc_starts[0]) + fused.CHUNK_SLACK * n_chunks + 1, np.int32)
        doc_out_end = np.empty(n_docs, np.int64)
        counters = np.zeros(COUNTERS, np.int64)
        counters[N_CHUNKS] = n_chunks
        kernel = fused.encode_chunks_bpe
        # a helper meeting this tokenizer for the first time starts from a copy of this thread's
        # cache, not the vocabulary's seed: the pieces this thread has met are the ones the batch has
        # (cold, a helper made two-thread English batches of 40 KB 1.5x slower for the first dozen)
        inherit = [structs.copy_piece_cache(self._thread(longest).cache_arrays)] if self._states < threads else []

        def run(wait: bool) -> int:
            st = self._thread(longest, inherit)
            n = kernel(st.sessions[parse_special], buf, doc_starts, doc_ends, chunks, out_ids, doc_out_end,
                       counters, wait)
            ahead = min(self._widest, HELPER_PREGROW_BYTES)
            if not wait and st.cap < ahead:
                # a helper grows to the caller's size after its share of this batch, not before its
                # share of a later one (growing takes 0.5-0.9 ms, while the caller does every chunk:
                # the helpers of the comparison's Japanese batches grew in about one call of four)
                self._thread(ahead)
            return n

        pool = thread_pool(threads - 1)
        # a helper that fails before claiming a chunk leaves it to the others; one chunk needs none
        helpers = [pool.submit(run, False) for _ in range(threads - 1)] if n_chunks > 1 else []
        n = run(True)
        while n == fused.CHUNKS_RUNNING:
            for helper in helpers:
                if helper.done():
                    helper.result()  # a helper that raised will never finish the chunk it claimed
            n = fused.finish_chunks(doc_starts, chunks, out_ids, doc_out_end, counters)
        if n >= 0:
            return self._in_normal_form(out_ids[:n], doc_out_end, buf, doc_starts, doc_ends, parse_special, set(),
                                        suspect)
        # a chunk stopped at a document: its ids so far, then encode_docs from that document on
        base = doc_starts[chunks[:, 0]] + fused.CHUNK_SLACK * np.arange(n_chunks)
        prev = np.empty(n_docs, np.int64)
        prev[1:] = doc_out_end[:-1]
        prev[chunks[:, 0]] = base
        counts = doc_out_end - prev
        parts = [out_ids[b:e] for b, e in zip(base.tolist(), chunks[:, 3].tolist())]
        done: set[int] = set()
        for c in np.flatnonzero(chunks[:, 2] < chunks[:, 1]).tolist():
            stop, end = int(chunks[c, 2]), int(chunks[c, 1])
            rest, rest_ends = self.encode_docs(buf, doc_starts[stop:end], doc_ends[stop:end], parse_special)
            parts[c] = np.concatenate((parts[c], rest))
            counts[stop:end] = np.diff(rest_ends, prepend=0)
            done.update(range(stop, end))  # encode_docs has brought these into the normal form
        return self._in_normal_form(np.concatenate(parts), np.cumsum(counts), buf, doc_starts, doc_ends,
                                    parse_special, done, suspect)

    def _in_normal_form(self, ids, doc_out_end, buf, doc_starts, doc_ends, parse_special, done, suspect=None):
        """(ids, doc_out_end) with the documents not in the tokenizer's normal form re-encoded
        (``_normal_form_extra``; those in ``done`` are final), when it has one."""
        if self.form is None:
            return ids, doc_out_end
        extra: dict[int, np.ndarray] = {}
        self._normal_form_extra(buf, doc_starts, doc_ends, parse_special, extra, skip=done, suspect=suspect)
        return self._splice(ids, doc_out_end, extra) if extra else (ids, doc_out_end)

    def _normal_form_extra(self, buf: np.ndarray, doc_starts: np.ndarray, doc_ends: np.ndarray,
                           parse_special: bool, extra: dict, skip=(), suspect: np.ndarray | None = None) -> None:
        """Put into ``extra`` the ids of every document not in the tokenizer's normal form (the kernel
        encoded its text as it is): the kernel's ids of its normalization, or the staged pipeline's
        (``_kernel_text``). Documents already in ``extra`` or in ``skip`` are left as they are. Only
        documents the quick check cannot pass (a kernel, without the GIL; or ``suspect``, its
        verdicts from ``prepare_documents``) are checked in full."""
        if suspect is None:
            suspect = np.zeros(doc_ends.shape[0], np.bool_)
            if not normal_form_suspects(buf, doc_starts, doc_ends, quick_check_table(self.form),
                                        quick_check_yes_bits(self.form), suspect):
                return
        elif not suspect.any():
            return
        renormalized = {}
        for d in np.flatnonzero(suspect).tolist():
            if d in extra or d in skip:
                continue
            data = buf[doc_starts[d]:doc_ends[d]].tobytes()
            norm = self._kernel_text(data, parse_special)
            if norm is None:
                extra[d] = self.tok._encode_staged(buf[doc_starts[d]:doc_ends[d]], parse_special,
                                                   want_spans=False)[0]
            elif norm is not data:
                renormalized[d] = norm
        if renormalized:
            # in the form now: the kernel encodes them as one more batch
            keys = list(renormalized)
            n_ids, n_out_end = self.encode_docs(*byte_documents([renormalized[d] for d in keys]), parse_special)
            for i, d in enumerate(keys):
                extra[d] = n_ids[(n_out_end[i - 1] if i else 0):n_out_end[i]]

    def _thread(self, longest: int = 0, inherit: list | None = None) -> _BPEThread:
        """This thread's buffers, made (or made larger) for a document of ``longest`` bytes. A thread's
        first buffers take their cache from ``inherit`` (a list holding one copy of another thread's
        cache arrays, taken by the first thread that needs it) when given, else from the seed; a
        thread of a shared batch (``inherit`` given) starts as large as the largest buffers so far
        (up to ``HELPER_PREGROW_BYTES``)."""
        st = getattr(self._local, "st", None)
        if st is None or st.cap < longest:
            size = max(longest, 2 * st.cap if st is not None else 0)
            workspace = None
            if st is not None:
                cache = (st.cache, st.cache_arrays)
                workspace = st.workspace
            else:
                self._states += 1
                cache = (None, inherit.pop()) if inherit else None
                if inherit is not None:  # a helper: as large as the largest buffers so far
                    size = max(size, min(self._widest, HELPER_PREGROW_BYTES))
            st = self._local.st = _BPEThread(self.model, self.pipes, size, cache, workspace)
            self._widest = max(self._widest, st.cap)
        return st

    def prepare_documents(self, buf: np.ndarray, doc_starts: np.ndarray, doc_ends: np.ndarray) -> dict:
        """With a normal form: the quick check's verdicts (``suspect``), after documents whose marks
        are only out of order were put in the form in ``buf`` (:func:`~tokjit.kernels.normal_form.
        order_marks_in_place`); Python then normalizes only the rest, and nothing is encoded twice."""
        if self._order_marks is None:
            # the form's table is built here, at the first batch, not at load (~0.2 s). Not done when
            # an added token holds a mark: HF matches added tokens in the text before normalizing
            # it, and such a token could match there and not in the form
            self._order_marks = not any(quick_check_table(self.form)[[ord(c) for c in t.content]].any()
                                        for t in self.tok.spec.added_tokens)
        if not self._order_marks:
            return {}
        suspect = np.zeros(doc_ends.shape[0], np.bool_)
        order_marks_in_place(buf, doc_starts, doc_ends, quick_check_table(self.form), quick_check_yes_bits(self.form),
                             suspect, np.zeros(4 * MAX_MARK_RUN, np.uint8), np.zeros(MAX_MARK_RUN, np.int64))
        return {"suspect": suspect}

    def encode_docs(self, buf: np.ndarray, doc_starts: np.ndarray, doc_ends: np.ndarray,
                    parse_special: bool, suspect: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(ids, per-document end offsets into ids) for documents ``buf[doc_starts[i]:doc_ends[i]]``;
        ``suspect``, when given, the quick check's verdicts on them (``prepare_documents``)."""
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
                # a pathological document for the backtracking budget, or added tokens under a rule
                # the kernel leaves to it: the staged path encodes it; the fused kernel resumes after it
                seg = buf[doc_starts[d]:doc_ends[d]]
                ids, _, _ = self.tok._encode_staged(seg, parse_special, want_spans=False)
                extra[d] = ids
                doc_out_end[d] = st.io[0]
                d += 1
        n_written = int(st.io[0])  # before the call below for re-normalized documents reuses st
        if self.form is not None and n_docs:
            self._normal_form_extra(buf, doc_starts, doc_ends, parse_special, extra, suspect=suspect)
        ids = out_ids[:n_written]
        if extra:
            ids, doc_out_end = self._splice(ids, doc_out_end, extra)
        return ids, doc_out_end


