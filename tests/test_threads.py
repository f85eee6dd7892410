"""One tokenizer shared by many Python threads gives exactly the serial results.

Kernels release the GIL (batch kernels are ``nogil``; a single call's kernel releases it around a
text of 1 KB or more) and every call keeps its scratch buffers thread-local (a single call finds them
in the tokenizer's thread table), so races would show up as wrong ids, not as exceptions: each thread runs a different mix of
``encode`` / ``encode_batch`` / ``encode_batch_numpy`` / ``decode`` over the same texts, and every
result is compared with the one computed serially before the threads started. The families cover
every model kernel (byte-level BPE, SentencePiece BPE with byte fallback, Unigram, WordPiece) and
the fused batch path; nested thread pools (``encode_batch(num_threads=2)`` called from several
threads at once) are covered too.
"""

from __future__ import annotations

import threading

import pytest

import tokjit
from conftest import corpus_lines, shared_path

N_THREADS = 8

FAMILIES = {
    "o200k (bundled tiktoken, fused path)": lambda: tokjit.get_encoding("o200k_base"),
    "llama3 tokenizer.json": lambda: tokjit.load(shared_path("data", "hf", "llama3", "tokenizer.json")),
    "gemma3 tokenizer.json (byte fallback, added tokens)": lambda: tokjit.load(
        shared_path("data", "hf", "gemma3", "tokenizer.json")),
    "llama2 .model": lambda: tokjit.load(shared_path("data", "spm", "llama2", "tokenizer.model")),
    "t5 tokenizer.json (Unigram, charsmap)": lambda: tokjit.load(shared_path("data", "hf", "t5", "tokenizer.json")),
    "bert-minilm (WordPiece)": lambda: tokjit.load(shared_path("data", "hf", "bert-minilm", "tokenizer.json")),
}


@pytest.fixture(scope="module")
def texts(shared):
    # a deterministic sample of every corpus plus all edge cases and a few long documents
    lines = corpus_lines(limit_per_file=40, step=97)
    return lines + ["<s> <|endoftext|> [CLS] special-looking text", "x" * 20_000, "日本語 " * 2000, ""]


def _run_threads(worker, n=N_THREADS):
    errors: list[BaseException] = []
    barrier = threading.Barrier(n)

    def run(k):
        try:
            barrier.wait()
            worker(k)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(k,)) for k in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=600)
    assert not any(t.is_alive() for t in threads), "a thread hung"
    if errors:
        raise errors[0]


@pytest.mark.parametrize("family", list(FAMILIES))
def test_shared_tokenizer_matches_serial(shared, texts, family):
    tok = FAMILIES[family]()
    serial = [tok.encode(t) for t in texts]
    serial_special = [tok.encode(t, parse_special=True, add_special_tokens=True) for t in texts]
    decoded = [tok.decode(ids) for ids in serial]
    mismatches: list[str] = []

    def worker(k):
        # every thread walks the texts from a different start so different kernels overlap in time
        order = texts[k * 7 % len(texts):] + texts[:k * 7 % len(texts)]
        expect = serial[k * 7 % len(texts):] + serial[:k * 7 % len(texts)]
        mode = k % 4
        for rep in range(2):
            if mode == 0:
                got = [tok.encode(t) for t in order]
            elif mode == 1:
                got = tok.encode_batch(order, num_threads=1)
            elif mode == 2:
                flat, offsets = tok.encode_batch_numpy(order, num_threads=1)
                got = [flat[a:b].tolist() for a, b in zip(offsets[:-1].tolist(), offsets[1:].tolist())]
            else:
                got = [tok.decode(ids) for ids in expect]
                want = decoded[k * 7 % len(texts):] + decoded[:k * 7 % len(texts)]
                if got != want:
                    mismatches.append(f"thread {k} decode")
                got = [tok.encode(t, parse_special=True, add_special_tokens=True) for t in texts]
                if got != serial_special:
                    mismatches.append(f"thread {k} encode(parse_special=True)")
                continue
            if got != expect:
                bad = next(i for i in range(len(got)) if got[i] != expect[i])
                mismatches.append(f"thread {k} mode {mode} rep {rep} text {order[bad][:40]!r}")

    _run_threads(worker)
    assert not mismatches, mismatches[:10]


@pytest.mark.parametrize("family", ["o200k (bundled tiktoken, fused path)", "llama2 .model",
                                    "t5 tokenizer.json (Unigram, charsmap)"])
def test_concurrent_batches_with_their_own_pools(shared, texts, family):
    """Several threads each calling ``encode_batch(num_threads=2)``: pools inside threads."""
    tok = FAMILIES[family]()
    serial = [tok.encode(t) for t in texts]
    results: dict[int, list] = {}

    def worker(k):
        results[k] = tok.encode_batch(texts, num_threads=2)
        flat, offsets = tok.encode_batch_numpy(texts, num_threads=2)
        results[k + 100] = [flat[a:b].tolist() for a, b in zip(offsets[:-1].tolist(), offsets[1:].tolist())]

    _run_threads(worker, n=4)
    for k, got in results.items():
        assert got == serial, f"worker {k}"


def test_batch_threads_survive_fork(texts):
    """The batch worker threads persist between calls; a forked child (multiprocessing's default on
    Linux, Dask/torch DataLoader workers) must get working pools, not the parent's vanished threads."""
    import multiprocessing

    tok = tokjit.get_encoding("o200k_base")
    expected = tok.encode_batch(texts, num_threads=2)  # starts the parent's pool
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    child = ctx.Process(target=lambda: queue.put(tok.encode_batch(texts, num_threads=2) == expected))
    child.start()
    try:
        assert queue.get(timeout=120) is True
    finally:
        child.join(timeout=10)
