"""GGUF vocabulary -> :class:`~tokjit.spec.TokenizerSpec`, tokenizing as llama.cpp does.

The metadata section of a GGUF file is read by a small parser of our own: the ``gguf`` package's
``GGUFReader`` builds numpy views for every array element and takes ~12 s on a 128k vocab, while the
tokenizer keys only need one pass over the bytes. The parser checks every length against the bytes
left, so truncated or lying files raise :class:`~tokjit.errors.ModelFileError` naming the key.

What each ``tokenizer.ggml.*`` key means, with llama.cpp's defaults, is in ``notes/llamacpp.md``;
the per-``tokenizer.ggml.pre`` regexes and flags are in :mod:`tokjit.load.gguf_pretypes`.
"""

from __future__ import annotations

import struct

import numpy as np
from numba import njit

from tokjit.errors import ModelFileError, UnsupportedComponentError
from tokjit.spec import AddedToken, TokenizerSpec, TokenType
from tokjit.load.gguf_attrs import (ATTR_LSTRIP, ATTR_MATCHED, ATTR_NORMAL, ATTR_PARSE_SPECIAL_ONLY, ATTR_RSTRIP, ATTR_UNUSED,
                         ATTR_USER_DEFINED, token_attributes, types_from_attributes)
from tokjit.load.gguf_pretypes import UnknownPreTypeError, gguf_pre_type
from tokjit.load.hf_json import bytes_to_unicode, unmap_byte_level

# GGUF value types (gguf.GGUFValueType)
T_UINT8, T_INT8, T_UINT16, T_INT16, T_UINT32, T_INT32, T_FLOAT32, T_BOOL, T_STRING, T_ARRAY, \
    T_UINT64, T_INT64, T_FLOAT64 = range(13)
_SCALAR = {T_UINT8: "u1", T_INT8: "i1", T_UINT16: "u2", T_INT16: "i2", T_UINT32: "u4", T_INT32: "i4",
           T_FLOAT32: "f4", T_BOOL: "u1", T_UINT64: "u8", T_INT64: "i8", T_FLOAT64: "f8"}
_TYPE_NAMES = ("uint8", "int8", "uint16", "int16", "uint32", "int32", "float32", "bool", "string",
               "array", "uint64", "int64", "float64")


@njit(cache=True, nogil=True)
def scan_string_array(data, pos, count, big_endian, out_starts, out_ends):
    """Offsets of ``count`` GGUF strings (u64 length + bytes) starting at ``data[pos]``.

    Returns the position after the last string, or -1 - index of the first string whose length
    runs past the end of ``data``. O(count).
    """
    n = data.shape[0]
    for i in range(count):
        if pos + 8 > n:
            return -1 - i
        length = np.uint64(0)
        for k in range(8):
            b = np.uint64(data[pos + (7 - k if not big_endian else k)])
            length = (length << np.uint64(8)) | b
        pos += 8
        if length > np.uint64(n - pos):
            return -1 - i
        out_starts[i] = pos
        pos += np.int64(length)
        out_ends[i] = pos
    return pos


