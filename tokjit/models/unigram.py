"""The Unigram model (SentencePiece ``unigram``, HF ``Unigram``): Viterbi over piece scores.

``spec.model`` options: ``unk_id``, ``byte_fallback``, and ``arithmetic``: ``"sentencepiece"`` (the
default; what ``.model`` files mean), ``"hf"`` (tokenizer.json) or ``"llamacpp"`` (GGUF t5 / UGM).
They differ in which pieces can be matched, how the unknown score and the user-defined score are
derived, whether a fused run of unknowns is looked up in the vocabulary, and float32 vs float64 path
sums (see :mod:`tokjit.kernels.unigram`); each file must tie-break like its own reference.
"""

from __future__ import annotations

import numpy as np

from tokjit.compile import pack_bytes
from tokjit.errors import InputError, ModelFileError, UnsupportedComponentError
from tokjit.kernels import unigram as kernel
from tokjit.kernels.lookup import table_size
from tokjit.models.bpe import Workspace, model_mask
from tokjit.spec import TokenizerSpec, TokenType

ARITHMETIC = {"sentencepiece": kernel.ARITH_SPM, "hf": kernel.ARITH_HF, "llamacpp": kernel.ARITH_LLAMACPP}
UNK_PENALTY = 10.0  # sentencepiece kUnkPenalty / tokenizers K_UNK_PENALTY
FLT_MAX = np.finfo(np.float32).max


class VocabTrie:
    """The pieces a model can match as a byte trie (see :mod:`tokjit.kernels.unigram`)."""

    def __init__(self, tokens: list[bytes], include: np.ndarray):
        ids = np.flatnonzero(include)
        # stable sort: equal pieces keep id order, so the last id wins (HF's token -> id map)
        order = np.asarray(sorted(ids.tolist(), key=tokens.__getitem__), np.int64)
        blob, offsets = pack_bytes(tokens)
        lengths = np.diff(offsets)
        self.max_len = int(lengths[ids].max()) if ids.size else 0
        n_nodes = kernel.count_trie_nodes(blob, offsets, order, np.int64(order.shape[0]))
        size = table_size(max(n_nodes, 8))
        while size < 2 * n_nodes:
            size *= 2
        keys = np.full(size, -1, np.int64)
        children = np.full(size, -1, np.int32)
        node_value = np.full(n_nodes + 1, -1, np.int32)
        kernel.build_trie(blob, offsets, order, np.int64(order.shape[0]), np.arange(len(tokens), dtype=np.int32),
                          np.int64(self.max_len), keys, children, node_value)
        self.n_nodes = n_nodes
        self.da = self._double_array(keys, children, node_value, n_nodes)

    @staticmethod
    def _double_array(keys, children, node_value, n_nodes) -> np.ndarray:
        filled = keys >= 0
        parent = keys[filled] >> 8
        edge_byte = (keys[filled] & 255).astype(np.int32)
        edge_child = children[filled].astype(np.int64)
        order = np.lexsort((edge_byte, parent))
        parent, edge_byte, edge_child = parent[order], edge_byte[order], edge_child[order]
        edge_start = np.zeros(n_nodes + 1, np.int64)
        np.cumsum(np.bincount(parent, minlength=n_nodes)[:n_nodes], out=edge_start[1:])
        rows = 2 * n_nodes + 512
        while True:
            da = np.zeros((rows, 4), np.int32)
            da[:, kernel.DA_CHECK] = -1
            da[:, kernel.DA_VALUE] = -1
            used = kernel.build_double_array(np.int64(n_nodes), edge_start, edge_byte, edge_child,
                                             node_value, da)
            if used >= 0:
                # keep room for base + 255 of the highest base
                top = int(da[:used, kernel.DA_BASE].max()) + 256 if used else 256
                return np.ascontiguousarray(da[:max(used, top)])
            rows *= 2


