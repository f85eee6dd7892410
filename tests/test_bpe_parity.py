"""Byte-level BPE parity: tokjit against tiktoken and HF ``tokenizers`` on the public corpora.

Every text of every corpus file is compared (english paragraphs, whole code files, every line of the
multilingual files, every edge case). Reference ids come from the reference libraries at test time.
"""

from __future__ import annotations

import json

import pytest

import tokjit
from conftest import SHARED, corpus_files, shared_path

tiktoken = pytest.importorskip("tiktoken")
import tiktoken.load  # noqa: E402  (submodule is not imported by the package)
tokenizers = pytest.importorskip("tokenizers")

BUNDLED = ["o200k_base", "cl100k_base", "p50k_base", "r50k_base"]
HF_BYTE_LEVEL = ["llama3", "gpt4o", "gpt35turbo"]
CORPORA = sorted(corpus_files()) if SHARED.is_dir() else []


def reference_tiktoken(name: str):
    encodings = json.loads(shared_path("data", "tiktoken", "encodings.json").read_text())
    entry = encodings[name]
    ranks_file = entry["mergeable_ranks_file"].split()[0]
    ranks = tiktoken.load.load_tiktoken_bpe(str(shared_path("data", "tiktoken", ranks_file)))
    return tiktoken.Encoding(name=name, pat_str=entry["pat_str"], mergeable_ranks=ranks,
                             special_tokens=entry["special_tokens"], explicit_n_vocab=entry.get("explicit_n_vocab"))


def first_mismatch(texts, ours, theirs):
    for text, a, b in zip(texts, ours, theirs):
        if a != b:
            return f"{text[:120]!r}: tokjit {a[:20]} vs reference {b[:20]}"
    return None


@pytest.fixture(scope="module")
def tiktoken_pairs(shared):
    return {name: (tokjit.get_encoding(name), reference_tiktoken(name)) for name in BUNDLED}


@pytest.mark.parametrize("corpus", CORPORA)
@pytest.mark.parametrize("name", BUNDLED)
def test_bundled_encoding_matches_tiktoken(tiktoken_pairs, name, corpus):
    ours, ref = tiktoken_pairs[name]
    texts = corpus_files()[corpus]
    expected = ref.encode_ordinary_batch(texts)
    got = ours.encode_batch(texts)
    assert got == expected, first_mismatch(texts, got, expected)


@pytest.mark.parametrize("name", BUNDLED)
def test_bundled_encoding_special_tokens_match_tiktoken(tiktoken_pairs, name):
    ours, ref = tiktoken_pairs[name]
    specials = list(ref.special_tokens_set)
    texts = [f"a{s}b" for s in specials] + ["".join(specials) + " x " + specials[0]]
    texts += corpus_files()["edge_cases"]
    for text in texts:
        assert ours.encode(text, parse_special=True) == ref.encode(text, allowed_special="all"), text
        assert ours.encode(text) == ref.encode_ordinary(text), text


@pytest.mark.parametrize("name", BUNDLED)
def test_special_tokens_at_every_offset_match_tiktoken(tiktoken_pairs, name):
    # the added-token scan skips text eight bytes at a time: a token must be found wherever it starts
    ours, ref = tiktoken_pairs[name]
    special = sorted(ref.special_tokens_set)[0]
    base = "The quick brown fox jumps over the lazy dog, 12345 times. Ünïcödé 中文"
    for k in range(len(base) + 1):
        for text in (base[:k] + special + base[k:], base[:k] + special[:-1] + base[k:] + special):
            assert ours.encode(text, parse_special=True) == ref.encode(text, allowed_special="all"), text


@pytest.mark.parametrize("name", BUNDLED)
def test_bundled_encoding_decodes_every_token(tiktoken_pairs, name):
    ours, ref = tiktoken_pairs[name]
    for tid in range(ref.n_vocab):
        try:
            expected = ref.decode_single_token_bytes(tid)
        except KeyError:
            continue
        assert ours.decode_bytes([tid]) == expected, tid