class _Reader:
    """Sequential reader over the metadata of a GGUF file; every read is bounds-checked."""

    def __init__(self, data: bytes, path):
        self.data = data
        self.arr = np.frombuffer(data, np.uint8)
        self.path = path
        self.pos = 0
        self.end = "<"
        self.key = "header"
        self.depth = 0

    def fail(self, msg: str):
        raise ModelFileError(msg, path=self.path, where=self.key)

    def need(self, n: int):
        if n < 0 or self.pos + n > len(self.data):
            self.fail(f"file truncated at byte {self.pos} (needs {n} more bytes, {len(self.data) - self.pos} left)")

    def unpack(self, fmt: str):
        size = struct.calcsize(fmt)
        self.need(size)
        out = struct.unpack_from(self.end + fmt, self.data, self.pos)[0]
        self.pos += size
        return out

    def string(self) -> bytes:
        n = self.unpack("Q")
        self.need(n)
        s = self.data[self.pos:self.pos + n]
        self.pos += n
        return s

    def value(self, vtype: int):
        if vtype in _SCALAR:
            fmt = {"u1": "B", "i1": "b", "u2": "H", "i2": "h", "u4": "I", "i4": "i", "f4": "f", "u8": "Q",
                   "i8": "q", "f8": "d"}[_SCALAR[vtype]]
            v = self.unpack(fmt)
            return bool(v) if vtype == T_BOOL else v
        if vtype == T_STRING:
            return self.string()
        if vtype == T_ARRAY:
            etype = self.unpack("I")
            count = self.unpack("Q")
            return self.array(etype, count)
        self.fail(f"unknown GGUF value type {vtype}")

    def array(self, etype: int, count: int):
        if etype in _SCALAR:
            dt = np.dtype(_SCALAR[etype]).newbyteorder(self.end)
            self.need(count * dt.itemsize if count < (1 << 60) else -1)
            out = np.frombuffer(self.data, dt, count, self.pos).astype(dt.newbyteorder("="))
            self.pos += count * dt.itemsize
            return _Array(etype, out)
        if etype == T_STRING:
            if count > (len(self.data) - self.pos) // 8:
                self.fail(f"string array claims {count} elements, more than the file can hold")
            starts = np.empty(count, np.int64)
            ends = np.empty(count, np.int64)
            r = scan_string_array(self.arr, np.int64(self.pos), np.int64(count), self.end == ">", starts, ends)
            if r < 0:
                self.fail(f"string {-1 - r} of the array runs past the end of the file")
            self.pos = int(r)
            return _Array(etype, (starts, ends))
        if etype == T_ARRAY:  # arrays of arrays: parsed (to skip them), never used by tokenizers
            if count > (len(self.data) - self.pos) // 12:
                self.fail(f"array claims {count} elements, more than the file can hold")
            self.depth += 1
            if self.depth > 64:  # a crafted file could nest deep enough to exhaust the Python stack
                self.fail("arrays nested more than 64 deep")
            items = [self.value(T_ARRAY) for _ in range(count)]
            self.depth -= 1
            return _Array(etype, items)
        self.fail(f"unknown GGUF array element type {etype}")


class _Array:
    __slots__ = ("etype", "payload")

    def __init__(self, etype, payload):
        self.etype = etype
        self.payload = payload


def read_gguf_metadata(data: bytes, path=None) -> dict:
    """Key -> value for every metadata key of a GGUF file (strings as ``bytes``, arrays as ``_Array``)."""
    r = _Reader(data, path)
    r.need(8)
    if data[:4] != b"GGUF":
        r.fail("not a GGUF file (bad magic)")
    version = struct.unpack_from("<I", data, 4)[0]
    if version > 0xFFFF:  # a big-endian file reads as a huge little-endian number
        r.end = ">"
        version = struct.unpack_from(">I", data, 4)[0]
    if version not in (2, 3):
        r.fail(f"unsupported GGUF version {version} (tokjit reads versions 2 and 3)")
    r.pos = 8
    r.unpack("Q")  # tensor count: tensors are not needed for tokenizing
    n_kv = r.unpack("Q")
    if n_kv > len(data) // 13:
        r.fail(f"header claims {n_kv} metadata keys, more than the file can hold")
    out: dict = {}
    for i in range(n_kv):
        r.key = f"metadata key #{i}"
        raw_key = r.string()
        try:
            key = raw_key.decode("utf-8")
        except UnicodeDecodeError:
            r.fail("metadata key is not UTF-8")
        r.key = key
        vtype = r.unpack("I")
        out[key] = r.value(vtype)
    return out


