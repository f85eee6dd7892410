"""Bundled tiktoken encodings, available offline through :func:`get_encoding`."""

from __future__ import annotations

import gzip
import json
from importlib import resources

from tokjit.errors import UnknownEncodingError



def _catalog() -> dict:
    with resources.files("tokjit").joinpath("data/encodings/encodings.json").open("rb") as fh:
        return json.load(fh)


def list_encoding_names() -> list[str]:
    return sorted(_catalog())




def bundled_encoding(name: str) -> tuple[bytes, dict]:
    """The rank file bytes of bundled encoding ``name`` and the load options it needs (pattern,
    special tokens, vocabulary size); :func:`tokjit.get_encoding` builds the tokenizer."""
    catalog = _catalog()
    if name not in catalog:
        raise UnknownEncodingError(f"unknown encoding {name!r}; bundled: {', '.join(sorted(catalog))}")
    entry = catalog[name]
    ref = resources.files("tokjit").joinpath("data/encodings/" + entry["ranks_file"])
    data = gzip.decompress(ref.read_bytes())
    return data, dict(path=f"<bundled {name}>", fmt="tiktoken", pat_str=entry["pat_str"],
                      special_tokens=entry["special_tokens"], name=name, n_vocab=entry.get("explicit_n_vocab"))
