"""WordLevel (HF ``models.WordLevel``): one id per pre-tokenized piece, looked up whole."""

from __future__ import annotations

import numpy as np

from tokjit.compile import TokenTable
from tokjit.errors import InputError
from tokjit.kernels.wordlevel import wordlevel_ids
from tokjit.models.bpe import model_mask
from tokjit.models.wordpiece import checked_unk_id
from tokjit.spec import TokenizerSpec


class WordLevelModel:
    """Spec options: ``unk_id`` (None when the vocabulary lacks the unknown token) and ``unk_token``."""

    def __init__(self, spec: TokenizerSpec):
        self.table = TokenTable.build(spec.tokens, model_mask(spec))
        self.unk_id = checked_unk_id(spec)
        self.unk_token = spec.model.get("unk_token")

    def encode_pieces(self, buf, starts, ends, ws=None):
        n = starts.shape[0]
        ids = np.empty(n, np.int32)
        t = self.table
        found = wordlevel_ids(buf, starts, ends, np.int64(n), t.blob, t.offsets, t.table, self.unk_id, ids)
        if found < 0:
            # HF raises too (WordLevel error MissingUnkToken)
            raise InputError(f"text needs the unknown token {self.unk_token!r}, which is not in the vocabulary")
        if found < n:
            kept = ids >= 0
            return ids[kept], starts[kept], ends[kept]
        return ids, starts.copy(), ends.copy()
