"""The per-thread piece cache (tokjit/kernels/piece_cache.py) against a dict.

The fused kernels trust a hit blindly: whatever the cache returns for a piece's bytes is emitted as
its ids. So a lookup must return exactly what was stored for those bytes or nothing, through row
replacement, pieces longer than the inline key, ids too many or too large to stay inline, and the
pools filling up and starting again. Pieces and ids here are random; the reference is a dict.
"""

from __future__ import annotations

import random

import numpy as np

from tokjit.kernels import piece_cache as pc


def _small_cache(slots: int, pool_bytes: int, pool_ids: int):
    rows = np.zeros((slots, pc.ROW), np.int64)
    return rows, np.zeros(pool_bytes, np.uint8), np.zeros(pool_ids, np.int32), np.zeros(3, np.int64)


def _lookup(cache, piece: bytes):
    rows, byte_pool, id_pool, _ = cache
    buf = np.frombuffer(piece, np.uint8)
    r = pc.cache_find(rows, byte_pool, buf, 0, len(piece))
    if r < 0:
        return None
    out = np.full(len(piece) + 8, -7, np.int32)
    k = pc.cache_emit(rows, id_pool, r, out, 0)
    return out[:k].tolist()


def _put(cache, piece: bytes, ids: list[int]):
    rows, byte_pool, id_pool, fill = cache
    buf = np.frombuffer(piece, np.uint8)
    pc.cache_put(rows, byte_pool, id_pool, fill, buf, 0, len(piece), np.array(ids, np.int32), 0, len(ids))


def test_lookups_return_what_was_stored_or_nothing():
    rng = random.Random(11)
    # a tiny cache and tiny pools: rows are replaced and the pools start again many times over
    cache = _small_cache(256, 2000, 300)
    truth: dict[bytes, list[int]] = {}
    alphabet = b"ab\xe4\xb8\x80 xyz"  # few distinct bytes: many pieces share their first 16
    hits = 0
    for step in range(30000):
        n = rng.choice([1, 2, 5, 8, 15, 16, 17, 24, 40, pc.MAX_PIECE, 49, 57, 100, pc.MAX_CACHED])
        piece = bytes(rng.choice(alphabet) for _ in range(n))
        got = _lookup(cache, piece)
        if got is not None:
            assert got == truth[piece], (piece, got, truth[piece])
            hits += 1
            continue
        k = rng.choice([1, 1, 2, 3, 4, 5, 9])
        if piece not in truth:
            big = rng.random() < 0.1  # ids past 21 bits cannot be inline
            truth[piece] = [rng.randrange(1 << 22 if big else 1 << 21) for _ in range(k)]
        _put(cache, piece, truth[piece])
        assert _lookup(cache, piece) == truth[piece], piece  # just stored: found
    assert hits > 1000  # the test reaches the hit path
    assert (cache[0][:, 2] != 0).sum() > 100


def _at_home(rows, piece: bytes) -> bool:
    buf = np.frombuffer(piece, np.uint8)
    h, w0, w1 = pc.piece_key(buf, 0, len(piece))
    home = pc.home_row(rows, h)
    return (rows[home, 2] & pc.N_MASK) == len(piece) and rows[home, 0] == w0 and rows[home, 1] == w1


def _reachable(rows, piece: bytes) -> bool:
    """Whether a lookup would find ``piece`` (the walk of cache_find_key, without marking a hit)."""
    buf = np.frombuffer(piece, np.uint8)
    h, w0, w1 = pc.piece_key(buf, 0, len(piece))
    r = pc.home_row(rows, h)
    for _ in range(pc.WINDOW):
        if rows[r, 2] == 0:
            return False
        if (rows[r, 2] & pc.N_MASK) == len(piece) and rows[r, 0] == w0 and rows[r, 1] == w1:
            return True
        r = (r + 1) % rows.shape[0]
    return False


def test_pieces_found_past_their_home_move_there_and_none_is_lost():
    """A lookup that finds a piece past its home row moves it there when the piece at home was not
    hit lately (pc._promote): afterwards every piece stored is still found with its own ids, and the
    pieces looked up sit at home more often than before. Short pieces only (no pool starts again,
    so nothing may go missing), the rows filled densely enough that windows run long."""
    rng = random.Random(5)
    cache = _small_cache(512, 4096, 4096)
    truth: dict[bytes, list[int]] = {}
    while len(truth) < 330:
        piece = bytes(rng.choice(b"abcdef\xe4\xb8") for _ in range(rng.choice([2, 3, 5, 8, 12, 16])))
        if piece not in truth:
            truth[piece] = [rng.randrange(1 << 21) for _ in range(rng.choice([1, 2, 4, 5]))]
            _put(cache, piece, truth[piece])
    rows = cache[0]
    stored = [p for p in truth if _reachable(rows, p)]  # a full window replaced some
    assert len(stored) > 250
    hot = rng.sample(stored, 150)
    home_before = sum(_at_home(rows, p) for p in hot)
    for _ in range(3):
        for piece in rng.sample(hot, len(hot)):
            assert _lookup(cache, piece) == truth[piece], piece
    home_after = sum(_at_home(rows, p) for p in hot)
    assert home_after > home_before, (home_before, home_after)
    for piece in stored:
        assert _lookup(cache, piece) == truth[piece], piece


