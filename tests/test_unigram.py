"""Unigram model and precompiled charsmap, against HF ``tokenizers`` and ``sentencepiece``.

Corpus coverage (CI has 2 cores): hf/t5 tokenizer.json runs the full public corpus; pegasus, envit5 and
the .model files run a deterministic sample (every line of the first N per file, edge cases in full).
"""

from __future__ import annotations

import base64
import glob
import json
import random

import numpy as np
import pytest

from conftest import corpus_lines

import tokjit
from tokjit.pipeline.charsmap import PrecompiledCharsmap
from tokjit.errors import InputError, ModelFileError
from tokjit.kernels import charsmap as charsmap_kernel
from tokjit.fused.unigram import FusedUnigram, FusedUnigramHF

tokenizers = pytest.importorskip("tokenizers")
spm = pytest.importorskip("sentencepiece")



def _hf(shared, name):
    path = shared / "data" / "hf" / name / "tokenizer.json"
    ref = tokenizers.Tokenizer.from_file(str(path))
    ref.no_truncation()
    ref.no_padding()
    return ref, tokjit.load(path)


def _mismatches(expected, got, texts):
    return [(t[:80], e[:20], g[:20]) for t, e, g in zip(texts, expected, got) if e != g]


# ---------------------------------------------------------------------------------------------------
# HF tokenizer.json parity
# ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name,limit", [("t5", None), ("pegasus", 1500), ("envit5", 1500)])
def test_hf_parity(shared, name, limit):
    ref, tok = _hf(shared, name)
    if name != "envit5":  # envit5 is a BPE model behind the same normalizer
        assert isinstance(tok._fused, FusedUnigramHF)  # encode_batch runs the fused kernel
    texts = corpus_lines(limit_per_file=limit)
    expected = [e.ids for e in ref.encode_batch(texts, add_special_tokens=False)]
    got = tok.encode_batch(texts, parse_special=True)
    assert _mismatches(expected, got, texts) == []


