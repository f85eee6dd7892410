"""A tokenizer gives back all its memory when dropped, whatever calls it served.

Kernels hold a tokenizer's arrays through numba structures (``StructRef``) whose lifetime is an NRT
reference count, invisible to Python's garbage collector: a reference taken and never released keeps
a structure and every array in it (a thread's session holds its buffers and piece cache, tens of MB)
alive after the tokenizer is gone. Two checks, over every fused model family (the staged pipeline
holds no structures) and every call path:

- in process: no thread session's reference count grows from one round of calls to the next;
- in a fresh process with numba's allocation statistics on from its start: after load, calls (single, batch on one and two threads, offsets, decode, streaming),
  ``del`` and a collection, as many NRT allocations are live as before the load.
"""

from __future__ import annotations

import gc
import json
import subprocess
import sys

import pytest

import tokjit
from conftest import shared_path

FAMILIES = {
    "byte-level BPE (llama3 tokenizer.json)": ("hf", "llama3", "tokenizer.json"),
    "SentencePiece BPE (llama2 .model)": ("spm", "llama2", "tokenizer.model"),
    "SentencePiece BPE, byte fallback (gemma3 tokenizer.json)": ("hf", "gemma3", "tokenizer.json"),
    "Unigram with charsmap (t5 tokenizer.json)": ("hf", "t5", "tokenizer.json"),
    "WordPiece (bert-minilm tokenizer.json)": ("hf", "bert-minilm", "tokenizer.json"),
}

TEXTS = ["Hello world, how are you?", "日本語のテキストです。", "  def f(x):\n\treturn x + 1\n", "", "x" * 3000] * 20

# run in a subprocess: the calls, then the live NRT allocation counts before load, while loaded, after del
_ROUNDS = r"""
import gc, json, sys
import tokjit
from numba.core.runtime import _nrt_python, rtsys

_nrt_python.memsys_enable_stats()  # before the first allocation; NUMBA_NRT_STATS is read only when NRT starts
texts = json.loads(sys.argv[2])

def live():
    gc.collect()
    stats = rtsys.get_allocation_stats()
    return stats.mi_alloc - stats.mi_free

counts = []
for _ in range(3):
    before = live()
    tok = tokjit.load(sys.argv[1])
    tok.encode(texts[0])
    tok.encode_batch(texts, num_threads=1)
    tok.encode_batch(texts, num_threads=2)
    tok.encode_batch_numpy(texts, num_threads=2)
    tok.encode_with_offsets(texts[1])
    ids = tok.encode(texts[2])
    tok.decode(ids)
    tok.decode_batch([ids, ids])
    stream = tok.decode_stream()
    for i in ids:
        stream.step(i)
    loaded = live()
    del tok, stream
    counts.append((before, loaded, live()))
print(json.dumps(counts))
"""


def _calls(tok) -> None:
    tok.encode(TEXTS[0])
    tok.encode_batch(TEXTS, num_threads=1)
    tok.encode_batch(TEXTS, num_threads=2)
    tok.decode(tok.encode(TEXTS[1]))


def _session_references() -> dict[int, tuple[str, int]]:
    """NRT reference counts of every thread session alive. Only sessions: a pool worker meeting the
    tokenizer for the first time makes a session of its own, which rightly holds one more reference
    to the shared pipeline structures; nothing but its thread's state refers to a session."""
    from numba.experimental.structref import StructRefProxy

    # type(), not isinstance(): the heap may hold dead weak proxies, which raise on isinstance
    return {id(o): (type(o).__name__, o._meminfo.refcount) for o in gc.get_objects()
            if issubclass(type(o), StructRefProxy) and type(o).__name__.endswith("Session")}


@pytest.mark.parametrize("family", list(FAMILIES))
def test_calls_leave_no_session_reference_behind(shared, family):
    """Every call path leaves each session's NRT reference count as it found it (a batch kernel
    compiled without reference counting took one per call from the session it was passed)."""
    tok = tokjit.load(shared_path("data", *FAMILIES[family]))
    _calls(tok)
    before = _session_references()
    assert before, "no session structures found: the check would see nothing"
    for _ in range(3):
        _calls(tok)
    after = _session_references()
    grown = {name: (before[key][1], count) for key, (name, count) in after.items()
             if key in before and count > before[key][1]}
    assert not grown, f"{family}: session reference counts grew over three rounds of calls: {grown}"


@pytest.mark.parametrize("family", list(FAMILIES))
def test_dropped_tokenizer_frees_its_numba_memory(shared, family):
    path = shared_path("data", *FAMILIES[family])
    proc = subprocess.run([sys.executable, "-c", _ROUNDS, str(path), json.dumps(TEXTS)],
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    counts = json.loads(proc.stdout.strip().splitlines()[-1])
    for before, loaded, after in counts:
        assert loaded > before, f"{family}: no NRT allocation seen while loaded ({counts}): the check sees nothing"
        assert after == before, f"{family}: {after - before} NRT allocations outlived the tokenizer ({counts})"
