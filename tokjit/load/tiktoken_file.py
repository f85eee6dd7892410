"""``.tiktoken`` rank files: one ``base64(token bytes) rank`` line per token."""

from __future__ import annotations

import base64
import binascii

import numpy as np

from tokjit.errors import ModelFileError
from tokjit.spec import AddedToken, TokenizerSpec, TokenType


def parse_ranks(data: bytes, path=None) -> dict[bytes, int]:
    ranks: dict[bytes, int] = {}
    seen_ranks: set[int] = set()
    for lineno, line in enumerate(data.splitlines(), 1):
        if not line.strip():
            continue
        try:
            token_b64, rank_s = line.split()
            token = base64.b64decode(token_b64)  # lenient like tiktoken: whisper has "= 50256"
            rank = int(rank_s)
        except (ValueError, binascii.Error) as exc:
            raise ModelFileError(f"malformed rank line {line[:60]!r} ({exc})", path=path,
                                 where=f"line {lineno}") from None
        if rank < 0 or rank > 10_000_000:
            raise ModelFileError(f"rank {rank} out of range", path=path, where=f"line {lineno}")
        if token in ranks:
            raise ModelFileError(f"duplicate token {token!r}", path=path, where=f"line {lineno}")
        if rank in seen_ranks:
            raise ModelFileError(f"duplicate rank {rank}", path=path, where=f"line {lineno}")
        seen_ranks.add(rank)
        ranks[token] = rank
    if not ranks:
        raise ModelFileError("no ranks found", path=path)
    return ranks


def spec_from_ranks(ranks: dict[bytes, int], pat_str: str, special_tokens: dict[str, int], *,
                    name: str, path=None, n_vocab: int | None = None) -> TokenizerSpec:
    """A tiktoken encoding as a spec: byte-level BPE ranked by the merged token's rank."""
    size = max(max(ranks.values()) + 1, max(special_tokens.values(), default=-1) + 1)
    if n_vocab is not None and n_vocab != size:
        raise ModelFileError(f"encoding expects {n_vocab} tokens, file and specials give {size}", path=path)
    tokens = [b""] * size
    types = np.full(size, TokenType.UNUSED, np.int8)
    mask = np.zeros(size, np.bool_)
    for tok, rank in ranks.items():
        tokens[rank] = tok
        types[rank] = TokenType.NORMAL
        mask[rank] = True
    singles = {tok[0] for tok in ranks if len(tok) == 1}
    if len(singles) != 256:
        raise ModelFileError(f"byte-level ranks must contain all 256 single bytes, found {len(singles)}",
                             path=path)
    added = []
    for content, tid in special_tokens.items():
        if mask[tid]:
            raise ModelFileError(f"special token {content!r} reuses rank {tid}", path=path)
        tokens[tid] = content.encode("utf-8")
        types[tid] = TokenType.CONTROL
        added.append(AddedToken(content, tid, special=True))
    from tokjit.compile import TokenTable, split_merge_rows
    # every (left, right) -> token cut, stored so that a cached load need not recompute it
    merges = split_merge_rows(TokenTable.build(tokens, mask), mask)
    return TokenizerSpec(
        model={"type": "BPE", "merge_rule": "ranks", "byte_level": True, "ignore_merges": True},
        tokens=tokens, token_types=types, model_mask=mask, merges=merges,
        pre_tokenizer={"type": "Split", "pattern": {"Regex": pat_str}, "behavior": "Removed", "invert": True,
                       "syntax": "rust"},  # tiktoken's engine is fancy-regex
        decoder={"type": "ByteLevel"},
        added_tokens=added,
        source={"format": "tiktoken", "name": name, "path": None if path is None else str(path)},
    )


def load_tiktoken(path, data: bytes, *, pat_str: str | None, special_tokens: dict[str, int] | None,
                  name: str | None = None) -> TokenizerSpec:
    if pat_str is None:
        raise ModelFileError(".tiktoken files carry no split pattern: pass pat_str= (for example the "
                             "pattern of the encoding the file belongs to)", path=path)
    ranks = parse_ranks(data, path)
    return spec_from_ranks(ranks, pat_str, special_tokens or {}, name=name or str(path), path=path)