HF_PIPELINE_VARIANTS = {
    "metaspace first, no split": (None, {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first",
                                         "split": False}),
    "metaspace never": (None, {"type": "Sequence", "pretokenizers": [
        {"type": "WhitespaceSplit"}, {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "never"}]}),
    "whitespace split only": (None, {"type": "WhitespaceSplit"}),
    "space collapse + first": ("collapse", {"type": "Sequence", "pretokenizers": [
        {"type": "WhitespaceSplit"}, {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first"}]}),
    "no normalizer": ("none", {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always"}),
}


@pytest.mark.parametrize("variant", list(HF_PIPELINE_VARIANTS))
def test_hf_unigram_pipeline_variants(shared, tmp_path, variant):
    """t5's tokenizer.json with other normalizer / pre-tokenizer combinations the fused Unigram path
    accepts, against HF on a corpus sample and texts that start with spaces or added tokens."""
    norm_kind, pre = HF_PIPELINE_VARIANTS[variant]
    config = json.loads((shared / "data" / "hf" / "t5" / "tokenizer.json").read_text(encoding="utf-8"))
    if norm_kind == "collapse":
        config["normalizer"] = {"type": "Sequence", "normalizers": [
            config["normalizer"], {"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": " "}]}
    elif norm_kind == "none":
        config["normalizer"] = None
    config["pre_tokenizer"] = pre
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(config), encoding="utf-8")
    ref = tokenizers.Tokenizer.from_file(str(path))
    ref.no_truncation()
    ref.no_padding()
    tok = tokjit.load(path)
    assert isinstance(tok._fused, FusedUnigramHF)
    texts = corpus_lines(limit_per_file=60, step=11) + [
        "  leading", "</s>after", "x</s> y", "a\u2581b \u2581\u2581c", "\ufdfa" * 50, " ", ""]
    expected = [e.ids for e in ref.encode_batch(texts, add_special_tokens=False)]
    assert _mismatches(expected, tok.encode_batch(texts, parse_special=True), texts) == []


@pytest.mark.parametrize("name", ["t5", "pegasus", "envit5"])
def test_hf_parity_with_special_tokens(shared, name):
    ref, tok = _hf(shared, name)
    texts = corpus_lines(limit_per_file=100) + ["</s> <pad> <unk>", "<extra_id_0> x <extra_id_1>", ""]
    expected = [e.ids for e in ref.encode_batch(texts, add_special_tokens=True)]
    got = tok.encode_batch(texts, parse_special=True, add_special_tokens=True)
    assert _mismatches(expected, got, texts) == []


@pytest.mark.parametrize("name", ["t5", "pegasus"])
def test_hf_decode_parity(shared, name):
    ref, tok = _hf(shared, name)
    for i in range(tok.vocab_size):
        assert tok.decode([i]) == ref.decode([i], skip_special_tokens=False), i
    texts = corpus_lines(limit_per_file=200)
    for ids in ref.encode_batch(texts, add_special_tokens=True):
        assert tok.decode(ids.ids) == ref.decode(ids.ids, skip_special_tokens=False)
        assert tok.decode(ids.ids, skip_special_tokens=True) == ref.decode(ids.ids, skip_special_tokens=True)


def _unigram_json(vocab, unk_id=0, byte_fallback=False, normalizer=None):
    return json.dumps({
        "version": "1.0", "added_tokens": [], "normalizer": normalizer, "pre_tokenizer": None,
        "post_processor": None, "decoder": None, "truncation": None, "padding": None,
        "model": {"type": "Unigram", "unk_id": unk_id, "vocab": vocab, "byte_fallback": byte_fallback},
    })


UNK_TEXTS = ["abc", "xyz", "a\u00e9\u00e9b", "\u4e2d\u6587", "ab\U0001F600c", "", "zzzaz", "ba" * 30]


@pytest.mark.parametrize("byte_fallback", [False, True])
def test_hf_unknowns_and_byte_fallback(tmp_path, byte_fallback):
    vocab = [["<unk>", 0.0], ["a", -1.0], ["b", -1.5], ["ab", -2.0], ["abc", -2.6], ["c", -1.2],
             ["ba", -1.9], ["z", -3.0]]
    vocab += [[f"<0x{b:02X}>", -5.0] for b in range(256) if b not in (0xA9, 0x98)]
    path = tmp_path / "tokenizer.json"
    path.write_text(_unigram_json(vocab, byte_fallback=byte_fallback))
    ref = tokenizers.Tokenizer.from_file(str(path))
    tok = tokjit.load(path)
    for text in UNK_TEXTS:
        assert tok.encode(text) == ref.encode(text).ids, text


def test_hf_ties_break_like_hf(tmp_path):
    # equal path scores everywhere: the earliest-starting last piece wins
    vocab = [["<unk>", 0.0], ["a", -1.0], ["aa", -2.0], ["aaa", -3.0], ["b", -1.0], ["ab", -2.0]]
    path = tmp_path / "tokenizer.json"
    path.write_text(_unigram_json(vocab))
    ref = tokenizers.Tokenizer.from_file(str(path))
    tok = tokjit.load(path)
    for n in range(1, 12):
        for text in ("a" * n, "a" * n + "b", "ab" * n):
            assert tok.encode(text) == ref.encode(text).ids, text


@pytest.mark.parametrize("name", ["pegasus", "t5"])
def test_hf_scores_as_hf_reads_them(shared, name):
    """HF reads a tokenizer.json's floats with serde_json's shortcut, not always the nearest double to
    the text (a quarter of pegasus' scores differ from Python's json in the last bit), and a Unigram
    vocabulary's near-ties follow those bits: the scores tokjit loads are the ones HF writes back
    (``to_str()``), and texts built to meet such ties (a vocabulary piece and a run of one character:
    'O////' is ▁O /// / for HF) get HF's ids."""
    ref, tok = _hf(shared, name)
    held = [score for _, score in json.loads(ref.to_str())["model"]["vocab"]]
    assert tok.model.scores.tolist() == held
    vocab = json.loads((shared / "data" / "hf" / name / "tokenizer.json").read_text(encoding="utf-8"))["model"]["vocab"]
    pieces = [piece.replace("\u2581", " ") for piece, _ in vocab[110:]]
    runs = list("-=.*_~!0#/+x") + ["ha", "la", "..", "-="]
    rng = random.Random(6)
    texts = ["O////", "a#####", "Dream-----", "pee-----", "PM///////"]
    for _ in range(30_000):
        word, run = rng.choice(pieces), rng.choice(runs) * rng.randint(2, 14)
        texts.append(rng.choice([word + run, run + word, word + run + rng.choice(pieces)]))
    expected = [e.ids for e in ref.encode_batch(texts, add_special_tokens=False)]
    assert _mismatches(expected, tok.encode_batch(texts, parse_special=True), texts) == []
    assert _mismatches(expected[:2000], [tok.encode(t, parse_special=True) for t in texts[:2000]], texts) == []


def test_hf_missing_unk_id(tmp_path):
    path = tmp_path / "tokenizer.json"
    path.write_text(_unigram_json([["a", -1.0], ["b", -2.0]], unk_id=None))
    tok = tokjit.load(path)
    assert tok.encode("abba") == tokenizers.Tokenizer.from_file(str(path)).encode("abba").ids
    with pytest.raises(InputError):
        tok.encode("abc")


@pytest.mark.parametrize("bad", [
    {"vocab": [["<unk>", 0.0], ["a", float("nan")]]},
    {"vocab": [["<unk>", 0.0], ["a", float("inf")]]},
    {"vocab": [["<unk>", 0.0], ["a", -1.0]], "unk_id": 2},
    {"vocab": [["<unk>", 0.0], ["a", -1.0]], "unk_id": -1},
    {"vocab": [["<unk>", 0.0], ["a"]]},
    {"vocab": [["<unk>", 0.0], ["a", "x"]]},
    {"vocab": []},
    {"vocab": {"a": 1}},
])
def test_hf_bad_unigram_files(tmp_path, bad):
    model = {"type": "Unigram", "unk_id": 0, **bad}
    doc = {"added_tokens": [], "normalizer": None, "pre_tokenizer": None, "post_processor": None,
           "decoder": None, "model": model}
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(ModelFileError):
        tokjit.load(path)


def test_pieces_longer_than_input(tmp_path):
    path = tmp_path / "tokenizer.json"
    path.write_text(_unigram_json([["<unk>", 0.0], ["a", -1.0], ["a" * 500, -0.5]]))
    ref = tokenizers.Tokenizer.from_file(str(path))
    tok = tokjit.load(path)
    for text in ("a", "a" * 499, "a" * 500, "a" * 1001):
        assert tok.encode(text) == ref.encode(text).ids


# ---------------------------------------------------------------------------------------------------
# sentencepiece .model parity
# ---------------------------------------------------------------------------------------------------

SPM_MODELS = ["hf/t5/spiece.model", "spm/sentencepiece-tests/botchan_en_unigram_1000.model"]


@pytest.mark.parametrize("rel", SPM_MODELS)
def test_sentencepiece_parity(shared, rel):
    path = shared / "data" / rel
    ref = spm.SentencePieceProcessor(model_file=str(path))
    tok = tokjit.load(path)
    assert isinstance(tok._fused, FusedUnigram)  # encode_batch runs the fused kernel
    # charsmap expansions far past the input length make the kernel grow its buffers mid-batch
    texts = corpus_lines(limit_per_file=1000) + ["\ufdfa" * 3000, "\u337b" * 5000 + " x", "a\ufdfab " * 100]
    expected = ref.encode(texts)
    got = tok.encode_batch(texts)
    assert _mismatches(expected, got, texts) == []
    for ids in expected[:3000]:
        assert tok.decode(ids) == ref.decode(ids)


def test_sentencepiece_word_cache_any_order(shared):
    """The word cache against sentencepiece, one call per text: words met first deep inside a long
    document (a large path score, where many words' paths are not certain) and then at the start of
    short texts (certain there: their ids are filled in late), random letter strings (near-tied paths),
    every text twice and then as one batch."""
    import random
    path = shared / "data" / "hf" / "t5" / "spiece.model"
    ref = spm.SentencePieceProcessor(model_file=str(path))
    tok = tokjit.load(path)
    assert tok._fused.word_cache
    rng = random.Random(7)
    words = sorted({w for line in corpus_lines(limit_per_file=300) for w in line.split() if len(w) < 30})
    words += ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(2, 12)))
              for _ in range(3000)]
    rng.shuffle(words)
    long_doc = " ".join(words * 3)
    short = [" ".join(words[i:i + rng.randint(1, 6)]) for i in range(0, len(words), 3)]
    texts = [long_doc] + short + [long_doc]
    expected = [ref.encode(t) for t in texts]
    for _ in range(2):
        got = [tok.encode(t) for t in texts]
        assert _mismatches(expected, got, texts) == []
    assert _mismatches(expected, tok.encode_batch(texts), texts) == []


@pytest.mark.parametrize("rel", SPM_MODELS)
def test_sentencepiece_decode_every_id(shared, rel):
    path = shared / "data" / rel
    ref = spm.SentencePieceProcessor(model_file=str(path))
    tok = tokjit.load(path)
    for i in range(ref.get_piece_size()):
        assert tok.decode([i]) == ref.decode([i]), i


def _edited_t5(shared, tmp_path, edit, name):
    pb = pytest.importorskip("sentencepiece.sentencepiece_model_pb2")
    proto = pb.ModelProto()
    proto.ParseFromString((shared / "data" / "hf" / "t5" / "spiece.model").read_bytes())
    edit(proto, pb)
    path = tmp_path / f"{name}.model"
    path.write_bytes(proto.SerializeToString())
    return str(path)


def _set_type(proto, pieces, kind):
    for piece in pieces:
        existing = [p for p in proto.pieces if p.piece == piece]
        if existing:
            existing[0].type = kind
        else:
            proto.pieces.add(piece=piece, score=0.0, type=kind)


def _unigram_user_defined(proto, pb):
    # in the vocabulary already and new ones, of several lengths: their score is 0.1 * (bytes - 1)
    _set_type(proto, ["▁the", "ing", "s", "<mask>", "foo bar", "@@", "▁▁", "xyz"],
              pb.ModelProto.SentencePiece.USER_DEFINED)


def _unigram_unused(proto, pb):
    _set_type(proto, ["▁the", "ing", "▁a", "s", "▁", "e"], pb.ModelProto.SentencePiece.UNUSED)


def _unigram_byte_fallback(proto, pb):
    proto.trainer_spec.byte_fallback = True
    for b in range(256):
        proto.pieces.add(piece=f"<0x{b:02X}>", score=0.0, type=pb.ModelProto.SentencePiece.BYTE)


def _unigram_no_dummy_keep_spaces(proto, pb):
    proto.normalizer_spec.add_dummy_prefix = False
    proto.normalizer_spec.remove_extra_whitespaces = False


UNIGRAM_VARIANTS = {"user_defined": _unigram_user_defined, "unused": _unigram_unused,
                    "byte_fallback": _unigram_byte_fallback, "no_dummy_keep_spaces": _unigram_no_dummy_keep_spaces}


@pytest.mark.parametrize("variant", list(UNIGRAM_VARIANTS))
def test_sentencepiece_unigram_variants(shared, tmp_path, variant):
    """t5's model with edited piece types / flags, against sentencepiece on a sample including the long
    code documents (path scores past sentencepiece's 1e5 rebase threshold)."""
    path = _edited_t5(shared, tmp_path, UNIGRAM_VARIANTS[variant], variant)
    ref = spm.SentencePieceProcessor(model_file=path)
    tok = tokjit.load(path)
    assert isinstance(tok._fused, FusedUnigram)
    texts = corpus_lines(limit_per_file=80, step=13) + [t for t in corpus_lines(limit_per_file=400)
                                                        if len(t) > 20_000][:6] + [
        "  leading and trailing  ", "<mask> x<mask>y", "foo bar foo  bar", "@@@@", "xyzxyz xy", "",
        "▁", " ▁ ", "the theatre thethe singing", "\U0001F600 \u6f22\u5b57 \x00\x01",
        # repeated words whose path score crosses the 1e5 rebase many times (word cache + reset replay)
        "the cat sat on the mat, " * 8000, "x\u00e9 \U0001F600 \u6f22 " * 9000]
    # the word-by-word Viterbi needs U+2581 as a piece of its own and inside no other piece
    assert tok._fused.word_cache is (variant in ("byte_fallback", "no_dummy_keep_spaces"))
    expected = ref.encode(texts)
    for _ in range(2):  # the second pass is served by the word cache
        got = tok.encode_batch(texts)
        assert _mismatches(expected, got, texts) == []
    assert [tok.decode(x) for x in expected[:200]] == ref.decode(expected[:200])


@pytest.mark.parametrize("options", [
    dict(),
    dict(byte_fallback=True, user_defined_symbols=["<sep>", "ab", "[MASK]"], split_digits=True),
    dict(normalization_rule_name="nmt_nfkc_cf", add_dummy_prefix=False, remove_extra_whitespaces=False,
         character_coverage=0.98),
    dict(treat_whitespace_as_suffix=True, normalization_rule_name="identity"),
])
def test_sentencepiece_char_models(tmp_path, options):
    """model_type CHAR (text cut into characters, user-defined pieces first, each looked up): models
    trained by sentencepiece's own trainer on part of the corpora, against sentencepiece on the rest."""
    import io
    texts = corpus_lines(step=30)
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(texts[::4][:3000]), model_writer=model,
                                   model_type="char", minloglevel=2, **options)
    path = tmp_path / "char.model"
    path.write_bytes(model.getvalue())
    ref = spm.SentencePieceProcessor(model_file=str(path))
    tok = tokjit.load(path)
    rng = random.Random(3)
    alphabet = list("abcXYZ019 .,'!?-_\t\n") + ["é", "ß", "ﬁ", "\u0301", "中", "ア", "👍", "\u3000", "①", "<sep>",
                                                  "[MASK]", "▁", "  "]
    sample = texts[1::9] + ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 30))) for _ in range(500)]
    expected = [ref.encode(t) for t in sample]
    assert _mismatches(expected, tok.encode_batch(sample), sample) == []
    assert _mismatches(expected, [tok.encode(t) for t in sample], sample) == []


