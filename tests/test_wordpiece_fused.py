"""The fused WordPiece path (``tokjit.fused.wordpiece``) against HF ``tokenizers`` for pipeline
variants the shipped BERT file does not cover (WhitespaceSplit, cased normalizer, normalized added
tokens), and which pipelines take it. The shipped file itself is covered by ``test_wordpiece.py``,
whose batches run through this path. A deterministic sample (every 13th line) keeps this ~10 s.
"""

from __future__ import annotations

import json

import pytest

from conftest import corpus_lines

tokenizers = pytest.importorskip("tokenizers")

import tokjit  # noqa: E402
from tokjit.fused.wordpiece import FusedWordPiece  # noqa: E402

EXTRA_TEXTS = ["Hello World foo-bar [MASK]", "hello worldly HELLO WORLD", "İstanbul ǅ ﬃ Ω", "x\u0301\u0316\u0300 y",
               "naïve café", "Naive Cafe!", "[CLS]hello world[SEP]", "日本語のテキスト、です。", "\u00a0\u2003a\tb\nc", "a" * 101]


def _added(tid, content, normalized, special, **flags):
    return {"id": tid, "content": content, "single_word": False, "lstrip": False, "rstrip": False,
            "normalized": normalized, "special": special, **flags}


# normalized added tokens are spelled as the normalizer writes them (HF also normalizes their content
# before matching; tokjit's loader does not yet, which is not what this file tests)
VARIANTS = {
    "whitespace_split": {"pre_tokenizer": {"type": "WhitespaceSplit"}},
    "cased": {"normalizer": {"type": "BertNormalizer", "clean_text": True, "handle_chinese_chars": False,
                             "strip_accents": False, "lowercase": False}},
    "added_tokens": {"added": [_added(30522, "hello world", True, False), _added(30523, "naive cafe", True, True),
                               _added(30524, "foo-", False, False)]},
}


@pytest.fixture(scope="module")
def base_json(shared):
    return json.loads((shared / "data" / "hf" / "bert-minilm" / "tokenizer.json").read_text(encoding="utf-8"))


def _write(tmp_path, base, name, change):
    doc = json.loads(json.dumps(base))
    for key in ("pre_tokenizer", "normalizer"):
        if key in change:
            doc[key] = change[key]
    doc["added_tokens"] += change.get("added", [])
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_variant_matches_hf(tmp_path, base_json, name):
    path = _write(tmp_path, base_json, name, VARIANTS[name])
    hf = tokenizers.Tokenizer.from_file(str(path))
    hf.no_truncation()
    hf.no_padding()
    tok = tokjit.load(path)
    assert isinstance(tok._fused, FusedWordPiece)
    texts = corpus_lines(step=13) + EXTRA_TEXTS
    ref = [e.ids for e in hf.encode_batch(texts, add_special_tokens=False)]
    got = tok.encode_batch(texts, parse_special=True, num_threads=2)
    bad = [(t, r, g) for t, r, g in zip(texts, ref, got) if r != g]
    assert not bad, f"{len(bad)}/{len(texts)} differ; first {bad[0][0][:80]!r}: hf={bad[0][1][:20]} tj={bad[0][2][:20]}"


@pytest.mark.parametrize("change", [
    {"pre_tokenizer": {"type": "Whitespace"}},
    {"pre_tokenizer": {"type": "Sequence", "pretokenizers": [{"type": "BertPreTokenizer"}]}},
    {"normalizer": {"type": "Lowercase"}},
    {"added": [_added(30522, "<zz>", False, True, lstrip=True)]},
], ids=["Whitespace", "Sequence", "Lowercase", "lstrip"])
def test_other_pipelines_stay_staged(tmp_path, base_json, change):
    tok = tokjit.load(_write(tmp_path, base_json, "other", change))
    assert not isinstance(tok._fused, FusedWordPiece)
