"""WordPiece family parity with HF ``tokenizers``: BERT normalizer and pre-tokenizers over all of
Unicode, the all-MiniLM tokenizer.json on the public corpora, vocab.txt, and decoding.

Time budget (2 cores): the full corpora are encoded once with ``add_special_tokens=True`` (the
post-processor path, which includes the model ids); ``add_special_tokens=False`` runs on a
deterministic sample (every 7th line) plus all edge cases, as do vocab.txt and decode checks.
"""

from __future__ import annotations

import numpy as np
import pytest

from conftest import corpus_files, corpus_lines

tokenizers = pytest.importorskip("tokenizers")

import tokjit  # noqa: E402
from tokjit.pipeline.pre_tokenizers import Pieces  # noqa: E402
from tokjit.models.wordpiece import BertNormalizer, BertPreTokenizer, Whitespace, WhitespaceSplit  # noqa: E402

ALL_CHARS = "".join(chr(c) for c in range(0x110000) if not 0xD800 <= c < 0xE000)


@pytest.fixture(scope="module")
def bert_paths(shared):
    base = shared / "data" / "hf" / "bert-minilm"
    return base / "tokenizer.json", base / "vocab.txt"


@pytest.fixture(scope="module")
def hf_bert(bert_paths):
    tok = tokenizers.Tokenizer.from_file(str(bert_paths[0]))
    tok.no_truncation()
    tok.no_padding()
    return tok


@pytest.fixture(scope="module")
def tj_bert(bert_paths):
    return tokjit.load(bert_paths[0])


def _normalize(config: dict, text: str) -> str:
    buf, _ = BertNormalizer(config)(np.frombuffer(text.encode("utf-8"), np.uint8), None)
    return buf.tobytes().decode("utf-8")


NORMALIZER_CONFIGS = [
    dict(clean_text=True, handle_chinese_chars=False, strip_accents=False, lowercase=False),
    dict(clean_text=False, handle_chinese_chars=True, strip_accents=False, lowercase=False),
    dict(clean_text=False, handle_chinese_chars=False, strip_accents=True, lowercase=False),
    dict(clean_text=False, handle_chinese_chars=False, strip_accents=False, lowercase=True),
    dict(clean_text=True, handle_chinese_chars=True, strip_accents=None, lowercase=True),
    dict(clean_text=True, handle_chinese_chars=True, strip_accents=None, lowercase=False),
    dict(clean_text=True, handle_chinese_chars=True, strip_accents=True, lowercase=False),
]


@pytest.mark.parametrize("config", NORMALIZER_CONFIGS, ids=lambda c: "-".join(f"{k}={v}" for k, v in c.items()))
def test_bert_normalizer_every_code_point(config):
    """Every code point, in order, one string: also covers canonical reordering of neighbours."""
    ref = tokenizers.normalizers.BertNormalizer(**config).normalize_str(ALL_CHARS)
    assert _normalize({"type": "BertNormalizer", **config}, ALL_CHARS) == ref


def test_bert_normalizer_each_code_point_alone():
    config = dict(clean_text=True, handle_chinese_chars=True, strip_accents=True, lowercase=True)
    hf = tokenizers.normalizers.BertNormalizer(**config)
    # a separator that survives every step and never combines keeps the characters apart
    text = "|".join(ALL_CHARS)
    assert _normalize({"type": "BertNormalizer", **config}, text) == hf.normalize_str(text)


def test_bert_normalizer_combining_runs():
    """NFD reorders runs of combining marks by class before accents are dropped; marks that HF
    does not strip (newer than its tables) and spacing marks with a class survive in that order."""
    import unicodedata
    hf = tokenizers.normalizers.BertNormalizer(strip_accents=True, lowercase=True)
    marks = [c for c in range(0x110000) if not 0xD800 <= c < 0xE000 and unicodedata.combining(chr(c))]
    survivors = [c for c in marks if hf.normalize_str("a" + chr(c)) != "a"]
    assert survivors, "expected some combining characters HF keeps"
    texts = ["a" + chr(x) + chr(y) + "\u0301" + chr(z) for x in survivors for y in marks[::7] for z in survivors[::5]]
    text = " ".join(texts)
    assert _normalize({"type": "BertNormalizer", "strip_accents": True, "lowercase": True}, text) == \
        hf.normalize_str(text)
    long_run = "e" + "".join(chr(c) for c in marks) * 3  # longer than the kernel's first run buffer
    assert _normalize({"type": "BertNormalizer", "strip_accents": False, "lowercase": False}, long_run) == \
        tokenizers.normalizers.BertNormalizer(strip_accents=False, lowercase=False).normalize_str(long_run)
    assert _normalize({"type": "BertNormalizer"}, long_run) == \
        tokenizers.normalizers.BertNormalizer().normalize_str(long_run)


def _pieces(pre, text: str) -> list[str]:
    buf = np.frombuffer(text.encode("utf-8"), np.uint8)
    p = pre(Pieces.whole(buf))
    raw = buf.tobytes()
    return [raw[s:e].decode("utf-8") for s, e in zip(p.starts.tolist(), p.ends.tolist())]


@pytest.mark.parametrize("kind", ["BertPreTokenizer", "WhitespaceSplit"])
def test_pre_tokenizer_every_code_point(kind):
    cls = {"BertPreTokenizer": BertPreTokenizer, "WhitespaceSplit": WhitespaceSplit}[kind]
    hf = getattr(tokenizers.pre_tokenizers, kind)()
    text = "x".join(ALL_CHARS)
    assert _pieces(cls({}), text) == [s for s, _ in hf.pre_tokenize_str(text)]


