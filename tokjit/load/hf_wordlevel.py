"""tokenizer.json ``WordLevel`` model -> spec parts (see ``_bpe`` in :mod:`tokjit.load.hf_json`)."""

from __future__ import annotations

from tokjit.errors import ModelFileError
from tokjit.load.hf_wordpiece import id_strings


def _wordlevel(doc: dict, model: dict, path) -> dict:
    strings = id_strings(model, "WordLevel", path)
    unk = model.get("unk_token")
    if not isinstance(unk, str):
        # HF has no default for it and refuses the file
        raise ModelFileError("WordLevel needs a string 'unk_token'", path=path, where="model.unk_token")
    return {
        "model": {"type": "WordLevel", "unk_id": model["vocab"].get(unk), "unk_token": unk},
        "strings": strings, "to_bytes": lambda s: s.encode("utf-8"),
    }
