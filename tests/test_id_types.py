"""Token ids that are not integers are refused, as the references refuse them.

HF ``tokenizers``, tiktoken and sentencepiece raise ``TypeError`` for a float id (also ``1.0``), a
numpy float, ``None`` or a string; they accept ints, bools and numpy integers. tokjit raises
:class:`~tokjit.errors.TokenIdTypeError` (a ``TypeError`` and an ``InputError``) at every entry point
that takes ids, instead of truncating ``1.5`` to ``1``. Each case first asserts what the reference
does with the same input, so a reference that changes its mind shows up here.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

import tokjit
from tokjit.errors import InputError, TokenIdTypeError
from tokjit.serving import Sequence, StopSequenceDecoder

tokenizers = pytest.importorskip("tokenizers")
tiktoken = pytest.importorskip("tiktoken")
import tiktoken.load  # noqa: E402
from tokenizers.decoders import DecodeStream as HFDecodeStream  # noqa: E402

# one tokenizer per decode path: byte-level table, WordPiece chain, Metaspace/Unigram, ByteFallback
# chain, no-decoder tokenizer.json (pegasus has one, so bert's chain covers the ## rule)
HF_FAMILIES = ["gpt35turbo", "bert-minilm", "t5", "mistral-7b"]


class Reference:
    """The reference library's decode for one tokenizer file."""

    def __init__(self, name, decode, decode_bytes=None, decode_batch=None, hf=None):
        self.name, self.decode, self.decode_bytes, self.decode_batch, self.hf = \
            name, decode, decode_bytes, decode_batch, hf


def _hf_pair(shared, family):
    path = shared / "data" / "hf" / family / "tokenizer.json"
    ref = tokenizers.Tokenizer.from_file(str(path))
    # tokjit keeps special tokens unless asked, HF drops them unless asked
    return tokjit.load(path), Reference(
        family, lambda ids: ref.decode(ids, skip_special_tokens=False),
        decode_batch=lambda batch: ref.decode_batch(batch, skip_special_tokens=False), hf=ref)


def _tiktoken_pair(shared):
    entry = json.loads((shared / "data" / "tiktoken" / "encodings.json").read_text())["cl100k_base"]
    path = shared / "data" / "tiktoken" / "cl100k_base.tiktoken"
    ranks = tiktoken.load.load_tiktoken_bpe(str(path))
    ref = tiktoken.Encoding("cl100k_base", pat_str=entry["pat_str"], mergeable_ranks=ranks,
                            special_tokens=entry["special_tokens"])
    tok = tokjit.load(path, pat_str=entry["pat_str"], special_tokens=entry["special_tokens"])
    return tok, Reference("cl100k_base.tiktoken", ref.decode, decode_bytes=ref.decode_bytes,
                          decode_batch=ref.decode_batch)


def _spm_pair(shared):
    spm = pytest.importorskip("sentencepiece")
    path = shared / "data" / "spm" / "llama2" / "tokenizer.model"
    ref = spm.SentencePieceProcessor(model_file=str(path))
    return tokjit.load(path), Reference("llama2 tokenizer.model", ref.decode)


@pytest.fixture(scope="module", params=HF_FAMILIES + ["tiktoken", "spm"])
def pair(request, shared):
    if request.param == "tiktoken":
        return _tiktoken_pair(shared)
    if request.param == "spm":
        return _spm_pair(shared)
    return _hf_pair(shared, request.param)


@pytest.fixture(scope="module")
def gpt35(shared):
    return _hf_pair(shared, "gpt35turbo")


# ids in the ordinary vocabulary of every tokenizer above (>= 1000 so no special token, no byte piece)
A, B = 1500, 2600

REFUSED = {
    "float": [1.5],
    "integral float": [float(A)],
    "float among ints": [A, B + 0.5, B],
    "numpy float": [np.float64(A)],
    "float array": np.array([A, B], np.float64),
    "None": [A, None],
    "str element": [A, str(B)],
    "numpy bool": [np.bool_(True)],
    "bool array": np.array([True, False]),
    "object array with float": np.array([A, 2.5], object),
}

