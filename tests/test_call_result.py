"""The single-text kernels read the str, make the caller's list or array, and hold the GIL only for
short texts.

:mod:`tokjit.kernels.call_result`: every family's single-text kernel, compiled holding the GIL, reads
the str's UTF-8 itself, returns ``encode``'s list (shared ints) or ``encode_to_numpy``'s array made
with the C API, and releases the GIL around the encoding of a long text. Checked against the
reference libraries' ids (texts with lone surrogates and non-ASCII text included), with the path
that builds results in Python (interpreters where the C layout check fails) beside it, and the GIL
seen from another thread.
"""

from __future__ import annotations

import gc
import sys
import threading
import time

import numpy as np
import pytest

import tokjit
from conftest import corpus_lines, shared_path
from test_single_call import NUMPY_FAMILIES, _reference
from tokjit.errors import KernelError
from tokjit.kernels import call_result


def _cpython_with_gil() -> bool:
    return sys.implementation.name == "cpython" and getattr(sys, "_is_gil_enabled", lambda: True)()


def test_results_check_out_here(shared):
    """On CPython with the GIL the kernels make the results (else every test below would measure the
    Python fallback): the check of each tokenizer path's first call passes; without the list
    layout it is not even tried."""
    if not _cpython_with_gil():
        pytest.skip("results are made by the kernel only on CPython with the GIL")
    for make in (lambda: tokjit.get_encoding("o200k_base"),
                 lambda: tokjit.load(shared_path("data", "hf", "t5", "tokenizer.json"))):
        tok = make()
        tok.encode("Hi")
        assert tok._fused._makes is True
    assert call_result.result_io(None)[call_result.IO_MAKES] == 0


def _texts():
    lines = [t for t in corpus_lines(limit_per_file=40) if t]
    return (["", "Hi", " ", "x" * 300, "\u4e2d\u6587" * 50, "caf\u00e9 \U0001f600"] + lines
            + ["\n".join(lines)[:call_result.RELEASE_GIL_BYTES + 500]])


class _Str(str):
    pass


@pytest.mark.parametrize("family", list(NUMPY_FAMILIES))
def test_texts_the_kernel_cannot_read(shared, family):
    """A str with lone surrogates (no UTF-8: its bytes with U+FFFD, as every call takes it) and a str
    subclass give the reference's ids of those texts; bytes and None are refused as before."""
    parts, kind = NUMPY_FAMILIES[family]
    path = str(shared_path("data", *parts))
    ref, parse_special = _reference(kind, path)
    tok = tokjit.load(path)
    for text in ("a\ud800b", "\udfff" * 700 + " tail", "x\ud83d"):
        want = ref(text.encode("utf-16", "surrogatepass").decode("utf-16", "replace"))
        assert tok.encode(text, parse_special=parse_special) == want
        assert tok.encode_to_numpy(text, parse_special=parse_special).tolist() == want
    assert tok.encode(_Str("Hello there"), parse_special=parse_special) == ref("Hello there")
    for bad in (b"Hello", None, 3):
        with pytest.raises(TypeError):
            tok.encode(bad)
        with pytest.raises(TypeError):
            tok.encode_to_numpy(bad)


@pytest.mark.parametrize("family", list(NUMPY_FAMILIES))
def test_kernel_results_match_reference(shared, monkeypatch, family):
    """Lists and arrays from the kernel equal the reference's ids: texts on both sides of the GIL
    threshold, with and without special-token parsing; the int table is attached once per thread's
    buffers (one NOT_BUILT), after which every list comes from the kernel."""
    parts, kind = NUMPY_FAMILIES[family]
    path = str(shared_path("data", *parts))
    ref, parse_special = _reference(kind, path)
    tok = tokjit.load(path)
    codes = []
    recover = type(tok._fused)._recover

    def spy(self, code, st, data, ps):
        codes.append(code)
        return recover(self, code, st, data, ps)

    monkeypatch.setattr(type(tok._fused), "_recover", spy)
    tok.encode(" ".join(_texts()), parse_special=parse_special)  # buffers grown once, up front
    codes.clear()
    for text in _texts():
        want = ref(text)
        got = tok.encode(text, parse_special=parse_special)
        arr = tok.encode_to_numpy(text, parse_special=parse_special)
        assert got == want, text[:60]
        assert type(got) is list and arr.dtype == np.int32 and arr.flags.owndata and arr.tolist() == want
    assert codes.count(call_result.NOT_BUILT) <= 1, codes
    assert codes.count(call_result.NOT_TEXT) == 0, codes


