"""Byte-level BPE batches shared between threads by the kernel (``FusedBPE.encode_chunks``).

A batch of 16 KB or more on two threads is cut into chunks that each thread's kernel claims; the ids
are moved together at the end. These tests compare every text's ids with the reference library's
(HF ``tokenizers`` on the same tokenizer.json, tiktoken for the bundled encoding), on corpus lines
mixed with documents the kernel hands back to the staged pipeline (its regex needs the memoizing
path), so both ways a chunk can end are covered.
"""

from __future__ import annotations

import json
import random

import numpy as np
import pytest

import tokjit
from conftest import corpus_lines, o200k_reference, shared_path
from tokjit.kernels import fused as fused_kernel

# a split regex the kernel runs on its backtracking VM (no known shape): long letter runs exceed its
# step budget, and such documents go back to the staged pipeline
_VM_SPLIT = r"(?:\p{L}\p{M}*)+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+|\s+"


def _lists(flat, offsets):
    return [flat[a:b].tolist() for a, b in zip(offsets[:-1].tolist(), offsets[1:].tolist())]


def _spy_finish(monkeypatch, path):
    """Every outcome of the chunk kernels' last step from now on: the caller's kernel call, or, when
    its bounded spin ran out before the helpers finished (CHUNKS_RUNNING, on a loaded machine), the
    ``finish_chunks`` call that ended the caller's wait."""
    seen: list[int] = []
    kernel, finish = fused_kernel.encode_chunks_bpe, fused_kernel.finish_chunks

    class Spy:
        def __init__(self, fn, last_step):
            self.fn, self.last_step = fn, last_step

        def __call__(self, *args):
            n = self.fn(*args)
            if self.last_step(args) and n != fused_kernel.CHUNKS_RUNNING:
                seen.append(n)
            return n

    monkeypatch.setattr(fused_kernel, "encode_chunks_bpe", Spy(kernel, lambda args: args[-1]))
    monkeypatch.setattr(fused_kernel, "finish_chunks", Spy(finish, lambda args: True))
    return seen


def test_two_thread_batches_match_tiktoken(shared):
    ref = o200k_reference()
    tok = tokjit.get_encoding("o200k_base")
    lines = corpus_lines()
    rng = random.Random(7)
    for size in (33_000, 100_000, 400_000):
        batch, n = [], 0
        while n < size:
            line = rng.choice(lines)
            batch.append(line)
            n += len(line.encode("utf-8", "surrogatepass"))
        want = ref.encode_ordinary_batch(batch, num_threads=1)
        assert _lists(*tok.encode_batch_numpy(batch, num_threads=2)) == want, size
        assert tok.encode_batch(batch, num_threads=2) == want, size


def test_two_thread_batches_with_handed_back_documents(shared, tmp_path, monkeypatch):
    hf = pytest.importorskip("tokenizers")
    data = json.loads(shared_path("data", "hf", "gpt4o", "tokenizer.json").read_text(encoding="utf-8"))
    for pre in data["pre_tokenizer"]["pretokenizers"]:
        if pre["type"] == "Split":
            pre["pattern"] = {"Regex": _VM_SPLIT}
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    ref = hf.Tokenizer.from_file(str(path))
    tok = tokjit.load(str(path))
    seen = _spy_finish(monkeypatch, tok._fused)
    lines = [t for t in corpus_lines(limit_per_file=300) if t]
    hard = ["a" * 3000, "é" * 2000 + " 12345", "ab" * 700 + " x"]
    rng = random.Random(11)
    for size in (60_000, 200_000):
        batch = []
        while sum(len(t.encode("utf-8", "surrogatepass")) for t in batch) < size:
            batch.append(rng.choice(hard) if rng.random() < 0.05 else rng.choice(lines))
        batch[0], batch[-1] = hard[0], hard[1]  # the first and the last chunk stop too
        want = [ref.encode(t, add_special_tokens=False).ids for t in batch]
        seen.clear()
        assert _lists(*tok.encode_batch_numpy(batch, num_threads=2, parse_special=True)) == want
        assert tok.encode_batch(batch, num_threads=2, parse_special=True) == want
        assert fused_kernel.CHUNKS_STOPPED in seen  # the kernel handed documents back
        assert len(seen) == 2  # one chunk stage per call
    # and a batch it finishes alone: ids moved together by the kernel
    plain = [t for t in batch if t not in hard]
    seen.clear()
    assert tok.encode_batch(plain, num_threads=2, parse_special=True) == [
        ref.encode(t, add_special_tokens=False).ids for t in plain]
    assert seen and all(n >= 0 for n in seen)


