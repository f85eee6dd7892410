"""Batch calls refuse arguments that would silently do something else: one str given as a batch (HF
``tokenizers`` raises TypeError; iterating it would encode one-character texts) and thread counts that
are not positive ints. Ids of a valid batch equal HF's."""

from __future__ import annotations

import pytest

import tokjit
from conftest import shared_path
from tokjit.errors import InputError, TextTypeError

tokenizers = pytest.importorskip("tokenizers")


@pytest.fixture(scope="module")
def pair():
    path = str(shared_path("data", "hf", "llama3", "tokenizer.json"))
    return tokjit.load(path), tokenizers.Tokenizer.from_file(path)


@pytest.mark.parametrize("call", ["encode_batch", "encode_batch_numpy"])
def test_one_string_as_a_batch_raises_type_error_like_hf(pair, call):
    tok, ref = pair
    with pytest.raises(TypeError):
        ref.encode_batch("hello")
    with pytest.raises(TextTypeError):
        getattr(tok, call)("hello")
    with pytest.raises(TypeError):
        getattr(tok, call)(b"hello")


@pytest.mark.parametrize("bad", [0, -1, 1.5, "2", True])
def test_num_threads_must_be_a_positive_int(pair, bad):
    tok, _ = pair
    with pytest.raises(InputError):
        tok.encode_batch(["a b"], num_threads=bad)


@pytest.mark.parametrize("threads", [None, 1, 2])
def test_valid_batch_equals_hf(pair, threads):
    tok, ref = pair
    texts = ["hello world", "", "Straße 東京", "a" * 3000, "x\n\n y"]
    expected = [e.ids for e in ref.encode_batch(texts, add_special_tokens=False)]
    assert tok.encode_batch(tuple(texts), num_threads=threads) == expected
    assert tok.encode_batch(iter(texts), num_threads=threads) == expected
