"""Models: pre-tokenized pieces -> token ids, each a thin owner of compiled arrays around one kernel.

A model is built from a :class:`~tokjit.spec.TokenizerSpec` by :func:`build_model`, which dispatches on
``spec.model["type"]``. Every model has ``encode_pieces(buf, starts, ends) -> (ids, tok_starts,
tok_ends)`` where the spans are byte offsets into ``buf`` (used for offsets and streaming).
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from .compile import PairTable, TokenTable, check_ids
from .errors import ModelFileError, UnsupportedComponentError
from .kernels import bpe as bpe_kernel
from .spec import TokenizerSpec, TokenType

MODEL_BUILDERS: dict[str, Callable[[TokenizerSpec], object]] = {}


def register_model(name: str):
    def wrap(builder):
        MODEL_BUILDERS[name] = builder
        return builder
    return wrap


def build_model(spec: TokenizerSpec):
    kind = spec.model.get("type")
    try:
        builder = MODEL_BUILDERS[kind]
    except KeyError:
        raise UnsupportedComponentError(
            f"model type {kind!r} is not supported (known: {sorted(MODEL_BUILDERS)})") from None
    return builder(spec)


def model_mask(spec: TokenizerSpec) -> np.ndarray:
    if spec.model_mask is not None:
        return spec.model_mask.astype(np.bool_)
    return np.ones(len(spec.tokens), dtype=np.bool_)


class Workspace:
    """Per-thread scratch buffers for the BPE kernel, grown on demand, never shrunk."""

    def __init__(self):
        self.cap = 0
        self.grow(256)

    def grow(self, n: int) -> None:
        if n <= self.cap:
            return
        cap = max(n, 2 * self.cap)
        self.start = np.empty(cap, np.int64)
        self.end = np.empty(cap, np.int64)
        self.id = np.empty(cap, np.int32)
        self.rank = np.empty(cap, np.int64)
        self.prev = np.empty(cap, np.int64)
        self.next = np.empty(cap, np.int64)
        self.heap = np.empty(3 * cap + 16, np.int64)
        self.cap = cap


class BPEModel:
    """Byte-pair encoding; see :mod:`tokjit.kernels.bpe` for the flavours one kernel covers."""

    def __init__(self, spec: TokenizerSpec):
        opts = spec.model
        path = spec.source.get("path")
        n = len(spec.tokens)
        self.vocab = TokenTable.build(spec.tokens, model_mask(spec))
        rule = opts.get("merge_rule", "pairs")
        flags = 0
        if opts.get("byte_level", False):
            flags |= bpe_kernel.FLAG_BYTE_SYMBOLS
        if opts.get("ignore_merges", False):
            flags |= bpe_kernel.FLAG_WHOLE_PIECE_FIRST
        if opts.get("byte_fallback", False):
            flags |= bpe_kernel.FLAG_BYTE_FALLBACK
        if opts.get("fuse_unk", False):
            flags |= bpe_kernel.FLAG_FUSE_UNK
        self.merge_rank = np.full(max(n, 1), -1, dtype=np.int64)
        if rule == "pairs":
            merges = spec.merges if spec.merges is not None else np.zeros((0, 2), np.int32)
            merges = np.asarray(merges, dtype=np.int32)
            if merges.ndim != 2 or merges.shape[1] not in (2, 3):
                raise ModelFileError("merges must be (n, 2) or (n, 3) id rows", path=path, where="merges")
            check_ids(merges[:, :2], n, "merges", path)
            if merges.shape[1] == 3:
                merged = merges[:, 2].copy()
                if merged.size and int(merged.max()) >= n:
                    raise ModelFileError("merged token id outside the vocabulary", path=path, where="merges")
            else:
                merged = self._merged_ids(spec, merges)
            keep = merged >= 0
            ranks = np.arange(len(merges), dtype=np.int32)
            self.pairs = PairTable.build(merges[keep, 0], merges[keep, 1], ranks[keep], merged[keep])
        elif rule == "ranks":
            # tiktoken: any two adjacent parts merge if their concatenation is a token; rank = its id
            flags |= bpe_kernel.FLAG_RANK_BY_BYTES
            self.merge_rank[:n] = np.arange(n)
            self.merge_rank[:n][~model_mask(spec)] = -1
            self.pairs = PairTable.empty()
        elif rule == "scores":
            # SentencePiece BPE: merge the pair whose concatenated piece has the highest score
            flags |= bpe_kernel.FLAG_RANK_BY_BYTES
            scores = np.asarray(spec.scores, dtype=np.float64)
            if scores.shape[0] != n or not np.all(np.isfinite(scores)):
                raise ModelFileError("scores must be finite, one per token", path=path, where="scores")
            mergeable = model_mask(spec)
            order = np.unique(-scores[mergeable], return_inverse=True)[1]
            self.merge_rank[:n][mergeable] = order
            self.pairs = PairTable.empty()
        else:
            raise UnsupportedComponentError(f"BPE merge rule {rule!r}")
        self.flags = np.int64(flags)
        unk = opts.get("unk_id")
        self.unk_id = np.int64(-1 if unk is None else unk)
        self.byte_ids = self._byte_ids(spec, flags)
        self.max_len = np.int64(max(self.vocab.max_len, 1))

    def _merged_ids(self, spec: TokenizerSpec, merges: np.ndarray) -> np.ndarray:
        merged = np.full(len(merges), -1, dtype=np.int32)
        lookup = {tok: i for i, tok in enumerate(spec.tokens) if spec.model_mask is None or spec.model_mask[i]}
        toks = spec.tokens
        for row, (a, b) in enumerate(merges.tolist()):
            merged[row] = lookup.get(toks[a] + toks[b], -1)
        return merged

    @staticmethod
    def _byte_ids(spec: TokenizerSpec, flags: int) -> np.ndarray:
        byte_ids = np.full(256, -1, dtype=np.int32)
        if flags & bpe_kernel.FLAG_BYTE_SYMBOLS:
            mask = model_mask(spec)
            for i, tok in enumerate(spec.tokens):
                if len(tok) == 1 and mask[i] and byte_ids[tok[0]] < 0:
                    byte_ids[tok[0]] = i
        elif flags & bpe_kernel.FLAG_BYTE_FALLBACK:
            byte_ids[:] = byte_fallback_ids(spec)
        return byte_ids

    def encode_pieces(self, buf, starts, ends, ws: Workspace):
        total = int(buf.shape[0])
        longest = int((ends - starts).max()) if starts.shape[0] else 0
        ws.grow(longest + 1)
        out_ids = np.empty(total, np.int32)
        out_starts = np.empty(total, np.int64)
        out_ends = np.empty(total, np.int64)
        v, p = self.vocab, self.pairs
        n = bpe_kernel.bpe_encode(
            buf, starts, ends, np.int64(starts.shape[0]),
            v.blob, v.offsets, v.table, self.byte_ids, self.merge_rank,
            p.keys, p.ranks, p.merged,
            self.flags, self.unk_id, self.max_len,
            out_ids, out_starts, out_ends,
            ws.start, ws.end, ws.id, ws.rank, ws.prev, ws.next, ws.heap)
        return out_ids[:n], out_starts[:n], out_ends[:n]


def byte_fallback_ids(spec: TokenizerSpec) -> np.ndarray:
    """Ids of the ``<0xXX>`` byte tokens (-1 where a byte has none)."""
    ids = np.full(256, -1, dtype=np.int32)
    index = {tok: i for i, tok in enumerate(spec.tokens)}
    for b in range(256):
        tid = index.get(b"<0x%02X>" % b)
        if tid is not None:
            ids[b] = tid
    return ids


register_model("BPE")(BPEModel)

__all__ = ["BPEModel", "Workspace", "build_model", "register_model", "byte_fallback_ids", "TokenType"]
