"""SentencePiece-BPE family: ``.model`` files against ``sentencepiece``, tokenizer.json files (Mistral,
Gemma 3) against HF ``tokenizers``; encode and decode, plus model variants built by editing a real
``ModelProto`` (UNUSED / USER_DEFINED pieces, normalizer flags) and corrupted ``.model`` files.

Corpus coverage (CI budget): the Llama 2 ``.model`` runs on the whole public corpus; the other
tokenizers on a deterministic sample (every 9th text, at most 400 per file, all edge cases).
"""

from __future__ import annotations

import random

import numpy as np
import pytest

import tokjit
from tokjit.fused.spm import FusedSentencePiece
from conftest import SHARED, corpus_lines, shared_path
from tokjit.errors import ModelFileError, TokjitError

spm = pytest.importorskip("sentencepiece")
tokenizers = pytest.importorskip("tokenizers")

pytestmark = pytest.mark.skipif(not SHARED.is_dir(), reason=f"test data folder {SHARED} not found")

SPM_MODELS = {
    "llama2": ("spm", "llama2", "tokenizer.model"),
    "mistral-7b": ("spm", "mistral-7b", "tokenizer.model"),
    "botchan_bpe": ("spm", "sentencepiece-tests", "botchan_en_bpe_1000.model"),
}
HF_FILES = {
    "mistral-7b": ("hf", "mistral-7b", "tokenizer.json"),
    "gemma3": ("hf", "gemma3", "tokenizer.json"),
}


def data_path(parts) -> str:
    return str(shared_path("data", *parts))


def sample_texts() -> list[str]:
    return corpus_lines(limit_per_file=400, step=9) if SHARED.is_dir() else []


def first_mismatch(texts, ours, theirs):
    for text, a, b in zip(texts, ours, theirs):
        if a != b:
            return f"{text[:100]!r}: tokjit {a[:16]} vs reference {b[:16]}"
    return None


@pytest.fixture(scope="module")
def spm_pair(request):
    cache = {}

    def get(name):
        if name not in cache:
            parts = SPM_MODELS[name]
            path = data_path(parts)
            cache[name] = (tokjit.load(path), spm.SentencePieceProcessor(model_file=path))
        return cache[name]
    return get


@pytest.fixture(scope="module")
def hf_pair():
    cache = {}

    def get(name):
        if name not in cache:
            path = data_path(HF_FILES[name])
            ref = tokenizers.Tokenizer.from_file(path)
            ref.no_truncation()
            ref.no_padding()
            cache[name] = (tokjit.load(path), ref)
        return cache[name]
    return get


# ------------------------------------------------------------------------------------------------
# .model encode / decode vs sentencepiece
# ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", list(SPM_MODELS))
def test_spm_encode_parity(spm_pair, name):
    tok, ref = spm_pair(name)
    texts = corpus_lines() if name == "llama2" else sample_texts()
    ours = tok.encode_batch(texts, num_threads=2)
    theirs = ref.encode(texts, num_threads=2)
    bad = sum(a != b for a, b in zip(ours, theirs))
    assert bad == 0, f"{bad} of {len(texts)} differ; first: {first_mismatch(texts, ours, theirs)}"


@pytest.mark.parametrize("name", list(SPM_MODELS))
def test_spm_decode_parity(spm_pair, name):
    tok, ref = spm_pair(name)
    texts = sample_texts()
    ids = ref.encode(texts, num_threads=2)
    theirs = ref.decode(ids)
    ours = [tok.decode(x) for x in ids]
    assert first_mismatch(texts, [[o] for o in ours], [[t] for t in theirs]) is None
    # every single id, and random id sequences (byte pieces that are not valid UTF-8, controls, ...)
    n = tok.vocab_size
    singles = [[i] for i in range(n)]
    assert [tok.decode(x) for x in singles] == ref.decode(singles)
    rng = random.Random(1234)
    byte_ids = [i for i in range(n) if ref.is_byte(i)]
    seqs = []
    for _ in range(400):
        k = rng.randint(1, 12)
        pool = byte_ids if (byte_ids and rng.random() < 0.5) else range(n)
        seqs.append([rng.choice(pool) if rng.random() < 0.7 else rng.randrange(n) for _ in range(k)])
    assert [tok.decode(s) for s in seqs] == ref.decode(seqs)


