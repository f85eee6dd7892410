"""Loading tokenizer files of every supported format, detected from the content itself.

``load(path)`` reads the file, recognises GGUF (magic), tokenizer.json (JSON object), ``.tiktoken``
rank files (base64 + rank lines), SentencePiece ``.model`` (protobuf) and WordPiece ``vocab.txt``, turns
it into a :class:`~tokjit.spec.TokenizerSpec` and compiles a :class:`~tokjit.tokenizer.Tokenizer`.
"""

from __future__ import annotations

import hashlib
import os
import re

from tokjit.errors import ModelFileError, TokenizerFileNotFoundError, UnsupportedComponentError

_RANK_LINE = re.compile(rb"^[A-Za-z0-9+/]+={0,2} \d+\r?$")

FORMATS = ("gguf", "tokenizer.json", "tiktoken", "sentencepiece", "vocab.txt")


def detect_format(data: bytes, path=None) -> str:
    """Name of the file format of ``data`` (one of :data:`FORMATS`), from its content."""
    if data[:4] == b"GGUF":
        return "gguf"
    head = data[:4096].lstrip()
    if head[:1] == b"{":
        return "tokenizer.json"
    first = data.split(b"\n", 1)[0]
    if _RANK_LINE.match(first):
        return "tiktoken"
    if data[:1] == b"\x0a":  # protobuf field 1 (pieces), length-delimited: SentencePiece ModelProto
        return "sentencepiece"
    # a bad byte (a cut character, a surrogate's UTF-8 form) still leaves a word list recognisable,
    # so the vocab.txt loader can say which line holds it
    text = data[:65536].decode("utf-8", "replace")
    if "\n" in text and not any(" " in ln.strip() for ln in text.splitlines()[:200]):
        return "vocab.txt"
    raise ModelFileError("unrecognised tokenizer file (expected GGUF, tokenizer.json, .tiktoken, "
                         "SentencePiece .model or vocab.txt)", path=path)


def load_spec(data: bytes, *, path=None, fmt: str | None = None, pat_str=None, special_tokens=None,
              name=None, n_vocab=None, use_cache: bool = True):
    """Parse ``data`` into a :class:`~tokjit.spec.TokenizerSpec`, through the on-disk cache."""
    from tokjit.load import cache

    sha = hashlib.sha256(data).hexdigest()
    key = cache.cache_key(sha, {"fmt": fmt, "pat_str": pat_str, "special_tokens": special_tokens,
                                "name": name, "n_vocab": n_vocab})
    spec = cache.read(key) if use_cache else None
    if spec is None:
        spec = _parse(data, path=path, fmt=fmt, pat_str=pat_str, special_tokens=special_tokens, name=name,
                      n_vocab=n_vocab)
        spec.source["sha256"] = sha
        if use_cache:
            cache.write(key, spec)
    spec.source["path"] = None if path is None else str(path)
    return spec


def _parse(data: bytes, *, path, fmt, pat_str, special_tokens, name, n_vocab):
    fmt = fmt or detect_format(data, path)
    if fmt == "tiktoken":
        from tokjit.load.tiktoken_file import load_tiktoken
        spec = load_tiktoken(path, data, pat_str=pat_str, special_tokens=special_tokens, name=name)
        if n_vocab is not None and spec.vocab_size != n_vocab:
            raise ModelFileError(f"expected {n_vocab} tokens, got {spec.vocab_size}", path=path)
    elif fmt == "tokenizer.json":
        _reject_companion_json(data, path)
        from tokjit.load.hf_json import load_hf_json
        spec = load_hf_json(path, data)
    elif fmt == "gguf":
        from tokjit.load.gguf_file import load_gguf
        spec = load_gguf(path, data)
    elif fmt == "sentencepiece":
        from tokjit.load.sentencepiece_model import load_sentencepiece
        spec = load_sentencepiece(path, data)
    elif fmt == "vocab.txt":
        from tokjit.load.vocab_txt import load_vocab_txt
        spec = load_vocab_txt(path, data)
    else:
        raise UnsupportedComponentError(f"format {fmt!r}")
    if fmt != "tiktoken" and (pat_str is not None or special_tokens is not None):
        _override(spec, pat_str, special_tokens)
    spec.source.setdefault("format", fmt)
    if name:
        spec.source["name"] = name
    return spec


def _override(spec, pat_str, special_tokens):
    from tokjit.spec import AddedToken
    if pat_str is not None:
        spec.pre_tokenizer = {"type": "Split", "pattern": {"Regex": pat_str}, "behavior": "Removed",
                              "invert": True, "syntax": "rust"}
    if special_tokens:
        for content, tid in special_tokens.items():
            spec.added_tokens.append(AddedToken(content, int(tid), special=True))


