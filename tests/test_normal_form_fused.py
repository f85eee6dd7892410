"""Byte-level BPE after a Unicode normal form (Qwen 2/2.5/3 write ``"normalizer": {"type": "NFC"}``) runs
the fused kernel for text already in that form and the staged pipeline for the rest: both against HF
``tokenizers`` loading the same JSON, on corpus lines, decomposed text and added tokens beside combining
marks."""

from __future__ import annotations

import json
import unicodedata

import pytest

import tokjit
from conftest import corpus_lines, shared_path
from tokjit.fused.bpe import FusedBPE

tokenizers = pytest.importorskip("tokenizers")

ADDED = [{"id": 0, "content": "<|im_start|>", "single_word": False, "lstrip": False, "rstrip": False,
          "normalized": False, "special": True},
         {"id": 0, "content": "cafe", "single_word": False, "lstrip": False, "rstrip": False,
          "normalized": False, "special": False}]


def _texts():
    texts = corpus_lines(limit_per_file=300)
    decomposed = [unicodedata.normalize("NFD", t) for t in texts[::7]]
    marks = ["cafe\u0301 au lait", "<|im_start|>\u0301x", "e\u0301<|im_start|>e\u0301", "\u1100\u1161\u11a8",
             "\u0041\u030a\u0301", "cafe\u0301<|im_start|>cafe", "\u0b47\u0b3e", "Å Å Å", "ﬁ ½ ①"]
    return texts + decomposed + marks


@pytest.mark.parametrize("form", ["NFC", "NFKC", "NFD"])
def test_normal_form_then_byte_level_bpe_equals_hf(tmp_path, form):
    data = json.loads(shared_path("data", "hf", "gpt4o", "tokenizer.json").read_text(encoding="utf-8"))
    data["normalizer"] = {"type": form}
    data["added_tokens"] = data["added_tokens"] + ADDED
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    ref = tokenizers.Tokenizer.from_file(str(path))
    for added in data["added_tokens"]:  # HF assigns added-token ids itself: write the ones it chose
        added["id"] = ref.token_to_id(added["content"])
    path.write_text(json.dumps(data), encoding="utf-8")
    ref = tokenizers.Tokenizer.from_file(str(path))
    tok = tokjit.load(str(path))
    assert isinstance(tok._fused, FusedBPE) and tok._fused.form == form
    texts = _texts()
    assert any(not unicodedata.is_normalized(form, t) for t in texts)
    expected = [ref.encode(t, add_special_tokens=False).ids for t in texts]
    assert [tok.encode(t, parse_special=True) for t in texts] == expected
    assert tok.encode_batch(texts, parse_special=True, num_threads=2) == expected
    plain = [tok.encode(t) for t in texts]
    assert plain == tok.encode_batch(texts)  # parse_special=False: same path choice per text