def test_whisper_rank_file_loads_with_explicit_pattern(shared):
    path = shared_path("data", "tiktoken", "whisper", "multilingual.tiktoken")
    pat = json.loads(shared_path("data", "tiktoken", "encodings.json").read_text())["gpt2"]["pat_str"]
    ranks = tiktoken.load.load_tiktoken_bpe(str(path))
    specials = {"<|endoftext|>": len(ranks), "<|startoftranscript|>": len(ranks) + 1}
    ref = tiktoken.Encoding(name="whisper", pat_str=pat, mergeable_ranks=ranks, special_tokens=specials)
    ours = tokjit.load(path, pat_str=pat, special_tokens=specials)
    texts = corpus_files()["edge_cases"] + corpus_files()["french"][:500] + corpus_files()["japanese"][:500]
    assert ours.encode_batch(texts) == ref.encode_ordinary_batch(texts)
    assert ours.encode("<|endoftext|>hi", parse_special=True) == ref.encode("<|endoftext|>hi", allowed_special="all")


def test_tiktoken_file_without_pattern_is_a_clear_error(shared):
    with pytest.raises(tokjit.ModelFileError, match="pat_str"):
        tokjit.load(shared_path("data", "tiktoken", "r50k_base.tiktoken"))


@pytest.fixture(scope="module")
def hf_pairs(shared):
    pairs = {}
    for name in HF_BYTE_LEVEL:
        path = shared_path("data", "hf", name, "tokenizer.json")
        ref = tokenizers.Tokenizer.from_file(str(path))
        ref.no_truncation()
        ref.no_padding()
        pairs[name] = (tokjit.load(path), ref)
    return pairs


@pytest.mark.parametrize("corpus", CORPORA)
@pytest.mark.parametrize("name", HF_BYTE_LEVEL)
def test_tokenizer_json_matches_hf(hf_pairs, name, corpus):
    ours, ref = hf_pairs[name]
    texts = corpus_files()[corpus]
    expected = [e.ids for e in ref.encode_batch(texts, add_special_tokens=False)]
    got = ours.encode_batch(texts, parse_special=True)
    assert got == expected, first_mismatch(texts, got, expected)


@pytest.mark.parametrize("name", HF_BYTE_LEVEL)
def test_tokenizer_json_post_processor_matches_hf(hf_pairs, name):
    ours, ref = hf_pairs[name]
    texts = corpus_files()["edge_cases"] + ["", "hello"]
    expected = [e.ids for e in ref.encode_batch(texts, add_special_tokens=True)]
    got = [ours.encode(t, add_special_tokens=True, parse_special=True) for t in texts]
    assert got == expected, first_mismatch(texts, got, expected)


@pytest.mark.parametrize("name", HF_BYTE_LEVEL)
def test_tokenizer_json_decode_matches_hf(hf_pairs, name):
    ours, ref = hf_pairs[name]
    for tid in range(0, ref.get_vocab_size(), 7):
        assert ours.decode([tid]) == ref.decode([tid], skip_special_tokens=False), tid
    for text in corpus_files()["edge_cases"] + corpus_files()["emoji"][:300]:
        ids = ref.encode(text, add_special_tokens=False).ids
        assert ours.decode(ids) == ref.decode(ids, skip_special_tokens=False)
        assert ours.decode(ids, skip_special_tokens=True) == ref.decode(ids, skip_special_tokens=True)


def test_piece_cache_replacement_keeps_ids_exact(tiktoken_pairs):
    """The byte-level kernel's per-thread piece cache replaces rows once its windows fill. 150k
    distinct random words (more than its 64k rows; with CJK, emoji and long pieces that also fill its
    pools) are encoded, then a mix of old and new words twice, each pass after the cache has turned
    over: every pass must equal tiktoken."""
    import random

    ours, ref = tiktoken_pairs["o200k_base"]
    rng = random.Random(11)
    alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJ0123456789éßжя日本語中文😀'"
    words = sorted({"".join(rng.choice(alphabet) for _ in range(rng.randint(1, 30))) for _ in range(150_000)})
    rng.shuffle(words)
    first = [" ".join(words[i:i + 25]) for i in range(0, len(words), 25)]
    mixed = [" ".join(rng.choice(words) for _ in range(25)) for _ in range(3000)]
    for texts in (first, mixed, mixed, first[:500]):
        got = ours.encode_batch(texts, num_threads=1)
        expected = ref.encode_ordinary_batch(texts)
        assert got == expected, first_mismatch(texts, got, expected)
