"""Byte-level BPE after a Unicode normal form (Qwen 2/2.5/3 write ``"normalizer": {"type": "NFC"}``) runs
the fused kernel for text already in that form and the staged pipeline for the rest: both against HF
``tokenizers`` loading the same JSON, on corpus lines, decomposed text and added tokens beside combining
marks."""

from __future__ import annotations

import json
import unicodedata

import pytest

import tokjit
from conftest import corpus_lines, shared_path
from tokjit.fused.bpe import FusedBPE

tokenizers = pytest.importorskip("tokenizers")

ADDED = [{"id": 0, "content": "<|im_start|>", "single_word": False, "lstrip": False, "rstrip": False,
          "normalized": False, "special": True},
         {"id": 0, "content": "cafe", "single_word": False, "lstrip": False, "rstrip": False,
          "normalized": False, "special": False}]


def _texts():
    texts = corpus_lines(limit_per_file=300)
    decomposed = [unicodedata.normalize("NFD", t) for t in texts[::7]]
    marks = ["cafe\u0301 au lait", "<|im_start|>\u0301x", "e\u0301<|im_start|>e\u0301", "\u1100\u1161\u11a8",
             "\u0041\u030a\u0301", "cafe\u0301<|im_start|>cafe", "\u0b47\u0b3e", "Å Å Å", "ﬁ ½ ①",
             # marks out of order only (put in the form in place by a batch): Arabic shadda before fatha
             "\u0643\u0651\u064e\u062a\u064e\u0628\u064e \u0645\u064e\u0631\u0652", "<|im_start|>\u0651\u064e",
             "\u0651\u064e<|im_start|>\u0628\u0651\u064e", "cafe\u0651\u064ecafe", "x" + "\u0651\u064e" * 20,
             "\u05e9\u05c2\u05bc \u0628\u0651\u0650\u0652"]
    return texts + decomposed + marks


@pytest.mark.parametrize("form", ["NFC", "NFKC", "NFD"])
def test_normal_form_then_byte_level_bpe_equals_hf(tmp_path, form):
    data = json.loads(shared_path("data", "hf", "gpt4o", "tokenizer.json").read_text(encoding="utf-8"))
    data["normalizer"] = {"type": form}
    data["added_tokens"] = data["added_tokens"] + ADDED
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    ref = tokenizers.Tokenizer.from_file(str(path))
    for added in data["added_tokens"]:  # HF assigns added-token ids itself: write the ones it chose
        added["id"] = ref.token_to_id(added["content"])
    path.write_text(json.dumps(data), encoding="utf-8")
    ref = tokenizers.Tokenizer.from_file(str(path))
    tok = tokjit.load(str(path))
    assert isinstance(tok._fused, FusedBPE) and tok._fused.form == form
    texts = _texts()
    assert any(not unicodedata.is_normalized(form, t) for t in texts)
    expected = [ref.encode(t, add_special_tokens=False).ids for t in texts]
    assert [tok.encode(t, parse_special=True) for t in texts] == expected
    assert tok.encode_batch(texts, parse_special=True, num_threads=2) == expected
    plain = [tok.encode(t) for t in texts]
    assert plain == tok.encode_batch(texts)  # parse_special=False: same path choice per text
    # texts the kernel cannot take first, last, side by side and beside empty ones: their ids are
    # spliced between runs of kernel ids
    n_forms = [i for i, t in enumerate(texts) if not unicodedata.is_normalized(form, t)]
    edge = [n_forms[0], 0, n_forms[1], n_forms[2], 1, 2, n_forms[-1]]
    batch = [texts[i] for i in edge]
    batch = batch[:2] + [""] + batch[2:] + [""] + [texts[n_forms[0]]]
    assert tok.encode_batch(batch, parse_special=True, num_threads=1) == \
        [ref.encode(t, add_special_tokens=False).ids for t in batch]


