"""tokenizer.json ``Unigram`` models -> the parts :func:`tokjit.load.hf_json._finish` assembles.

HF stores ``vocab`` as ``[[piece, score], ...]`` (id = position), ``unk_id`` and ``byte_fallback``.
Scores stay float64 as parsed: HF sums them in f64, and the model is told so (``arithmetic="hf"``).
"""

from __future__ import annotations

import math

from tokjit.errors import ModelFileError


def _unigram(doc: dict, model: dict, path) -> dict:
    import numpy as np

    vocab = model.get("vocab")
    if not isinstance(vocab, list):
        raise ModelFileError("Unigram vocab must be a list of [piece, score]", path=path, where="model.vocab")
    if not vocab:
        raise ModelFileError("Unigram vocab is empty", path=path, where="model.vocab")
    strings: dict[int, str] = {}
    scores = np.empty(len(vocab), np.float64)
    for i, entry in enumerate(vocab):
        where = f"model.vocab[{i}]"
        if not isinstance(entry, (list, tuple)) or len(entry) != 2 or not isinstance(entry[0], str):
            raise ModelFileError("expected [piece, score]", path=path, where=where)
        score = entry[1]
        if isinstance(score, bool) or not isinstance(score, (int, float)):
            raise ModelFileError(f"score {score!r} is not a number", path=path, where=where)
        if not math.isfinite(score):
            raise ModelFileError(f"score {score!r} is not finite", path=path, where=where)
        strings[i] = entry[0]
        scores[i] = float(score)
    unk_id = model.get("unk_id")
    if unk_id is not None:
        if isinstance(unk_id, bool) or not isinstance(unk_id, int) or not 0 <= unk_id < len(vocab):
            raise ModelFileError(f"unk_id {unk_id!r} is not an index into the vocab of {len(vocab)}",
                                 path=path, where="model.unk_id")
    byte_fallback = model.get("byte_fallback", False)
    if not isinstance(byte_fallback, bool):
        raise ModelFileError("byte_fallback must be true or false", path=path, where="model.byte_fallback")
    return {
        "model": {"type": "Unigram", "arithmetic": "hf", "unk_id": unk_id, "byte_fallback": byte_fallback},
        "strings": strings, "to_bytes": lambda s: s.encode("utf-8"), "scores": scores,
    }
