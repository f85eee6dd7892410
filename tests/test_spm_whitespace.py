"""The SentencePiece-BPE kernels' whitespace pass on text without a charsmap
(``spm_whitespace.sentencepiece_whitespace_bytes``) against sentencepiece's own ``normalize``.

The pass copies runs of other bytes a word at a time and stores whole words into its output: every
line of the corpora, and whitespace-heavy and multilingual strings, must come out as sentencepiece
normalizes them, and nothing may be written past the capacity the kernel states (3 n + 3 bytes)."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import corpus_lines, shared_path
from tokjit.kernels.spm_whitespace import WS_DUMMY_PREFIX, WS_ESCAPE, sentencepiece_whitespace_bytes

EXTRA = ["", " ", "  a  ", "a", "word", "twelve chars", "x" * 7, "x" * 8, "x" * 9, "  leading",
         "trailing   ", "tabs\tand\nnew lines  ", "日本語 のテキスト", "émigré  naïve", "a b c d e f g h",
         " ".join(["abcdefghijklmnopqrstuvw"] * 5), "▁already▁escaped", "🤖 " * 9]


@pytest.mark.parametrize("model", ["llama2", "mistral-7b"])
def test_whitespace_bytes_match_sentencepiece_normalize(shared, model):
    spm = pytest.importorskip("sentencepiece")
    sp = spm.SentencePieceProcessor(model_file=str(shared_path("data", "spm", model, "tokenizer.model")))
    for text in corpus_lines(limit_per_file=300) + EXTRA:
        data = text.encode("utf-8")
        cap = 3 * len(data) + 3
        guarded = np.full(cap + 16, 0xAB, np.uint8)
        buf = np.frombuffer(bytearray(b"#" + data + b"#"), np.uint8).copy()
        m = sentencepiece_whitespace_bytes(buf, 1, 1 + len(data), np.int64(WS_ESCAPE | WS_DUMMY_PREFIX),
                                           guarded[:cap])
        assert guarded[:m].tobytes().decode("utf-8") == sp.normalize(text), repr(text[:60])
        assert (guarded[cap:] == 0xAB).all(), repr(text[:60])