@pytest.mark.parametrize("name", ["llama2", "mistral-7b"])
def test_spm_special_handling(spm_pair, name):
    tok, ref = spm_pair(name)
    texts = ["<s>Hello</s> world<unk>", "a <s> b", " <s>", "Hello"]
    for text in texts:
        # sentencepiece never matches control text: the default does the same
        assert tok.encode(text) == ref.encode(text)
        assert tok.encode(text, add_special_tokens=True) == ref.encode(text, add_bos=True)
    # parse_special=True: control pieces matched by their text, each segment with its dummy prefix
    bos = ref.piece_to_id("<s>")
    eos = ref.piece_to_id("</s>")
    got = tok.encode("Hello<s>world</s>", parse_special=True)
    assert got == ref.encode("Hello") + [bos] + ref.encode("world") + [eos]


# ------------------------------------------------------------------------------------------------
# .model variants: edited ModelProto (needs the protobuf classes sentencepiece ships)
# ------------------------------------------------------------------------------------------------

def edited_llama2(tmp_path, edit, name):
    pb = pytest.importorskip("sentencepiece.sentencepiece_model_pb2")
    proto = pb.ModelProto()
    proto.ParseFromString(open(data_path(SPM_MODELS["llama2"]), "rb").read())
    edit(proto, pb)
    path = tmp_path / f"{name}.model"
    path.write_bytes(proto.SerializeToString())
    return str(path)


def _unused(proto, pb):
    wanted = {"▁the", "ing", "▁and", "er", "▁of", "ation", "▁t", "he", "in", "▁a", "re", "on"}
    for p in proto.pieces:
        if p.piece in wanted:
            p.type = pb.ModelProto.SentencePiece.UNUSED


def _user_defined(proto, pb):
    for piece in ["<mask>", "ing", "foo bar", "▁▁", "@@", "</think>"]:
        existing = [p for p in proto.pieces if p.piece == piece]
        if existing:
            existing[0].type = pb.ModelProto.SentencePiece.USER_DEFINED
        else:
            proto.pieces.add(piece=piece, score=0.0, type=pb.ModelProto.SentencePiece.USER_DEFINED)


def _remove_extra(proto, pb):
    proto.normalizer_spec.remove_extra_whitespaces = True


def _no_dummy(proto, pb):
    proto.normalizer_spec.add_dummy_prefix = False


def _no_escape(proto, pb):
    proto.normalizer_spec.escape_whitespaces = False
    proto.normalizer_spec.remove_extra_whitespaces = True


def _suffix(proto, pb):
    proto.trainer_spec.treat_whitespace_as_suffix = True


VARIANTS = {"unused": _unused, "user_defined": _user_defined, "remove_extra": _remove_extra,
            "no_dummy_prefix": _no_dummy, "no_escape": _no_escape, "ws_suffix": _suffix}


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_spm_variants(tmp_path, variant):
    path = edited_llama2(tmp_path, VARIANTS[variant], variant)
    ref = spm.SentencePieceProcessor(model_file=path)
    tok = tokjit.load(path)
    texts = corpus_lines(limit_per_file=60, step=37) + [
        "  leading and trailing  ", "a  b   c", "<mask> x<mask>y", "foo bar foo  bar", "@@@@", "   ",
        "", "\u2581", "x\u2581", " \u2581 ", "sing singing ring", "the theatre thethe", "</think>done"]
    # every arrangement of spaces around short words and U+2581 (runs, ends, space-only texts)
    rng = random.Random(7)
    texts += ["".join(rng.choice([" ", " ", "a", "\u2581", "\n", "bc"]) for _ in range(rng.randint(0, 12)))
              for _ in range(300)]
    ours = [tok.encode(t) for t in texts]
    theirs = ref.encode(texts)
    assert first_mismatch(texts, ours, theirs) is None
    ids = theirs[:200]
    assert [tok.decode(x) for x in ids] == ref.decode(ids)


def test_unused_resegmentation_from_many_threads(tmp_path):
    """UNUSED-piece resegmentation writes per-call scratch (``rev_left`` and the list of ids to reset
    in it): threads sharing one tokenizer, half of their calls on the fused path (encode) and half
    on the staged one (encode_with_offsets), all give sentencepiece's ids."""
    import threading

    path = edited_llama2(tmp_path, _unused, "unused")
    ref = spm.SentencePieceProcessor(model_file=path)
    tok = tokjit.load(path)
    texts = corpus_lines(limit_per_file=30, step=41) + ["the theatre thethe and nation ration " * 20]
    expected = ref.encode(texts)
    failures = []

    def work(k):
        try:
            for i, text in enumerate(texts):
                staged = (i + k) % 2 == 1
                ids = tok.encode_with_offsets(text)[0] if staged else tok.encode(text)
                if ids != expected[i]:
                    failures.append((k, staged, text[:60]))
        except Exception as exc:  # noqa: BLE001 - a thread's error fails the test, not just the thread
            failures.append((k, repr(exc)))

    threads = [threading.Thread(target=work, args=(k,)) for k in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=600)
    assert not failures, failures[:3]


