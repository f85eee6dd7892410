"""``tokjit.sentencepiece.SentencePieceProcessor`` next to ``sentencepiece`` itself, on every ``.model``
in the shared data, over corpus lines: ids, pieces, extra options, decode of ids and of pieces,
vocabulary lookups and the errors sentencepiece raises."""

from __future__ import annotations

import pytest

import tokjit
from tokjit.sentencepiece import SentencePieceProcessor

from conftest import SHARED, corpus_lines

spm = pytest.importorskip("sentencepiece")

MODELS = sorted(str(p.relative_to(SHARED)) for p in SHARED.glob("data/**/*.model")) if SHARED.is_dir() else []


@pytest.fixture(scope="module", params=MODELS)
def pair(request, shared):
    path = str(shared / request.param)
    return SentencePieceProcessor(model_file=path), spm.SentencePieceProcessor(model_file=path)


@pytest.fixture(scope="module")
def lines(shared):
    texts = corpus_lines(limit_per_file=200)
    return [t for t in texts if len(t) < 2000]


def _outcome(fn):
    try:
        return ("ok", fn())
    except IndexError:
        return ("IndexError",)
    except ValueError:
        return ("ValueError",)


def test_every_shared_model_is_covered():
    assert len(MODELS) >= 5, MODELS


def test_ids_and_pieces_match(pair, lines):
    ours, ref = pair
    assert ours.encode(lines) == ref.encode(lines)
    assert ours.encode(lines, out_type=str) == ref.encode(lines, out_type=str)
    assert ours.encode(lines, out_type=str, emit_unk_piece=True) == ref.encode(lines, out_type=str, emit_unk_piece=True)
    for text in lines[::7]:
        assert ours.encode_as_ids(text) == ref.encode_as_ids(text)
        assert ours.EncodeAsPieces(text) == ref.EncodeAsPieces(text)


def test_extra_options_match(pair):
    ours, ref = pair
    text = "Hello wörld, 你好 ©"
    for kwargs in [dict(add_bos=True), dict(add_eos=True), dict(add_bos=True, add_eos=True),
                   dict(reverse=True), dict(add_bos=True, add_eos=True, reverse=True)]:
        for out_type in (int, str):
            expected = _outcome(lambda: ref.encode(text, out_type=out_type, **kwargs))
            got = _outcome(lambda: ours.encode(text, out_type=out_type, **kwargs))
            assert got == expected, (kwargs, out_type)
    # options given to the constructor are the defaults of every call
    path = ours.tokenizer.spec.source["path"]
    if ref.eos_id() >= 0:
        assert SentencePieceProcessor(model_file=path, add_eos=True, reverse=True).encode(text) == \
            spm.SentencePieceProcessor(model_file=path, add_eos=True, reverse=True).encode(text)


def test_decode_ids_and_pieces_match(pair, lines):
    ours, ref = pair
    batch = ref.encode(lines)
    assert ours.decode(batch) == ref.decode(batch)
    pieces = ref.encode(lines, out_type=str)
    assert ours.decode(pieces) == ref.decode(pieces)
    assert [ours.decode_pieces(p) for p in pieces[::5]] == [ref.decode_pieces(p) for p in pieces[::5]]
    assert ours.decode(5) == ref.decode(5) and ours.decode([]) == ref.decode([])
    specials = [i for i in (ref.bos_id(), ref.eos_id(), ref.unk_id(), ref.pad_id()) if i >= 0]
    ids = specials + batch[0] + specials
    assert ours.decode_ids(ids) == ref.decode_ids(ids)
    odd = ["zzq", ref.id_to_piece(ref.unk_id()), "\u2581a", ref.id_to_piece(7), "<0x41>", "\u2581\u2581x"]
    assert ours.decode_pieces(odd) == ref.decode_pieces(odd)
    assert ours.decode_pieces(odd[::-1]) == ref.decode_pieces(odd[::-1])


def test_vocabulary_lookups_match(pair):
    ours, ref = pair
    n = ref.get_piece_size()
    assert ours.get_piece_size() == n == len(ours) == ours.vocab_size()
    assert (ours.bos_id(), ours.eos_id(), ours.pad_id(), ours.unk_id()) == \
        (ref.bos_id(), ref.eos_id(), ref.pad_id(), ref.unk_id())
    ids = list(range(0, n, max(1, n // 2000))) + list(range(min(n, 300)))
    assert ours.id_to_piece(ids) == ref.id_to_piece(ids)
    pieces = ref.id_to_piece(ids)
    assert ours.piece_to_id(pieces + ["not a piece \u2581\u2581"]) == ref.piece_to_id(pieces + ["not a piece \u2581\u2581"])
    for tid in ids:
        assert ours.get_score(tid) == ref.get_score(tid)
        assert (ours.is_control(tid), ours.is_unknown(tid), ours.is_unused(tid), ours.is_byte(tid)) == \
            (ref.is_control(tid), ref.is_unknown(tid), ref.is_unused(tid), ref.is_byte(tid))
    for bad in (n, -1, n + 1000):
        for call in ("id_to_piece", "get_score", "is_control"):
            with pytest.raises(IndexError):
                getattr(ref, call)(bad)
            with pytest.raises(IndexError):
                getattr(ours, call)(bad)
        with pytest.raises(IndexError):
            ref.decode([bad])
        with pytest.raises(IndexError):
            ours.decode([bad])


def test_sampling_is_refused(pair):
    ours, _ = pair
    for kwargs in [dict(enable_sampling=True, alpha=0.1, nbest_size=-1), dict(nbest_size=4), dict(alpha=0.5)]:
        with pytest.raises(NotImplementedError):
            ours.encode("hello", **kwargs)
    with pytest.raises(NotImplementedError):
        ours.sample_encode_as_pieces("hello", -1, 0.1)
    with pytest.raises(NotImplementedError):
        SentencePieceProcessor(enable_sampling=True)


def test_model_proto_and_wrong_format(shared):
    path = shared / "data/spm/sentencepiece-tests/botchan_en_bpe_1000.model"
    ours = SentencePieceProcessor(model_proto=path.read_bytes())
    ref = spm.SentencePieceProcessor(model_proto=path.read_bytes())
    assert ours.encode("I am a cat.", out_type=str) == ref.encode("I am a cat.", out_type=str)
    with pytest.raises(tokjit.InputError):
        SentencePieceProcessor.from_tokenizer(tokjit.get_encoding("r50k_base"))
    with pytest.raises(tokjit.InputError):
        SentencePieceProcessor().encode("x")