def _check_post_processor_ids(spec, path) -> None:
    """Every id a post-processor template would insert must be in the vocabulary (HF does not check;
    an id past the end would make the output undecodable)."""
    n = len(spec.tokens)

    def walk(node, where):
        if isinstance(node, dict):
            for key, value in node.items():
                if key == "ids" and isinstance(value, list):
                    for tid in value:
                        if isinstance(tid, bool) or not isinstance(tid, int) or not 0 <= tid < n:
                            raise ModelFileError(f"post-processor inserts id {tid!r}, outside the vocabulary "
                                                 f"of {n}", path=path, where=f"{where}.{key}")
                elif key in ("cls", "sep") and isinstance(value, list) and len(value) == 2:
                    tid = value[1]
                    if isinstance(tid, bool) or not isinstance(tid, int) or not 0 <= tid < n:
                        raise ModelFileError(f"post-processor inserts id {tid!r}, outside the vocabulary "
                                             f"of {n}", path=path, where=f"{where}.{key}")
                else:
                    walk(value, f"{where}.{key}")
        elif isinstance(node, list):
            for i, value in enumerate(node):
                walk(value, f"{where}[{i}]")

    walk(spec.post_processor, "post_processor")


def read_tokenizer_file(path) -> tuple[str, bytes]:
    """``(path, contents)`` of the tokenizer file at ``path`` (a folder: its tokenizer file), with the
    errors a user can act on: not found (and a Hub id is not a path), unreadable, file contents passed
    as a path."""
    path = os.fspath(path)
    _reject_contents_as_path(path)
    if os.path.isdir(path):
        for candidate in ("tokenizer.json", "tokenizer.model", "spiece.model", "vocab.txt"):
            if os.path.exists(os.path.join(path, candidate)):
                path = os.path.join(path, candidate)
                break
        else:
            raise ModelFileError("no tokenizer.json, tokenizer.model, spiece.model or vocab.txt in directory",
                                 path=path)
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except FileNotFoundError as exc:
        if isinstance(path, str) and _HUB_ID.fullmatch(path) and not path.lower().endswith(_FILE_SUFFIXES):
            raise TokenizerFileNotFoundError(
                f"no such tokenizer file or folder: {path!r}. It looks like a Hugging Face Hub id; tokjit.load "
                f"reads local files: download the tokenizer first (for example `huggingface-cli download {path} "
                f"tokenizer.json tokenizer_config.json --local-dir DIR`) and load DIR") from exc
        raise TokenizerFileNotFoundError(f"no such tokenizer file: {path}") from exc
    except OSError as exc:
        raise ModelFileError(f"cannot read file ({exc.strerror})", path=path) from exc
    return path, data


# "org/name" (or "name/variant-1.5"): a relative path of exactly two parts that names no file
_HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[\w.-]+")
_FILE_SUFFIXES = (".json", ".model", ".tiktoken", ".gguf", ".txt")  # "dir/tokenizer.json" is a path
_LONGEST_PATH = 4096


def _reject_contents_as_path(path) -> None:
    """A path argument that is really a file's contents (``load(open(f).read())``) would otherwise end
    up, all of it, in a "no such file" message."""
    text = path.decode("utf-8", "replace") if isinstance(path, bytes) else path
    if len(text) > _LONGEST_PATH or "\n" in text or "\x00" in text:
        from tokjit.errors import InputError
        raise InputError(f"load() takes a path, but got what looks like file contents ({len(text)} characters "
                         f"starting {text[:40]!r}); pass the file's path, or its bytes to "
                         f"tokjit.api.load_bytes(data)")


# files that sit beside a tokenizer.json in a model folder and are JSON objects too
_COMPANION_JSON = {"tokenizer_config.json": "settings (special tokens, chat template, max length)",
                   "special_tokens_map.json": "the names of the special tokens",
                   "config.json": "the model's configuration", "generation_config.json": "generation settings"}


def _reject_companion_json(data: bytes, path) -> None:
    """A JSON object without a "model" section is not a tokenizer.json; say what it probably is."""
    if b'"model"' in data:
        return
    name = os.path.basename(str(path)) if path is not None else ""
    what = _COMPANION_JSON.get(name)
    if what is None and (b'"tokenizer_class"' in data or b'"added_tokens_decoder"' in data):
        name, what = "tokenizer_config.json", _COMPANION_JSON["tokenizer_config.json"]
    if what is not None:
        raise ModelFileError(f"this is a {name} ({what}), not a tokenizer: load the tokenizer.json (or "
                             f"tokenizer.model) beside it, or the folder", path=path)
    raise ModelFileError("JSON without a \"model\" section: not a tokenizer.json", path=path)


