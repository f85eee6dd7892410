"""The plain description of a tokenizer that every file format is loaded into.

Loaders (``tokjit.load``) turn tokenizer.json, SentencePiece ``.model``, ``.tiktoken`` and GGUF files
into a :class:`TokenizerSpec`; ``tokjit.compile`` turns a spec into flat arrays for the kernels.
Pipeline components are kept as HF-``tokenizers``-style dicts (``{"type": "Split", ...}``): that schema
is what most tokenizers in the wild are written in, so loaders of other formats describe their
behaviour in the same vocabulary, adding tokjit-specific types only where a reference behaves in a way
no HF component does (for example llama.cpp's own pre-tokenizer splitting).
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np


class TokenType(enum.IntEnum):
    """Token types, numbered as in SentencePiece's ModelProto and GGUF ``tokenizer.ggml.token_type``."""

    UNDEFINED = 0
    NORMAL = 1
    UNKNOWN = 2
    CONTROL = 3
    USER_DEFINED = 4
    UNUSED = 5
    BYTE = 6


class PackedBytes(Sequence):
    """A read-only list of byte strings kept as one ``blob`` + ``offsets`` (n + 1 int64), as the spec
    cache stores them: a cached load hands the arrays straight to the compiler instead of splitting
    them into 100k+ Python objects and packing them again. Items are sliced on access; iterating
    builds the list once. ``strings=True`` yields ``str`` (UTF-8, surrogatepass) instead."""

    __slots__ = ("blob", "offsets", "strings", "_raw", "_offs", "_list")

    def __init__(self, blob: np.ndarray, offsets: np.ndarray, strings: bool = False):
        self.blob = blob
        self.offsets = offsets
        self.strings = strings
        self._raw = None
        self._offs = None
        self._list = None

    def _item(self, i: int):
        if self._raw is None:
            self._raw = self.blob.tobytes()
            self._offs = self.offsets.tolist()
        item = self._raw[self._offs[i]:self._offs[i + 1]]
        return item.decode("utf-8", "surrogatepass") if self.strings else item

    def __len__(self) -> int:
        return self.offsets.shape[0] - 1

    def __getitem__(self, index):
        if isinstance(index, slice):
            return self.tolist()[index]
        n = len(self)
        i = index.__index__()
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError("token index out of range")
        if self._list is not None:
            return self._list[i]
        return self._item(i)

    def tolist(self) -> list:
        if self._list is None:
            raw = self.blob.tobytes()
            offs = self.offsets.tolist()
            items = [raw[offs[i]:offs[i + 1]] for i in range(len(offs) - 1)]
            if self.strings:
                items = [b.decode("utf-8", "surrogatepass") for b in items]
            self._list = items
        return self._list

    def __iter__(self):
        return iter(self.tolist())

    def __eq__(self, other):
        if isinstance(other, (list, tuple, PackedBytes)):
            return len(self) == len(other) and list(self) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __reduce__(self):
        return (PackedBytes, (self.blob, self.offsets, self.strings))


@dataclass(frozen=True)
class AddedToken:
    """A token matched in the raw text before the model runs (HF ``added_tokens``, tiktoken specials,
    SentencePiece user-defined pieces, GGUF control/user-defined tokens)."""

    content: str
    id: int
    special: bool = True
    lstrip: bool = False
    rstrip: bool = False
    single_word: bool = False
    normalized: bool = False


@dataclass
class TokenizerSpec:
    """Everything needed to build a tokenizer, independent of the file it came from.

    ``tokens[i]`` are the bytes the model matches for id ``i`` (GPT-2's byte-to-unicode mapping is
    already undone; SentencePiece pieces keep their U+2581). ``model`` holds the model type and its
    options (``{"type": "BPE", "merge_rule": "pairs", ...}``); the other components are HF-style dicts
    or ``None``.
    """

    model: dict[str, Any]
    tokens: list[bytes] | PackedBytes
    token_types: np.ndarray  # int8, one TokenType per id
    scores: np.ndarray | None = None  # float32 per id (SentencePiece / Unigram / GGUF)
    # BPE merges, int32 rows. merge_rule "pairs": (n, 2) id pairs, rank = row, or (n, 3) with the merged
    # id. merge_rule "ranks" (tiktoken): optional (n, 3) rows of every (left, right, merged) cut of a
    # token into two tokens, ranked by the merged token's rank (derived from tokens when absent)
    merges: np.ndarray | None = None
    model_mask: np.ndarray | None = None  # bool per id: the model may produce it by matching bytes
    normalizer: dict | None = None
    pre_tokenizer: dict | None = None
    post_processor: dict | None = None
    decoder: dict | None = None
    added_tokens: list[AddedToken] = field(default_factory=list)
    bos_id: int | None = None
    eos_id: int | None = None
    unk_id: int | None = None
    pad_id: int | None = None
    chat_template: str | None = None
    source: dict[str, Any] = field(default_factory=dict)  # format, path, sha256

    @property
    def vocab_size(self) -> int:
        return len(self.tokens)