def test_sentencepiece_char_model_type_over_a_vocabulary_of_longer_pieces(shared, tmp_path):
    """llama2's model with its model_type set to CHAR: sentencepiece then looks each character up
    and ignores the longer pieces; so does tokjit."""
    from sentencepiece import sentencepiece_model_pb2 as pb
    proto = pb.ModelProto()
    proto.ParseFromString((shared / "data" / "spm" / "llama2" / "tokenizer.model").read_bytes())
    proto.trainer_spec.model_type = pb.TrainerSpec.CHAR
    path = tmp_path / "char.model"
    path.write_bytes(proto.SerializeToString())
    ref = spm.SentencePieceProcessor(model_file=str(path))
    tok = tokjit.load(path)
    texts = corpus_lines(limit_per_file=60, step=7) + ["", " ", "a  b", "\U0001F600x", "ﬁ①"]
    assert _mismatches([ref.encode(t) for t in texts], tok.encode_batch(texts), texts) == []

DELETED_BY_THE_CHARSMAP = ["\x0b", "\x7f", "\x1c\x1d\x1e\x1f", " \x0b", "\x0b ", "  \x0b  ", "\x0b\u3000",
                           "\u3000\x0b", "\u3000", " ", "  ", "a\x0b", "\x0bb", " \x0b a", "\x7f \x7f",
                           "\x0b<mask>\x0b", "<mask>\x0b", "\x0b<mask>", "<mask> \x0b"]


