"""The entry points that make a :class:`~tokjit.Tokenizer`: from a file, its bytes, a model folder or
a bundled encoding.

The loaders in :mod:`tokjit.load` turn files into a :class:`~tokjit.spec.TokenizerSpec`; this module
builds the tokenizer from it, attaches what the folder's config files add, and gives the tokenizer the
function that rebuilds it in another process (pickling ships the origin, not the arrays).
"""

from __future__ import annotations

import dataclasses
import json
import os
import threading

import regex

from tokjit.errors import ModelFileError, TokenizerFileNotFoundError, TokjitError, UnsupportedComponentError
from tokjit.load import _check_post_processor_ids, load_spec, read_tokenizer_file
from tokjit.load.encodings import bundled_encoding, list_encoding_names
from tokjit.load.pretrained import TOKENIZER_FILES, read_tokenizer_config, resolve_pretrained
from tokjit.spec import AddedToken
from tokjit.tokenizer import Tokenizer

__all__ = ["load", "load_bytes", "from_pretrained", "get_encoding", "list_encoding_names",
           "attach_tokenizer_config", "with_config_special_tokens"]

_LOCK = threading.RLock()
_ENCODINGS: dict[str, Tokenizer] = {}
_REBUILT: dict[str, Tokenizer] = {}


def load_bytes(data: bytes, **kwargs) -> Tokenizer:
    """A tokenizer from a file's bytes (format detected, or ``fmt=``); see :func:`load` for the options."""
    spec = load_spec(data, **kwargs)
    path = kwargs.get("path")
    _check_post_processor_ids(spec, path)
    try:
        tok = Tokenizer(spec)
    except TokjitError:
        raise
    except (KeyError, TypeError, ValueError, AttributeError, IndexError, OverflowError, regex.error) as exc:
        # a component config of the wrong shape (a field missing or of the wrong type, a Split
        # regex that does not compile) surfaces while building the pipeline: it is the file's
        # fault, so say which file and what
        raise ModelFileError(f"malformed tokenizer component ({type(exc).__name__}: {exc})",
                             path=path) from None
    if spec.source.get("format") == "tokenizer.json" and spec.model.get("byte_level") and \
            kwargs.get("pat_str") is None:
        from tokjit.load.hf_json import _components
        if not any(c.get("type") == "ByteLevel" for c in _components(spec.pre_tokenizer, "pretokenizers")):
            # HF maps text to GPT-2 byte characters only in the ByteLevel pre-tokenizer; without it
            # its model matches raw characters against byte-mapped vocab strings
            raise UnsupportedComponentError("a byte-level vocabulary (ByteLevel decoder) without a ByteLevel "
                                            f"pre-tokenizer is not supported (in {path})")
    tok._rebuild = _rebuild_tokenizer
    return tok


def load(path, *, pat_str: str | None = None, special_tokens: dict[str, int] | None = None, fmt=None,
         config_special_tokens: bool = False):
    """Load a tokenizer file; the format is detected from the content (see :data:`FORMATS`).

    ``pat_str`` / ``special_tokens`` are needed for ``.tiktoken`` files, which carry neither.
    ``config_special_tokens=True`` also matches the special tokens only ``tokenizer_config.json`` /
    ``special_tokens_map.json`` name, as transformers does (:func:`tokjit.from_pretrained`).
    """
    path, data = read_tokenizer_file(path)
    tok = load_bytes(data, path=path, fmt=fmt, pat_str=pat_str, special_tokens=special_tokens)
    tok._load_options = {"pat_str": pat_str, "special_tokens": special_tokens, "fmt": fmt}  # for pickling
    if tok.spec.source.get("format") in ("tokenizer.json", "sentencepiece", "vocab.txt"):
        attach_tokenizer_config(tok, path)
    if config_special_tokens:
        tok = with_config_special_tokens(tok)
        tok._load_options["config_special_tokens"] = True
    return tok


def from_pretrained(name_or_path, *, revision: str = "main", cache_dir=None):
    """A :class:`~tokjit.Tokenizer` for a model folder or a locally cached hub id, with the special
    tokens, ``model_max_length``, padding side and chat template its config files give. Unlike
    ``tokjit.load`` (the file's own reference, HF ``tokenizers``), special tokens named only in the
    config are matched in text too, as transformers does."""
    folder = resolve_pretrained(name_or_path, revision=revision, cache_dir=cache_dir)
    if not any(os.path.isfile(os.path.join(folder, f)) for f in TOKENIZER_FILES):
        raise TokenizerFileNotFoundError(
            f"no tokenizer file ({', '.join(TOKENIZER_FILES)}) in {folder}")
    return load(folder, config_special_tokens=True)


