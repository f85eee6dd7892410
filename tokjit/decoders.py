"""Decoders: token ids -> text.

Most decoder chains reduce to "concatenate a fixed byte string per token" (byte-level BPE; SentencePiece
with U+2581 -> space and ``<0xXX>`` -> byte), plus at most a rule about the very first token. Those are
compiled into a per-id byte table gathered by one kernel. Chains that need per-token context keep the
HF semantics: a list of token strings passed through each decoder's ``decode_chain``.
"""

from __future__ import annotations

from typing import Callable

import numpy as np
from numba import njit

from .errors import UnsupportedComponentError

DECODER_BUILDERS: dict[str, Callable[[dict], object]] = {}


def register_decoder(name: str):
    def wrap(builder):
        DECODER_BUILDERS[name] = builder
        return builder
    return wrap


def build_decoder(config: dict | None):
    if config is None:
        return None
    kind = config.get("type")
    try:
        builder = DECODER_BUILDERS[kind]
    except KeyError:
        raise UnsupportedComponentError(
            f"decoder type {kind!r} is not supported (known: {sorted(DECODER_BUILDERS)})") from None
    return builder(config)


@njit(cache=True, nogil=True)
def gather_token_bytes(ids, n_ids, blob, offsets, skip, out):
    """Concatenate ``blob[offsets[id]:offsets[id+1]]`` for each id not marked in ``skip``.

    ``out`` must hold the total; ids are validated by the caller. O(output bytes).
    """
    n = 0
    for i in range(n_ids):
        t = ids[i]
        if skip[t]:
            continue
        s = offsets[t]
        e = offsets[t + 1]
        for k in range(s, e):
            out[n] = blob[k]
            n += 1
    return n


@njit(cache=True, nogil=True)
def gathered_length(ids, n_ids, offsets, skip):
    total = 0
    for i in range(n_ids):
        t = ids[i]
        if not skip[t]:
            total += offsets[t + 1] - offsets[t]
    return total


class ByteLevel:
    """HF ``ByteLevel`` decoder: token strings are byte-mapped, so the raw bytes are the text."""

    per_token_bytes = True

    def __init__(self, config: dict):
        pass

    def decode_chain(self, tokens: list[str]) -> list[str]:
        return tokens


class Sequence:
    def __init__(self, config: dict):
        self.steps = [build_decoder(c) for c in config["decoders"]]

    def decode_chain(self, tokens: list[str]) -> list[str]:
        for step in self.steps:
            tokens = step.decode_chain(tokens)
        return tokens


register_decoder("ByteLevel")(ByteLevel)
register_decoder("Sequence")(Sequence)