def test_python_fallback_matches_reference(shared, monkeypatch):
    """Where the layout check fails the kernels only count (RESULT_COUNT) and Python builds the
    list or array from the thread's buffer: the same ids."""
    path = str(shared_path("data", "hf", "llama3", "tokenizer.json"))
    ref, _ = _reference("tokenizers", path)
    tok = tokjit.load(path)
    tok._fused._makes = False
    encode = tok._fused._encode_function(None, None, None)
    to_numpy = tok._fused._encode_function(None, None, None, as_array=True)
    for text in _texts():
        arr = to_numpy(text, parse_special=True)
        assert encode(text, parse_special=True) == ref(text) == arr.tolist(), text[:60]
        assert not np.shares_memory(arr, tok._fused._local.st.out)


def test_array_owns_its_memory_and_lists_share_ints(shared):
    """An array is the caller's alone (freed with it: the kernel's reference is the caller's); a
    list holds the int table's objects, whose counts come back when it is dropped."""
    tok = tokjit.get_encoding("o200k_base")
    text = "x" * 300
    arr = tok.encode_to_numpy(text)
    assert sys.getrefcount(arr) == 2  # the name and getrefcount's argument: no slot keeps it
    first = arr.copy()
    arr[:] = -1
    assert tok.encode_to_numpy(text).tolist() == first.tolist()
    ids = tok.encode(text)
    table = tok._fused.int_table(0)
    probe = ids[0]
    del ids
    gc.collect()
    before = sys.getrefcount(table[probe])
    kept = [tok.encode(text) for _ in range(5)]
    during = sys.getrefcount(table[probe])
    uses = sum(x.count(probe) for x in kept)
    del kept
    gc.collect()
    after = sys.getrefcount(table[probe])
    assert during - before == uses and after == before


def test_long_text_releases_the_gil(shared):
    """While one thread encodes a long text, another keeps running Python: the longest pause it
    sees is far below the encoding's time (a kernel holding the GIL would stop it throughout)."""
    tok = tokjit.get_encoding("o200k_base")
    text = "\n".join(corpus_lines(limit_per_file=400)) * 4
    tok.encode(text)  # buffers grown
    stamps = []
    done = threading.Event()

    def ticker():
        while not done.is_set():
            stamps.append(time.perf_counter())

    other = threading.Thread(target=ticker)
    other.start()
    time.sleep(0.02)
    t0 = time.perf_counter()
    ids = tok.encode_to_numpy(text)
    t1 = time.perf_counter()
    done.set()
    other.join()
    inside = [s for s in stamps if t0 <= s <= t1]
    gaps = np.diff([t0] + inside + [t1])
    assert ids.shape[0] > 10000
    assert t1 - t0 > 0.02, "the text should take a while to encode"
    assert gaps.max() < 0.5 * (t1 - t0), (gaps.max(), t1 - t0)


def test_kernel_failure_is_a_typed_error():
    """A kernel that raised (an index out of bounds under NUMBA_BOUNDSCHECK=1) surfaces as KernelError,
    after the kernel took the GIL back."""
    tok = tokjit.get_encoding("o200k_base")
    tok.encode("Hi")
    path = tok._fused
    with pytest.raises(KernelError):
        path._recover(call_result.KERNEL_FAILED, path._local.st, b"Hi", False)