def test_emptied_pools_keep_long_pieces_cached():
    """Pieces that need the pools (long, or more than four ids) are still stored after the pools
    filled once: the pools start again instead of refusing every later such piece."""
    cache = _small_cache(4096, 64, 64)
    for i in range(200):
        piece = f"{i:04d}-a-long-piece-past-the-inline-key".encode()
        ids = [i, i + 1, i + 2, i + 3, i + 4, i + 5]
        _put(cache, piece, ids)
        assert _lookup(cache, piece) == ids, i


def test_pieces_that_differ_late_are_told_apart():
    """Pieces of one length that share their first 8 or first 16 bytes, all in one window (an
    8-row cache is a single window): each lookup must still find its own piece's ids."""
    cache = _small_cache(8, 4096, 4096)
    pieces = [b"same-8b-" + bytes([c]) * 8 for c in b"abcd"]  # 16 bytes, differ in bytes 8..15
    pieces += [b"same-first-16-by" + bytes([c]) * 8 for c in b"wxyz"]  # differ past the inline key
    for i, piece in enumerate(pieces):
        _put(cache, piece, [i])
    for i, piece in enumerate(pieces):
        assert _lookup(cache, piece) in ([i], None), piece
    assert sum(_lookup(cache, p) is not None for p in pieces) >= 6


def test_the_longest_piece_a_row_can_describe_is_kept_and_no_longer_one():
    """A row's length field has 8 bits: a piece of MAX_CACHED bytes is stored and found, one byte more
    is not stored (a wrapped length would make a row claim another piece's bytes)."""
    cache = _small_cache(64, 4096, 4096)
    longest = bytes(range(256))[:pc.MAX_CACHED]
    _put(cache, longest, [7, 8])
    assert _lookup(cache, longest) == [7, 8]
    _put(cache, longest + b"!", [9])
    assert _lookup(cache, longest + b"!") is None
    assert _lookup(cache, longest[:-1]) is None


def test_met_before_admits_a_piece_from_its_third_meeting():
    """Long Han/kana runs are looked up and kept whole only from their third meeting
    (``met_before``): the first two meetings answer False, every later one True, pieces of other
    hashes are not disturbed, and the bits start again once an eighth of them are set."""
    admit = np.zeros(2 * pc.ADMIT_WORDS + 1, np.uint64)
    h = np.int64(0x1234_5678_9ABC_DEF1)
    other = np.int64(h ^ (np.int64(1) << 45))  # another admission bit
    assert [pc.met_before(admit, h) for _ in range(4)] == [False, False, True, True]
    assert [pc.met_before(admit, other) for _ in range(3)] == [False, False, True]
    assert not pc.met_before(np.zeros(1, np.uint64), h)  # a cache that keeps nothing
    rng = np.random.default_rng(5)
    for x in rng.integers(-(1 << 62), 1 << 62, size=pc.ADMIT_BITS // 4):
        pc.met_before(admit, np.int64(x))
    # cleared at least once on the way: the bits set stay below an eighth of them
    assert int(admit[2 * pc.ADMIT_WORDS]) < pc.ADMIT_BITS // 8


def test_rows_are_line_aligned_and_homes_even():
    """A lookup reads its home row and the next from the one line the piece loop prefetched: the
    table starts a cache line and every home row is even (a row straddling two lines read its meta
    word from a line nobody had asked for)."""
    like = np.arange(64 * pc.ROW, dtype=np.int64).reshape(64, pc.ROW)
    for rows in (pc.line_aligned_rows(1 << 10), pc.line_aligned_rows(64, like)):
        assert rows.ctypes.data % pc.LINE_BYTES == 0 and rows.flags.c_contiguous and rows.dtype == np.int64
    assert np.array_equal(pc.line_aligned_rows(64, like), like)
    rows = pc.line_aligned_rows(1 << 10)
    homes = {pc.home_row(rows, np.int64(h)) for h in range(-5000, 5000, 7)}
    assert all(h % 2 == 0 and 0 <= h < rows.shape[0] for h in homes) and len(homes) > 400


def test_large_rows_start_a_huge_page():
    """A cache of 4 MB or more starts a 2 MB boundary, so every 2 MB of it can be one huge page (an
    unaligned 16 MB cache kept its first and last extents on 4 KB pages), and its rows are zeros."""
    n_rows = (4 << 20) // (pc.ROW * 8)
    rows = pc.line_aligned_rows(n_rows)
    assert rows.ctypes.data % pc.HUGE_PAGE == 0 and rows.shape == (n_rows, pc.ROW) and not rows.any()
    like = np.arange(n_rows * pc.ROW, dtype=np.int64).reshape(n_rows, pc.ROW)
    assert np.array_equal(pc.line_aligned_rows(n_rows, like), like)