ACCEPTED = {
    "ints": [A, B],
    "bool": [True, A],
    "numpy ints": [np.int64(A), np.int32(B)],
    "int32 array": np.array([A, B], np.int32),
    "uint16 array": np.array([A, B], np.uint16),
    "tuple": (A, B),
    "object array of ints": np.array([A, B], object),
}

# sentencepiece reads numpy bools as ints; tokjit follows HF and tiktoken (operator.index) there
SPM_TAKES = {"numpy bool", "bool array"}


def _raises_type_error(fn, ids) -> bool:
    try:
        fn(ids)
    except TypeError:
        return True
    return False


def _entry_points(tok):
    return {
        "decode": tok.decode,
        "decode_bytes": tok.decode_bytes,
        "decode_batch": lambda ids: tok.decode_batch([[A], ids]),
        "decode skip_special": lambda ids: tok.decode(ids, skip_special_tokens=True),
    }


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_non_integer_ids_are_refused_like_the_reference(pair, gpt35, case):
    tok, ref = pair
    ids = REFUSED[case]
    if ref.name.endswith(".model") and case in SPM_TAKES:
        ref = gpt35[1]
    assert _raises_type_error(ref.decode, ids), f"{ref.name} now accepts {case}"
    if ref.decode_bytes is not None:
        assert _raises_type_error(ref.decode_bytes, ids)
    if ref.decode_batch is not None:
        assert _raises_type_error(ref.decode_batch, [[A], ids])
    for name, fn in _entry_points(tok).items():
        with pytest.raises(TokenIdTypeError) as info:
            fn(ids)
        assert isinstance(info.value, TypeError) and isinstance(info.value, InputError), name


@pytest.mark.parametrize("case", sorted(ACCEPTED))
def test_integer_ids_decode_like_the_reference(pair, case):
    tok, ref = pair
    ids = ACCEPTED[case]
    plain = [int(i) for i in ids]
    if ref.name.endswith(".model") and isinstance(ids, np.ndarray) and ids.dtype == object:
        expected = ref.decode(plain)  # sentencepiece takes no object arrays; HF and tiktoken do
    else:
        expected = ref.decode(ids)
    assert expected == ref.decode(plain)
    assert tok.decode(ids) == expected
    if ref.decode_bytes is not None:
        assert tok.decode_bytes(ids) == ref.decode_bytes(ids)
    if ref.decode_batch is not None:
        assert tok.decode_batch([ids, ids]) == ref.decode_batch([ids, ids])


def test_generator_of_ids_is_read_once(pair):
    tok, ref = pair
    assert tok.decode(i for i in [A, B]) == ref.decode([A, B])
    assert tok.decode_bytes(i for i in [A, B]) == tok.decode_bytes([A, B])
    with pytest.raises(TokenIdTypeError):
        tok.decode_bytes(x for x in [A, 2.5])


def test_string_of_digits_is_not_ids(gpt35):
    tok, ref = gpt35
    assert _raises_type_error(ref.hf.decode, "15")
    with pytest.raises(TokenIdTypeError):
        tok.decode("15")


def test_id_to_token_refuses_floats(gpt35):
    tok, ref = gpt35
    assert _raises_type_error(ref.hf.id_to_token, float(A))
    with pytest.raises(TokenIdTypeError):
        tok.id_to_token(float(A))
    assert tok.id_to_token(np.int64(A)) == ref.hf.id_to_token(A)


@pytest.mark.parametrize("family", ["gpt35turbo", "t5", "bert-minilm"])
@pytest.mark.parametrize("bad", [1.5, float(A), np.float64(A), np.bool_(True), "5", None],
                         ids=["float", "integral float", "numpy float", "numpy bool", "str", "None"])
