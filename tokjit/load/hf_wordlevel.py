"""tokenizer.json ``WordLevel`` model -> spec parts (see ``_bpe`` in :mod:`tokjit.load.hf_json`)."""

from __future__ import annotations

from tokjit.errors import ModelFileError


def _wordlevel(doc: dict, model: dict, path) -> dict:
    vocab = model["vocab"]
    if not isinstance(vocab, dict):
        raise ModelFileError("WordLevel vocab must be an object", path=path, where="model.vocab")
    unk = model.get("unk_token")
    if "unk_token" not in model or not isinstance(unk, str):
        # HF has no default for it and refuses the file
        raise ModelFileError("WordLevel needs a string 'unk_token'", path=path, where="model.unk_token")
    strings = {}
    for s, i in vocab.items():
        if not isinstance(s, str) or isinstance(i, bool) or not isinstance(i, int):
            raise ModelFileError(f"vocab entry {s!r}: {i!r} is not string -> integer id", path=path,
                                 where="model.vocab")
        strings[i] = s
    return {
        "model": {"type": "WordLevel", "unk_id": vocab.get(unk), "unk_token": unk},
        "strings": strings, "to_bytes": lambda s: s.encode("utf-8"),
    }
