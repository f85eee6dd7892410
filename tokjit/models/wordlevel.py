"""WordLevel (HF ``models.WordLevel``): one id per pre-tokenized piece, looked up whole."""

from __future__ import annotations

import numpy as np

from tokjit.compile import TokenTable
from tokjit.errors import InputError, ModelFileError
from tokjit.kernels.wordlevel import wordlevel_ids
from tokjit.models.bpe import model_mask
from tokjit.spec import TokenizerSpec


class WordLevelModel:
    """Spec options: ``unk_id`` (None when the vocabulary lacks the unknown token) and ``unk_token``."""

    def __init__(self, spec: TokenizerSpec):
        self.table = TokenTable.build(spec.tokens, model_mask(spec))
        unk = spec.model.get("unk_id")
        if unk is not None and not 0 <= int(unk) < len(spec.tokens):
            raise ModelFileError(f"unk id {unk} outside the vocabulary", path=spec.source.get("path"),
                                 where="model.unk_id")
        self.unk_id = np.int64(-1 if unk is None else int(unk))
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
