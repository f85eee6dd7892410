"""HF ``tokenizer.json`` -> :class:`~tokjit.spec.TokenizerSpec`.

The normalizer / pre-tokenizer / post-processor / decoder dicts pass through unchanged (tokjit builds
its components from the same schema); the model's vocabulary is turned into token bytes, undoing
GPT-2's byte-to-unicode mapping for byte-level vocabularies so kernels see raw bytes.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import re
import warnings
from typing import Any, Callable

import numpy as np

from tokjit.errors import ModelFileError, UnsupportedComponentError
from tokjit.spec import AddedToken, TokenizerSpec, TokenType
from tokjit.text import byte_level_values, bytes_to_unicode


BYTE_DECODER = byte_level_values()
# characters below U+0100 that are not in the table must take the slow path (their UTF-8 differs)
_TO_LATIN1 = str.maketrans({**{chr(c): "\U0010FFFF" for c in range(256)},
                            **{c: chr(b) for c, b in BYTE_DECODER.items()}})


def unmap_byte_level(token: str) -> bytes:
    """Raw bytes of a byte-level token string (characters outside the table keep their UTF-8)."""
    try:
        return token.translate(_TO_LATIN1).encode("latin-1")
    except UnicodeEncodeError:
        out = bytearray()
        for ch in token:
            b = BYTE_DECODER.get(ch)
            out += ch.encode("utf-8") if b is None else bytes((b,))
        return bytes(out)


_SURROGATE = re.compile("[\ud800-\udfff]")
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")
_SURROGATE_UTF8 = re.compile(rb"\xed[\xa0-\xbf]")


def may_hold_surrogate(data: bytes) -> bool:
    """Whether JSON text can parse to a string holding a surrogate: through a ``\\uD800``-``\\uDFFF``
    escape, or through bytes ED A0-BF (UTF-8's form of a surrogate, which ``json.loads`` lets
    through). Neither occurs in the usual UTF-8 export, so the common case costs two byte scans
    (~35 ms for gemma3's 33 MB, next to ~1.2 s of json.loads)."""
    return _SURROGATE_ESCAPE.search(data) is not None or _SURROGATE_UTF8.search(data) is not None


def lone_surrogate_at(doc) -> str | None:
    """Where in a parsed JSON document a string (or key) holds a surrogate code point, or None.

    ``json.loads`` joins an escaped high/low pair into one character, so any surrogate left is a
    lone one: such a string cannot be encoded to UTF-8 and serde_json (HF) rejects the file.
    """
    try:  # one pass in C; escaped pairs are single characters by now (ensure_ascii files have many)
        json.dumps(doc, ensure_ascii=False).encode("utf-8")
        return None
    except UnicodeEncodeError:
        pass
    except RecursionError:
        pass  # as deep as json.loads allows: the walk below needs no recursion
    search = _SURROGATE.search
    stack = [(doc, "")]
    while stack:  # iterative: the document may nest as deep as json.loads allows
        node, where = stack.pop()
        if isinstance(node, dict):
            for key, value in node.items():
                if search(key):
                    return f"{where or '(top level)'} key {ascii(key)}"
                if isinstance(value, str):
                    if search(value):
                        return f"{where}.{key}" if where else key
                elif isinstance(value, (dict, list)):
                    stack.append((value, f"{where}.{key}" if where else key))
        elif isinstance(node, list):
            for i, value in enumerate(node):
                if isinstance(value, str):
                    if search(value):
                        return f"{where}[{i}]"
                elif isinstance(value, (dict, list)):
                    stack.append((value, f"{where}[{i}]"))
        elif isinstance(node, str) and search(node):
            return where or "(top level)"
    return None


def _components(cfg: dict | None, key: str) -> list[dict]:
    """Flatten Sequence components of a pipeline stage."""
    if not cfg:
        return []
    if cfg.get("type") == "Sequence":
        out = []
        for sub in cfg.get(key, []):
            out.extend(_components(sub, key))
        return out
    return [cfg]


def has_byte_level(doc: dict, stage: str) -> bool:
    """Whether ``doc``'s ``stage`` (pre_tokenizer, decoder), Sequences flattened, has a ByteLevel step."""
    return any(c.get("type") == "ByteLevel" for c in _components(doc.get(stage), _STAGES[stage]))


def is_byte_level(doc: dict) -> bool:
    return has_byte_level(doc, "pre_tokenizer") or has_byte_level(doc, "decoder")


# tokenizer.json model type -> "module:function" turning its model section into spec parts; the
# function of each family is imported on first use
HF_MODEL_LOADERS: dict[str, str] = {
    "BPE": "tokjit.load.hf_json:_bpe",
    "Unigram": "tokjit.load.hf_unigram:_unigram",
    "WordPiece": "tokjit.load.hf_wordpiece:_wordpiece",
    "WordLevel": "tokjit.load.hf_wordlevel:_wordlevel",
}


def _model_loader(kind: str) -> Callable[[dict, dict, Any], dict]:
    module, function = HF_MODEL_LOADERS[kind].split(":")
    return getattr(importlib.import_module(module), function)


_U64_MAX = (1 << 64) - 1
_POW10 = tuple(float("1e%d" % k) for k in range(309))


def serde_json_float(text: str) -> float:
    """The f64 HF ``tokenizers`` holds for the JSON number ``text``: serde_json without its
    ``float_roundtrip`` feature reads the digits into a u64 (digits past its range are dropped),
    converts that to f64, then multiplies or divides once by a power of ten, which is not always the
    nearest double to the text (Python's ``float`` is). A Unigram vocabulary's scores decide its ties,
    so the nearest double is not HF's ids: 25.5K of pegasus' 96.1K scores read one step off, and
    'O////' came out ▁O / /// instead of ▁O /// / (two splits whose scores sum equal with Python's
    values, apart with HF's). Checked equal to the values ``Tokenizer.to_str()`` writes back for every
    score of the shared Unigram files."""
    body = text[1:] if text[0] == "-" else text
    if "e" not in body and "E" not in body:
        point = body.find(".")
        digits = body.replace(".", "", 1)
        if len(digits) <= 19:  # any 19 digits fit a u64: the common case, one conversion and one division
            f = float(int(digits))
            if point >= 0:
                f /= _POW10[len(body) - point - 1]
            return -f if body is not text else f
    return _serde_json_float_digits(text)


def _serde_json_float_digits(text: str) -> float:
    """:func:`serde_json_float` digit by digit, as serde_json reads them: integer digits past a u64
    count in the exponent, a fraction digit that would overflow ends the digits it reads."""
    i, n = (1, len(text)) if text[0] == "-" else (0, len(text))
    significand, exponent, long = 0, 0, False
    while i < n and text[i].isdigit():
        digit = ord(text[i]) - 48
        if long or significand * 10 + digit > _U64_MAX:
            long = True
            exponent += 1
        else:
            significand = significand * 10 + digit
        i += 1
    if i < n and text[i] == ".":
        i += 1
        while i < n and text[i].isdigit():
            digit = ord(text[i]) - 48
            if significand * 10 + digit > _U64_MAX:
                while i < n and text[i].isdigit():
                    i += 1
                break
            significand = significand * 10 + digit
            exponent -= 1
            i += 1
    if i < n and text[i] in "eE":
        exponent += int(text[i + 1:])
    f = float(significand)
    while True:
        if abs(exponent) < len(_POW10):
            f = f * _POW10[abs(exponent)] if exponent >= 0 else f / _POW10[abs(exponent)]
            break
        if f == 0.0:
            break
        if exponent >= 0:
            return float("inf") if text[0] != "-" else float("-inf")  # serde_json refuses it; json.loads gives inf too
        f /= 1e308
        exponent += 308
    return -f if text[0] == "-" else f


def load_hf_json(path, data: bytes) -> TokenizerSpec:
    try:
        doc = json.loads(data, parse_float=serde_json_float)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ModelFileError(f"not valid JSON ({exc})", path=path) from None
    if may_hold_surrogate(data):
        where = lone_surrogate_at(doc)
        if where is not None:
            raise ModelFileError("a string holds a lone UTF-16 surrogate (an escape like \\ud800, or its "
                                 "UTF-8 form), which is no Unicode text; HF tokenizers refuses the file too",
                                 path=path, where=where)
    if not isinstance(doc, dict) or not isinstance(doc.get("model"), dict):
        raise ModelFileError("tokenizer.json needs an object with a 'model' object", path=path, where="model")
    model = doc["model"]
    kind = model.get("type")
    if kind is None:  # very old exports omit the type; infer it from the fields
        kind = "BPE" if "merges" in model else "Unigram" if isinstance(model.get("vocab"), list) else "WordPiece"
    if not isinstance(kind, str):
        raise ModelFileError(f"model type must be a string, got {kind!r}", path=path, where="model.type")
    check_component_tree(doc, path)
    doc = byte_level_normalizer_as_pre_tokenizer(doc)
    byte_level = is_byte_level(doc)
    if byte_level and kind != "BPE" and not has_byte_level(doc, "pre_tokenizer"):
        # a vocabulary in GPT-2's byte alphabet is read as bytes, which needs the text as bytes too
        raise UnsupportedComponentError(f"a {kind} model with a ByteLevel decoder but no ByteLevel pre-tokenizer "
                                        "is not supported")
    if kind not in HF_MODEL_LOADERS:
        raise UnsupportedComponentError(f"tokenizer.json model type {kind!r} is not supported "
                                        f"(known: {sorted(HF_MODEL_LOADERS)})")
    try:
        parts = _model_loader(kind)(doc, model, path)
    except (KeyError, TypeError, ValueError, AttributeError, IndexError, OverflowError) as exc:
        if isinstance(exc, ModelFileError):
            raise
        raise ModelFileError(f"malformed {kind} model ({type(exc).__name__}: {exc})", path=path,
                             where="model") from None
    if byte_level and kind != "BPE":
        # as for BPE, the vocabulary is read as bytes; the model steps through them where HF steps
        # through the mapped characters (models.wordpiece char_mask, models.unigram byte_chars)
        alphabet = BYTE_DECODER.keys()
        outside = next((t for t in parts["strings"].values() if not alphabet >= set(t)), None)
        if outside is not None:
            # HF maps the text into the byte alphabet, where such an entry can never match, while
            # read as bytes it would: refused rather than guessed
            raise UnsupportedComponentError(f"a {kind} model behind a ByteLevel step whose vocabulary is not in "
                                            f"GPT-2's byte alphabet ({outside!r}) is not supported")
        parts["to_bytes"] = unmap_byte_level
        parts["model"]["byte_level"] = True
    return _finish(doc, parts, path)


def byte_level_normalizer_as_pre_tokenizer(doc: dict) -> dict:
    """``doc`` with a ByteLevel normalizer (alone, or last of a Sequence) moved to the front of the
    pre-tokenizer as a ByteLevel step that only maps bytes: HF gives the same ids and offsets for both
    (the pre-tokenizer's steps see the mapped characters either way), and tokjit runs the second
    (vocabulary as bytes). Unchanged when there is no ByteLevel normalizer; refused
    where the two differ or tokjit cannot follow: a ByteLevel normalizer before another normalizer,
    a ByteLevel pre-tokenizer too (HF maps the text twice), or an added token matched on the
    normalized text whose content the mapping changes (HF looks for its mapped form)."""
    steps = _components(doc.get("normalizer"), "normalizers")
    at = [i for i, c in enumerate(steps) if c.get("type") == "ByteLevel"]
    if not at:
        return doc
    if at != [len(steps) - 1]:
        raise UnsupportedComponentError("a ByteLevel normalizer before another normalizer is not supported")
    if has_byte_level(doc, "pre_tokenizer"):
        raise UnsupportedComponentError("a ByteLevel normalizer with a ByteLevel pre-tokenizer (the text mapped "
                                        "twice) is not supported")
    for t in doc.get("added_tokens") or []:
        if t.get("normalized", not t.get("special", False)) and not all("!" <= ch <= "~" for ch in t["content"]):
            raise UnsupportedComponentError(f"added token {t['content']!r} is matched on the byte-level "
                                            "normalized text; tokjit supports that for printable ASCII only")
    rest = steps[:-1]
    normalizer = None if not rest else rest[0] if len(rest) == 1 else {"type": "Sequence", "normalizers": rest}
    maps = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}
    pre = doc.get("pre_tokenizer")
    return dict(doc, normalizer=normalizer,
                pre_tokenizer={"type": "Sequence", "pretokenizers": [maps] + ([pre] if pre else [])})


