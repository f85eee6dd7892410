"""HF BPE with ``continuing_subword_prefix`` / ``end_of_word_suffix`` (CLIP, GPT-1 and BPE models trained
with either) against HF ``tokenizers``: vocabularies trained by HF's own trainer on part of the shared
corpora, ids compared on the rest and on the edge cases."""

from __future__ import annotations

import json

import pytest

import tokjit
from conftest import SHARED, corpus_lines

tokenizers = pytest.importorskip("tokenizers")
from tokenizers import Regex, decoders, models, normalizers, pre_tokenizers, trainers  # noqa: E402

pytestmark = pytest.mark.skipif(not SHARED.is_dir(), reason="shared data missing")

# CLIP's split: words, single digits and runs of other characters, what matches nothing dropped
CLIP_SPLIT = (r"<\|startoftext\|>|<\|endoftext\|>|'s|'t|'re|'ve|'m|'ll|'d|[\p{L}]+|[\p{N}]|"
              r"[^\s\p{L}\p{N}]+")

VARIANTS = {
    "suffix": dict(byte_level=False, affixes=dict(end_of_word_suffix="</w>")),
    "prefix": dict(byte_level=False, affixes=dict(continuing_subword_prefix="##")),
    "prefix-and-suffix": dict(byte_level=False, affixes=dict(end_of_word_suffix="</w>",
                                                             continuing_subword_prefix="##")),
    "suffix-fuse-unk": dict(byte_level=False, affixes=dict(end_of_word_suffix="</w>"), fuse_unk=True),
    "byte-level-suffix": dict(byte_level=True, affixes=dict(end_of_word_suffix="</w>")),
    "byte-level-prefix": dict(byte_level=True, affixes=dict(continuing_subword_prefix="##")),
    "clip": dict(byte_level=True, affixes=dict(end_of_word_suffix="</w>"), clip=True),
}


@pytest.fixture(scope="module")
def corpus():
    texts = corpus_lines(step=25)
    # train on every other text of the sample, compare on all of them and the edge cases
    edge = ["", " ", "a", "ab", "  x  ", "héllo wörld", "日本語", "🙂🙂 x🙂", "a\u0301", "\x00\x01", "x" * 300,
            "word " * 100]
    return texts[::2], corpus_lines(step=100) + edge


def _train(corpus, byte_level: bool, affixes: dict, fuse_unk: bool = False, clip: bool = False):
    train, _ = corpus
    unk = None if byte_level else "<unk>"
    tok = tokenizers.Tokenizer(models.BPE(unk_token=unk, fuse_unk=fuse_unk, **affixes))
    special = ["<|endoftext|>"] if byte_level else ["<unk>"]
    alphabet = pre_tokenizers.ByteLevel.alphabet() if byte_level else []
    if clip:
        tok.normalizer = normalizers.Sequence([normalizers.NFC(), normalizers.Replace(Regex(r"\s+"), " "),
                                               normalizers.Lowercase()])
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(CLIP_SPLIT), "removed", invert=True),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    elif byte_level:
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    else:
        tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.train_from_iterator(train, trainers.BpeTrainer(vocab_size=3000, show_progress=False, special_tokens=special,
                                                       initial_alphabet=alphabet, **affixes))
    tok.decoder = decoders.ByteLevel() if byte_level else decoders.BPEDecoder(
        suffix=affixes.get("end_of_word_suffix", "</w>"))
    return tok


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_affixed_bpe_matches_hf(corpus, tmp_path, name):
    ref = _train(corpus, **VARIANTS[name])
    path = tmp_path / "tokenizer.json"
    ref.save(str(path))
    ours = tokjit.load(path)
    texts = corpus[1]
    expected = [e.ids for e in ref.encode_batch(texts, add_special_tokens=False)]
    single = [ours.encode(t, parse_special=True) for t in texts]  # HF splits added tokens out
    bad = [(t, a, b) for t, a, b in zip(texts, single, expected) if a != b]
    assert not bad, f"{len(bad)} of {len(texts)} differ; first: {bad[0][0][:80]!r} {bad[0][1][:12]} vs {bad[0][2][:12]}"
    assert ours.encode_batch(texts, num_threads=2, parse_special=True) == expected
    # the decoder too (BPEDecoder: the suffix is a space but in the last token)
    for t, ids in zip(texts[:200], expected[:200]):
        assert ours.decode(ids) == ref.decode(ids), t[:80]


def test_affixed_merge_names_the_token_as_hf_does(tmp_path):
    """HF names a merge's token the left part and the right part less the prefix's length: with
    "##" the merge ("a", "##b") makes "ab"; a word's later characters start prefixed."""
    vocab = {"<unk>": 0, "a": 1, "##b": 2, "ab": 3, "##c": 4, "abc": 5, "c": 6, "##a": 7, "ca": 8, "b": 9}
    doc = {"version": "1.0", "added_tokens": [], "normalizer": None,
           "pre_tokenizer": {"type": "WhitespaceSplit"}, "post_processor": None, "decoder": None,
           "model": {"type": "BPE", "dropout": None, "unk_token": "<unk>", "continuing_subword_prefix": "##",
                     "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False,
                     "vocab": vocab, "merges": ["a ##b", "ab ##c", "c ##a"]}}
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    ref = tokenizers.Tokenizer.from_file(str(path))
    ours = tokjit.load(path)
    for text in ["abc", "ab", "a", "ca", "cab abc", "ba", "bca", "abcabc"]:
        assert ours.encode(text) == ref.encode(text, add_special_tokens=False).ids, text


def test_byte_fallback_with_affixes_is_refused(tmp_path):
    doc = {"version": "1.0", "model": {"type": "BPE", "unk_token": "<unk>", "end_of_word_suffix": "</w>",
                                       "byte_fallback": True, "vocab": {"<unk>": 0, "a</w>": 1}, "merges": []}}
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    with pytest.raises(tokjit.UnsupportedComponentError, match="byte_fallback"):
        tokjit.load(path)


def test_a_merge_the_prefix_cannot_cut_is_a_file_error(tmp_path):
    # HF cannot load it either (it slices the right part inside a character and panics)
    doc = {"version": "1.0", "model": {"type": "BPE", "unk_token": "<unk>", "continuing_subword_prefix": "x",
                                       "vocab": {"<unk>": 0, "a": 1, "é": 2, "aé": 3}, "merges": ["a é"]}}
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    with pytest.raises(tokjit.ModelFileError, match="continuing_subword_prefix"):
        tokjit.load(path)