def test_added_token_holding_marks_keeps_batches_off_the_in_place_ordering(tmp_path):
    """HF matches added tokens in the text before normalizing it: with an added token that holds a
    mark, text whose marks are out of order goes to the staged pipeline, not to the in-place
    ordering (a token spelled with the marks out of order matches the raw text only)."""
    data = json.loads(shared_path("data", "hf", "gpt4o", "tokenizer.json").read_text(encoding="utf-8"))
    data["normalizer"] = {"type": "NFC"}
    data["added_tokens"] = data["added_tokens"] + [
        {"id": 0, "content": "\u0628\u0651\u064e", "single_word": False, "lstrip": False, "rstrip": False,
         "normalized": False, "special": False}]
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    ref = tokenizers.Tokenizer.from_file(str(path))
    data["added_tokens"][-1]["id"] = ref.token_to_id("\u0628\u0651\u064e")
    path.write_text(json.dumps(data), encoding="utf-8")
    ref = tokenizers.Tokenizer.from_file(str(path))
    tok = tokjit.load(str(path))
    assert not tok._fused._order_marks
    texts = ["\u0628\u0651\u064e\u0627", "\u0628\u064e\u0651\u0627", "x \u0643\u0651\u064e"] * 30
    expected = [ref.encode(t, add_special_tokens=False).ids for t in texts]
    assert expected[0] != expected[1]
    assert tok.encode_batch(texts, num_threads=1) == expected
    assert tok.encode_batch(texts, num_threads=2) == expected


@pytest.mark.parametrize("form", ["NFC", "NFD", "NFKC", "NFKD"])
def test_quick_check_kernel_never_passes_text_not_in_the_form(form):
    """The kernel that spares the batch path a Python check per document (kernels.normal_form) may
    flag normalized text, but must never pass text ``unicodedata.is_normalized`` rejects: random
    strings over combining marks, composites, Hangul jamo and syllables, compatibility characters and
    characters of other planes; malformed UTF-8 is flagged too."""
    import random

    import numpy as np

    from tokjit.kernels.normal_form import normal_form_suspects, quick_check_table, quick_check_yes_bits

    ranges = [(0x20, 0x3000), (0x1100, 0x1200), (0xAC00, 0xAC60), (0xF900, 0xFB50), (0xFF00, 0xFFF0),
              (0x1D150, 0x1D1C0), (0x2F800, 0x2F900), (0x1F000, 0x1F100), (0x10000, 0x10100)]
    pool = [chr(c) for lo, hi in ranges for c in range(lo, hi) if not 0xD800 <= c < 0xE000]
    rng = random.Random(1)
    texts = ["".join(rng.choice(pool) for _ in range(rng.randrange(1, 6))) for _ in range(200_000)]
    encoded = [t.encode() for t in texts] + [b"ok \xff", b"\xe2\x82", b"\xc0\xaf", b"\xed\xa0\x80", b"a\xf5\x80\x80\x80"]
    lengths = np.array([len(e) for e in encoded])
    ends = np.cumsum(lengths)
    buf = np.frombuffer(b"".join(encoded), np.uint8)
    suspect = np.zeros(len(encoded), np.bool_)
    n = normal_form_suspects(buf, ends - lengths, ends, quick_check_table(form), quick_check_yes_bits(form), suspect)
    assert n == suspect.sum() and suspect[len(texts):].all()
    wrongly_passed = [t for t, s in zip(texts, suspect) if not s and not unicodedata.is_normalized(form, t)]
    assert not wrongly_passed, wrongly_passed[:5]
    rejected = sum(not unicodedata.is_normalized(form, t) for t in texts)
    assert rejected > 1000  # the strings do exercise the check
    assert suspect[:len(texts)].sum() < 0.6 * len(texts)  # and it passes most of them