# Sequence children per stage, and component fields HF deserializes as strings: a file with
# anything else there is refused by HF at load, so it must not get as far as encode or decode here
_STAGES = {"normalizer": "normalizers", "pre_tokenizer": "pretokenizers", "post_processor": "processors",
           "decoder": "decoders"}
_STRING_FIELDS = ("prefix", "replacement", "content", "prepend", "suffix", "delimiter")


def check_component_tree(doc: dict, path) -> None:
    """Each pipeline stage is null or an object with a string ``type``; Sequence children likewise;
    string-valued fields are strings. Raises :class:`ModelFileError` naming the key otherwise."""
    def check(node, where, children_key):
        if not isinstance(node, dict) or not isinstance(node.get("type"), str):
            raise ModelFileError(f"expected a component object with a string 'type', got {str(node)[:80]}",
                                 path=path, where=where)
        for key in _STRING_FIELDS:
            if key in node and not isinstance(node[key], str):
                raise ModelFileError(f"'{key}' must be a string, got {node[key]!r}", path=path,
                                     where=f"{where}.{key}")
        if node["type"] == "Sequence":
            children = node.get(children_key)
            if not isinstance(children, list):
                raise ModelFileError(f"Sequence needs a list '{children_key}'", path=path,
                                     where=f"{where}.{children_key}")
            for i, child in enumerate(children):
                check(child, f"{where}.{children_key}[{i}]", children_key)

    for stage, children_key in _STAGES.items():
        if doc.get(stage) is not None:
            check(doc[stage], stage, children_key)
    added = doc.get("added_tokens")
    if added is not None and not isinstance(added, list):
        raise ModelFileError("added_tokens must be a list", path=path, where="added_tokens")


