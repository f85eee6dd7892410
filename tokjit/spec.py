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
    tokens: list[bytes]
    token_types: np.ndarray  # int8, one TokenType per id
    scores: np.ndarray | None = None  # float32 per id (SentencePiece / Unigram / GGUF)
    merges: np.ndarray | None = None  # int32 (n, 2) id pairs, rank = row (BPE with merge_rule "pairs")
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