class _Meta:
    """Typed access to the tokenizer keys; wrong types raise ModelFileError naming the key."""

    def __init__(self, kv: dict, data: bytes, path):
        self.kv = kv
        self.data = data
        self.path = path

    def fail(self, key, msg):
        raise ModelFileError(msg, path=self.path, where=key)

    def has(self, key):
        return key in self.kv

    def string(self, key, default=None):
        v = self.kv.get(key)
        if v is None:
            return default
        if not isinstance(v, bytes):
            self.fail(key, "expected a string")
        try:
            return v.decode("utf-8")
        except UnicodeDecodeError:
            self.fail(key, "string is not valid UTF-8")

    def integer(self, key, default=None):
        v = self.kv.get(key)
        if v is None:
            return default
        if isinstance(v, bool) or not isinstance(v, int):
            self.fail(key, f"expected an integer, got {type(v).__name__}")
        return v

    def boolean(self, key, default=None):
        v = self.kv.get(key)
        if v is None:
            return default
        if isinstance(v, (bytes, _Array, float)):
            self.fail(key, "expected a bool")
        return bool(v)

    def array(self, key, etypes, n=None, required=False):
        v = self.kv.get(key)
        if v is None:
            if required:
                self.fail(key, "required key is missing")
            return None
        if not isinstance(v, _Array):
            self.fail(key, "expected an array")
        if v.etype not in etypes:
            self.fail(key, f"array of {_TYPE_NAMES[v.etype] if v.etype < 13 else v.etype}, expected "
                           f"{' or '.join(_TYPE_NAMES[t] for t in etypes)}")
        length = len(v.payload[0]) if v.etype == T_STRING else len(v.payload)
        if n is not None and length != n:
            self.fail(key, f"array has {length} elements, the vocabulary has {n}")
        return v

    def strings(self, key, n=None, required=False) -> list[str] | None:
        v = self.array(key, (T_STRING,), n, required)
        if v is None:
            return None
        starts, ends = v.payload
        data = self.data
        try:
            return [data[s:e].decode("utf-8") for s, e in zip(starts.tolist(), ends.tolist())]
        except UnicodeDecodeError:
            for i, (s, e) in enumerate(zip(starts.tolist(), ends.tolist())):
                try:
                    data[s:e].decode("utf-8")
                except UnicodeDecodeError:
                    self.fail(f"{key}[{i}]", "string is not valid UTF-8")
            raise


GPT2_ALPHABET = frozenset(bytes_to_unicode().values())

# llama.cpp's per-model defaults (llama_vocab::impl::load): bos, eos, unk, sep, pad, mask; flags
_MODEL_DEFAULTS = {
    "llama": dict(bos=1, eos=2, unk=0, sep=None, pad=None, mask=None, add_bos=True, add_eos=False, add_sep=False),
    "bert": dict(bos=101, eos=None, unk=100, sep=102, pad=0, mask=103, add_bos=True, add_eos=False, add_sep=True),
    "gpt2": dict(bos=11, eos=11, unk=None, sep=None, pad=None, mask=None, add_bos=False, add_eos=False,
                 add_sep=False),
    "t5": dict(bos=None, eos=1, unk=2, sep=None, pad=0, mask=None, add_bos=False, add_eos=True, add_sep=False),
    "rwkv": dict(bos=None, eos=None, unk=None, sep=None, pad=None, mask=None, add_bos=False, add_eos=False,
                 add_sep=False),
    # BPE run on each whitespace-separated run of the text, whitespace dropped (llama.cpp's defaults are gpt2's)
    "whitespace": dict(bos=11, eos=11, unk=None, sep=None, pad=None, mask=None, add_bos=False, add_eos=False,
                       add_sep=False),
    # a BPE vocabulary whose pre type is always gemma4; every special id comes from the keys
    "gemma4": dict(bos=None, eos=None, unk=None, sep=None, pad=None, mask=None, add_bos=False, add_eos=False,
                   add_sep=False),
}
# tokenizer.ggml.model values llama.cpp runs through its BPE tokenizer, with the pre type they force
_BPE_MODELS = {"gpt2": None, "whitespace": None, "gemma4": "gemma4"}
_ID_KEYS = {"bos": "bos_token_id", "eos": "eos_token_id", "unk": "unknown_token_id",
            "sep": "seperator_token_id", "pad": "padding_token_id", "mask": "mask_token_id"}


