"""The one driver of every fused family: a single text, or a batch split over threads.

Each family (:mod:`tokjit.fused.bpe`, ``spm``, ``unigram``, ``wordpiece``) compiles its tokenizer once
into numba structures and gives this driver a text kernel and a batch method; the driver owns the call
protocol (raw entry point, negative codes, staged fallback) and the batch threading.

Threading: each Python thread works on its own contiguous chunk of documents with its own
workspaces and calls the ``nogil`` kernel once per chunk; no numba ``parallel`` code is involved,
so concurrent calls from many Python threads are safe.
"""

from __future__ import annotations

import gc
import sys
import weakref
from unicodedata import is_normalized

import numpy as np

from tokjit.errors import KernelError
from tokjit.fused.call_object import arm, arm_quick_check, builtin_encode
from tokjit.fused.threads import list_items_offset, str_layout, utf8_bytes
from tokjit.kernels import fused, pylist, pystr
from tokjit.kernels.call_result import (IO_MAKES, IO_TABLE, KERNEL_FAILED, NOT_BUILT, NOT_TEXT, PARSE_SPECIAL, RAW,
                                        RESULT_ARRAY, RESULT_COUNT, RESULT_LIST, SESSION_GIVEN, TEXT_IS_BYTES,
                                        THREAD_WORDS, THREADS_COUNT, THREADS_FIRST, attach,
                                        current_thread_state, entry_point, thread_table)
from tokjit.kernels.normal_form import quick_check_table, quick_check_yes_bits
from tokjit.thread_pool import thread_pool


# An id list at least this long is built from one shared Python int per id (``FusedPath.id_list``)
BIG_LIST = 1 << 16

# Waking a pooled thread and handing it a chunk costs ~50-100 us on a 2-core VM (up to ~0.3 ms
# measured); below this many bytes per thread (~0.2-0.4 ms of work) a batch runs on fewer threads.
# Two threads of 16-24 KB each ran 12-31% faster than one thread (llama3, o200k; Chinese, Japanese,
# Russian, English), and 39 KB of code +4%
MIN_BYTES_PER_THREAD = 16 * 1024
CHUNKS_PER_THREAD = 4


def doc_sizes(doc_starts: np.ndarray, doc_ends: np.ndarray) -> tuple[int, int, int]:
    """(number of documents, longest, total bytes). A few documents are measured in Python: numpy's
    reductions cost ~1.5 us each on small arrays, a tenth of a call for a batch of short sentences."""
    n_docs = doc_ends.shape[0]
    if n_docs <= 16:
        lengths = [e - s for s, e in zip(doc_starts.tolist(), doc_ends.tolist())]
        return n_docs, max(lengths, default=0), sum(lengths)
    lengths = doc_ends - doc_starts
    return n_docs, int(lengths.max()), int(lengths.sum())


