"""Bad files and hostile text for the foundation: typed errors naming the problem, or correct output."""

from __future__ import annotations

import json
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tokjit
from conftest import shared_path

tiktoken = pytest.importorskip("tiktoken")
tokenizers = pytest.importorskip("tokenizers")


@pytest.fixture(scope="module")
def o200k():
    return tokjit.get_encoding("o200k_base")


@pytest.fixture(scope="module")
def o200k_ref(shared):
    import tiktoken.load
    entry = json.loads(shared_path("data", "tiktoken", "encodings.json").read_text())["o200k_base"]
    ranks = tiktoken.load.load_tiktoken_bpe(str(shared_path("data", "tiktoken", "o200k_base.tiktoken")))
    return tiktoken.Encoding(name="o200k", pat_str=entry["pat_str"], mergeable_ranks=ranks,
                             special_tokens=entry["special_tokens"])


@pytest.fixture(scope="module")
def llama3_json(shared):
    return json.loads(shared_path("data", "hf", "llama3", "tokenizer.json").read_text(encoding="utf-8"))


def write(tmp_path, name, payload) -> str:
    path = tmp_path / name
    path.write_bytes(payload if isinstance(payload, bytes) else json.dumps(payload).encode())
    return str(path)


def test_missing_file_is_file_not_found(tmp_path):
    with pytest.raises(FileNotFoundError):
        tokjit.load(tmp_path / "nope.json")
    with pytest.raises(tokjit.TokjitError):
        tokjit.load(tmp_path / "nope.json")


@pytest.mark.parametrize("cut", [1, 100, 5000, 200_000])
def test_truncated_tokenizer_json_is_model_file_error(shared, tmp_path, cut):
    data = shared_path("data", "hf", "gpt35turbo", "tokenizer.json").read_bytes()[:cut]
    with pytest.raises(tokjit.ModelFileError):
        tokjit.load(write(tmp_path, "t.json", data))


def test_unrecognised_bytes_are_model_file_error(tmp_path):
    with pytest.raises(tokjit.ModelFileError, match="unrecognised"):
        tokjit.load(write(tmp_path, "x.bin", b"\x00\x01\x02garbage" * 10))


def test_unknown_pre_tokenizer_is_named(llama3_json, tmp_path):
    doc = dict(llama3_json, pre_tokenizer={"type": "FancyNewSplitter"})
    with pytest.raises(tokjit.UnsupportedComponentError, match="FancyNewSplitter"):
        tokjit.load(write(tmp_path, "t.json", doc))


def test_unknown_model_type_is_named(llama3_json, tmp_path):
    doc = dict(llama3_json, model=dict(llama3_json["model"], type="Hyperpiece"))
    with pytest.raises(tokjit.UnsupportedComponentError, match="Hyperpiece"):
        tokjit.load(write(tmp_path, "t.json", doc))


def test_merge_naming_missing_token_is_named(llama3_json, tmp_path):
    model = dict(llama3_json["model"])
    model["merges"] = ["Ġt he", "nosuch token"] + model["merges"][:10]
    with pytest.raises(tokjit.ModelFileError, match="nosuch"):
        tokjit.load(write(tmp_path, "t.json", dict(llama3_json, model=model)))


def test_model_without_vocab_object_is_model_file_error(llama3_json, tmp_path):
    with pytest.raises(tokjit.ModelFileError):
        tokjit.load(write(tmp_path, "t.json", dict(llama3_json, model={"type": "BPE", "vocab": [1, 2]})))


@pytest.mark.parametrize("line", [b"!!!notbase64 1\n", b"YQ== notanint\n", b"YQ== 1\nYQ== 2\n", b"YQ== 1\nYg== 1\n"])
def test_bad_rank_files_are_model_file_errors(tmp_path, line):
    with pytest.raises(tokjit.ModelFileError):
        tokjit.load(write(tmp_path, "r.tiktoken", line), pat_str=r"\w+")


def test_unknown_encoding_name(o200k):
    with pytest.raises(KeyError, match="o200k_base"):
        tokjit.get_encoding("o300k_base")


def test_empty_text(o200k):
    assert o200k.encode("") == []
    assert o200k.decode([]) == ""


def test_lone_surrogates_encode_like_tiktoken(o200k, o200k_ref):
    for text in ["\ud800", "a\udfffb", "\ud83d\ude00", "x\ud800\udc00y", "\udc00\ud800"]:
        assert o200k.encode(text) == o200k_ref.encode_ordinary(text)
        repaired = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
        assert o200k.decode(o200k.encode(text)) == repaired


def test_decode_rejects_ids_outside_vocab(o200k):
    with pytest.raises(tokjit.InputError):
        o200k.decode([o200k.vocab_size])
    with pytest.raises(ValueError):
        o200k.decode([-1])


@pytest.mark.parametrize("unit", ["x", " ", "^", "1", "'", "\n", "é", "日"])
def test_long_runs_are_roughly_linear(o200k, unit):
    def best_time(text):
        times = []
        for _ in range(3):
            t0 = time.perf_counter()
            ids = o200k.encode(text)
            times.append(time.perf_counter() - t0)
        return min(times), ids

    o200k.encode(unit * 1000)
    small, big = unit * 100_000, unit * 1_000_000
    t_small, _ = best_time(small)
    t_big, ids = best_time(big)
    assert o200k.decode(ids) == big
    # generous bound for a shared, noisy machine: linear is 10x, a quadratic kernel would be ~100x
    assert t_big / max(t_small, 1e-3) < 40


@settings(max_examples=150, deadline=None)
@given(st.text(max_size=200))
def test_round_trip_any_text(o200k, text):
    repaired = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    assert o200k.decode(o200k.encode(text)) == repaired


@settings(max_examples=150, deadline=None)
@given(st.text(alphabet=st.characters(codec="utf-8"), max_size=120))
def test_any_text_matches_tiktoken_reference(o200k, o200k_ref, text):
    assert o200k.encode(text) == o200k_ref.encode_ordinary(text)


def test_batch_and_numpy_paths_agree(o200k):
    texts = ["hello world", "", "日本語のテキスト", "x" * 5000, "<|endoftext|> tail"]
    single = [o200k.encode(t) for t in texts]
    assert o200k.encode_batch(texts, num_threads=2) == single
    flat, offsets = o200k.encode_batch_numpy(texts, num_threads=2)
    assert [flat[offsets[i]:offsets[i + 1]].tolist() for i in range(len(texts))] == single