def load_gguf(path, data: bytes) -> TokenizerSpec:
    """Parse the tokenizer of a GGUF file (any GGUF: vocab-only or a full model)."""
    kv = read_gguf_metadata(bytes(data), path)
    meta = _Meta(kv, bytes(data), path)
    model_name = meta.string("tokenizer.ggml.model")
    if model_name is None:
        meta.fail("tokenizer.ggml.model", "required key is missing")
    if model_name not in _MODEL_DEFAULTS:
        raise UnsupportedComponentError(
            f"GGUF tokenizer.ggml.model {model_name!r} is not supported (tokjit reads "
            f"{', '.join(sorted(_MODEL_DEFAULTS))})")
    strings = meta.strings("tokenizer.ggml.tokens", required=True)
    n = len(strings)
    if n == 0:
        meta.fail("tokenizer.ggml.tokens", "empty vocabulary")
    types_arr = meta.array("tokenizer.ggml.token_type", (T_INT32, T_UINT32, T_INT8, T_UINT8, T_INT16), n)
    if types_arr is None:
        types = np.full(n, TokenType.NORMAL, np.int8)
    else:
        raw = types_arr.payload.astype(np.int64)
        if raw.size and (raw.min() < 0 or raw.max() > 6):
            meta.fail("tokenizer.ggml.token_type", f"token type {int(raw[(raw < 0) | (raw > 6)][0])} "
                      "is not one of 0..6")
        types = raw.astype(np.int8)
    scores_arr = meta.array("tokenizer.ggml.scores", (T_FLOAT32, T_INT32, T_FLOAT64), n)
    scores = None if scores_arr is None else scores_arr.payload.astype(np.float32)
    if scores is not None and not np.all(np.isfinite(scores)):
        meta.fail("tokenizer.ggml.scores", "scores must be finite")
    if len(set(strings)) != n:
        seen = set()
        for i, s in enumerate(strings):
            if s in seen:
                meta.fail(f"tokenizer.ggml.tokens[{i}]", f"duplicate token {s!r}")
            seen.add(s)
    for i, s in enumerate(strings):
        if not s:
            strings[i] = f"[EMPTY_{i}]"  # llama.cpp renames empty tokens

    ids = _special_ids(meta, model_name, n)
    bpe = model_name in _BPE_MODELS
    pre_name = (_BPE_MODELS[model_name] or meta.string("tokenizer.ggml.pre")) if bpe else None
    pre = None
    from_pre: set[str] = set()
    if bpe:
        try:
            pre = gguf_pre_type(pre_name)
        except UnknownPreTypeError as exc:
            raise UnsupportedComponentError(f"{exc} (key tokenizer.ggml.pre in {path})") from None
        ids["add_bos"] = pre.add_bos
        ids["add_sep"] = pre.add_sep
        from_pre = {"add_bos", "add_sep"}
        if pre.bos_disabled:
            ids["bos"] = None
    for flag in ("add_bos", "add_eos", "add_sep"):
        key = f"tokenizer.ggml.{flag}_token"
        val = meta.boolean(key)
        if val is not None:
            ids[flag] = val
            from_pre.discard(flag)
    if pre is not None and pre.pre_type == "GEMMA4":
        ids["add_bos"] = True  # llama.cpp overrides a false add_bos_token for this pre type
    for flag, tid in (("add_bos", "bos"), ("add_eos", "eos"), ("add_sep", "sep")):
        if ids[flag] and ids[tid] is None:
            if flag not in from_pre:
                meta.fail(f"tokenizer.ggml.{flag}_token", f"is true but there is no {tid} token")
            # a pre type's default (jina-v1-en's add_sep) with no such token: llama.cpp loads the file
            # and only aborts if asked to add it, so the flag is dropped here
            ids[flag] = False

    attrs = token_attributes(strings, types, meta, ids["eos"])
    types = types_from_attributes(types, attrs)
    added = _added_tokens(strings, attrs)
    builders = {"gpt2": _gpt2, "whitespace": _gpt2, "gemma4": _gpt2, "llama": _llama, "bert": _bert, "t5": _t5, "rwkv": _rwkv}
    spec = builders[model_name](meta, strings, types, scores, ids, pre, added, attrs)
    spec.post_processor = _post_processor(model_name, ids)
    spec.chat_template = meta.string("tokenizer.chat_template")
    spec.bos_id, spec.eos_id, spec.unk_id, spec.pad_id = ids["bos"], ids["eos"], ids["unk"], ids["pad"]
    spec.source = {"format": "gguf", "path": None if path is None else str(path), "token_strings": strings,
                   "gguf_model": model_name, "gguf_pre": pre.name if pre is not None else None,
                   "name": meta.string("general.name")}
    return spec