# ------------------------------------------------------------------------------------------------
# tokenizer.json (HF) encode / decode
# ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", list(HF_FILES))
@pytest.mark.parametrize("add_special", [False, True])
def test_hf_encode_parity(hf_pair, name, add_special):
    tok, ref = hf_pair(name)
    # Replace(" " -> U+2581) [+ Prepend] [+ Split " "] runs as the fused SentencePiece-BPE kernel
    assert isinstance(tok._fused, FusedSentencePiece)
    texts = sample_texts() if not add_special else sample_texts()[::5]
    texts = texts + ["<s>Hello</s>", "<bos><start_of_turn>user\nhi<end_of_turn>", " <unk> x"]
    ours = tok.encode_batch(texts, num_threads=2, parse_special=True, add_special_tokens=add_special)
    theirs = [e.ids for e in ref.encode_batch(texts, add_special_tokens=add_special)]
    bad = sum(a != b for a, b in zip(ours, theirs))
    assert bad == 0, f"{bad} of {len(texts)} differ; first: {first_mismatch(texts, ours, theirs)}"


@pytest.mark.parametrize("name", list(HF_FILES))
def test_hf_decode_parity(hf_pair, name):
    tok, ref = hf_pair(name)
    texts = sample_texts()[::3]
    ids = [e.ids for e in ref.encode_batch(texts, add_special_tokens=True)]
    n = tok.vocab_size
    rng = random.Random(99)
    byte_ids = [i for i in range(n) if tok.id_to_token(i).startswith("<0x")]
    seqs = [[rng.choice(byte_ids) if rng.random() < 0.5 else rng.randrange(n) for _ in range(rng.randint(1, 10))]
            for _ in range(300)]
    stride = 1 if n <= 50_000 else 7  # gemma3 (262k ids): every 7th id plus every byte id
    singles = [[i] for i in range(0, n, stride)] + [[i] for i in byte_ids]
    for skip in (False, True):
        for batch in (ids, seqs, singles):
            ours = [tok.decode(x, skip_special_tokens=skip) for x in batch]
            theirs = ref.decode_batch(batch, skip_special_tokens=skip)
            bad = [(x, a, b) for x, a, b in zip(batch, ours, theirs) if a != b]
            assert not bad, f"skip={skip}: {len(bad)} differ, first {bad[0][0][:10]}: {bad[0][1]!r} vs {bad[0][2]!r}"