def test_decode_stream_refuses_non_integer_steps_and_goes_on(shared, family, bad):
    """gpt35turbo steps on the byte-table path, t5 and bert on the window path."""
    tok, ref = _hf_pair(shared, family)
    hf_stream = HFDecodeStream(skip_special_tokens=False)
    hf_out = [hf_stream.step(ref.hf, A)]
    with pytest.raises(TypeError):
        hf_stream.step(ref.hf, bad)
    hf_out.append(hf_stream.step(ref.hf, B))

    stream = tok.decode_stream()
    out = [stream.step(A)]
    with pytest.raises(TokenIdTypeError):
        stream.step(bad)
    with pytest.raises(TokenIdTypeError):
        stream.step([B, bad])
    out.append(stream.step(B))  # the refused steps left nothing behind
    assert out == hf_out


@pytest.mark.parametrize("family", ["gpt35turbo", "t5"])
def test_decode_stream_refuses_float_prompt_ids(shared, family):
    tok, ref = _hf_pair(shared, family)
    with pytest.raises(TypeError):
        HFDecodeStream(ids=[A, 1.5], skip_special_tokens=False)
    with pytest.raises(TokenIdTypeError):
        tok.decode_stream(prompt_ids=[A, 1.5])
    with pytest.raises(TokenIdTypeError):
        tok.decode_stream(prompt_ids=np.array([A, B], np.float32))
    # numpy integers are ids for both
    HFDecodeStream(ids=[np.int64(A)], skip_special_tokens=False)
    stream = tok.decode_stream(prompt_ids=[np.int64(A)])
    assert stream.step(np.int32(B)) == tok.decode([A, B])[len(tok.decode([A])):]


def test_stop_decoder_does_not_stop_on_a_float_equal_to_a_stop_id(gpt35):
    tok, ref = gpt35
    assert _raises_type_error(ref.hf.decode, [float(B)])
    dec = StopSequenceDecoder(tok, stop_token_ids=[B])
    with pytest.raises(TokenIdTypeError):
        dec.step(float(B))  # 2600.0 == 2600: without the check this stopped generation
    assert not dec.is_stopped()
    assert dec.step(np.int64(B)).__class__.__name__ in ("Stopped", "StoppedWithText")
    with pytest.raises(TokenIdTypeError):
        StopSequenceDecoder(tok, stop_token_ids=[2.5])
    with pytest.raises(TokenIdTypeError):
        StopSequenceDecoder(tok, visible_stop_token_ids=[np.float64(B)])


def test_sequence_refuses_float_ids(gpt35):
    tok, ref = gpt35
    assert _raises_type_error(ref.hf.decode, [A, 0.5])
    with pytest.raises(TokenIdTypeError):
        Sequence(tok, [A, 0.5])
    seq = Sequence(tok, [A])
    with pytest.raises(TokenIdTypeError):
        seq.append_token(float(B))
    assert seq.token_ids == [A]
    seq.append_token(np.int64(B))
    assert seq.text() == ref.hf.decode([A, B])


def test_constraint_refuses_float_ids(gpt35):
    from tokjit.constrain import Regex
    tok, ref = gpt35
    digit = tok.encode("7")
    assert len(digit) == 1
    (seven,) = digit
    assert _raises_type_error(ref.hf.decode, [float(seven)])
    c = Regex(tok, r"[0-9]+", eos_ids=[])
    state = c.initial_state
    assert c.is_allowed(state, seven) and c.is_allowed(state, np.int64(seven))
    with pytest.raises(TokenIdTypeError):
        c.advance(state, float(seven))
    with pytest.raises(TokenIdTypeError):
        c.is_allowed(state, float(seven))  # a caller's bug, not a forbidden token
    assert not c.is_allowed(state, tok.encode("x")[0])
    with pytest.raises(TokenIdTypeError):
        Regex(tok, r"[0-9]+", eos_ids=[float(seven)])
