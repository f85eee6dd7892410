"""tokjit.arrow.encode_arrow: ids equal ``encode_batch`` row by row, straight from Arrow buffers.

The reference here is tokjit's own ``encode_batch`` (which the parity suites check against HF
tokenizers / tiktoken): this file tests that the Arrow path is the same function of the text.
"""

from __future__ import annotations

import numpy as np
import pytest

pa = pytest.importorskip("pyarrow")

import tokjit  # noqa: E402
from tokjit.arrow import encode_arrow, invalid_utf8_rows  # noqa: E402

from conftest import corpus_lines  # noqa: E402


def _tokenizers(shared):
    toks = [tokjit.get_encoding("o200k_base"), tokjit.get_encoding("cl100k_base")]
    for rel in ("hf/llama3/tokenizer.json", "hf/mistral-7b/tokenizer.json", "hf/t5/tokenizer.json",
                "hf/bert-minilm/tokenizer.json", "spm/llama2/tokenizer.model"):
        toks.append(tokjit.load(shared / "data" / rel))
    return toks


@pytest.fixture(scope="module")
def texts(shared):
    # a deterministic sample of every corpus file plus all edge cases keeps this file fast
    return corpus_lines(limit_per_file=150, step=7)


def _expected(tok, rows, parse_special=False):
    present = [r for r in rows if r is not None]
    enc = iter(tok.encode_batch(present, parse_special=parse_special))
    return [None if r is None else next(enc) for r in rows]


def test_ids_equal_encode_batch(shared, texts):
    rows = texts + ["", None, "", "<|endoftext|> <s> [CLS]"]
    for tok in _tokenizers(shared):
        got = encode_arrow(tok, pa.array(rows, pa.string()))
        assert got.type == pa.list_(pa.int32())
        assert got.to_pylist() == _expected(tok, rows), tok.name


def test_parse_special_and_large_string(shared):
    tok = tokjit.load(shared / "data/hf/llama3/tokenizer.json")
    rows = ["<|begin_of_text|>hi<|eot_id|>", None, "plain"]
    got = encode_arrow(tok, pa.array(rows, pa.large_string()), parse_special=True)
    assert got.to_pylist() == _expected(tok, rows, parse_special=True)
    assert encode_arrow(tok, pa.array(rows)).to_pylist() == _expected(tok, rows)


def test_chunked_sliced_nulls_empty(shared, texts):
    tok = tokjit.get_encoding("o200k_base")
    rows = texts[:300] + [None] * 3 + [""] * 3
    arr = pa.array(rows)
    chunked = pa.chunked_array([arr.slice(0, 7), arr.slice(7, 0), arr.slice(7, 200), arr.slice(207)])
    got = encode_arrow(tok, chunked, num_threads=2)
    assert isinstance(got, pa.ChunkedArray) and got.num_chunks == 4
    assert got.to_pylist() == _expected(tok, rows)
    assert got.null_count == 3
    assert encode_arrow(tok, arr.slice(50, 30)).to_pylist() == _expected(tok, rows[50:80])
    assert encode_arrow(tok, pa.array([], pa.string())).to_pylist() == []
    assert encode_arrow(tok, pa.array([None, None], pa.string())).to_pylist() == [None, None]


def test_invalid_utf8_rows_are_repaired_like_str():
    tok = tokjit.get_encoding("cl100k_base")
    raw = [b"ok", b"a\xffb", b"\xe4\xbd", b"\xed\xa0\x80x", b"\xf0\x9f\xa4\x96"]
    offsets = np.cumsum([0] + [len(r) for r in raw]).astype(np.int32)
    arr = pa.Array.from_buffers(pa.string(), len(raw), [None, pa.py_buffer(offsets.tobytes()),
                                                          pa.py_buffer(b"".join(raw))])
    expected = tok.encode_batch([r.decode("utf-8", "replace") for r in raw])
    assert encode_arrow(tok, arr).to_pylist() == expected


def test_utf8_validator_matches_python():
    rng = np.random.default_rng(0)
    alphabet = np.array([0x41, 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0xC0, 0xC2, 0xDF, 0xE0, 0xED, 0xEF,
                         0xF0, 0xF4, 0xF5], np.uint8)
    for _ in range(3000):
        data = rng.choice(alphabet, size=int(rng.integers(0, 8))).tobytes()
        try:
            data.decode("utf-8")
            valid = True
        except UnicodeDecodeError:
            valid = False
        bad = np.zeros(1, np.bool_)
        invalid_utf8_rows(np.frombuffer(data, np.uint8), np.zeros(1, np.int64),
                          np.array([len(data)], np.int64), bad)
        assert bool(bad[0]) == (not valid), data


def test_rejects_non_strings():
    tok = tokjit.get_encoding("o200k_base")
    with pytest.raises(TypeError):
        encode_arrow(tok, pa.array([1, 2]))
    with pytest.raises(TypeError):
        encode_arrow(tok, ["not", "arrow"])
