"""Id lists built by a kernel from shared ints (``tokjit.kernels.pylist``): ``encode_batch`` gives
tiktoken's ids as ordinary lists, every reference it takes to a shared int is given back when the
lists go, and ids without an int are refused without leaking a list."""

from __future__ import annotations

import gc
import sys
import weakref

import numpy as np
import pytest

import tokjit
from conftest import corpus_lines, o200k_reference
from tokjit.fused import driver
from tokjit.kernels import pylist


@pytest.fixture(scope="module")
def api():
    api = driver._list_api()
    if api is None:
        if sys.implementation.name == "cpython" and getattr(sys, "_is_gil_enabled", lambda: True)():
            pytest.fail("the list kernel should be usable on CPython with the GIL")
        pytest.skip("the list kernel needs CPython's C API")
    return api


def _counts(table, indices):
    # read into plain ints first: pytest's assertion rewriting keeps the operands of an assert alive
    return [sys.getrefcount(table[i]) for i in indices]


def test_encode_batch_lists_match_tiktoken(shared, api):
    ref = o200k_reference()
    tok = tokjit.get_encoding("o200k_base")
    texts = corpus_lines(limit_per_file=200) + ["", "", "x"]
    got = tok.encode_batch(texts, num_threads=1)
    assert got == ref.encode_ordinary_batch(texts, num_threads=1)
    assert all(type(x) is list for x in got) and len({id(x) for x in got}) == len(got)
    got[0].append("mine")  # each list is the caller's own
    assert "mine" not in got[1]


def test_references_are_given_back(api):
    path = tokjit.get_encoding("o200k_base")._fused
    table = path.int_table(1000)
    # ints above 256: CPython's small ints are shared by everything, their counts move by themselves
    ids = np.array([300, 999, 300, 500, 300], np.int32)
    offsets = np.array([0, 2, 2, 5], np.int64)
    before = _counts(table, (300, 500, 999))
    lists = path.id_lists(ids, offsets)
    during = _counts(table, (300, 500, 999))
    same = lists == [[300, 999], [], [300, 500, 300]]
    del lists
    gc.collect()
    after = _counts(table, (300, 500, 999))
    assert same
    assert during == [before[0] + 3, before[1] + 1, before[2] + 1]
    assert after == before


def test_ids_without_an_int_are_refused(api):
    table = np.empty(10, object)
    table[:] = [int(x) for x in range(5000, 5010)]
    before = _counts(table, (2,))
    outer = [None, None]
    ids = np.array([2, 2, 10], np.int32)  # 10 is past the table
    result = pylist.build_lists(api, id(outer), 2, ids, np.array([0, 2, 3], np.int64), table.ctypes.data, 10)
    kept = outer[0] == [5002, 5002] and outer[1] is None
    del outer
    gc.collect()
    after = _counts(table, (2,))
    assert result == -1 and kept
    assert after == before


def test_single_call_lists_match_tiktoken(shared, api):
    """encode() lists are made by the single-text kernel from the shared ints
    (:mod:`tokjit.kernels.call_result`): equal to tiktoken's ids, the caller's own list, the shared
    ints' references given back."""
    ref = o200k_reference()
    tok = tokjit.get_encoding("o200k_base")
    texts = [t for t in corpus_lines(limit_per_file=100) if t] + ["word " * 5000, "x" * 100]
    for text in texts:
        got = tok.encode(text)
        assert got == ref.encode_ordinary(text)
    table = tok._fused.int_table(0)
    probe = tok.encode("x" * 300)  # ids of "x" runs, past 256 (not CPython's small ints)
    assert all(i > 256 for i in probe) and all(i is table[i] for i in probe)
    probed = sorted(set(probe))
    del probe
    gc.collect()
    before = _counts(table, probed)
    lists = [tok.encode("x" * 300) for _ in range(3)]
    during = _counts(table, probed)
    uses = sum(len(x) for x in lists)
    lists[0].append(-1)
    same = lists[1] == lists[2] and lists[0][:-1] == lists[1] and lists[1] is not lists[2]
    del lists
    gc.collect()
    assert same and sum(during) - sum(before) == uses and _counts(table, probed) == before


class _Held:
    """An object that can be watched through a weak reference."""


def test_id_lists_are_left_to_reference_counting(shared, api):
    """Batch and single-call lists are untracked by the cycle collector (they hold ints only; each
    collection would traverse them), and whatever a caller puts into one is still held by it
    through every collection."""
    tok = tokjit.get_encoding("o200k_base")
    texts = [t for t in corpus_lines(limit_per_file=50) if t][:100]
    assert len(texts) > 64  # past the few short texts that single calls answer
    batch = tok.encode_batch(texts, num_threads=1)
    single = tok.encode(texts[0])
    assert batch[0] == single
    assert gc.is_tracked(batch)  # the outer list is the caller's ordinary list
    assert not any(gc.is_tracked(x) for x in batch) and not gc.is_tracked(single)
    held = _Held()
    watch = weakref.ref(held)
    held.ids = batch[1]  # a cycle the collector cannot see: the list is kept by reference counts
    batch[1].append(held)
    single.append({"held": held})
    del held
    gc.collect()
    assert watch() is not None and batch[1][-1] is watch() and single[-1]["held"] is watch()