def _run_threads(work, n: int) -> list:
    """Run ``work(k)`` on ``n`` threads; the errors they raised (a thread's error fails its test)."""
    errors = []

    def run(k):
        try:
            work(k)
        except Exception as exc:  # noqa: BLE001 - reported to the test
            errors.append(repr(exc))

    threads = [threading.Thread(target=run, args=(k,)) for k in range(n)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    return errors


def _rows(table) -> int:
    return int(table[call_result.THREADS_COUNT])


def _wait_rows(table, want: int) -> int:
    """The table's row count once it reaches ``want`` (a finished thread's buffers, and so its row,
    go when the interpreter clears its state, just after join() returns), or after a second."""
    for _ in range(100):
        gc.collect()
        if _rows(table) == want:
            break
        time.sleep(0.01)
    return _rows(table)


def test_thread_table_follows_threads(shared, monkeypatch):
    """Each thread's single calls find its own buffers through the path's thread table: with more
    live threads than rows (rows reused, threads adding themselves again), every result is the
    serial one; a thread's row goes with it, and with its old buffers when they are rebuilt."""
    monkeypatch.setattr(call_result, "THREAD_ROWS", 3)
    ref, _ = _reference("tokenizers", str(shared_path("data", "hf", "bert-minilm", "tokenizer.json")))
    tok = tokjit.load(shared_path("data", "hf", "bert-minilm", "tokenizer.json"))
    texts = [t for t in corpus_lines(limit_per_file=30) if t][:40]
    want = [ref(t) for t in texts]
    table = tok._fused.thread_table()
    assert table.shape[0] == call_result.THREADS_FIRST + 3 * call_result.THREAD_WORDS
    assert tok.encode(texts[0], parse_special=True) == want[0]
    assert _rows(table) == 1
    barrier = threading.Barrier(6)
    errors = []

    def work(k):
        for rnd in range(3):
            for i in range(k, len(texts), 6):
                got = tok.encode(texts[i], parse_special=True)
                arr = tok.encode_to_numpy(texts[i], parse_special=True)
                if got != want[i] or arr.tolist() != want[i]:
                    errors.append((k, rnd, i))
            barrier.wait(timeout=30)  # six live threads share three rows between rounds

    errors += _run_threads(work, 6)
    assert errors == []
    assert _wait_rows(table, 1) <= 1  # the main thread's row, at most (it may have been reused)
    # the main thread's buffers rebuilt larger: its row moves to them, the old buffers' row is not kept
    long_text = " ".join(texts) * 20
    assert tok.encode(long_text, parse_special=True) == ref(long_text)
    rows = table[call_result.THREADS_FIRST:].reshape(-1, call_result.THREAD_WORDS)[:_rows(table)]
    st = tok._fused._local.st
    assert [tuple(r) for r in rows] == [(call_result.current_thread_state(), *st.session_addrs)]
    assert tok.encode(texts[1], parse_special=True) == want[1]


def test_first_calls_from_two_threads(shared, monkeypatch):
    """A thread calling while another makes the tokenizer's first single call (and is still finding
    the result kind) gets the reference's ids, as does the first."""
    ref, _ = _reference("tokenizers", str(shared_path("data", "hf", "llama3", "tokenizer.json")))
    tok = tokjit.load(shared_path("data", "hf", "llama3", "tokenizer.json"))
    path_type = type(tok._fused)
    found = path_type._result_kind
    finding = threading.Event()

    def slowly(self, entry, as_array):
        finding.set()
        time.sleep(0.05)  # the second thread calls meanwhile
        return found(self, entry, as_array)

    monkeypatch.setattr(path_type, "_result_kind", slowly)
    texts = [t for t in corpus_lines(limit_per_file=5) if t][:10]
    results = {}

    def work(k):
        if k == 1:
            assert finding.wait(timeout=30)
        results[k] = [tok.encode(t, parse_special=True) for t in texts]

    assert _run_threads(work, 2) == []
    assert results[0] == results[1] == [ref(t) for t in texts]


def test_forgetting_buffers_drops_every_row_that_names_them():
    """A thread table row names a thread state and its buffers; when the buffers go, every row that
    names both goes (two can exist if a finalizer ran inside another thread's registration), and
    rows of other buffers or other threads stay, in any order."""
    from tokjit.fused.driver import _forget_row
    from tokjit.kernels.call_result import THREAD_ROWS, THREAD_WORDS, THREADS_COUNT, THREADS_FIRST

    table = np.zeros(THREADS_FIRST + THREAD_ROWS * THREAD_WORDS, np.int64)
    rows = table[THREADS_FIRST:].reshape(-1, THREAD_WORDS)
    written = [(7, 100, 1), (8, 200, 2), (7, 100, 3), (7, 300, 4), (9, 100, 5), (7, 100, 6)]
    for i, row in enumerate(written):
        rows[i] = row
    table[THREADS_COUNT] = len(written)
    _forget_row(table, 7, 100)
    kept = {tuple(r) for r in rows[:int(table[THREADS_COUNT])].tolist()}
    assert kept == {(8, 200, 2), (7, 300, 4), (9, 100, 5)}
    assert not rows[int(table[THREADS_COUNT]):].any()