def _added_tokens(doc: dict, path) -> list[AddedToken]:
    out = []
    for i, t in enumerate(doc.get("added_tokens") or []):
        if not isinstance(t, dict) or not isinstance(t.get("content"), str) or not t["content"]:
            raise ModelFileError("added token needs a non-empty string 'content'", path=path,
                                 where=f"added_tokens[{i}]")
        try:
            out.append(AddedToken(content=str(t["content"]), id=int(t["id"]), special=bool(t.get("special", False)),
                                  lstrip=bool(t.get("lstrip", False)), rstrip=bool(t.get("rstrip", False)),
                                  single_word=bool(t.get("single_word", False)),
                                  normalized=bool(t.get("normalized", not t.get("special", False)))))
        except (KeyError, TypeError, ValueError) as exc:
            raise ModelFileError(f"malformed added token ({exc})", path=path, where=f"added_tokens[{i}]") from None
    return out


def _hf_added_ids(added: list[AddedToken], vocab_strings: dict[int, str], doc: dict, path) -> list[AddedToken]:
    """The added tokens with the ids HF gives them, which are not the file's: a token the model's
    vocabulary holds takes its id there, and each new one, in file order, the model's vocabulary size
    (its number of strings) plus the number of new ones before it. The file's ids are HF's own where
    HF wrote the file; where they differ (a hand-edited file) HF warns and tokjit does too. A token
    listed twice keeps its first entry."""
    if not added:
        return added
    # the model's own string -> id map, as HF builds it (two strings may share an id)
    vocab = (doc.get("model") or {}).get("vocab")
    if isinstance(vocab, dict):
        vocab_ids = {s: int(i) for s, i in vocab.items()}
    elif isinstance(vocab, list):
        vocab_ids = {entry[0]: k for k, entry in enumerate(vocab)}
    else:
        vocab_ids = {s: i for i, s in vocab_strings.items()}
    next_id = len(vocab) if isinstance(vocab, (dict, list)) else len(vocab_strings)
    out, seen, moved = [], set(), []
    for k, t in enumerate(added):
        if t.content in seen:
            continue
        seen.add(t.content)
        tid = vocab_ids.get(t.content)
        if tid is None:
            tid = next_id
            next_id += 1
            if tid in vocab_strings:
                raise ModelFileError(f"added token {t.content!r} gets id {tid} from HF, the id of vocabulary token "
                                     f"{vocab_strings[tid]!r}", path=path, where=f"added_tokens[{k}]")
        if tid != t.id:
            moved.append(f"{t.content!r} {t.id} -> {tid}")
            t = dataclasses.replace(t, id=tid)
        out.append(t)
    if moved:
        warnings.warn(f"tokjit: added tokens whose ids in {path or 'the file'} are not the ones HF gives them take "
                      f"HF's ({', '.join(moved[:5])}{', ...' if len(moved) > 5 else ''})", stacklevel=4)
    return out


