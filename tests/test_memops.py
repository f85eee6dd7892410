"""The word load under the piece cache's keys and the scanner's ASCII runs (tokjit/kernels/memops.py).

``load_word`` reads 8 bytes at once where 8 are readable and byte by byte near the array's end; the two
paths must agree with Python's own ``int.from_bytes`` at every offset and length, or a piece would get
a different cache key (and a wrong hit or a needless miss) depending on where it sits in the buffer.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from tokjit.kernels.memops import ascii_classes64, find_byte, load_two_words, load_word
from tokjit.kernels.piece_cache import piece_key


@njit(cache=True)
def _load(buf, i, n):
    return load_word(buf, i, n)


@njit(cache=True)
def _load_two(buf, i, n):
    return load_two_words(buf, i, n)


@njit(cache=True)
def _find(buf, i, e, byte):
    return find_byte(buf, i, e, byte)


@njit(cache=True)
def _key(buf, s, e):
    return piece_key(buf, s, e)


@njit(cache=True)
def _classes(buf, i):
    return ascii_classes64(buf, i)


def test_ascii_classes64_marks_each_byte_value_at_its_bit():
    values = np.arange(256, dtype=np.uint8)
    buf = np.concatenate([values, values[::-1], values[7::3]])
    for i in range(0, buf.shape[0] - 63, 5):
        window = buf[i:i + 64].astype(np.int64)
        def bits(member):
            return sum(1 << k for k in range(64) if member[k])
        upper = (window >= 0x41) & (window <= 0x5A)
        lower = (window >= 0x61) & (window <= 0x7A)
        digits = (window >= 0x30) & (window <= 0x39)
        blanks = (window == 0x09) | (window == 0x0B) | (window == 0x0C)
        breaks = (window == 0x0A) | (window == 0x0D)
        hard = ((window < 0x20) & ~blanks & ~breaks) | (window == 0x7F) | (window >= 0x80)
        want = (bits(upper | lower), bits(upper), bits(window == 0x20), bits(blanks), bits(breaks), bits(digits),
                bits(window == 0x2F), bits(window == 0x27), bits(hard))
        assert tuple(int(m) for m in _classes(buf, i)) == want, i


def test_load_word_is_the_little_endian_value_of_the_bytes():
    rng = np.random.default_rng(5)
    for size in (1, 5, 8, 9, 16, 23):
        buf = rng.integers(0, 256, size, dtype=np.uint8)
        for i in range(size):
            for n in range(0, min(8, size - i) + 1):
                want = int.from_bytes(bytes(buf[i:i + n]), "little")
                assert int(_load(buf, i, n)) == want, (size, i, n)


def test_piece_key_does_not_depend_on_where_the_piece_sits():
    rng = np.random.default_rng(6)
    for n in (1, 3, 7, 8, 9, 15, 16, 17, 24, 25, 30, 48):
        piece = rng.integers(0, 256, n, dtype=np.uint8)
        alone = piece.copy()  # at the very end: the byte-by-byte path
        inside = np.concatenate([rng.integers(0, 256, 3, dtype=np.uint8), piece,
                                 rng.integers(0, 256, 20, dtype=np.uint8)])  # the one-load path
        assert tuple(_key(alone, 0, n)) == tuple(_key(inside, 3, 3 + n))
        other = piece.copy()
        other[-1] ^= 1
        assert tuple(_key(other, 0, n)) != tuple(_key(alone, 0, n))


def test_every_byte_of_a_long_piece_moves_its_home_row():
    """Bytes past the first 16 join the hash eight at a time; a multiply carries bits only upwards,
    so without the final fold a word's high bytes would never reach the low bits that pick the cache
    row, and pieces differing there would pile into one window. Each byte position, given 256 values,
    must spread them over (nearly) 256 rows of the smallest cache."""
    rows_mask = (1 << 18) - 2  # piece_cache.home_row of an unseeded cache
    rng = np.random.default_rng(8)
    for n in (17, 24, 31, 40, 48):
        base = rng.integers(0, 256, n + 8, dtype=np.uint8)
        for p in range(16, n):
            homes = set()
            for v in range(256):
                buf = base.copy()
                buf[p] = v
                homes.add(int(_key(buf, 0, n)[0]) & rows_mask)
            assert len(homes) >= 248, (n, p, len(homes))


def test_load_two_words_is_the_first_16_bytes_zero_padded():
    # the masked two-load path (16 readable bytes) and the byte path near the end give the same words
    rng = np.random.default_rng(7)
    for size in (1, 8, 15, 16, 17, 40):
        buf = rng.integers(0, 256, size, dtype=np.uint8)
        for i in range(size):
            for n in range(0, size - i + 1):
                head = bytes(buf[i:i + min(n, 16)])
                want = (int.from_bytes(head[:8], "little"), int.from_bytes(head[8:16], "little"))
                assert tuple(int(w) for w in _load_two(buf, i, n)) == want, (size, i, n)


def test_call_at_reaches_a_compiled_function_with_a_view_of_the_caller_bytes():
    """``call_at`` calls a ``numba.cfunc`` by address (how BPE reaches its long-piece merge, compiled
    once); the callee sees the caller's array through ``data_address`` / ``bytes_at``, without a copy."""
    from numba import cfunc, types

    from tokjit.kernels.memops import bytes_at, call_at, data_address

    def weighted_sum(address, n, scale):
        view = bytes_at(address, n)
        view[0] = 7  # written through: the same memory
        total = 0
        for i in range(view.shape[0]):
            total += (i + 1) * np.int64(view[i])
        return total * scale

    native = cfunc(types.int64(types.int64, types.int64, types.int64), _nrt=False)(weighted_sum)

    @njit
    def caller(fn, buf, scale):
        return call_at(fn, (data_address(buf), np.int64(buf.shape[0]), np.int64(scale)))

    buf = np.frombuffer(bytes(range(1, 200)), np.uint8).copy()
    want = 3 * sum((i + 1) * (7 if i == 0 else int(b)) for i, b in enumerate(buf.tolist()))
    assert caller(native.address, buf, 3) == want
    assert buf[0] == 7


def test_find_byte_is_the_first_occurrence_at_every_start_and_end():
    # bytes that differ from the target by one bit or a borrow (0xE1, 0xE3, 0x62, 0x00, 0xFF) sit next
    # to it, where a word-at-a-time test that marked the wrong lane would show
    rng = np.random.default_rng(9)
    for size in (0, 1, 7, 8, 9, 17, 40):
        for trial in range(6):
            buf = rng.choice(np.array([0xE2, 0xE1, 0xE3, 0x62, 0x00, 0xFF, 0x96, 0x81], np.uint8), size)
            if trial == 0:
                buf[:] = 0xE1
            data = bytes(buf)
            for i in range(size + 1):
                for e in range(i, size + 1):
                    found = data.find(b"\xe2", i, e)
                    assert _find(buf, i, e, 0xE2) == (e if found < 0 else found), (data, i, e)
