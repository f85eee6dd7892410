"""Spec -> flat numpy arrays, validated once so kernels can trust every index they read."""

from __future__ import annotations

import numpy as np

from tokjit.errors import ModelFileError, UnsupportedComponentError
from tokjit.spec import PackedBytes
from tokjit.kernels.lookup import (PAIR_FIELD_BITS, PAIR_FIELD_MASK, build_bytes_table, build_merge_bits,
                                   build_pair_table, merge_bits_words,
                                   pair_table_size, reachable_merges, table_size, token_split_pairs)


class TokenTable:
    """Token bytes as one blob + offsets, with an exact bytes -> id hash table."""

    __slots__ = ("blob", "offsets", "table", "max_len")

    def __init__(self, blob: np.ndarray, offsets: np.ndarray, table: np.ndarray):
        self.blob = blob
        self.offsets = offsets
        self.table = table
        lengths = np.diff(offsets)
        self.max_len = int(lengths.max()) if lengths.size else 0

    @classmethod
    def build(cls, tokens: list[bytes], include: np.ndarray | None = None) -> "TokenTable":
        blob, offsets = pack_bytes(tokens)
        if include is None:
            include = np.ones(len(tokens), dtype=np.bool_)
        table = np.full(table_size(int(include.sum())), -1, dtype=np.int32)
        build_bytes_table(blob, offsets, include.astype(np.bool_), table)
        return cls(blob, offsets, table)

    def token_bytes(self, tid: int) -> bytes:
        return self.blob[self.offsets[tid]:self.offsets[tid + 1]].tobytes()


def pack_bytes(items: list[bytes]) -> tuple[np.ndarray, np.ndarray]:
    """Concatenate byte strings into (uint8 blob, int64 offsets of length n + 1)."""
    if isinstance(items, PackedBytes) and not items.strings and items.blob.size:
        return items.blob, items.offsets  # already packed (a cached spec); kernels only read them
    offsets = np.zeros(len(items) + 1, dtype=np.int64)
    if items:
        np.cumsum(np.fromiter((len(t) for t in items), dtype=np.int64, count=len(items)), out=offsets[1:])
    blob = np.frombuffer(b"".join(items), dtype=np.uint8).copy()
    if blob.size == 0:
        blob = np.zeros(1, dtype=np.uint8)  # kernels index blob[...]; keep it non-empty
    return blob, offsets


class PairTable:
    """Merge rules (left id, right id) -> (rank, merged id): ``slots``, an open-addressing array of
    packed entries (see :func:`~tokjit.kernels.lookup.pair_slot`), and ``rows``, each rule's
    ``rank << 32 | merged id`` (empty when the ranks rise with the merged ids, which then stand for
    them); the kernels take them as the tuple ``arrays``. ``merge_bits`` filter its pairs
    (:func:`~tokjit.kernels.lookup.may_merge`) for the merge loops."""

    __slots__ = ("slots", "rows", "size", "_merge_bits")

    def __init__(self, slots: np.ndarray, rows: np.ndarray, size: int):
        self.slots = slots
        self.rows = rows
        self.size = size  # number of rules
        self._merge_bits = None

    @property
    def merge_bits(self) -> np.ndarray:
        """The table's merge bits, built on first use: the tables a load builds on its way to the one
        the kernels read (the whole merge list before its reachable rules) never need theirs."""
        if self._merge_bits is None:
            bits = np.zeros(merge_bits_words(self.size), np.uint64)
            build_merge_bits(self.slots, bits)
            self._merge_bits = bits
        return self._merge_bits

    @property
    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        return self.slots, self.rows

    @classmethod
    def build(cls, lefts, rights, ranks, merged) -> "PairTable":
        ranks = np.asarray(ranks, np.int64)
        merged = np.asarray(merged, np.int64)
        lefts = np.asarray(lefts, np.int64)
        rights = np.asarray(rights, np.int64)
        if ranks.size and (int(ranks.min()) < 0 or int(ranks.max()) >= 2 ** 31 or int(merged.min()) < 0):
            raise ModelFileError("merge ranks and merged ids must be in [0, 2**31)")
        limit = PAIR_FIELD_MASK  # all ones in a field is never a value (an empty entry is -1)
        if len(lefts) >= limit or (lefts.size and max(int(lefts.max()), int(rights.max()), int(merged.max())) >= limit):
            raise UnsupportedComponentError(
                f"BPE with more than {limit - 1} tokens or merge rules (the pair table packs ids in "
                f"{PAIR_FIELD_BITS} bits)")
        order = np.argsort(ranks, kind="stable")
        by_merged = bool(np.all(np.diff(ranks[order]) > 0) and np.all(np.diff(merged[order]) > 0))
        # ranks and merged ids in the same strict order: comparing merged ids compares ranks
        lows = merged if by_merged else np.arange(len(lefts), dtype=np.int64)
        rows = np.zeros(0, np.int64) if by_merged else (ranks << 32) | merged
        slots = np.full(pair_table_size(len(lefts)), -1, dtype=np.int64)
        build_pair_table(lefts.astype(np.int32), rights.astype(np.int32), lows.astype(np.int32), slots)
        return cls(slots, rows, len(lefts))

    @classmethod
    def empty(cls) -> "PairTable":
        return cls(np.full(16, -1, np.int64), np.zeros(0, np.int64), 0)


