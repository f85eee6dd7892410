"""Bundled tiktoken encodings, available offline through :func:`get_encoding`."""

from __future__ import annotations

import gzip
import json
import threading
from importlib import resources

from tokjit.errors import UnknownEncodingError

_LOCK = threading.RLock()
_CACHE: dict[str, object] = {}


def _catalog() -> dict:
    with resources.files("tokjit").joinpath("data/encodings/encodings.json").open("rb") as fh:
        return json.load(fh)


def list_encoding_names() -> list[str]:
    return sorted(_catalog())


def get_encoding(name: str):
    """A bundled encoding (``o200k_base``, ``cl100k_base``, ``p50k_base``, ``r50k_base``, ...)."""
    from tokjit.load import load_bytes

    with _LOCK:
        if name in _CACHE:
            return _CACHE[name]
        catalog = _catalog()
        if name not in catalog:
            raise UnknownEncodingError(f"unknown encoding {name!r}; bundled: {', '.join(sorted(catalog))}")
        entry = catalog[name]
        ref = resources.files("tokjit").joinpath("data/encodings/" + entry["ranks_file"])
        data = gzip.decompress(ref.read_bytes())
        tok = load_bytes(data, path=f"<bundled {name}>", fmt="tiktoken", pat_str=entry["pat_str"],
                         special_tokens=entry["special_tokens"], name=name,
                         n_vocab=entry.get("explicit_n_vocab"))
        _CACHE[name] = tok
        return tok