@pytest.mark.parametrize("remove_extra", [True, False])
@pytest.mark.parametrize("suffix", [False, True])
def test_text_the_charsmap_deletes_entirely(shared, tmp_path, remove_extra, suffix):
    """Text made only of characters the charsmap deletes (t5's drops C0 controls and DEL) and spaces:
    sentencepiece's leading-space skip stops at a deleted character, so such text still gets its dummy
    prefix ("\\x0b" -> [▁] unless a trailing-space trim removes it again), while text of spaces alone
    (U+3000 included: the charsmap makes it " ") gets nothing. Every path, all four flag combinations."""
    def edit(proto, pb):
        proto.normalizer_spec.remove_extra_whitespaces = remove_extra
        proto.trainer_spec.treat_whitespace_as_suffix = suffix
        _set_type(proto, ["<mask>"], pb.ModelProto.SentencePiece.USER_DEFINED)
    path = _edited_t5(shared, tmp_path, edit, "deleted")
    ref = spm.SentencePieceProcessor(model_file=path)
    tok = tokjit.load(path)
    texts = DELETED_BY_THE_CHARSMAP
    expected = ref.encode(texts)
    assert _mismatches(expected, tok.encode_batch(texts), texts) == []
    assert _mismatches(expected, [tok.encode(t) for t in texts], texts) == []
    assert _mismatches(expected, [tok.encode_with_offsets(t)[0] for t in texts], texts) == []



