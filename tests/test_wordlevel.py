"""HF's WordLevel model (one id per pre-tokenized piece, else the unknown token) against HF
``tokenizers``: vocabularies trained by HF's WordLevelTrainer on part of the shared corpora, ids,
offsets and decodes compared on the rest and on edge cases."""

from __future__ import annotations

import json

import pytest

import tokjit
from conftest import SHARED, corpus_lines

tokenizers = pytest.importorskip("tokenizers")
from tokenizers import decoders, models, normalizers, pre_tokenizers, processors, trainers  # noqa: E402

pytestmark = pytest.mark.skipif(not SHARED.is_dir(), reason="shared data missing")

EDGE = ["", " ", "a", "  x  ", "Héllo Wörld", "日本語 の テキスト", "🙂🙂 x🙂", "a\u0301", "\x00\x01", "x" * 300,
        "word " * 100, "[UNK] [PAD] [CLS]"]

VARIANTS = {
    "whitespace": dict(pre=pre_tokenizers.Whitespace()),
    "whitespace-split-lowercase": dict(pre=pre_tokenizers.WhitespaceSplit(), normalizer=normalizers.Lowercase()),
    "bert-pre-tokenizer-with-template": dict(pre=pre_tokenizers.BertPreTokenizer(), template=True),
    "characters": dict(pre=pre_tokenizers.Split("", "isolated")),
}


@pytest.fixture(scope="module")
def corpus():
    texts = corpus_lines(step=25)
    return texts[::2], corpus_lines(step=100) + EDGE


def _train(train, pre, normalizer=None, template=False):
    tok = tokenizers.Tokenizer(models.WordLevel(unk_token="[UNK]"))
    tok.pre_tokenizer = pre
    if normalizer is not None:
        tok.normalizer = normalizer
    tok.train_from_iterator(train, trainers.WordLevelTrainer(vocab_size=4000, show_progress=False,
                                                             special_tokens=["[UNK]", "[PAD]", "[CLS]", "[SEP]"]))
    if template:
        tok.post_processor = processors.TemplateProcessing(
            single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
            special_tokens=[("[CLS]", tok.token_to_id("[CLS]")), ("[SEP]", tok.token_to_id("[SEP]"))])
        tok.decoder = decoders.WordPiece()
    return tok


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_wordlevel_matches_hf(corpus, tmp_path, name):
    train, test = corpus
    ref = _train(train, **VARIANTS[name])
    path = tmp_path / "tokenizer.json"
    ref.save(str(path))
    ours = tokjit.load(path)
    special = name.startswith("bert")
    expected = ref.encode_batch(test, add_special_tokens=special)
    assert sum(ref.token_to_id("[UNK]") in e.ids for e in expected) > 10  # unknown words are exercised
    assert ours.encode_batch(test, parse_special=True, add_special_tokens=special) == [e.ids for e in expected]
    for text, e in zip(test[::7], expected[::7]):
        assert ours.encode_with_offsets(text, parse_special=True, add_special_tokens=special)[1] == e.offsets, text
        for skip in (False, True):
            assert ours.decode(e.ids, skip_special_tokens=skip) == ref.decode(e.ids, skip_special_tokens=skip), text


def test_wordlevel_without_its_unknown_token(corpus, tmp_path):
    """A vocabulary without its unk_token: known words encode, an unknown one raises in both (HF's
    MissingUnkToken); a file without unk_token is refused by both."""
    train, _ = corpus
    ref = _train(train, pre_tokenizers.Whitespace())
    doc = json.loads(ref.to_str())
    doc["model"]["unk_token"] = "<missing>"
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    ref = tokenizers.Tokenizer.from_file(str(path))
    ours = tokjit.load(path)
    known = " ".join(w for w in list(doc["model"]["vocab"])[4:40] if w.isalpha())
    assert ours.encode(known, parse_special=True) == ref.encode(known, add_special_tokens=False).ids
    with pytest.raises(Exception):
        ref.encode("qzxqzxqzx")
    with pytest.raises(tokjit.errors.InputError):
        ours.encode("qzxqzxqzx")
    del doc["model"]["unk_token"]
    path.write_text(json.dumps(doc), encoding="utf-8")
    with pytest.raises(Exception):
        tokenizers.Tokenizer.from_file(str(path))
    with pytest.raises(tokjit.errors.ModelFileError):
        tokjit.load(path)
