"""A tokenizer's ``encode`` / ``encode_to_numpy`` as built-ins (``tokjit.fused.call_object``).

The built-in calls the kernel itself for ``encode(text)`` and ``encode(text, parse_special=b)`` and
hands every other call to the Python function. Each way in is compared with the reference library:
tiktoken's o200k_base (``encode_ordinary`` / ``allowed_special="all"``), and HF ``tokenizers`` on
Llama 3's tokenizer.json with its post-processor; calls the built-in passes on (other keywords, a
lone surrogate, another thread, metrics on) give what the tokenizer's general ``encode`` gives.
"""

from __future__ import annotations

import threading
import types

import numpy as np
import pytest

import tokjit
from conftest import corpus_lines, o200k_reference, shared_path
from tokjit.fused import call_object
from tokjit.kernels import call_object as kernel
from tokjit.serving import metrics

SPECIAL = "a line <|endoftext|> then <|endofprompt|>"


@pytest.fixture(scope="module")
def o200k():
    return tokjit.get_encoding("o200k_base"), o200k_reference()


def _lines():
    return corpus_lines(limit_per_file=40) + [SPECIAL, "", "Hi", " ", "\n\n", "x" * 5000]


def test_encode_is_a_builtin_armed_by_its_first_call(shared):
    tok = tokjit.get_encoding("o200k_base")
    if not call_object._ready():
        pytest.skip("this interpreter's layouts do not allow the built-in (the Python function answers)")
    assert isinstance(tok.encode, types.BuiltinFunctionType)
    assert isinstance(tok.encode_to_numpy, types.BuiltinFunctionType)
    fresh = tokjit.load(shared_path("data", "hf", "llama3", "tokenizer.json"))
    assert fresh.encode.__self__[kernel.CALL_KERNEL] == 0  # loading compiles and arms nothing
    fresh.encode("Hi")
    assert fresh.encode.__self__[kernel.CALL_KERNEL] != 0


def test_plain_and_keyword_calls_match_tiktoken(shared, o200k):
    tok, ref = o200k
    for line in _lines():
        ordinary = ref.encode_ordinary(line)
        special = ref.encode(line, allowed_special="all")
        assert tok.encode(line) == ordinary
        assert tok.encode(line, parse_special=False) == ordinary
        assert tok.encode(line, parse_special=True) == special
        arr = tok.encode_to_numpy(line)
        assert arr.dtype == np.int32 and arr.tolist() == ordinary
        assert tok.encode_to_numpy(line, parse_special=True).tolist() == special
        # truthy values that are not True, and the text as a keyword, go to the Python function
        assert tok.encode(line, parse_special=1) == special
        assert tok.encode(text=line) == ordinary


def test_post_processor_and_parse_special_match_hf(shared):
    hf = pytest.importorskip("tokenizers")
    path = str(shared_path("data", "hf", "llama3", "tokenizer.json"))
    ref = hf.Tokenizer.from_file(path)
    tok = tokjit.load(path)
    for line in _lines()[:60] + ["<|begin_of_text|>hello<|eot_id|>"]:
        assert tok.encode(line, parse_special=True) == ref.encode(line, add_special_tokens=False).ids
        assert tok.encode(line, add_special_tokens=True, parse_special=True) == ref.encode(line).ids
        assert tok.encode_to_numpy(line, parse_special=True).tolist() == ref.encode(line, add_special_tokens=False).ids


def test_calls_passed_on_answer_as_the_general_encode(shared, o200k):
    tok, _ = o200k
    general = type(tok).encode
    tok.encode("armed")
    for text in ("lone \ud800 surrogate", "plain"):
        assert tok.encode(text) == general(tok, text)
    for bad in (None, 123, b"bytes", bytearray(b"ab"), ["a list"]):
        with pytest.raises(tokjit.errors.TextTypeError):
            type(tok).encode(tok, bad)
        for call in (tok.encode, tok.encode_to_numpy):
            with pytest.raises(tokjit.errors.TextTypeError):
                call(bad)
    with pytest.raises(TypeError):
        tok.encode()
    with pytest.raises(TypeError):
        tok.encode("x", unknown=True)
    with pytest.raises(TypeError):
        tok.encode("x", "y")
    out = {}

    def worker(k):
        out[k] = [tok.encode(line) for line in _lines()[:50]]
    threads = [threading.Thread(target=worker, args=(k,)) for k in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    expected = [general(tok, line) for line in _lines()[:50]]
    assert all(out[k] == expected for k in range(3))


def test_metrics_count_calls_made_through_the_builtin(o200k):
    tok, _ = o200k
    tok.encode("armed")
    m = metrics.enable()
    try:
        tok.encode("one two three")
        tok.encode_to_numpy("four")
        tok.encode("five", parse_special=True)
        assert m.snapshot()["encode_calls"] == 3
    finally:
        metrics.disable()
    tok.encode("not counted")
    assert m.snapshot()["encode_calls"] == 3


def test_small_batches_of_single_calls_match_the_references(shared, o200k):
    """A batch of a few short texts is encoded by single calls (``Tokenizer._small_batch``), a larger
    one by the batch path: both give the references' ids, with and without the post-processor."""
    tok, ref = o200k
    small = [line for line in _lines() if len(line) < 200][:8] + [SPECIAL, ""]
    large = _lines()
    assert tok._small_batch(small) and not tok._small_batch(large)
    for batch in (small, large):
        assert tok.encode_batch(batch) == [ref.encode_ordinary(x) for x in batch]
        assert tok.encode_batch(batch, parse_special=True) == [ref.encode(x, allowed_special="all") for x in batch]
    hf = pytest.importorskip("tokenizers")
    path = str(shared_path("data", "hf", "llama3", "tokenizer.json"))
    hf_ref, llama = hf.Tokenizer.from_file(path), tokjit.load(path)
    for batch in (small, large):
        assert llama.encode_batch(batch, parse_special=True) == [e.ids for e in hf_ref.encode_batch(
            batch, add_special_tokens=False)]
        assert llama.encode_batch(batch, parse_special=True, add_special_tokens=True) == [
            e.ids for e in hf_ref.encode_batch(batch)]
    metrics.enable()
    try:
        assert not tok._small_batch(small)  # metrics count single calls: a batch stays one
    finally:
        metrics.disable()