# ---------------------------------------------------------------------------------------------------
# charsmap
# ---------------------------------------------------------------------------------------------------

def _rule_blobs(shared):
    paths = sorted(glob.glob(str(shared / "data" / "spm" / "sentencepiece-tests" / "normalization_rules" / "*.bin")))
    assert paths
    return {p.rsplit("/", 1)[-1]: open(p, "rb").read() for p in paths}


def _spm_normalizer(blob):
    from sentencepiece import sentencepiece_model_pb2 as pb
    spec = pb.NormalizerSpec(name="rules", precompiled_charsmap=blob, add_dummy_prefix=False,
                             remove_extra_whitespaces=False, escape_whitespaces=False)
    return spm.SentencePieceNormalizer(normalizer_spec=spec)


def _as_array(data: bytes) -> np.ndarray:
    return np.frombuffer(data, np.uint8)


def test_charsmap_matches_sentencepiece(shared):
    pytest.importorskip("google.protobuf")
    # letters before combining marks (keys that begin with a plain letter), compatibility forms, CJK
    rng = random.Random(11)
    mix = ["A", "e", "\u0301", "\u0308", "\u0306", "\u0438", "\u3000", "\uff21", "\u4e2d", " ", "\x00", "\ufb01",
           "1", "\u2460", "\uff76", "\uff9e", "\u1100", "\u1161", "\U0001F600", "\u00e9"]
    texts = corpus_lines(limit_per_file=400) + [
        "".join(rng.choice(mix) for _ in range(rng.randint(1, 10))) for _ in range(400)]
    raw = [b"a\xff\xc3b\xe2\x82", b"\xed\xa0\x80x", b"\xc0\xaf\xf4\x90\x80\x80", b"\x00\x01\xef\xbf\xbd",
           "\uff21\u0301\ufb01\u2460\u3000\uff76\uff9e".encode()]
    for name, blob in _rule_blobs(shared).items():
        ref = _spm_normalizer(blob)
        charsmap = PrecompiledCharsmap(blob)
        for text in texts:
            data = text.encode("utf-8", "surrogatepass")
            out, align = charsmap.normalize(_as_array(data), None)
            assert out.tobytes().decode("utf-8") == ref.normalize(text), (name, text[:80])
            if align is not None:
                assert align.shape[0] == out.shape[0] + 1 and align[-1] == len(data)
                assert np.all(np.diff(align) >= 0)
        for data in raw:
            out, _ = charsmap.normalize(_as_array(data), None)
            expected = ref.normalize(data)
            expected = expected if isinstance(expected, bytes) else expected.encode("utf-8")
            assert out.tobytes() == expected, (name, data)