def test_cut_chunks_covers_every_document():
    rng = np.random.default_rng(3)
    for _ in range(300):
        n = int(rng.integers(1, 60))
        lengths = rng.integers(0, 5000, n)
        ends = np.cumsum(lengths)
        starts = ends - lengths
        max_chunks = int(rng.integers(1, 40))
        chunks = np.full((max_chunks, 4), -1, np.int64)
        k, longest = fused_kernel.cut_chunks(starts, ends, max_chunks, 4096, chunks)
        assert 1 <= k <= max_chunks and longest == lengths.max()
        assert chunks[0, 0] == 0 and chunks[k - 1, 1] == n
        assert all(chunks[c, 0] < chunks[c, 1] for c in range(k))
        assert all(chunks[c, 1] == chunks[c + 1, 0] for c in range(k - 1))


def test_cut_chunks_claimed_last_are_the_smallest():
    # many equal documents: each chunk is a share falling linearly (the threads finish together)
    ends = np.cumsum(np.full(2000, 100, np.int64))
    chunks = np.full((32, 4), -1, np.int64)
    k, _ = fused_kernel.cut_chunks(ends - 100, ends, 32, 1024, chunks)
    sizes = (chunks[:k, 1] - chunks[:k, 0]).tolist()
    assert k == 32 and sum(sizes) == 2000
    assert all(a >= b for a, b in zip(sizes, sizes[1:])) and sizes[0] > 20 * sizes[-1]


def test_a_helper_grows_to_the_callers_buffers_after_its_share(shared):
    """A helper whose buffers are smaller than its caller's (the caller met a longer document on its
    own) grows to the caller's size after its share of a batch, in its own thread, so a later batch
    with a long document does not wait for it to grow first; not past HELPER_PREGROW_BYTES (a caller
    that met a huge document does not make every helper as large); the ids stay tiktoken's."""
    from tokjit.fused.bpe import HELPER_PREGROW_BYTES
    from tokjit.api import load_bytes
    from tokjit.load.encodings import bundled_encoding
    from tokjit.thread_pool import thread_pool

    ref = o200k_reference()

    data, options = bundled_encoding("o200k_base")
    tok = load_bytes(data, **options)  # a tokenizer of its own: no thread has buffers for it yet
    path = tok._fused
    lines = [line for line in corpus_lines() if 20 < len(line) < 400][:400]
    flat, offsets = tok.encode_batch_numpy(lines, num_threads=2)  # the helper's first buffers
    assert _lists(flat, offsets) == ref.encode_ordinary_batch(lines)
    pool = thread_pool(1)
    helper_cap = pool.submit(lambda: path._local.st.cap).result()
    long_doc = " ".join(lines)
    assert tok.encode(long_doc) == ref.encode_ordinary(long_doc)  # the caller grows
    caller_cap = path._local.st.cap
    assert helper_cap < caller_cap <= HELPER_PREGROW_BYTES
    flat, offsets = tok.encode_batch_numpy(lines, num_threads=2)
    assert _lists(flat, offsets) == ref.encode_ordinary_batch(lines)
    # the pool's one thread runs tasks in order: this one after the helper has grown
    assert pool.submit(lambda: path._local.st.cap).result() >= caller_cap
    huge_doc = long_doc * (2 * HELPER_PREGROW_BYTES // len(long_doc) + 1)
    assert tok.encode(huge_doc) == ref.encode_ordinary(huge_doc)
    assert path._local.st.cap > HELPER_PREGROW_BYTES
    flat, offsets = tok.encode_batch_numpy(lines, num_threads=2)
    assert _lists(flat, offsets) == ref.encode_ordinary_batch(lines)
    assert pool.submit(lambda: path._local.st.cap).result() <= HELPER_PREGROW_BYTES


def test_chunks_whose_every_byte_is_an_id_keep_apart(shared):
    """Digits and punctuation alternating: every byte is a piece and an id, so a chunk's ids fill its
    whole region, and its last piece, a cache hit, writes four ids whatever its count
    (piece_cache.cache_emit). The next chunk's first ids, written by the other thread, must survive
    (with one slot of room per chunk they were overwritten: hundreds of documents differed)."""
    ref = o200k_reference()
    tok = tokjit.get_encoding("o200k_base")
    rng = random.Random(1)
    for _ in range(8):
        docs, n = [], 0
        while n < 60_000:
            doc = "".join(rng.choice("0123456789") + rng.choice(".,;:") for _ in range(rng.randint(1, 150)))
            docs.append(doc)
            n += len(doc)
        want = ref.encode_ordinary_batch(docs)
        assert sum(len(w) for w in want) == n  # one id per byte
        for _ in range(3):
            assert _lists(*tok.encode_batch_numpy(docs, num_threads=2)) == want
            assert tok.encode_batch(docs, num_threads=2) == want
