"""``tokjit.tiktoken`` next to tiktoken itself: model routing, special-token rules (what raises, what
becomes a special token), bytes-level helpers and batches, on the bundled encodings' rank files."""

from __future__ import annotations

import pickle

import pytest

import tokjit
from tokjit import cli
from tokjit import tiktoken as tj_tiktoken

tiktoken = pytest.importorskip("tiktoken")
tiktoken_model = pytest.importorskip("tiktoken.model")

NAMES = ["cl100k_base", "o200k_base", "p50k_edit", "r50k_base"]


@pytest.fixture(scope="module", params=NAMES)
def pair(request):
    name = request.param
    return tj_tiktoken.get_encoding(name), cli._tiktoken_from_bundled(tiktoken, name)


def test_model_routing_matches_tiktoken():
    names = list(tiktoken_model.MODEL_TO_ENCODING)
    names += [prefix + "2025-01-01" for prefix in tiktoken_model.MODEL_PREFIX_TO_ENCODING]
    names += ["gpt-4o-mini", "gpt-4-32k", "gpt-3.5-turbo-16k", "ft:gpt-4o:org:x:1", "gpt-oss-20b"]
    for model in names:
        expected = tiktoken.encoding_name_for_model(model)
        assert tj_tiktoken.encoding_name_for_model(model) == expected, model
        assert tokjit.encoding_name_for_model(model) == expected, model
    assert tokjit.encoding_for_model("gpt-4o") is tokjit.get_encoding("o200k_base")
    assert tj_tiktoken.encoding_for_model("gpt-4").name == "cl100k_base"
    with pytest.raises(KeyError):
        tiktoken.encoding_name_for_model("llama-3")
    with pytest.raises(tokjit.UnknownEncodingError):
        tokjit.encoding_for_model("llama-3")


TEXTS = [
    "hello world",
    "<|endoftext|> hello <|fim_prefix|> there <|fim_middle|>",
    "a<|endofprompt|>b<|endoftext|><|endoftext|>c",
    "<|fim_suffix|>x<|fim_prefix|>",
    "no special here < | > <|not_special|>",
    "\ud83d lone surrogate and 👍",
]


def _outcome(fn):
    try:
        return ("ok", fn())
    except ValueError as exc:
        return ("ValueError", str(exc))


@pytest.mark.parametrize("text", TEXTS)
def test_special_token_rules_match_tiktoken(pair, text):
    ours, ref = pair
    specials = sorted(ref.special_tokens_set)
    options = [{}, {"allowed_special": "all"}, {"disallowed_special": ()},
               {"allowed_special": "all", "disallowed_special": ()}]
    for s in specials:
        options.append({"allowed_special": {s}})
        options.append({"allowed_special": {s}, "disallowed_special": ()})
        options.append({"disallowed_special": {s}})
    for kwargs in options:
        assert _outcome(lambda: ours.encode(text, **kwargs)) == _outcome(lambda: ref.encode(text, **kwargs)), kwargs
        # tiktoken's encode_to_numpy lacks encode's lone-surrogate repair and raises
        # UnicodeEncodeError; tokjit's returns encode's ids there
        numpy_ref = ref.encode if "\ud83d" in text else ref.encode_to_numpy
        assert _outcome(lambda: ours.encode_to_numpy(text, **kwargs).tolist()) == \
            _outcome(lambda: list(numpy_ref(text, **kwargs))), kwargs
        assert _outcome(lambda: ours.encode_batch([text, "x"], **kwargs)) == \
            _outcome(lambda: ref.encode_batch([text, "x"], **kwargs)), kwargs
    assert ours.encode_ordinary(text) == ref.encode_ordinary(text)
    assert ours.encode_ordinary_batch([text, text[:3]]) == ref.encode_ordinary_batch([text, text[:3]])


