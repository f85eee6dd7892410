"""Spec -> flat numpy arrays, validated once so kernels can trust every index they read."""

from __future__ import annotations

import numpy as np

from .errors import ModelFileError
from .spec import PackedBytes
from .kernels.lookup import build_bytes_table, build_pair_table, table_size


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
    """Merge rules (left id, right id) -> (rank, merged id) in an open-addressing table."""

    __slots__ = ("keys", "ranks", "merged")

    def __init__(self, keys: np.ndarray, ranks: np.ndarray, merged: np.ndarray):
        self.keys, self.ranks, self.merged = keys, ranks, merged

    @classmethod
    def build(cls, lefts, rights, ranks, merged) -> "PairTable":
        size = table_size(len(lefts))
        keys = np.full(size, -1, dtype=np.int64)
        out_ranks = np.zeros(size, dtype=np.int32)
        out_merged = np.zeros(size, dtype=np.int32)
        build_pair_table(np.asarray(lefts, np.int32), np.asarray(rights, np.int32),
                         np.asarray(ranks, np.int32), np.asarray(merged, np.int32),
                         keys, out_ranks, out_merged)
        return cls(keys, out_ranks, out_merged)

    @classmethod
    def empty(cls) -> "PairTable":
        return cls(np.full(16, -1, np.int64), np.zeros(16, np.int32), np.zeros(16, np.int32))


def check_ids(ids: np.ndarray, vocab_size: int, what: str, path=None) -> None:
    """Every id in ``ids`` must index the vocabulary; kernels rely on it."""
    if ids.size and (int(ids.min()) < 0 or int(ids.max()) >= vocab_size):
        bad = int(ids[(ids < 0) | (ids >= vocab_size)][0])
        raise ModelFileError(f"{what} refers to token id {bad}, outside the vocabulary of {vocab_size}",
                             path=path, where=what)