def _finish(doc: dict, parts: dict, path) -> TokenizerSpec:
    """Common tail: merge model vocab with added tokens into dense id-indexed arrays."""
    vocab_strings: dict[int, str] = parts["strings"]  # id -> model vocab string
    to_bytes: Callable[[str], bytes] = parts["to_bytes"]
    added = _hf_added_ids(_added_tokens(doc, path), vocab_strings, doc, path)
    ids = list(vocab_strings) + [t.id for t in added]
    if not ids:
        raise ModelFileError("empty vocabulary", path=path, where="model.vocab")
    if min(ids) < 0 or max(ids) > 50_000_000:
        raise ModelFileError("token ids out of range", path=path, where="model.vocab")
    size = max(ids) + 1
    tokens = [b""] * size
    strings = [""] * size
    types = np.full(size, TokenType.UNUSED, np.int8)
    mask = np.zeros(size, np.bool_)
    for tid, s in vocab_strings.items():
        tokens[tid] = to_bytes(s)
        strings[tid] = s
        types[tid] = TokenType.NORMAL
        mask[tid] = True
    for t in added:
        if not mask[t.id]:
            tokens[t.id] = t.content.encode("utf-8")
        strings[t.id] = t.content
        types[t.id] = TokenType.CONTROL if t.special else TokenType.USER_DEFINED
    extra_types = parts.get("types")
    if extra_types:
        for tid, ty in extra_types.items():
            if types[tid] == TokenType.NORMAL:
                types[tid] = ty
    spec = TokenizerSpec(
        model=parts["model"], tokens=tokens, token_types=types, model_mask=mask,
        scores=parts.get("scores"), merges=parts.get("merges"),
        normalizer=doc.get("normalizer"), pre_tokenizer=doc.get("pre_tokenizer"),
        post_processor=doc.get("post_processor"), decoder=doc.get("decoder"),
        added_tokens=added, unk_id=parts["model"].get("unk_id"),
        source={"format": "tokenizer.json", "path": None if path is None else str(path),
                "token_strings": strings,
                # what the folder's config reading needs of this file (api.attach_tokenizer_config),
                # kept so a cached load does not parse the whole file again for it
                "padding": doc.get("padding"), "truncation": doc.get("truncation")},
    )
    return spec