def test_attributes_and_bytes_helpers(pair):
    ours, ref = pair
    assert ours.eot_token == ref.eot_token
    assert ours.special_tokens_set == ref.special_tokens_set
    assert ours.n_vocab == ref.n_vocab and ours.max_token_value == ref.max_token_value
    ids = ref.encode("héllo wörld 🤖 <|endoftext|>", allowed_special="all")
    assert ours.decode_tokens_bytes(ids) == ref.decode_tokens_bytes(ids)
    assert ours.decode_with_offsets(ids) == ref.decode_with_offsets(ids)
    assert ours.decode_bytes(ids) == ref.decode_bytes(ids)
    plain = [i for i in ids if not ref.is_special_token(i)]
    assert ours.tokenizer.decode_bytes(ids, skip_special_tokens=True) == ref.decode_bytes(plain)
    for cut in range(len(ids)):  # cuts inside a character raise UnicodeDecodeError in both
        assert _outcome(lambda: ours.decode(ids[:cut], errors="strict")) == \
            _outcome(lambda: ref.decode(ids[:cut], errors="strict"))
        assert ours.decode(ids[:cut]) == ref.decode(ids[:cut])
    assert ours.decode_batch([ids, ids[:2]]) == ref.decode_batch([ids, ids[:2]])
    for tid in list(range(0, ref.n_vocab, 997)) + sorted(ref._special_tokens.values()):
        try:
            expected = ref.decode_single_token_bytes(tid)
        except KeyError:
            with pytest.raises(KeyError):
                ours.decode_single_token_bytes(tid)
            continue
        assert ours.decode_single_token_bytes(tid) == expected
        assert ours.encode_single_token(expected) == ref.encode_single_token(expected)
        assert ours.is_special_token(tid) == ref.is_special_token(tid)
    with pytest.raises(KeyError):
        ours.encode_single_token("not one token at all")
    for data in [b" \xec\x8b\xa4\xed", b"hello \xff", b"\n\n  \xe2\x82", b"\x80" * 5, b"abc"]:
        assert ours._encode_bytes(data) == ref._encode_bytes(data), data
    assert ours._encode_single_piece("helloqqqq") == ref._encode_single_piece("helloqqqq")
    assert sorted(ours.token_byte_values()) == sorted(ref.token_byte_values())


def test_unknown_ids_raise_key_error_like_tiktoken():
    ours = tj_tiktoken.get_encoding("cl100k_base")
    ref = cli._tiktoken_from_bundled(tiktoken, "cl100k_base")
    for bad in (100261, ours.n_vocab + 5):
        with pytest.raises(KeyError):
            ref.decode([bad])
        with pytest.raises(KeyError):
            ours.decode([bad])
        with pytest.raises(KeyError):
            ours.decode_bytes([bad])


def test_pickle_and_custom_encoding_against_tiktoken():
    base = tj_tiktoken.get_encoding("r50k_base")
    assert pickle.loads(pickle.dumps(base)) is not None
    assert pickle.dumps(base) == pickle.dumps(tj_tiktoken.get_encoding("r50k_base"))
    ref_base = cli._tiktoken_from_bundled(tiktoken, "r50k_base")
    kwargs = dict(pat_str=ref_base._pat_str, mergeable_ranks=ref_base._mergeable_ranks,
                  special_tokens={"<|pickle|>": 100_000, "<|endoftext|>": 50256})
    ours = tj_tiktoken.Encoding("custom", **kwargs)
    ref = tiktoken.Encoding("custom", **kwargs)
    text = "hi <|pickle|> there<|endoftext|>"
    assert ours.encode(text, allowed_special="all") == ref.encode(text, allowed_special="all")
    again = pickle.loads(pickle.dumps(ours))
    assert again.encode(text, allowed_special={"<|pickle|>"}, disallowed_special=()) == \
        ref.encode(text, allowed_special={"<|pickle|>"}, disallowed_special=())


def test_single_text_to_batch_is_a_typed_error():
    enc = tj_tiktoken.get_encoding("o200k_base")
    with pytest.raises(tokjit.InputError):
        enc.encode_batch("hello")
    with pytest.raises(tokjit.InputError):
        enc.encode(b"hello")