class UnigramModel:
    def __init__(self, spec: TokenizerSpec):
        opts = spec.model
        path = spec.source.get("path")
        n = len(spec.tokens)
        arith_name = opts.get("arithmetic", "sentencepiece")
        if arith_name not in ARITHMETIC:
            raise UnsupportedComponentError(f"Unigram arithmetic {arith_name!r} (known: {sorted(ARITHMETIC)})")
        self.arith = np.int64(ARITHMETIC[arith_name])
        mask = model_mask(spec)
        if spec.scores is None or len(spec.scores) > n or np.any(mask[len(spec.scores):]):
            raise ModelFileError("a Unigram model needs one score per piece", path=path, where="scores")
        # ids past the scores are added tokens only (tokenizer.json), which the model never matches
        scores = np.zeros(n, np.float64)
        scores[:len(spec.scores)] = np.asarray(spec.scores, np.float64)
        if not np.all(np.isfinite(scores)):
            bad = int(np.flatnonzero(~np.isfinite(scores))[0])
            raise ModelFileError(f"score of piece {bad} is {scores[bad]}", path=path, where="scores")
        unk = opts.get("unk_id")
        if unk is not None and not 0 <= int(unk) < n:
            raise ModelFileError(f"unk_id {unk} is outside the vocabulary of {n}", path=path, where="unk_id")
        self.unk_id = np.int64(-1 if unk is None else int(unk))
        self.byte_fallback = bool(opts.get("byte_fallback", False))
        self.byte_chars = bool(opts.get("byte_level", False))  # see kernels.unigram._viterbi
        if self.byte_chars and self.byte_fallback:
            # HF spells an unknown mapped character's UTF-8 as <0xXX> pieces, not the byte it stands for
            raise UnsupportedComponentError("a Unigram model with byte_fallback and a vocabulary in GPT-2's byte "
                                            "alphabet is not supported")
        types = np.asarray(spec.token_types)
        self.id_flags = np.zeros(max(n, 1), np.uint8)
        index: dict[bytes, int] = {}
        if self.arith == kernel.ARITH_SPM:
            normal = mask & (types == TokenType.NORMAL)
            user = mask & (types == TokenType.USER_DEFINED)
            self.id_flags[:n][user] = kernel.ID_USER_DEFINED
            matchable = normal | user  # UNUSED pieces sit in sentencepiece's trie but are skipped
            scores32 = scores.astype(np.float32)
            # sentencepiece starts its minimum from FLT_MAX
            min_score = np.float32(min(FLT_MAX, scores32[normal].min())) if normal.any() else np.float32(FLT_MAX)
            self.unk_score = np.float64(np.float32(min_score - np.float32(UNK_PENALTY)))
            self.scores = scores32.astype(np.float64)
            for i, tok in enumerate(spec.tokens):
                index.setdefault(tok, i)
        elif self.arith == kernel.ARITH_LLAMACPP:
            # llm_tokenizer_ugm: unknown score from NORMAL pieces in float32, user-defined pieces score 0
            matchable = mask
            normal = mask & (types == TokenType.NORMAL)
            scores32 = scores.astype(np.float32)
            min_score = np.float32(min(FLT_MAX, scores32[normal].min())) if normal.any() else np.float32(FLT_MAX)
            self.unk_score = np.float64(np.float32(min_score - np.float32(UNK_PENALTY)))
            self.scores = scores.copy()
            self.scores[:n][mask & (types == TokenType.USER_DEFINED)] = 0.0
            for i in np.flatnonzero(mask).tolist():
                index.setdefault(spec.tokens[i], i)
        else:
            matchable = mask
            self.unk_score = np.float64(scores[mask].min() - UNK_PENALTY) if mask.any() else np.float64(0.0)
            self.scores = scores
            for i in np.flatnonzero(mask).tolist():
                index[spec.tokens[i]] = i  # last one wins, like HF's token -> id map
        self.matchable = matchable
        self.trie = VocabTrie(spec.tokens, matchable)
        self.byte_ids = np.full(256, -1, np.int32)
        for b in range(256):
            tid = index.get(b"<0x%02X>" % b)
            if tid is not None:
                self.byte_ids[b] = tid
        self.scores = np.ascontiguousarray(self.scores)
        if self.scores.shape[0] == 0:
            self.scores = np.zeros(1, np.float64)

    def encode_pieces(self, buf, starts, ends, ws: Workspace):
        total = int(buf.shape[0])
        longest = int((ends - starts).max()) if starts.shape[0] else 0
        ws.grow(longest + 1)
        out_ids = np.empty(total, np.int32)
        out_starts = np.empty(total, np.int64)
        out_ends = np.empty(total, np.int64)
        t = self.trie
        n = kernel.unigram_encode(
            buf, starts, ends, np.int64(starts.shape[0]), (t.da, self.scores, self.id_flags, self.byte_ids),
            (self.arith, self.unk_id, self.unk_score, self.byte_fallback, self.byte_chars), out_ids, out_starts,
            out_ends,
            (ws.rank.view(np.float64), ws.start, ws.id, ws.prev, ws.next))
        if n == kernel.MISSING_UNK:
            raise InputError("the text contains a character this Unigram model has no piece for, and the "
                             "model defines no unk_id")
        return out_ids[:n], out_starts[:n], out_ends[:n]



__all__ = ["UnigramModel", "VocabTrie"]
