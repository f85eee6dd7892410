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
             "\u0041\u030a\u0301", "cafe\u0301<|im_start|>cafe", "\u0b47\u0b3e", "Å Å Å", "ﬁ ½ ①"]
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
    """The kernel's shortcuts (ASCII eight bytes a step, a bit per BMP code point for the common
    characters) give the verdict of the plain walk over the table on every corpus line, and on
    strings mixing ASCII runs of every length with 2-, 3- and 4-byte characters, combining marks,
    surrogate and overlong encodings and truncated sequences at every position."""
    import random

    import numpy as np

    from tokjit.kernels.normal_form import normal_form_suspects, quick_check_table, quick_check_yes_bits

    table = quick_check_table(form)
    lines = [t.encode() for t in corpus_lines(limit_per_file=2000)]
    pieces = ["a", "abcdefgh", "x" * 13, "\u00e9", "e\u0301", "\u0301\u0316", "\u0316\u0301", "\u0627\u0654",
              "\u0623", "\u064b", "\u3042\u3099", "\u304c", "\u4e2d\u6587", "\uac00", "\u1100\u1161", "\uff21",
              "\U0001f600", "\U0001d15e", "\u2126", "\u0958", " "]
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