def split_merge_rows(vocab: TokenTable, include: np.ndarray) -> np.ndarray:
    """(n, 3) int32 rows (left, right, merged): the merges of tiktoken-style BPE, where two adjacent
    parts merge whenever their concatenation is a token (rank = its id). Every cut of an included
    token into two included tokens (:func:`~tokjit.kernels.lookup.token_split_pairs`) would do; only
    the one cut per token that BPE can ever merge is kept
    (:func:`~tokjit.kernels.lookup.reachable_merges`), which halves the pair table the merge loop
    probes. ~0.3 s for a 200k vocabulary, so loaders store the rows in the spec (and the cache)."""
    include = np.asarray(include, np.bool_)
    lengths = np.diff(vocab.offsets)
    cap = int(np.maximum(lengths[include] - 1, 0).sum()) + 1
    rows = np.empty((3, cap), np.int32)
    n = token_split_pairs(vocab.blob, vocab.offsets, include, vocab.table, rows[0], rows[1], rows[2])
    n_tokens = vocab.offsets.shape[0] - 1
    byte_ids = np.full(256, -1, np.int32)
    singles = np.flatnonzero((lengths == 1) & include)
    values = vocab.blob[vocab.offsets[singles]]
    _, first = np.unique(values, return_index=True)  # the lowest id of each byte, as the BPE model takes
    byte_ids[values[first]] = singles[first]
    ranks = np.arange(n_tokens, dtype=np.int64)  # rank = id, as in tiktoken
    table = PairTable.build(rows[0, :n], rows[1, :n], ranks[rows[2, :n]], rows[2, :n])
    out = _reachable_rows(vocab, include, byte_ids, table)
    return np.ascontiguousarray(out[:3].T)


def reachable_pair_table(vocab: TokenTable, byte_ids: np.ndarray | None, pairs: PairTable) -> PairTable:
    """The rules of BPE's ``pairs`` that can ever be applied, one per token (see
    :func:`~tokjit.kernels.lookup.reachable_merges`), with their ranks: a smaller table giving the
    same ids (Llama 3: 127k of 280k merges). Symbols start as bytes (``byte_ids``: every byte must
    have a token) or, with ``byte_ids`` None, as characters. ~30 ms for a 128k vocabulary."""
    if not pairs.size:
        return pairs
    slots, rows = pairs.arrays
    include = np.zeros(vocab.offsets.shape[0] - 1, np.bool_)
    if rows.shape[0]:
        include[(rows & 0xFFFFFFFF).astype(np.int64)] = True
    else:
        low = slots[slots >= 0] & PAIR_FIELD_MASK  # without rows the low field is the merged id
        include[low] = True
    out = _reachable_rows(vocab, include, byte_ids, pairs)
    return PairTable.build(out[0], out[1], out[3], out[2])


def _reachable_rows(vocab: TokenTable, include: np.ndarray, byte_ids: np.ndarray | None,
                    pairs: PairTable) -> np.ndarray:
    """(4, k) int32 rows (left, right, merged, rank) of :func:`~tokjit.kernels.lookup.reachable_merges`."""
    lengths = np.diff(vocab.offsets)
    symbols = np.empty(int(lengths.max()) + 1 if lengths.size else 1, np.int64)
    out = np.empty((4, int(include.sum()) + 1), np.int32)
    by_chars = byte_ids is None
    k = reachable_merges(vocab.blob, vocab.offsets, vocab.table, include,
                         np.zeros(256, np.int32) if by_chars else byte_ids, by_chars, pairs.arrays, symbols,
                         out[0], out[1], out[2], out[3])
    return out[:, :k]


def check_ids(ids: np.ndarray, vocab_size: int, what: str, path=None) -> None:
    """Every id in ``ids`` must index the vocabulary; kernels rely on it."""
    if ids.size and (int(ids.min()) < 0 or int(ids.max()) >= vocab_size):
        bad = int(ids[(ids < 0) | (ids >= vocab_size)][0])
        raise ModelFileError(f"{what} refers to token id {bad}, outside the vocabulary of {vocab_size}",
                             path=path, where=what)