def test_hf_metaspace_components():
    """Metaspace pre-tokenizer/decoder, WhitespaceSplit, Strip/NFKC/Prepend normalizers, Strip/Replace
    decoders, on a small vocabulary, against HF ``tokenizers`` built from the same JSON."""
    import json

    from tokjit.api import load_bytes
    vocab = {"<unk>": 0, "\u2581": 1, "a": 2, "b": 3, "c": 4, "\u2581a": 5, "\u2581b": 6, "ab": 7, "\u2581ab": 8,
             "\u2581\u2581": 9, "x": 10, "\u2581c": 11}
    merges = [["\u2581", "a"], ["a", "b"], ["\u2581", "ab"], ["\u2581a", "b"], ["\u2581", "\u2581"], ["\u2581", "b"],
              ["\u2581", "c"]]
    texts = ["ab ab", "  a b  c", "x ab\tc", "ａｂ ｃ", "a\u3000b", " ", "", "\u2581ab", "ab  ", "\x1cab\x1c"]
    configs = []
    for scheme in ("always", "first", "never"):
        for split in (True, False):
            configs.append({"pre_tokenizer": {"type": "Metaspace", "replacement": "\u2581",
                                              "prepend_scheme": scheme, "split": split},
                            "decoder": {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": scheme,
                                        "split": split}})
    configs.append({"pre_tokenizer": {"type": "Sequence", "pretokenizers": [
        {"type": "WhitespaceSplit"}, {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first",
                                      "split": True}]},
        "normalizer": {"type": "Sequence", "normalizers": [{"type": "NFKC"}, {"type": "Strip", "strip_left": True,
                                                                             "strip_right": True}]},
        "decoder": {"type": "Sequence", "decoders": [
            {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
            {"type": "ByteFallback"}, {"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 2, "stop": 0}]}})
    configs.append({"normalizer": {"type": "Sequence", "normalizers": [
        {"type": "Prepend", "prepend": "\u2581"}, {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]},
        "decoder": {"type": "Sequence", "decoders": [
            {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "}, {"type": "Fuse"},
            {"type": "Strip", "content": " ", "start": 1, "stop": 0}]}})
    for extra in configs:
        doc = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": [],
               "normalizer": None, "pre_tokenizer": None, "post_processor": None, "decoder": None,
               "model": {"type": "BPE", "dropout": None, "unk_token": "<unk>", "continuing_subword_prefix": None,
                         "end_of_word_suffix": None, "fuse_unk": True, "byte_fallback": False,
                         "vocab": vocab, "merges": merges}}
        doc.update(extra)
        data = json.dumps(doc).encode()
        ref = tokenizers.Tokenizer.from_str(data.decode())
        tok = load_bytes(data, use_cache=False)
        for text in texts:
            assert tok.encode(text) == ref.encode(text, add_special_tokens=False).ids, (extra, text)
            ids = ref.encode(text, add_special_tokens=False).ids
            assert tok.decode(ids) == ref.decode(ids), (extra, text)
        for seq in ([1, 1, 5], [5, 1, 9, 8], [9], [6, 0, 11]):
            assert tok.decode(seq) == ref.decode(seq), (extra, seq)


# ------------------------------------------------------------------------------------------------
# corrupted .model files
# ------------------------------------------------------------------------------------------------

def _load_or_error(data: bytes):
    from tokjit.api import load_bytes
    try:
        tok = load_bytes(data, fmt="sentencepiece", use_cache=False)
    except TokjitError as exc:
        assert isinstance(exc, (ModelFileError, tokjit.UnsupportedComponentError)), repr(exc)
        return None
    tok.encode("Hello world, \u00e9t\u00e9 \u4e2d\u6587 \U0001F600")
    tok.decode(list(range(min(tok.vocab_size, 300))))
    return tok


def test_truncated_and_corrupted_models():
    data = open(data_path(SPM_MODELS["mistral-7b"]), "rb").read()
    rng = random.Random(7)
    cuts = sorted(set([1, 2, 3, 5, 8, 13, 64, 100, 1000] + [rng.randrange(len(data)) for _ in range(40)]))
    from tokjit.load.sentencepiece_model import parse_model_proto
    for cut in cuts:
        try:
            parse_model_proto(data[:cut])  # a cut between two whole fields is a valid (shorter) message
        except ModelFileError as exc:
            assert "byte offset" in str(exc)
    small = open(data_path(SPM_MODELS["botchan_bpe"]), "rb").read()
    for _ in range(60):
        mutated = bytearray(small)
        for _ in range(rng.randint(1, 6)):
            mutated[rng.randrange(len(mutated))] = rng.randrange(256)
        _load_or_error(bytes(mutated))
    for cut in [rng.randrange(len(small)) for _ in range(30)]:
        _load_or_error(small[:cut])


def test_malformed_fields_name_the_field():
    from tokjit.load.sentencepiece_model import load_sentencepiece

    def piece(text: bytes, score: float, ptype: int) -> bytes:
        import struct
        body = b"\x0a" + bytes([len(text)]) + text + b"\x15" + struct.pack("<f", score) + b"\x18" + bytes([ptype])
        return b"\x0a" + bytes([len(body)]) + body

    good = piece(b"<unk>", 0.0, 2) + piece(b"a", -1.0, 1) + piece(b"b", -2.0, 1) + b"\x12\x02\x18\x02"
    spec = load_sentencepiece(None, good)
    assert spec.model["type"] == "BPE" and spec.unk_id == 0
    cases = {
        "nan score": piece(b"<unk>", 0.0, 2) + piece(b"a", float("nan"), 1),
        "lying length": b"\x0a\xff\xff\xff\x0f" + good,
        "wrong wire type": b"\x0d\x00\x00\x00\x00" + good,
        "duplicate": good + piece(b"a", -3.0, 1),
        "bad type": good + piece(b"c", -3.0, 9),
        "no unk": piece(b"a", -1.0, 1),
        "overlong varint": b"\x0a" + b"\xff" * 11,
        "group wire type": good + b"\x33",
    }
    for what, data in cases.items():
        with pytest.raises(ModelFileError):
            load_sentencepiece(None, data)
    # unknown fields of every wire type are skipped
    extra = good + b"\xa0\x06\x01" + b"\xa9\x06" + b"\x00" * 8 + b"\xb5\x06" + b"\x00" * 4 + b"\xba\x06\x01z"
    assert load_sentencepiece(None, extra).tokens == spec.tokens
    # a huge declared length never allocates: it is checked against the bytes present
    with pytest.raises(ModelFileError, match="byte offset"):
        load_sentencepiece(None, b"\x0a\xff\xff\xff\xff\x0f")
    assert np.isfinite(spec.scores).all()


@pytest.mark.parametrize("name", ["llama2", "mistral-7b"])
def test_spm_piece_cache_overflow_and_repeats(spm_pair, name):
    """The fused kernel remembers word pieces per thread; 40k distinct random words (byte-fallback
    characters, emoji, CJK, digits) overflow and refill that cache several times, and encoding the
    same texts again is served from it: both passes must equal sentencepiece."""
    tok, ref = spm_pair(name)
    rng = random.Random(7)
    alphabet = "abcdefghijklmnopqrstuvwxyz0123456789éßж日本語😀\u0301\U00010348"
    words = {"".join(rng.choice(alphabet) for _ in range(rng.randint(1, 12))) for _ in range(40_000)}
    words = sorted(words)
    rng.shuffle(words)
    texts = [" ".join(words[i:i + 20]) for i in range(0, len(words), 20)]
    theirs = ref.encode(texts)
    for _ in range(2):
        ours = tok.encode_batch(texts, num_threads=1)
        assert ours == theirs, first_mismatch(texts, ours, theirs)


def _long_piece_texts() -> list[str]:
    """Pieces over the piece cache's 48 bytes with no space inside (and short ones): lines of words between newlines,
    digit runs, tables of box-drawing characters, CJK runs, mixed with the characters next to them
    that do merge (punctuation runs, letters), at random lengths; where a cut is made the parts must
    still give the reference's ids."""
    rng = random.Random(11)
    atoms = ["\n", "\n\n", "0", "12", "7", "│", "─", "┌", "┐", "日本", "語", "。", "+", "++", "=", "-", "*",
             "ab", "the", "The", "ing", ".", ",", "é", "ж", "😀", "\t", "<", ">", "x\u0301", "\u2581"]
    texts = []
    for i in range(600):
        # short ones too: a newline is cut around in parts of any length
        body = "".join(rng.choice(atoms) for _ in range(rng.randint(1, 8) if i % 3 == 0 else rng.randint(20, 120)))
        texts.append(body if rng.random() < 0.5 else f"{rng.choice(['word', 'Hi', ''])} {body} end")
    texts += ["\n".join(["deliminator", "delta", "demented", "demigod", "demo", "demo mode"] * 9),
              "831872    │1533   │slang/jargon/techspeak added.     │ │" * 3,
              "┌─────────┬──────────────────────────────────────────┐ │ abb",
              "+" * 300, "1234567890" * 30, "日本語のテキスト" * 20]
    return texts


@pytest.mark.parametrize("name", ["llama2", "mistral-7b", "botchan_bpe"])
def test_spm_long_pieces_cut_around_characters(spm_pair, name):
    """Long pieces are cut around characters no merged token contains (``BPEModel.cut_bits``);
    every cut must keep sentencepiece's ids, through the piece cache (twice: the second pass hits)
    and the single-text call."""
    tok, ref = spm_pair(name)
    if name == "llama2":
        cut = np.unpackbits(tok.model.cut_bits.view(np.uint8), bitorder="little")
        assert cut[ord("\n")] and cut[ord("7")], "llama2: no merged piece holds a newline or a digit"
    texts = _long_piece_texts()
    theirs = ref.encode(texts)
    for _ in range(2):
        ours = tok.encode_batch(texts, num_threads=1)
        assert ours == theirs, first_mismatch(texts, ours, theirs)
    ours = [tok.encode(t) for t in texts]
    assert ours == theirs, first_mismatch(texts, ours, theirs)


@pytest.mark.parametrize("name", list(HF_FILES))
def test_hf_long_pieces_cut_around_characters(hf_pair, name):
    tok, ref = hf_pair(name)
    texts = _long_piece_texts()
    theirs = [e.ids for e in ref.encode_batch(texts, add_special_tokens=False)]
    for _ in range(2):
        ours = tok.encode_batch(texts, num_threads=1)
        assert ours == theirs, first_mismatch(texts, ours, theirs)