def test_precompiled_matches_hf(shared):
    from tokjit.pipeline.registry import build_normalizer
    texts = corpus_lines(limit_per_file=300) + [
        "\uff21\u0301", "A\u0301", "a\r\nb", "x\u200d\u2460", "\U0001F468\u200d\U0001F469\u200d\U0001F467",
        "\U0001F1EB\U0001F1F7\U0001F1E9", "\ufb01\u0301", "\u0915\u094d\u0937", "\u1100\u1161\u11a8",
        "e\u0301\u0301\u0301\u0301", "\u0600\u0661", "1\ufe0f\u20e3", "\uff76\uff9e\uff9e", "\x00\u3000"]
    for name in ("t5", "pegasus", "envit5"):
        doc = json.loads((shared / "data" / "hf" / name / "tokenizer.json").read_text(encoding="utf-8"))
        cfg = doc["normalizer"]
        if cfg["type"] == "Sequence":
            cfg = cfg["normalizers"][0]
        ref = tokenizers.normalizers.Precompiled(base64.b64decode(cfg["precompiled_charsmap"]))
        mine = build_normalizer(cfg)
        for text in texts:
            data = text.encode("utf-8", "surrogatepass").decode("utf-8", "replace")
            out, _ = mine(_as_array(data.encode("utf-8")), None)
            assert out.tobytes().decode("utf-8") == ref.normalize_str(data), (name, text[:80])