def test_whitespace_pre_tokenizer_on_corpora():
    hf = tokenizers.pre_tokenizers.Whitespace()
    mine = Whitespace({})
    for text in corpus_lines(limit_per_file=300, step=13):
        assert _pieces(mine, text) == [s for s, _ in hf.pre_tokenize_str(text)], text[:80]


def _report(name, texts, ref, got):
    bad = [(t, r, g) for t, r, g in zip(texts, ref, got) if r != g]
    assert not bad, (f"{name}: {len(bad)}/{len(texts)} differ; first: {bad[0][0][:120]!r}\n"
                     f"hf={bad[0][1][:40]}\ntj={bad[0][2][:40]}")


def test_tokenizer_json_full_corpora_with_special_tokens(hf_bert, tj_bert):
    for name, texts in corpus_files().items():
        ref = [e.ids for e in hf_bert.encode_batch(texts, add_special_tokens=True)]
        got = tj_bert.encode_batch(texts, add_special_tokens=True, parse_special=True)
        _report(name, texts, ref, got)


def test_tokenizer_json_sample_without_special_tokens(hf_bert, tj_bert):
    texts = corpus_lines(step=7)
    ref = [e.ids for e in hf_bert.encode_batch(texts, add_special_tokens=False)]
    got = tj_bert.encode_batch(texts, add_special_tokens=False, parse_special=True)
    _report("sample", texts, ref, got)


def test_template_adds_cls_sep(tj_bert):
    assert tj_bert.encode("", add_special_tokens=True) == [101, 102]
    ids = tj_bert.encode("[CLS] hi [SEP]", parse_special=True)
    assert ids[0] == 101 and ids[-1] == 102


def test_long_words_and_unknown(hf_bert, tj_bert):
    texts = ["a" * 100, "a" * 101, "é" * 100 + " ok", "x" * 99 + "é" * 2, "☃☃ snow☃man", "\u0378abc",
             "abc" * 40 + "," + "d" * 150, "[UNK] [MASK][PAD]", "un[SEP]believable"]
    for t in texts:
        assert tj_bert.encode(t, parse_special=True) == hf_bert.encode(t, add_special_tokens=False).ids, t


def test_missing_unk_raises(shared):
    spec = tokjit.load(shared / "data" / "hf" / "bert-minilm" / "tokenizer.json").spec
    spec.model = dict(spec.model, unk_id=None)
    tok = tokjit.Tokenizer(spec)
    with pytest.raises(tokjit.InputError):
        tok.encode("☃")


def test_vocab_txt_matches_bert_wordpiece_tokenizer(bert_paths):
    from tokenizers.implementations import BertWordPieceTokenizer
    ref_tok = BertWordPieceTokenizer(str(bert_paths[1]))
    tok = tokjit.load(bert_paths[1])
    assert tok.spec.source["format"] == "vocab.txt"
    texts = corpus_lines(limit_per_file=2000, step=11)
    for add in (True, False):
        ref = [e.ids for e in ref_tok.encode_batch(texts, add_special_tokens=add)]
        got = tok.encode_batch(texts, add_special_tokens=add, parse_special=True)
        _report(f"vocab.txt add_special_tokens={add}", texts, ref, got)
    ids = [tok.encode(t, add_special_tokens=True, parse_special=True) for t in texts[:500]]
    for skip in (False, True):
        assert [tok.decode(i, skip_special_tokens=skip) for i in ids] == \
            ref_tok.decode_batch(ids, skip_special_tokens=skip)


def test_vocab_txt_lines(tmp_path):
    """HF reads vocab.txt lines with trim_end; a repeated token keeps its last line's id."""
    from tokenizers import Tokenizer
    from tokenizers.models import WordPiece
    path = tmp_path / "vocab.txt"
    path.write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\nhello \nhel\n##lo\nworld\nhello\n##s\r\n,\n", encoding="utf-8")
    ref = Tokenizer(WordPiece.from_file(str(path), unk_token="[UNK]"))
    ref.normalizer = tokenizers.normalizers.BertNormalizer()
    ref.pre_tokenizer = tokenizers.pre_tokenizers.BertPreTokenizer()
    tok = tokjit.load(path)
    for text in ["hello world", "hellos, worlds", "Hello", "helo", ""]:
        assert tok.encode(text) == ref.encode(text, add_special_tokens=False).ids, text


def test_decode_every_id(hf_bert, tj_bert):
    n = hf_bert.get_vocab_size()
    ids = list(range(n))
    for skip in (False, True):
        ref = hf_bert.decode_batch([[i] for i in ids], skip_special_tokens=skip)
        got = [tj_bert.decode([i], skip_special_tokens=skip) for i in ids]
        assert got == ref
    # pairs exercise the prefix / space / cleanup rules between tokens
    rng = np.random.default_rng(0)
    pairs = rng.integers(0, n, size=(20000, 3)).tolist()
    assert [tj_bert.decode(p) for p in pairs] == hf_bert.decode_batch(pairs, skip_special_tokens=False)


def test_decode_corpus_ids(hf_bert, tj_bert):
    texts = corpus_lines(limit_per_file=1500, step=5)
    ids = [e.ids for e in hf_bert.encode_batch(texts, add_special_tokens=True)]
    for skip in (False, True):
        ref = hf_bert.decode_batch(ids, skip_special_tokens=skip)
        got = [tj_bert.decode(i, skip_special_tokens=skip) for i in ids]
        _report(f"decode skip={skip}", texts, ref, got)
