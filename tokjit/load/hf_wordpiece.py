"""tokenizer.json ``WordPiece`` model -> spec parts (see ``_bpe`` in :mod:`tokjit.load.hf_json`)."""

from __future__ import annotations

from tokjit.errors import ModelFileError


def id_strings(model: dict, kind: str, path) -> dict[int, str]:
    """id -> string of a ``{"string": id}`` vocabulary (WordPiece, WordLevel), checked."""
    vocab = model["vocab"]
    if not isinstance(vocab, dict):
        raise ModelFileError(f"{kind} vocab must be an object", path=path, where="model.vocab")
    strings = {}
    for s, i in vocab.items():
        if not isinstance(s, str) or isinstance(i, bool) or not isinstance(i, int):
            raise ModelFileError(f"vocab entry {s!r}: {i!r} is not string -> integer id", path=path,
                                 where="model.vocab")
        strings[i] = s
    return strings


def _wordpiece(doc: dict, model: dict, path) -> dict:
    strings = id_strings(model, "WordPiece", path)
    vocab = model["vocab"]
    unk = model.get("unk_token", "[UNK]")
    unk_id = vocab.get(unk) if unk is not None else None
    max_chars = model.get("max_input_chars_per_word", 100)
    prefix = model.get("continuing_subword_prefix", "##")
    return {
        "model": {"type": "WordPiece", "unk_id": unk_id, "unk_token": unk,
                  "continuing_subword_prefix": "" if prefix is None else str(prefix),
                  "max_input_chars_per_word": None if max_chars is None else int(max_chars)},
        "strings": strings, "to_bytes": lambda s: s.encode("utf-8"),
    }