def _after_prefix(token: str, prefix_len: int, path, row: int) -> str:
    """``token`` past its first ``prefix_len`` UTF-8 bytes: HF names a merge's token the left part
    followed by the right part less the continuing-subword prefix's length, prefixed or not (and
    cannot load a file where that cut is not between two characters of the right part)."""
    if not prefix_len:
        return token
    data = token.encode("utf-8", "surrogatepass")
    if prefix_len > len(data) or (prefix_len < len(data) and 0x80 <= data[prefix_len] < 0xC0):
        raise ModelFileError(f"merge right part {token!r} does not start with {prefix_len} bytes of the "
                             "continuing_subword_prefix's length", path=path, where=f"model.merges[{row}]")
    return data[prefix_len:].decode("utf-8", "surrogatepass")


def _bpe(doc: dict, model: dict, path) -> dict:
    vocab = model["vocab"]
    if not isinstance(vocab, dict):
        raise ModelFileError("BPE vocab must be an object", path=path, where="model.vocab")
    if model.get("dropout") not in (None, 0, 0.0):
        raise UnsupportedComponentError("BPE dropout is random; tokjit only encodes deterministically")
    prefix, suffix = model.get("continuing_subword_prefix") or "", model.get("end_of_word_suffix") or ""
    if not isinstance(prefix, str) or not isinstance(suffix, str):
        raise ModelFileError("BPE continuing_subword_prefix / end_of_word_suffix must be strings", path=path,
                             where="model")
    if (prefix or suffix) and model.get("byte_fallback"):
        # HF spells the affixed symbol's bytes, prefix and suffix included, as <0xXX> tokens
        raise UnsupportedComponentError("BPE byte_fallback with continuing_subword_prefix / end_of_word_suffix "
                                        "is not supported")
    prefix_len = len(prefix.encode("utf-8"))
    byte_level = is_byte_level(doc)
    to_bytes = unmap_byte_level if byte_level else (lambda s: s.encode("utf-8"))
    strings = {int(i): s for s, i in vocab.items()}
    index = {s: int(i) for s, i in vocab.items()}
    raw_merges = model.get("merges") or []
    # third column: the merged token's id (-1 if the vocab lacks it), so compiling needs no dict
    merges = np.empty((len(raw_merges), 3), np.int32)
    for row, m in enumerate(raw_merges):
        if isinstance(m, str):
            a, sep, b = m.partition(" ")
            if not sep:
                raise ModelFileError(f"merge {m!r} is not 'left right'", path=path, where=f"model.merges[{row}]")
        else:
            a, b = m
        try:
            merges[row] = (index[a], index[b], index.get(a + _after_prefix(b, prefix_len, path, row), -1))
        except KeyError as exc:
            raise ModelFileError(f"merge {m!r} names token {exc.args[0]!r} missing from the vocab",
                                 path=path, where=f"model.merges[{row}]") from None
    unk = model.get("unk_token")
    unk_id = index.get(unk) if unk is not None else None
    return {
        "model": {"type": "BPE", "merge_rule": "pairs", "byte_level": byte_level,
                  "byte_fallback": bool(model.get("byte_fallback", False)), "fallback_whole_char": True,
                  "fuse_unk": bool(model.get("fuse_unk", False)),
                  "ignore_merges": bool(model.get("ignore_merges", False)), "unk_id": unk_id,
                  "continuing_subword_prefix": prefix, "end_of_word_suffix": suffix},
        "strings": strings, "to_bytes": to_bytes, "merges": merges,
    }