def _quick_check_in_python(data: bytes, table) -> bool:
    """UAX #15's quick check over ``table`` as the kernel's docstring states it, one character at a
    time: True when it passes (every character Yes, nonzero combining classes never decreasing)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    last = 0
    for ch in text:
        v = int(table[ord(ch)])
        if v == 255 or (v and last > v):
            return False
        last = v
    return True


@pytest.mark.parametrize("form", ["NFC", "NFKC"])
def test_quick_check_kernel_shortcuts_change_no_verdict(form):
    """The kernel's shortcuts (ASCII eight bytes a step, runs of 3-byte characters without a decode,
    a bit per BMP code point for the common characters) give the verdict of the plain walk over the
    table on every corpus line, and on strings mixing ASCII runs of every length with 2-, 3- and
    4-byte characters, combining marks, surrogate and overlong encodings and truncated sequences at
    every position."""
    import random

    import numpy as np

    from tokjit.kernels.normal_form import normal_form_suspects, quick_check_table, quick_check_yes_bits

    table = quick_check_table(form)
    lines = [t.encode() for t in corpus_lines(limit_per_file=2000)]
    pieces = ["a", "abcdefgh", "x" * 13, "\u00e9", "e\u0301", "\u0301\u0316", "\u0316\u0301", "\u0627\u0654",
              "\u0623", "\u064b", "\u3042\u3099", "\u304c", "\u4e2d\u6587", "\uac00", "\u1100\u1161", "\uff21",
              "\uff0c\u3002", "\ud7a3\u1234", "\u0e01\u0e48", "\U0001f600", "\U0001d15e", "\u2126", "\u0958", " "]
    raw = [b"\xed\xa0\x80", b"\xe0\x80\xaf", b"\xc0\xaf", b"\xe3\x81", b"\xc3", b"\xf0\x9f\x98", b"\xff", b"\x80"]
    rng = random.Random(7)
    mixed = []
    for _ in range(20_000):
        parts = [rng.choice(pieces).encode() for _ in range(rng.randrange(1, 9))]
        if rng.random() < 0.2:
            parts.insert(rng.randrange(len(parts) + 1), rng.choice(raw))
        mixed.append(b"".join(parts))
    docs = lines + mixed
    lengths = np.array([len(d) for d in docs])
    ends = np.cumsum(lengths)
    buf = np.frombuffer(b"".join(docs), np.uint8)
    suspect = np.zeros(len(docs), np.bool_)
    n = normal_form_suspects(buf, ends - lengths, ends, table, quick_check_yes_bits(form), suspect)
    expected = [not _quick_check_in_python(d, table) for d in docs]
    assert suspect.tolist() == expected
    assert n == sum(expected) and 100 < n < len(docs) - 1000


@pytest.mark.parametrize("form", ["NFC", "NFD", "NFKC", "NFKD"])
def test_marks_ordered_in_place_give_the_normal_form(form):
    """A document whose only fault is the order of its marks is brought into the form in place, and
    equals ``unicodedata.normalize`` then; every other document is flagged and left byte for byte.
    Random strings over Arabic letters and marks (a shadda before a fatha is the corpus's case),
    Latin letters, precomposed letters, combining marks of many classes, Hebrew points, Hangul,
    ASCII and malformed bytes; runs of marks up to and past MAX_MARK_RUN; the Arabic corpus lines."""
    import random

    import numpy as np

    from tokjit.kernels.normal_form import (MAX_MARK_RUN, order_marks_in_place, quick_check_table,
                                             quick_check_yes_bits)

    marks = [chr(c) for c in range(0x300, 0x370)] + [chr(c) for c in range(0x591, 0x5C8)] + \
        [chr(c) for c in range(0x64B, 0x660)] + ["\u0670", "\u06E1", "\u0E38", "\u0E48", "\u302A", "\u3099", "\u20D0"]
    letters = ["a", "e", " ", "\u00e9", "\u1ec7", "\u0627", "\u0628", "\u0645", "\u05d0", "\u05e9", "\u0e01",
               "\uac00", "\u1100", "\u1161", "\u304b", "\u00c5", "\ufb2a", "\u0958"]
    rng = random.Random(11)
    texts = []
    for _ in range(30_000):
        parts = []
        for _ in range(rng.randrange(1, 6)):
            parts.append(rng.choice(letters))
            parts.extend(rng.choice(marks) for _ in range(rng.choice((0, 1, 2, 2, 3, 5))))
        texts.append("".join(parts))
    texts += ["\u0628" + "\u0651\u064e" * (MAX_MARK_RUN // 2) + "x", "\u0628" + "\u0651\u064e" * (MAX_MARK_RUN // 2 + 1),
              "\u0628\u0651\u064e", "\u0651\u064e", "\u064e\u0651"]
    texts += corpus_lines(limit_per_file=3000)
    docs = [t.encode() for t in texts] + [b"\xd9\x91\xd9\x8e\xff", b"\xed\xa0\x80\xd9\x91\xd9\x8e"]
    lengths = np.array([len(d) for d in docs])
    ends = np.cumsum(lengths)
    buf = np.frombuffer(b"".join(docs), np.uint8).copy()
    suspect = np.zeros(len(docs), np.bool_)
    n = order_marks_in_place(buf, ends - lengths, ends, quick_check_table(form), quick_check_yes_bits(form),
                             suspect, np.zeros(4 * MAX_MARK_RUN, np.uint8), np.zeros(MAX_MARK_RUN, np.int64))
    assert n == suspect.sum()
    reordered = 0
    for i, doc in enumerate(docs):
        out = buf[ends[i] - lengths[i]:ends[i]].tobytes()
        if suspect[i]:
            assert out == doc
        else:
            assert out == unicodedata.normalize(form, doc.decode()).encode(), (form, doc)
            reordered += out != doc
    assert reordered > 1000 and n > 1000
    assert not suspect[30_000] and suspect[30_001]  # a run of MAX_MARK_RUN marks is sorted, a longer one is not
