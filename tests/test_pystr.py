"""The batch packer that reads str objects directly (``tokjit.kernels.pystr``) gives ``str.encode``'s
bytes: random lists of every str kind (ASCII, Latin-1, BMP, astral), empty strings, NULs, lone and
paired surrogates (which go back to ``str.encode``'s rules: U+FFFD), str subclasses and non-str items
(which go back to ``str.encode``, errors included). The reference is CPython's own UTF-8 encoder."""

from __future__ import annotations

import random
import sys

import numpy as np
import pytest

from tokjit.fused import driver
from tokjit.fused.threads import utf8_bytes
from tokjit.kernels import pystr

ALPHABET = ["a", "Z", " ", "\n", "\x00", "\x7f", "\x80", "é", "ÿ", "Ā", "€", "中", "\uffff", "😀", "\U0010ffff"]
SURROGATES = ["\ud800", "\udbff", "\udc00", "\udfff"]


class Sub(str):
    pass


def _reference(texts):
    return driver.byte_documents([utf8_bytes(t) for t in texts])


def _same(got, want):
    return got[0].tobytes() == want[0].tobytes() and np.array_equal(got[1], want[1]) and \
        np.array_equal(got[2], want[2])


def test_layout_is_learned_on_cpython():
    if sys.implementation.name != "cpython" or getattr(sys, "_is_gil_enabled", lambda: True)() is False:
        pytest.skip("the packer reads CPython's (GIL) str layout only")
    assert driver.str_layout() is not None  # else every batch silently takes str.encode


def test_layout_holds_after_a_singletons_utf8_was_asked_for():
    """``sys.getsizeof`` counts a str's cached UTF-8 copy. Learning the data offset from the
    one-character singleton "\xe9" read it 3 bytes too far once C code had asked for that str's
    UTF-8 (seen after other tests ran): the packer's check then failed (every batch took
    ``str.encode``) and the built-in call's normal-form quick check read the wrong code points."""
    if sys.implementation.name != "cpython" or getattr(sys, "_is_gil_enabled", lambda: True)() is False:
        pytest.skip("the packer reads CPython's (GIL) str layout only")
    import ctypes

    as_utf8 = ctypes.pythonapi.PyUnicode_AsUTF8
    as_utf8.restype = ctypes.c_char_p
    as_utf8.argtypes = [ctypes.py_object]
    singleton = "".join(["\xe9"])  # CPython's cached one-character str
    assert as_utf8(singleton) == "\xe9".encode()  # now it carries its UTF-8 copy
    layout = pystr.str_layout()
    assert layout is not None and pystr.fast_pack_ok(layout)
    for text in ("".join(["\xe9", "t\xe9"]), "".join(["\u20ac", "\u4e2d"]), "".join(["\U0001f600", "x"])):
        kind = 1 if max(map(ord, text)) < 0x100 else 2 if max(map(ord, text)) < 0x10000 else 4
        raw = ctypes.string_at(id(text) + int(layout[pystr.L_DATA]), kind * len(text))
        assert raw == text.encode({1: "latin-1", 2: "utf-16-le", 4: "utf-32-le"}[kind])


@pytest.mark.parametrize("seed", range(4))
def test_random_lists_match_str_encode(seed):
    rng = random.Random(seed)
    for _ in range(500):
        texts = []
        for _ in range(rng.randint(0, 12)):
            pool = ALPHABET + (SURROGATES if rng.random() < 0.1 else [])
            text = "".join(rng.choice(pool) for _ in range(rng.choice([0, 1, 5, 40, 300])))
            texts.append(Sub(text) if rng.random() < 0.02 else text)
        got = driver.utf8_documents(texts)
        assert _same(got, _reference(texts)), texts
        assert got[0].flags.writeable and got[0].flags.c_contiguous


def test_paired_surrogates_follow_the_reference():
    # a surrogate pair spelled as two code points: str.encode refuses it, text_to_utf8 joins it
    texts = ["ok", "\ud83d\ude00", "x\udc00y"]
    assert _same(driver.utf8_documents(texts), _reference(texts))


def test_non_str_items_raise_as_before():
    with pytest.raises(Exception) as fast:
        driver.utf8_documents(["ok", 5])
    with pytest.raises(Exception) as slow:
        driver.byte_documents([utf8_bytes(t) for t in ["ok", 5]])
    assert type(fast.value) is type(slow.value)


def test_kernels_refuse_what_they_cannot_read():
    layout = driver.str_layout()
    if layout is None:
        pytest.skip("no str layout on this interpreter")
    for bad in (["a", Sub("b")], ["a", b"b"], ["a", None]):
        assert pystr.measure_texts(id(bad), len(bad), layout, np.empty(len(bad), np.int64)) == -1
    short = ["abc", "d"]
    sizes = np.empty(2, np.int64)
    assert pystr.measure_texts(id(short), 2, layout, sizes) == 4
    # an output buffer smaller than the texts is refused, not overrun
    assert pystr.pack_texts(id(short), 2, layout, np.empty(3, np.uint8), np.empty(2, np.int64),
                            np.empty(2, np.int64)) == -1


def test_four_code_point_groups_match_str_encode():
    """Two-byte str are packed four code points at a time where all four are ASCII, all take two
    UTF-8 bytes or all take three: runs of each class at every alignment, mixed groups, a surrogate
    at each position of a group, and texts ending within 16 bytes of the buffer's end (where the
    groups' wide stores stop)."""
    classes = {"ascii": "ab c", "two": "\u0416\u0444\u00e9\u05d0\u0627",
               "three": "\u4e2d\u6587\u3042\uac00\u20ac\uffff"}
    texts = []
    for lead in range(5):
        for name, chars in classes.items():
            for n in (1, 3, 4, 5, 8, 9, 17):
                body = (chars * 20)[:n]
                # a two-byte str needs one code point past Latin-1 ("\u0100" where the run is ASCII)
                texts.append("x" * lead + body + ("\u0100" if name == "ascii" else ""))
        texts.append("x" * lead + "\u4e2d\u0416a\u4e2d\u0416a\u4e2d\u0416" * 3)
    for k in range(8):
        texts.append("\u4e2d" * k + "\ud800" + "\u4e2d" * 7)
    for tail in range(1, 9):
        texts.append("\u4e2d" * tail)
    assert any(t.isascii() is False for t in texts)
    for i in range(len(texts)):
        batch = texts[i:] + texts[:i]
        assert _same(driver.utf8_documents(batch), _reference(batch))
    for tail in range(1, 9):
        for name, chars in classes.items():
            single = [(chars * 10)[:tail] + "\u0100"]
            assert _same(driver.utf8_documents(single), _reference(single)), (name, tail)