def _special_ids(meta: _Meta, model_name: str, n: int) -> dict:
    ids = dict(_MODEL_DEFAULTS[model_name])
    for name, suffix in _ID_KEYS.items():
        if ids[name] is not None and ids[name] >= n:
            ids[name] = None  # a default outside the vocab means none
        key = f"tokenizer.ggml.{suffix}"
        v = meta.integer(key)
        if v is not None and 0 <= v < n:  # out-of-range ids are ignored (llama.cpp warns)
            ids[name] = v
    return ids


def _added_tokens(strings: list[str], attrs: np.ndarray) -> list[AddedToken]:
    """Tokens llama.cpp matches in the text before the model runs (CONTROL, USER_DEFINED or UNKNOWN
    attribute); those with CONTROL or UNKNOWN only with parse_special (``special=True`` here)."""
    out = []
    for i in np.flatnonzero(attrs & ATTR_MATCHED).tolist():
        a = int(attrs[i])
        out.append(AddedToken(content=strings[i], id=i, special=bool(a & ATTR_PARSE_SPECIAL_ONLY),
                              rstrip=bool(a & ATTR_RSTRIP), lstrip=bool(a & ATTR_LSTRIP), normalized=False))
    return out


def _post_processor(model_name: str, ids: dict) -> dict | None:
    """``add_special_tokens=True``: BOS / EOS / SEP as llama.cpp's tokenize(add_special=true) adds them."""
    prefix, suffix = [], []
    if model_name == "bert":  # WPM always emits [CLS] ... [SEP] with add_special
        if ids["bos"] is not None:
            prefix.append(ids["bos"])
        if ids["sep"] is not None:
            suffix.append(ids["sep"])
    else:
        if ids["add_bos"] and ids["bos"] is not None:
            prefix.append(ids["bos"])
        if ids["add_eos"] and ids["eos"] is not None:
            suffix.append(ids["eos"])
        if ids["add_sep"] and ids["sep"] is not None:
            suffix.append(ids["sep"])
    if not prefix and not suffix:
        return None
    single = [{"SpecialToken": {"id": f"<{i}>", "type_id": 0}} for i in range(len(prefix))]
    single.append({"Sequence": {"id": "A", "type_id": 0}})
    single += [{"SpecialToken": {"id": f"<{len(prefix) + i}>", "type_id": 0}} for i in range(len(suffix))]
    specials = {f"<{k}>": {"id": f"<{k}>", "ids": [tid]} for k, tid in enumerate(prefix + suffix)}
    return {"type": "TemplateProcessing", "single": single, "special_tokens": specials}


def _merges(meta: _Meta, strings: list[str], mask: np.ndarray, allow_missing: bool = False) -> np.ndarray:
    """``tokenizer.ggml.merges`` -> int32 rows (left id, right id, merged id or -1)."""
    merges = meta.strings("tokenizer.ggml.merges")
    if merges is None and allow_missing:
        merges = []  # llama.cpp then merges nothing: every character is looked up on its own
    if merges is None:
        meta.fail("tokenizer.ggml.merges", "required key is missing (llama.cpp refuses a BPE vocab without merges)")
    index = {}
    for i, s in enumerate(strings):
        if mask[i]:
            index.setdefault(s, i)
    rows = np.empty((len(merges), 3), np.int32)
    k = 0
    for m in merges:
        p = m.find(" ", 1)  # llama.cpp searches from byte 1, so a leading space belongs to the left part
        if p < 0:
            continue
        a, b = m[:p], m[p + 1:]
        ia, ib = index.get(a), index.get(b)
        if ia is None or ib is None:
            continue  # a side that is no token can never be a symbol of the merge loop
        rows[k] = (ia, ib, index.get(a + b, -1))
        k += 1
    return rows[:k]