def get_encoding(name: str) -> Tokenizer:
    """A bundled encoding (``o200k_base``, ``cl100k_base``, ``p50k_base``, ``r50k_base``, ...), one
    tokenizer per name per process."""
    with _LOCK:
        tok = _ENCODINGS.get(name)
        if tok is None:
            data, options = bundled_encoding(name)
            tok = _ENCODINGS[name] = load_bytes(data, **options)
        return tok


def attach_tokenizer_config(tok, tokenizer_path) -> None:
    """Give ``tok`` the config of the folder holding ``tokenizer_path``: ``tok.hf_config``,
    ``tok.config`` (the dict chat templates read), the chat template, and BOS/EOS/PAD ids in the spec
    (so ``tok.eos_token_id`` -- and ``constrain``'s default stop -- match transformers)."""
    folder = os.path.dirname(os.path.abspath(os.fspath(tokenizer_path)))
    tokenizer_json = None
    source = tok.spec.source
    if source.get("format") == "tokenizer.json":
        if "padding" in source and "truncation" in source:  # read when the file was parsed
            tokenizer_json = {"padding": source["padding"], "truncation": source["truncation"]}
        else:
            try:
                with open(tokenizer_path, "rb") as fh:
                    tokenizer_json = json.load(fh)
            except (OSError, ValueError):
                tokenizer_json = None
    hf = read_tokenizer_config(folder, tokenizer_json)
    if hf is None:
        return
    tok.hf_config = hf
    tok.config = hf.raw
    template = hf.raw.get("chat_template")
    jinja = os.path.join(folder, "chat_template.jinja")
    if os.path.isfile(jinja):  # transformers lets the file win over the config's template
        with open(jinja, encoding="utf-8") as fh:
            tok.spec.chat_template = fh.read()
        if isinstance(template, str):
            hf.raw.pop("chat_template")
    elif tok.spec.chat_template is None and isinstance(template, str):
        tok.spec.chat_template = template
    spec = tok.spec
    for name, attr in (("bos_token", "bos_id"), ("eos_token", "eos_id"), ("pad_token", "pad_id")):
        content = hf.special_tokens.get(name)
        setattr(spec, attr, None if content is None else _token_id(tok, content))


def _token_id(tok, content: str) -> int | None:
    # special tokens are nearly always added tokens: avoid building the whole string -> id map
    for t in tok.spec.added_tokens:
        if t.content == content:
            return t.id
    return tok.token_to_id(content)


def with_config_special_tokens(tok):
    """``tok``, or a copy that also matches (and skips on decode) the special tokens the config names
    but tokenizer.json does not list as added tokens: transformers registers every such token as a
    special added token when it loads a folder (EnViT5's ``</s>`` and ``<extra_id_*>``)."""
    hf = tok.hf_config
    if hf is None:
        return tok
    have = {t.content for t in tok.spec.added_tokens}
    extra = []
    for content in dict.fromkeys([*hf.special_tokens.values(), *hf.extra_special_tokens]):
        if content is None or content in have:
            continue
        tid = tok.token_to_id(content)
        if tid is not None:  # transformers would append a new id; tokjit's vocabulary is the file's
            extra.append(AddedToken(content, tid, special=True, normalized=False))
    if not extra:
        return tok
    spec = dataclasses.replace(tok.spec, added_tokens=[*tok.spec.added_tokens, *extra])
    out = Tokenizer(spec)
    out.hf_config, out.config = tok.hf_config, tok.config
    out._load_options = dict(getattr(tok, "_load_options", {}))
    out._rebuild = tok._rebuild
    return out


def _rebuild_tokenizer(origin: tuple) -> "Tokenizer":
    """Inverse of :meth:`Tokenizer.__reduce__`; one tokenizer per origin per process, so a worker
    compiles the vocabulary once however many tasks it runs."""
    key = repr(origin)
    with _LOCK:
        tok = _REBUILT.get(key)
        if tok is not None:
            return tok
        if origin[0] == "bundled":
            tok = get_encoding(origin[1])
        else:
            _, path, sha, options = origin
            tok = load(path, **{k: v for k, v in options if k != "path"})
            if sha is not None and tok.spec.source.get("sha256") != sha:
                raise ModelFileError(
                    f"tokenizer file changed since it was pickled: sha256 {tok.spec.source.get('sha256')} "
                    f"on this machine, {sha} where it was pickled; ship the same file to every worker",
                    path=path)
        _REBUILT[key] = tok
        return tok