class FusedPath:
    """The one driver of every fused family.

    Single text (``encode_list``, and the tokenizer's ``encode`` / ``encode_to_numpy`` built by
    ``make_encode``): the family's ``text_kernel(first, text, result)`` runs through its raw entry
    point, finds this thread's buffers (``_thread``) in the path's thread table at ``first``, takes
    the str itself and returns the ids as the caller's list or array
    (:mod:`tokjit.kernels.call_result`), or a negative code that ``_settle`` answers (a row in the
    table, larger buffers, the text's bytes, or the staged pipeline for this text).
    Batch (``encode_texts``): one buffer cut into contiguous chunks of about equal bytes, one chunk
    per thread, each through the family's ``encode_docs``; documents the kernel hands back are encoded
    by the staged pipeline and spliced in (``_splice``).

    A family sets ``tok``, ``text_kernel`` and ``_local`` (a ``threading.local``), and
    implements ``_thread(longest=0)`` (a state with ``sessions``, indexed by parse_special, their
    ``session_addrs`` (:func:`~tokjit.kernels.structs.addresses`), the ids buffer as ``out``,
    int32, ``out_view``, its memoryview, and ``io``, the kernels' int64 array) and ``encode_docs``."""

    text_kernel = None
    form = None  # a Unicode normal form ("NFC", ...) the text must already be in for the kernel's ids
    # (buf, doc_starts, doc_ends, parse_special, threads) -> (ids, ends): a family whose kernel shares a
    # batch between threads by itself (FusedBPE.encode_chunks); None: chunks are handed out in Python
    encode_chunks = None
    min_bytes_per_thread = MIN_BYTES_PER_THREAD  # below this many bytes per thread, fewer threads
    _int_table = np.empty(0, object)

    def id_list(self, ids: np.ndarray) -> list[int]:
        """``ids.tolist()`` for outputs of ``BIG_LIST`` ids or more (the callers choose): the list holds
        shared ints from a table of every id (an object array, grown on demand) instead of one new int
        per id. A million new ints make CPython's allocator take fresh memory, superlinearly (19 ms for
        1M ids against 1.5 ms for 100K); the table's copy takes 5 ms (0.9 ms)."""
        return self.int_table(int(ids.max()) + 1).take(ids).tolist()

    def int_table(self, top: int) -> np.ndarray:
        """An object array holding the int ``i`` at ``i`` for every ``i < top`` at least (grown on
        demand, kept): the ints id lists share."""
        table = self._int_table
        if top > table.shape[0]:
            table = np.empty(max(top, 2 * table.shape[0]), object)
            table[:] = range(table.shape[0])
            self._int_table = table
        return table

    def id_lists(self, flat: np.ndarray, offsets: np.ndarray) -> list[list[int]]:
        """One list of ids per text (``flat[offsets[k]:offsets[k + 1]]``): built by a kernel from the
        shared ints of ``int_table`` where the interpreter allows (:mod:`tokjit.kernels.pylist`), else
        from a memoryview slice per text (or shared ints, from ``BIG_LIST`` ids on)."""
        n = offsets.shape[0] - 1
        api = _list_api()
        if api is not None and n > 0:
            table = self.int_table(int(flat.max()) + 1 if flat.shape[0] else 0)
            out = [None] * n
            if pylist.build_lists(api, id(out), n, flat, offsets, table.ctypes.data, table.shape[0]) == 0:
                return out
        bounds = zip(offsets[:-1].tolist(), offsets[1:].tolist())
        if flat.shape[0] < BIG_LIST:
            # one list per text straight from the ids (a memoryview slice each): no list of every id
            # first, whose slices copied the ids again (7-27% of the list building)
            view = memoryview(flat)
            return [view[a:b].tolist() for a, b in bounds]
        ids = self.id_list(flat)
        return [ids[a:b] for a, b in bounds]

    def encode_list(self, text: str, parse_special: bool) -> list[int]:
        """Ids of one text as a list: one kernel call on this thread's buffers, no allocation."""
        try:
            plain = self._plain_encode
        except AttributeError:
            plain = self._plain_encode = self._encode_function(None, None, None)
        return plain(text, parse_special=parse_special)

    def make_encode(self, general, post_process, metrics, as_array: bool = False):
        """The tokenizer's ``encode`` as one function over this path (``encode_list`` inlined: a Python
        frame and a few attribute reads less per call, ~8% of ``encode("Hi")``). ``general`` is the
        tokenizer's own ``encode`` (taken while ``metrics.ACTIVE`` is set, so every call is counted).
        With ``as_array`` it is ``encode_to_numpy`` instead: ``general`` and ``post_process`` are then
        the array versions.

        Where the interpreter allows, the function returned is a built-in over that function
        (:mod:`tokjit.fused.call_object`): once armed by the first call, it calls the kernel itself for
        ``encode(text)`` and ``encode(text, parse_special=b)`` and hands every other call to the
        Python function (~40% of ``encode("Hi")`` less)."""
        state_ref = []
        function = self._encode_function(general, post_process, metrics, as_array, state_ref)
        name = "encode_to_numpy" if as_array else "encode"
        # the built-in cannot check a normal form until armed: with one, it takes ASCII str only (in
        # every form), then, after the first str that is not ASCII, str the form's quick check passes
        builtin, state = builtin_encode(function, name, general.__doc__ if general else None, metrics.GATE,
                                        ascii_only=self.form is not None)
        if state is not None:
            state_ref.append(weakref.ref(state))
        return builtin

    def _encode_function(self, general, post_process, metrics, as_array: bool = False, state_ref=()):
        """``encode(text, *, add_special_tokens, parse_special)`` over this path; without ``metrics``
        (``encode_list``) it neither counts nor post-processes. One kernel call: it finds the calling
        thread's buffers in the path's thread table, takes the str and returns the ids as a list, or
        with ``as_array`` as a new int32 array (:mod:`tokjit.kernels.call_result`); any other answer
        (an int) goes to ``_settle``. Where the interpreter does not allow the kernel to make the
        list or array, every call goes through ``_settle``, which makes them from the thread's ``out``.
        ``state_ref`` holds a weak reference to the built-in's state the first call arms, if any."""
        path, form = self, self.form
        staged = _int32_array if as_array else _same  # what the ids of the staged fallback become
        first = self.thread_table().ctypes.data  # the table is kept alive by the path
        entry = kind = None  # the kernel's entry point and result kind, found at the first call

        quick_check_armed = form is None  # the built-in's quick check, armed at the first str not ASCII

        def encode(text: str, *, add_special_tokens: bool = False, parse_special: bool = False):
            nonlocal entry, kind, quick_check_armed
            if metrics is not None and metrics.ACTIVE is not None:
                return general(text, add_special_tokens=add_special_tokens, parse_special=parse_special)
            if not quick_check_armed and type(text) is str and not text.isascii():
                # the form's table is built now (~0.2 s, once a process), not at load
                quick_check_armed = True
                state = state_ref[0]() if state_ref else None
                if state is not None:
                    arm_quick_check(state, quick_check_table(form), quick_check_yes_bits(form))
            if form is not None and not (type(text) is str and is_normalized(form, text)):
                # the kernel has no normalizer: text not already in the tokenizer's normal form (a
                # quick C scan says) is normalized here when no added token makes that differ from
                # the staged pipeline (_kernel_text), else encoded by the staged pipeline
                data = utf8_bytes(text)
                norm = path._kernel_text(data, parse_special) if type(text) is str else None
                if norm is None or norm is data:
                    # the staged pipeline itself: the family's _encode_staged would normalize again
                    out = staged(FusedPath._encode_staged(path, data, parse_special) if type(text) is str
                                 else path._encode_staged(data, parse_special))
                    return post_process(out) if add_special_tokens else out
                text = norm.decode("utf-8")
            if entry is None:
                # kind before entry: a thread that finds entry set must find kind set too
                found = text_kernel_entry(path.text_kernel)
                kind = path._result_kind(found, as_array)
                entry = found
                state = state_ref[0]() if state_ref else None
                if kind and state is not None:
                    arm(state, text_kernel_address(path.text_kernel), first, kind)
            out = entry(first, text, kind | PARSE_SPECIAL if parse_special else kind) if kind else 0
            if type(out) is int:
                out = path._settle(entry, text, kind, parse_special, as_array)
                if type(out) is list and as_array:
                    out = staged(out)
            return post_process(out) if add_special_tokens else out

        if general is not None:
            encode.__doc__ = general.__doc__
        return encode

    def _result_kind(self, entry, as_array: bool) -> int:
        """RESULT_ARRAY or RESULT_LIST where the kernel's results checked out (``_results_check``,
        once per path), else RESULT_COUNT."""
        makes = getattr(self, "_makes", None)
        if makes is None:
            makes = self._makes = self._results_check(entry)
        return RESULT_COUNT if not makes else RESULT_ARRAY if as_array else RESULT_LIST

    def _results_check(self, entry) -> bool:
        """Whether the kernel's array and list of a sample text are the ones numpy and ``tolist()``
        make of its ids (an owned, writable int32 array; a list of the int table's objects, their
        references counted): the C layouts the kernel relies on hold on this interpreter. Checked
        through the family's own kernel, so no kernel is compiled for it."""
        st = self._thread()
        if not st.io[IO_MAKES]:
            return False
        try:
            address = st.session_addrs[0]
            sample = "Hello world, 12345 tokens!"
            n = entry(address, sample, RESULT_COUNT | SESSION_GIVEN)
            if type(n) is not int or n < 0:  # a text this tokenizer cannot take: check on no ids
                sample = ""
                n = entry(address, sample, RESULT_COUNT | SESSION_GIVEN)
            ids = st.out[:n].tolist()
            arr = entry(address, sample, RESULT_ARRAY | SESSION_GIVEN)
            if type(arr) is not np.ndarray or arr.dtype != np.int32 or arr.ndim != 1 or arr.tolist() != ids \
                    or not (arr.flags.owndata and arr.flags.c_contiguous and arr.flags.writeable) \
                    or sys.getrefcount(arr) != 2:
                return False
            self._share_ints(st)
            counted = sorted({i for i in ids if 256 < i < st.table.shape[0]})  # small ints may be immortal
            before = [sys.getrefcount(st.table[i]) for i in counted]
            made = entry(address, sample, RESULT_LIST | SESSION_GIVEN)
            if type(made) is not list or made != ids or gc.is_tracked(made) \
                    or any(x is not st.table[i] for x, i in zip(made, ids)):
                return False
            uses = [sys.getrefcount(st.table[i]) - b - made.count(i) for i, b in zip(counted, before)]
            del made
            return not any(uses) and [sys.getrefcount(st.table[i]) for i in counted] == before
        except Exception:  # noqa: BLE001 - any surprise means: Python makes the results
            return False

    def _share_ints(self, st) -> None:
        """Point thread state ``st``'s kernels at the int table (kept by ``st``): their lists hold its ints."""
        st.table = self.int_table(self.tok.vocab_size + 1)
        attach(st.io, st.table)

    def thread_table(self) -> np.ndarray:
        """The path's thread table (:data:`~tokjit.kernels.call_result.THREADS_COUNT` ...), made once."""
        try:
            return self._thread_table
        except AttributeError:
            self._thread_table = thread_table()
            return self._thread_table

    def _register(self, st) -> None:
        """Give the calling thread's row of the thread table the sessions of ``st`` (its buffers,
        new or rebuilt larger). When every row is taken one is reused (its thread adds itself again
        on its next call). The row goes when ``st`` goes (its thread ended, or its buffers were
        rebuilt): a later thread with the same PyThreadState address never finds buffers that are gone."""
        table = self.thread_table()
        state = current_thread_state()
        rows = table[THREADS_FIRST:].reshape(-1, THREAD_WORDS)
        count = int(table[THREADS_COUNT])
        mine = np.flatnonzero(rows[:count, 0] == state)
        if mine.shape[0]:
            row = int(mine[0])
        elif count < rows.shape[0]:
            row = count
            table[THREADS_COUNT] = count + 1
        else:
            self._evictions = row = (getattr(self, "_evictions", -1) + 1) % rows.shape[0]
        rows[row] = (state, st.session_addrs[0], st.session_addrs[1])
        if not getattr(st, "in_thread_table", False):
            st.in_thread_table = True
            weakref.finalize(st, _forget_row, table, state, st.session_addrs[0]).atexit = False

    def _settle(self, entry, text, kind: int, parse_special: bool, as_array: bool):
        """The ids of ``text`` when the kernel answered with an int: the call again on this thread's
        buffers, given by their address (SESSION_GIVEN), after the answer's remedy: a row in the
        thread table, the text's bytes (a str with lone surrogates), larger buffers, the int table
        for lists; or the ids from the staged pipeline, or from ``out`` when the kernel only counts."""
        st = self._thread()
        uses_table = kind != RESULT_COUNT  # the kernel looks the thread up only when it makes results
        if uses_table:
            self._register(st)
        kind |= SESSION_GIVEN
        data = text
        while True:
            out = entry(st.session_addrs[parse_special], data, kind)
            if type(out) is not int:
                return out
            if out >= 0:
                n = out
                break
            if out == NOT_TEXT:
                data = utf8_bytes(text)  # lone surrogates become U+FFFD; a non-str raises here
                kind |= TEXT_IS_BYTES
                continue
            st = self._recover(out, st, data if type(data) is bytes else utf8_bytes(text), parse_special)
            if type(st) is list:
                return st
            if uses_table:
                self._register(st)
        if as_array:
            return st.out[:n].copy()
        return st.out_view[:n].tolist() if n < BIG_LIST else self.id_list(st.out[:n])

    def _recover(self, code: int, st, data: bytes, parse_special: bool):
        """After a negative ``text_kernel`` result: the thread state to retry with, or the ids (a list)."""
        if code == fused.GROW:
            return self._thread(len(data))
        if code == NOT_BUILT:
            # the ids are in the thread's buffer; a list needs the int table, attached here once per
            # thread buffers (the kernel then builds the lists of later calls)
            if st.io[IO_TABLE] == 0:
                self._share_ints(st)
            n = int(st.io[0])
            return st.out_view[:n].tolist() if n < BIG_LIST else self.id_list(st.out[:n])
        if code == KERNEL_FAILED:
            raise KernelError(f"the single-text kernel of {type(self).__name__} raised for this text (with "
                              "NUMBA_BOUNDSCHECK=1: an index out of bounds); please report it with the text")
        # FALLBACK: the staged pipeline encodes this text (or raises its error)
        return self._encode_staged(data, parse_special)

    def _encode_staged(self, data: bytes, parse_special: bool) -> list[int]:
        ids, _, _ = self.tok._encode_staged(np.frombuffer(bytearray(data), np.uint8), parse_special,
                                            want_spans=False)
        return ids.tolist()

    @staticmethod
    def _splice(ids, doc_out_end, extra):
        """Replace the ids of documents ``extra`` (whatever the kernel wrote for them) with ``extra[d]``.
        The runs of kernel ids between them are copied whole: a batch of thousands of lines with one
        line to splice costs a few slices, not one per document."""
        starts = np.empty_like(doc_out_end)
        starts[0] = 0
        starts[1:] = doc_out_end[:-1]
        lengths = doc_out_end - starts
        parts, prev = [], 0
        for d in sorted(extra):
            parts.append(ids[prev:starts[d]])
            parts.append(extra[d])
            lengths[d] = extra[d].shape[0]
            prev = doc_out_end[d]
        parts.append(ids[prev:doc_out_end[-1]])
        return np.concatenate(parts).astype(np.int32), np.cumsum(lengths)

    def prepare_documents(self, buf: np.ndarray, doc_starts: np.ndarray, doc_ends: np.ndarray) -> dict:
        """Work a family does on a batch's packed text before encoding it (``buf`` is the batch's own
        copy, which it may rewrite): the keyword arguments its ``encode_docs`` and ``encode_chunks``
        then take for this batch. None by default."""
        return {}

    def encode_texts(self, texts, parse_special: bool, num_threads: int):
        """(flat ids, offsets of len(texts) + 1) for a list of str, over up to ``num_threads`` threads.

        A family with ``encode_chunks`` shares the batch between threads in its kernel. Otherwise a
        batch is cut into contiguous chunks of about equal bytes, ``CHUNKS_PER_THREAD`` per thread
        so a thread that finishes early takes another; the calling thread works too, and each other
        thread is woken once and pulls chunks until none are left. Fewer threads run when the batch
        is too small to pay for waking them (``min_bytes_per_thread``)."""
        buf, doc_starts, doc_ends = utf8_documents(texts)
        n = doc_starts.shape[0]
        offsets = np.zeros(n + 1, np.int64)
        if n == 0:
            return np.zeros(0, np.int32), offsets
        total = int(doc_ends[-1])
        threads = max(1, min(num_threads, n, total // self.min_bytes_per_thread))
        if threads == 1 or self.encode_chunks is not None:
            known = self.prepare_documents(buf, doc_starts, doc_ends)
            ids, ends = (self.encode_docs(buf, doc_starts, doc_ends, parse_special, **known) if threads == 1 else
                         self.encode_chunks(buf, doc_starts, doc_ends, parse_special, threads, **known))
            offsets[1:] = ends
            return ids, offsets
        cut = np.empty((threads * CHUNKS_PER_THREAD, 4), np.int64)
        n_chunks = fused.cut_chunks(doc_starts, doc_ends, cut.shape[0], 1, cut)[0]
        bounds = cut[:n_chunks, :2].tolist()
        results = [None] * n_chunks
        chunks = iter(range(n_chunks))  # next() on a range iterator is atomic under the GIL

        def work():
            for i in chunks:
                lo, hi = bounds[i]
                results[i] = self.encode_docs(buf, doc_starts[lo:hi], doc_ends[lo:hi], parse_special)

        pool = thread_pool(threads - 1)
        helpers = [pool.submit(work) for _ in range(threads - 1)]
        work()
        for helper in helpers:
            helper.result()  # re-raises a helper's exception
        base = 0
        for (lo, hi), (ids, ends) in zip(bounds, results):
            offsets[lo + 1:hi + 1] = ends + base
            base += ids.shape[0]
        return np.concatenate([r[0] for r in results]), offsets


def utf8_documents(texts) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(writable uint8 buffer, starts, ends) of the UTF-8 of ``texts``; lone surrogates become U+FFFD
    (``text_to_utf8``). The buffer is writable so every kernel sees one array type. A list of plain
    str is read by a kernel (:mod:`tokjit.kernels.pystr`) where the interpreter's str layout checks out;
    anything else goes through ``str.encode``."""
    layout = str_layout()
    if layout is not None and type(texts) is list:
        n = len(texts)
        sizes = np.empty(n, np.int64)
        total = pystr.measure_texts(id(texts), n, layout, sizes)
        if total >= 0:
            buf = np.empty(total, np.uint8)
            starts = np.empty(n, np.int64)
            ends = np.empty(n, np.int64)
            written = pystr.pack_texts(id(texts), n, layout, buf, starts, ends)
            if written >= 0:
                return buf[:written], starts, ends
    return byte_documents(utf8_list(texts))


_LIST_API: list = []


def _list_api():
    """The C functions and offsets ``pylist.build_lists`` takes (checked once), or None."""
    if not _LIST_API:
        items = list_items_offset()
        api = pylist.api_addresses(items) if items is not None else None
        _LIST_API.append(api if api is not None and pylist.lists_ok(api) else None)
    return _LIST_API[0]


def utf8_list(texts) -> list[bytes]:
    """The UTF-8 of each of ``texts`` (lone surrogates as U+FFFD)."""
    try:
        return list(map(str.encode, texts))  # no Python frame per text, as a comprehension has
    except (UnicodeEncodeError, TypeError):
        return [utf8_bytes(t) for t in texts]


def byte_documents(parts: list[bytes]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(writable uint8 buffer, starts, ends) of documents already encoded as UTF-8."""
    lengths = np.fromiter(map(len, parts), np.int64, count=len(parts))
    doc_ends = np.cumsum(lengths)
    # bytearray's join builds the writable buffer in one copy (b"".join, then bytearray(), made two)
    return np.frombuffer(bytearray().join(parts), np.uint8), doc_ends - lengths, doc_ends


def _forget_row(table: np.ndarray, state: int, session_address: int) -> None:
    """Drop every row of the thread table that holds thread ``state`` with ``session_address`` (buffers
    being freed); the last row takes each one's place. (One is written per buffers, but a finalizer
    running inside another thread's ``_register`` could leave a second: none may outlive them.)"""
    count = int(table[THREADS_COUNT])
    rows = table[THREADS_FIRST:].reshape(-1, THREAD_WORDS)
    row = 0
    while row < count:
        if rows[row, 0] == state and rows[row, 1] == session_address:
            count -= 1
            rows[row] = rows[count]
            rows[count] = 0
            table[THREADS_COUNT] = count
        else:
            row += 1


def _same(ids: list[int]) -> list[int]:
    return ids


def _int32_array(ids: list[int]) -> np.ndarray:
    return np.array(ids, np.int32)


def text_kernel_address(dispatcher) -> int:
    """The C entry of a single-text kernel's compiled overload, ``object *f(int64 first, object *text,
    int64 result)``: numba's cfunc wrapper of the native function, compiled with it (kept in numba's
    cache with it too), so the built-in calls (:mod:`tokjit.fused.call_object`) compile nothing more."""
    from numba import types
    overload = dispatcher.overloads[(types.int64, RAW, types.int64)]
    return overload.library.get_pointer_to_function(overload.fndesc.llvm_cfunc_wrapper_name)


def text_kernel_entry(dispatcher):
    """The compiled entry point of a single-text kernel, ``(first, text, result) -> object``
    (its text and value are Python objects passed through, :data:`~tokjit.kernels.call_result.RAW`)."""
    from numba import types
    return entry_point(dispatcher, (types.int64, RAW, types.int64))