def _gpt2(meta, strings, types, scores, ids, pre, added, attrs) -> TokenizerSpec:
    if pre.byte_encode:
        # llama.cpp looks byte-encoded text up by token string, so a token spelled with characters outside
        # GPT-2's byte alphabet (mpt's raw space runs) can only be reached as an added token
        mask = np.fromiter((all(c in GPT2_ALPHABET for c in s) for s in strings), np.bool_, len(strings))
        tokens = [unmap_byte_level(s) if mask[i] else s.encode("utf-8") for i, s in enumerate(strings)]
        decoder = {"type": "ByteLevel"}
    else:
        mask = np.ones(len(strings), np.bool_)
        tokens = [s.encode("utf-8") for s in strings]
        # token_to_piece for raw-UTF-8 BPE: U+2581 back to spaces (when escaped), <0xXX> tokens to bytes
        steps = [{"type": "ByteFallback"}, {"type": "Fuse"}]
        if pre.escape_whitespaces:
            steps.insert(0, {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "})
        decoder = {"type": "Sequence", "decoders": steps}
    merges = _merges(meta, strings, mask, allow_missing=pre.name == "kimi-k2")  # as llama.cpp allows
    normalizer = None
    if pre.escape_whitespaces:
        normalizer = {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}
    if pre.lowercase:
        raise UnsupportedComponentError(f"GGUF pre type {pre.name!r} (lowercasing whitespace model)")
    pre_tokenizer = {"type": "LlamaCppRegexSplit", "regexes": list(pre.regexes)}
    if meta.string("tokenizer.ggml.model") == "whitespace":
        # llama.cpp's normalizer lowercase defaults to true; only the whitespace pre type turns it off
        lowercase = meta.boolean("tokenizer.ggml.normalizer.lowercase", pre.lowercase is None)
        pre_tokenizer = {"type": "Sequence", "pretokenizers": [
            {"type": "LlamaCppWhitespaceSegments", "lowercase": lowercase}, pre_tokenizer]}
    model = {"type": "BPE", "merge_rule": "pairs", "byte_level": pre.byte_encode,
             "byte_fallback": not pre.byte_encode, "ignore_merges": pre.ignore_merges, "unk_id": None}
    return TokenizerSpec(model=model, tokens=tokens, token_types=types, scores=scores, merges=merges,
                         model_mask=mask, normalizer=normalizer,
                         pre_tokenizer=pre_tokenizer, decoder=decoder, added_tokens=added)


def _llama(meta, strings, types, scores, ids, pre, added, attrs) -> TokenizerSpec:
    """llama.cpp's SPM: every raw fragment (text between matched tokens) gets one ' ' in front when
    add_space_prefix is on, ' ' -> U+2581, nothing else is normalised; symbols are characters merged
    by the score of the merged token (any token type may be formed), characters that are no token
    fall back to ``<0xXX>``. That is sentencepiece's identity-normaliser BPE with nothing filtered."""
    if scores is None:
        scores = np.zeros(len(strings), np.float32)
    add_space_prefix = meta.boolean("tokenizer.ggml.add_space_prefix", True)
    tokens = [s.encode("utf-8") for s in strings]
    model = {"type": "BPE", "merge_rule": "scores", "byte_level": False, "byte_fallback": True,
             "fuse_unk": False, "unk_id": ids["unk"]}
    # the Tokenizer normalises each segment between matched added tokens on its own, so the dummy
    # prefix lands on every raw fragment, as llama.cpp's is_prev_special logic does
    normalizer = {"type": "SentencePieceNormalizer", "precompiled_charsmap": None,
                  "add_dummy_prefix": add_space_prefix, "remove_extra_whitespaces": False,
                  "escape_whitespaces": True, "treat_whitespace_as_suffix": False, "user_defined": []}
    decoder = {"type": "SentencePieceDecoder", "strip_leading_space": add_space_prefix,
               "remove_extra_whitespaces": False, "unk_surface": "\u2585", "denormalizer": None}
    return TokenizerSpec(model=model, tokens=tokens, token_types=types, scores=scores.astype(np.float32),
                         model_mask=np.ones(len(strings), np.bool_), normalizer=normalizer,
                         decoder=decoder, added_tokens=added)


def _bert(meta, strings, types, scores, ids, pre, added, attrs) -> TokenizerSpec:
    lowercase = meta.boolean("tokenizer.ggml.normalizer.lowercase", True)
    strip_accents = meta.boolean("tokenizer.ggml.normalizer.strip_accents", lowercase)
    tokens = [s.encode("utf-8") for s in strings]
    # GGUF BERT vocabs mark word starts ("\u2581word") and store continuations bare
    model = {"type": "WordPiece", "unk_id": ids["unk"], "word_prefix": "\u2581", "continuing_subword_prefix": "",
             "first_may_be_empty": True, "max_input_chars_per_word": None}
    return TokenizerSpec(model=model, tokens=tokens, token_types=types, scores=scores,
                         model_mask=np.ones(len(strings), np.bool_),
                         pre_tokenizer={"type": "LlamaCppWpm", "lowercase": lowercase,
                                        "strip_accents": strip_accents},
                         decoder={"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always"},
                         added_tokens=added)


def _t5(meta, strings, types, scores, ids, pre, added, attrs) -> TokenizerSpec:
    """llama.cpp's UGM: sentencepiece's normaliser (user-defined prefix, charsmap, whitespace rules)
    and a Viterbi in double precision where later candidates must score strictly higher, consecutive
    unknowns fused into one unk id. Unigram arithmetic "llamacpp" over NORMAL / USER_DEFINED / UNUSED pieces."""
    if scores is None:
        scores = np.zeros(len(strings), np.float32)
    charsmap = meta.array("tokenizer.ggml.precompiled_charsmap", (T_UINT8, T_INT8))
    blob = None if charsmap is None or len(charsmap.payload) == 0 else charsmap.payload.astype(np.uint8).tobytes()
    tokens = [s.encode("utf-8") for s in strings]
    add_space_prefix = meta.boolean("tokenizer.ggml.add_space_prefix", False)
    remove_extra = meta.boolean("tokenizer.ggml.remove_extra_whitespaces", False)
    model = {"type": "Unigram", "unk_id": ids["unk"], "byte_fallback": False, "arithmetic": "llamacpp"}
    normalizer = {"type": "SentencePieceNormalizer", "precompiled_charsmap": blob,
                  # llama.cpp's merge mode puts a space before every word, the first one included
                  # even when add_space_prefix is off
                  "add_dummy_prefix": add_space_prefix or remove_extra, "remove_extra_whitespaces": remove_extra,
                  "escape_whitespaces": True, "treat_whitespace_as_suffix": False, "llamacpp": True,
                  "user_defined": [strings[i] for i in np.flatnonzero(attrs & ATTR_USER_DEFINED).tolist()]}
    # llm_tokenizer_ugm's trie: attribute bits, so a promoted NORMAL token and a control token named
    # "unused" stay in it
    mask = (attrs & (ATTR_NORMAL | ATTR_USER_DEFINED | ATTR_UNUSED)) != 0
    decoder = {"type": "SentencePieceDecoder", "strip_leading_space": add_space_prefix,
               "remove_extra_whitespaces": remove_extra, "unk_surface": "\u2585", "denormalizer": None}
    return TokenizerSpec(model=model, tokens=tokens, token_types=types, scores=scores.astype(np.float32),
                         model_mask=mask, normalizer=normalizer, decoder=decoder, added_tokens=added)


def unescape_rwkv(text: str) -> bytes:
    """llama.cpp's ``llama_unescape_rwkv_token``: RWKV GGUF tokens are Python ``repr`` bodies of their bytes
    (``\\t \\n \\r \\xNN``, any other escaped character stands for itself); hex digits are read as
    llama.cpp reads them (lower-case only; anything else wraps like its uint8 arithmetic)."""
    out = bytearray()
    escaping = False
    hex_left = 0
    acc = 0
    for c in text.encode("utf-8"):
        if hex_left:
            acc = ((acc << 4) + (c - 87 if c >= 97 else c - 48)) & 0xFF
            hex_left -= 1
            if hex_left == 0:
                out.append(acc)
                acc = 0
        elif escaping:
            escaping = False
            if c == 0x78:  # x
                hex_left = 2
            else:
                out.append({0x74: 9, 0x6E: 10, 0x72: 13}.get(c, c))
        elif c == 0x5C:
            escaping = True
        else:
            out.append(c)
    return bytes(out)


def _rwkv(meta, strings, types, scores, ids, pre, added, attrs) -> TokenizerSpec:
    """llama.cpp's RWKV: greedy longest match over the unescaped token bytes, nothing normalised or split."""
    tokens = [unescape_rwkv(s) for s in strings]
    return TokenizerSpec(model={"type": "LlamaCppRwkv", "unk_id": ids["unk"]}, tokens=tokens, token_types=types,
                         scores=scores, model_mask=np.ones(len(strings), np.bool_), added_tokens=added)