def test_grapheme_segmentation_matches_regex():
    import regex
    from tokjit.pipeline.charsmap import grapheme_properties
    props = grapheme_properties()
    texts = ["\r\n\r\r\n", "a\u0301\u0302b", "\U0001F468\u200d\U0001F469\u200d\U0001F467x",
             "\U0001F1EB\U0001F1F7\U0001F1E9\U0001F1EA\U0001F1EC", "\u0915\u094d\u0937\u093f",
             "\u1100\u1161\u11a8\uac00\u11a8\uac01", "\u0600\u0661 \u0e01\u0e33", "x\u200d\U0001F600",
             "\U0001F600\U0001F3FB\u200d\U0001F4BB"] + corpus_lines(limit_per_file=30)
    for text in texts:
        data = _as_array(text.encode("utf-8", "surrogatepass").decode("utf-8", "replace").encode("utf-8"))
        ends = []
        i = 0
        while i < data.shape[0]:
            i = charsmap_kernel.grapheme_end(data, np.int64(i), np.int64(data.shape[0]), props)
            ends.append(i)
        decoded = data.tobytes().decode("utf-8")
        expected = np.cumsum([len(m.group().encode("utf-8")) for m in regex.finditer(r"\X", decoded)]).tolist()
        assert ends == expected, text[:80]


def _corrupt(blob: bytes, units_fn=None, strings_fn=None, size=None) -> bytes:
    trie_size = int.from_bytes(blob[:4], "little")
    units = np.frombuffer(blob[4:4 + trie_size], "<u4").copy()
    strings = blob[4 + trie_size:]
    if units_fn:
        units_fn(units)
    if strings_fn:
        strings = strings_fn(strings)
    head = (trie_size if size is None else size).to_bytes(4, "little")
    return head + units.tobytes() + strings


def test_corrupt_charsmaps(shared):
    blob = _rule_blobs(shared)["nfkc.bin"]
    PrecompiledCharsmap(blob)
    charsmap = PrecompiledCharsmap(blob)
    n = charsmap.units.shape[0]
    nodes = np.empty(n, np.int64)
    values = np.empty(n, np.int64)
    count = charsmap_kernel.reachable_leaves(charsmap.units, nodes, values)
    leaf = int(nodes[0])
    leaf_at = leaf ^ int(charsmap_kernel._offset(np.int64(charsmap.units[leaf])))

    def value_past_strings(units):
        units[leaf_at] = np.uint32((1 << 31) | (len(blob) + 10))

    def leaf_outside_trie(units):
        unit = int(units[leaf])
        units[leaf] = np.uint32((unit & 0x3FF) | ((n + 4096) << 10) & 0xFFFFFFFF)

    cases = {
        "empty": b"",
        "four bytes": blob[:4],
        "trie size past blob": len(blob).to_bytes(4, "little") + blob[4:],
        "truncated": blob[:len(blob) // 2],
        "value past strings": _corrupt(blob, units_fn=value_past_strings),
        "unterminated": _corrupt(blob, strings_fn=lambda s: s.replace(b"\0", b"x")),
        "not utf-8": _corrupt(blob, strings_fn=lambda s: s.replace(b"A", b"\xff")),
        "trie size zero": _corrupt(blob, size=0),
    }
    assert count > 0
    for label, bad in cases.items():
        with pytest.raises(ModelFileError):
            PrecompiledCharsmap(bad)
    # a leaf pointing outside the trie is either rejected or walked safely (the child may not be reachable)
    try:
        broken = PrecompiledCharsmap(_corrupt(blob, units_fn=leaf_outside_trie))
    except ModelFileError:
        pass
    else:
        broken.normalize(_as_array("ABC \uff21 \u2460".encode()), None)
    with pytest.raises(ModelFileError):
        PrecompiledCharsmap.from_base64("not base64!")
