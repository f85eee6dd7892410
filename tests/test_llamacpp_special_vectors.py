"""GGUF vocabularies against ids written by llama.cpp 0c1e570 (llama-cpp-python 0.3.36) itself.

The fixtures (``tests/data/llamacpp-0c1e570``, written by ``scripts/gen_llamacpp_special_vectors.py``)
hold texts made of each vocabulary's special tokens, as llama.cpp marks them after loading, mixed
with words, whitespace and each other, with llama.cpp's ids for ``parse_special`` true and false, and
its ids for a sample of the shared corpora. They cover every GGUF of ``data/gguf`` and the GGUFs that
``llamacpp_vocabs.BUILT_VOCABS`` writes from shared tokenizer files: t5 (UGM; also with spaces kept,
with and without the prefix), gemma4, rwkv and whitespace vocabularies, and ``rules`` /
``rules-phi3``, the gpt-2 vocabulary plus tokens that meet every text and name rule of llama.cpp's
loader (two FIM candidates of one kind among them). The ``pre-*`` corpus fixtures hold llama.cpp's ids
for every ``tokenizer.ggml.pre`` value on the gpt-2 vocabulary.
"""

from __future__ import annotations

import pytest

from conftest import SHARED
from llamacpp_vocabs import (FIXTURE_DIR, fixture_vocabs, gguf_path, read_ids, read_refs, read_texts, ref_texts,
                             refs_path)

import tokjit

VOCABS = fixture_vocabs("special")
CORPUS_VOCABS = fixture_vocabs("corpus")
_loaded: dict[str, object] = {}


@pytest.fixture(scope="module")
def load(shared, tmp_path_factory):
    def get(vocab):
        if vocab not in _loaded:
            path = gguf_path(shared, vocab, tmp_path_factory.mktemp(vocab))
            if not path.is_file():
                pytest.skip(f"{path} not found")
            _loaded[vocab] = tokjit.load(path)
        return _loaded[vocab]
    return get


def _compare(vocab, tok, texts, expected, **kw):
    assert len(texts) == len(expected) > 0
    bad = [(i, t, e, tok.encode(t, **kw)) for i, (t, e) in enumerate(zip(texts, expected))]
    bad = [b for b in bad if b[2] != b[3]]
    if bad:
        i, text, want, got = bad[0]
        pytest.fail(f"{vocab} {kw}: {len(bad)}/{len(texts)} texts differ; first is #{i} {text[:80]!r}\n"
                    f"  llama.cpp: {want}\n  tokjit:    {got}")


def test_fixtures_cover_every_shared_gguf(shared):
    names = {p.name[len("ggml-vocab-"):-len(".gguf")] for p in (shared / "data" / "gguf").glob("ggml-vocab-*.gguf")}
    assert names, "no GGUF in the shared data"
    assert names <= set(VOCABS), f"no llama.cpp special-token fixtures for {sorted(names - set(VOCABS))}"


@pytest.mark.parametrize("vocab", VOCABS)
def test_special_texts_parse_special(load, vocab):
    texts = read_texts(FIXTURE_DIR / f"{vocab}.special.inp")
    _compare(vocab, load(vocab), texts, read_ids(FIXTURE_DIR / f"{vocab}.special.out"), parse_special=True)


@pytest.mark.parametrize("vocab", VOCABS)
def test_special_texts_without_parse_special(load, vocab):
    texts = read_texts(FIXTURE_DIR / f"{vocab}.special.inp")
    _compare(vocab, load(vocab), texts, read_ids(FIXTURE_DIR / f"{vocab}.special.noparse.out"))


@pytest.mark.parametrize("vocab", CORPUS_VOCABS)
def test_corpus_sample(load, vocab):
    corpus = ref_texts()
    texts = [corpus[name][i] for name, i in read_refs(refs_path(vocab))]
    _compare(vocab, load(vocab), texts, read_ids(FIXTURE_DIR / f"{vocab}.corpus.out"))


def test_issue_string_on_qwen2(load):
    """The report that started this: qwen2's ``</s>`` is a NORMAL token that llama.cpp makes control
    because its text is on the end-of-generation list."""
    if "qwen2" not in VOCABS or not (SHARED / "data" / "gguf" / "ggml-vocab-qwen2.gguf").is_file():
        pytest.skip("qwen2 GGUF or its fixture missing")
    texts = read_texts(FIXTURE_DIR / "qwen2.special.inp")
    want = read_ids(FIXTURE_DIR / "qwen2.special.out")[texts.index("<s><s><unk><s>a<s>b<s>c<unk>d<unk></s>")]
    tok = load("qwen2")
    assert want[-1] == tok.token_to_id("</s>")
    assert tok.encode("<s><s><unk><s>a<s>b<s>c<unk>d<unk></s>", parse_special=True) == want
