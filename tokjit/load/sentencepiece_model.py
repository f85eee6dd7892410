"""SentencePiece ``.model`` (a serialized ``ModelProto``) -> :class:`~tokjit.spec.TokenizerSpec`.

The protobuf is read by a small wire-format reader of our own, so the ``sentencepiece`` and
``protobuf`` packages are not needed at runtime. Only the fields that change how text is encoded or
decoded are kept; unknown fields are skipped as protobuf requires. Every length and offset is checked
against the bytes actually present, so a truncated or corrupt file raises :class:`ModelFileError`
naming the field and byte offset instead of crashing or allocating what a lying length claims.

What the spec describes is ``SentencePieceProcessor.encode`` / ``decode`` of the same file:

* normalizer ``SentencePieceNormalizer`` (charsmap, dummy prefix, whitespace collapsing, U+2581);
* model ``BPE`` with ``merge_rule="scores"`` (sentencepiece ``bpe_model.cc``) or ``Unigram``;
* USER_DEFINED pieces escape the charsmap in the normalizer. For BPE they are non-special added
  tokens matched in the normalized text (``bpe_model.cc`` makes them atomic symbols and never merges
  across them); for Unigram they stay in the Viterbi trie, where sentencepiece 0.2.3 scores one of
  ``length`` bytes ``0.1 * (length - 1)``, so a better-scoring path may still cut through one;
* CONTROL and UNKNOWN pieces as special added tokens. sentencepiece itself never matches control
  text, which is tokjit's default (``parse_special=False``); ``parse_special=True`` matches them by
  their piece text in the raw input, as llama.cpp and HF's converted tokenizers do, and then every
  text segment after such a token gets its own dummy prefix, as in both of those;
* a post-processor adding BOS only (``add_special_tokens=True``, what Llama-2-style HF and llama.cpp
  configurations do), and the ``SentencePieceDecoder`` reproducing ``decode``.
"""

from __future__ import annotations

import math
import struct

import numpy as np

from tokjit.errors import ModelFileError, UnsupportedComponentError
from tokjit.spec import AddedToken, TokenizerSpec, TokenType

# ModelProto.TrainerSpec.ModelType
MODEL_TYPES = {1: "UNIGRAM", 2: "BPE", 3: "WORD", 4: "CHAR"}

WIRE_VARINT, WIRE_I64, WIRE_LEN, WIRE_I32 = 0, 1, 2, 5

# field number -> (name, kind); kinds: "string", "bytes", "bool", "int32", "enum", "float", "message"
PIECE_FIELDS = {1: ("piece", "bytes"), 2: ("score", "float"), 3: ("type", "enum")}
TRAINER_FIELDS = {
    3: ("model_type", "enum"), 4: ("vocab_size", "int32"),
    24: ("treat_whitespace_as_suffix", "bool"), 26: ("allow_whitespace_only_pieces", "bool"),
    25: ("split_digits", "bool"), 35: ("byte_fallback", "bool"),
    40: ("unk_id", "int32"), 41: ("bos_id", "int32"), 42: ("eos_id", "int32"), 43: ("pad_id", "int32"),
    44: ("unk_surface", "string"), 45: ("unk_piece", "string"), 46: ("bos_piece", "string"),
    47: ("eos_piece", "string"), 48: ("pad_piece", "string"),
}
NORMALIZER_FIELDS = {
    1: ("name", "string"), 2: ("precompiled_charsmap", "bytes"), 3: ("add_dummy_prefix", "bool"),
    4: ("remove_extra_whitespaces", "bool"), 5: ("escape_whitespaces", "bool"),
}
TRAINER_DEFAULTS = {
    "model_type": 1, "vocab_size": 8000, "treat_whitespace_as_suffix": False,
    "allow_whitespace_only_pieces": False, "split_digits": False, "byte_fallback": False,
    "unk_id": 0, "bos_id": 1, "eos_id": 2, "pad_id": -1, "unk_surface": " \u2047 ",
    "unk_piece": "<unk>", "bos_piece": "<s>", "eos_piece": "</s>", "pad_piece": "<pad>",
}
NORMALIZER_DEFAULTS = {
    "name": "", "precompiled_charsmap": b"", "add_dummy_prefix": True,
    "remove_extra_whitespaces": True, "escape_whitespaces": True,
}
WIRE_OF_KIND = {"string": WIRE_LEN, "bytes": WIRE_LEN, "message": WIRE_LEN, "bool": WIRE_VARINT,
                "int32": WIRE_VARINT, "enum": WIRE_VARINT, "float": WIRE_I32}


class _Reader:
    """Protobuf wire-format reader over ``data[start:end]`` with bounds checks on every read."""

    __slots__ = ("data", "pos", "end", "path", "context")

    def __init__(self, data: bytes, start: int, end: int, path, context: str):
        self.data, self.pos, self.end, self.path, self.context = data, start, end, path, context

    def fail(self, message: str, offset: int):
        raise ModelFileError(f"{message} (corrupt or truncated SentencePiece model)",
                             path=self.path, where=f"{self.context}, byte offset {offset}")

    def varint(self, what: str) -> int:
        data, pos, end = self.data, self.pos, self.end
        start = pos
        result = 0
        shift = 0
        while True:
            if pos >= end:
                self.fail(f"{what}: varint runs past the end of its message", start)
            b = data[pos]
            pos += 1
            result |= (b & 0x7F) << shift
            if b < 0x80:
                break
            shift += 7
            if shift >= 70:
                self.fail(f"{what}: varint longer than 10 bytes", start)
        self.pos = pos
        return result & 0xFFFFFFFFFFFFFFFF

    def fields(self):
        """Yield (field number, wire type, offset of the key) until the end of the message."""
        while self.pos < self.end:
            at = self.pos
            key = self.varint("field key")
            number, wire = key >> 3, key & 7
            if number == 0:
                self.fail("field number 0", at)
            yield number, wire, at

    def length_delimited(self, what: str) -> tuple[int, int]:
        at = self.pos
        n = self.varint(f"{what} length")
        if n > self.end - self.pos:
            self.fail(f"{what}: length {n} exceeds the {self.end - self.pos} bytes left", at)
        start = self.pos
        self.pos += n
        return start, start + n

    def fixed(self, size: int, what: str) -> bytes:
        if self.end - self.pos < size:
            self.fail(f"{what}: needs {size} bytes, {self.end - self.pos} left", self.pos)
        out = self.data[self.pos:self.pos + size]
        self.pos += size
        return out

    def skip(self, wire: int, number: int, at: int) -> None:
        what = f"unknown field {number}"
        if wire == WIRE_VARINT:
            self.varint(what)
        elif wire == WIRE_I64:
            self.fixed(8, what)
        elif wire == WIRE_LEN:
            self.length_delimited(what)
        elif wire == WIRE_I32:
            self.fixed(4, what)
        else:  # groups (3/4) were never used by sentencepiece; 6/7 do not exist
            self.fail(f"field {number} has unsupported wire type {wire}", at)

    def value(self, name: str, kind: str, wire: int, at: int):
        expected = WIRE_OF_KIND[kind]
        if wire != expected:
            self.fail(f"field '{name}' has wire type {wire}, expected {expected}", at)
        if kind == "float":
            return struct.unpack("<f", self.fixed(4, name))[0]
        if kind in ("bool", "int32", "enum"):
            v = self.varint(name)
            if kind == "bool":
                return v != 0
            v &= 0xFFFFFFFF  # int32 / enum: low 32 bits, two's complement
            return v - (1 << 32) if v >= (1 << 31) else v
        s, e = self.length_delimited(name)
        raw = self.data[s:e]
        if kind == "string":
            try:
                return raw.decode("utf-8")
            except UnicodeDecodeError:
                self.fail(f"field '{name}' is not valid UTF-8", s)
        if kind == "message":
            return (s, e)
        return raw


def _read_message(data: bytes, start: int, end: int, fields: dict, defaults: dict, path, context: str) -> dict:
    out = dict(defaults)
    r = _Reader(data, start, end, path, context)
    for number, wire, at in r.fields():
        spec = fields.get(number)
        if spec is None:
            r.skip(wire, number, at)
            continue
        name, kind = spec
        out[name] = r.value(name, kind, wire, at)
    return out


def parse_model_proto(data: bytes, path=None) -> dict:
    """Decode the fields of a ``ModelProto`` tokjit uses into plain Python values.

    Returns ``{"pieces": [(bytes, float, int)], "trainer": {...}, "normalizer": {...} | None,
    "denormalizer": {...} | None}``.
    """
    data = bytes(data)
    r = _Reader(data, 0, len(data), path, "ModelProto")
    pieces: list[tuple[bytes, float, int]] = []
    trainer = dict(TRAINER_DEFAULTS)
    normalizer = None
    denormalizer = None
    for number, wire, at in r.fields():
        if number == 1:  # repeated SentencePiece pieces
            if wire != WIRE_LEN:
                r.fail(f"field 'pieces' has wire type {wire}, expected 2", at)
            s, e = r.length_delimited("pieces")
            pieces.append(_read_piece(data, s, e, path, len(pieces)))
        elif number in (2, 3, 5):
            name = {2: "trainer_spec", 3: "normalizer_spec", 5: "denormalizer_spec"}[number]
            if wire != WIRE_LEN:
                r.fail(f"field '{name}' has wire type {wire}, expected 2", at)
            s, e = r.length_delimited(name)
            if number == 2:
                trainer = _read_message(data, s, e, TRAINER_FIELDS, TRAINER_DEFAULTS, path, name)
            else:
                msg = _read_message(data, s, e, NORMALIZER_FIELDS, NORMALIZER_DEFAULTS, path, name)
                if number == 3:
                    normalizer = msg
                else:
                    denormalizer = msg
        else:
            r.skip(wire, number, at)
    return {"pieces": pieces, "trainer": trainer, "normalizer": normalizer, "denormalizer": denormalizer}


def _read_piece(data: bytes, start: int, end: int, path, index: int) -> tuple[bytes, float, int]:
    piece = b""
    score = 0.0
    ptype = int(TokenType.NORMAL)
    r = _Reader(data, start, end, path, f"pieces[{index}]")
    for number, wire, at in r.fields():
        if number == 1:
            piece = r.value("piece", "bytes", wire, at)
        elif number == 2:
            score = r.value("score", "float", wire, at)
        elif number == 3:
            ptype = r.value("type", "enum", wire, at)
        else:
            r.skip(wire, number, at)
    return piece, score, ptype


def load_sentencepiece(path, data: bytes) -> TokenizerSpec:
    """Parse a SentencePiece ``.model`` file into a :class:`TokenizerSpec`."""
    proto = parse_model_proto(data, path)
    pieces = proto["pieces"]
    trainer = proto["trainer"]
    if not pieces:
        raise ModelFileError("model has no pieces", path=path, where="ModelProto.pieces")
    model_type = MODEL_TYPES.get(trainer["model_type"])
    if model_type is None:
        raise ModelFileError(f"unknown model_type {trainer['model_type']}", path=path,
                             where="trainer_spec.model_type")
    if model_type == "WORD":
        raise UnsupportedComponentError(f"SentencePiece model_type {model_type} is not supported "
                                        "(only BPE, UNIGRAM and CHAR)")

    n = len(pieces)
    tokens: list[bytes] = []
    strings: list[str] = []
    types = np.empty(n, np.int8)
    scores = np.empty(n, np.float32)
    seen: dict[bytes, int] = {}
    for i, (piece, score, ptype) in enumerate(pieces):
        where = f"pieces[{i}]"
        if not piece:
            raise ModelFileError("empty piece", path=path, where=where)
        if ptype not in (1, 2, 3, 4, 5, 6):
            raise ModelFileError(f"piece type {ptype} is not a SentencePiece type", path=path, where=where)
        if math.isnan(score):
            raise ModelFileError("score is NaN", path=path, where=where)
        if piece in seen:  # sentencepiece refuses such models ("is already defined")
            raise ModelFileError(f"piece {piece!r} defined twice (ids {seen[piece]} and {i})", path=path,
                                 where=where)
        seen[piece] = i
        tokens.append(piece)
        strings.append(piece.decode("utf-8", "replace"))
        types[i] = ptype
        scores[i] = score

    unk_ids = np.flatnonzero(types == TokenType.UNKNOWN)
    if unk_ids.size != 1:
        raise ModelFileError(f"a model needs exactly one UNKNOWN piece, found {unk_ids.size}", path=path,
                             where="pieces")
    unk_id = int(unk_ids[0])
    byte_fallback = bool(trainer["byte_fallback"])
    byte_pieces = np.flatnonzero(types == TokenType.BYTE)
    for i in byte_pieces.tolist():
        if not (len(tokens[i]) == 6 and tokens[i].startswith(b"<0x") and tokens[i].endswith(b">")):
            raise ModelFileError(f"BYTE piece {tokens[i]!r} is not <0xXX>", path=path, where=f"pieces[{i}]")
        try:
            int(tokens[i][3:5], 16)
        except ValueError:
            raise ModelFileError(f"BYTE piece {tokens[i]!r} is not <0xXX>", path=path,
                                 where=f"pieces[{i}]") from None
    if byte_pieces.size and not byte_fallback:
        raise ModelFileError("BYTE pieces present although byte_fallback is off", path=path,
                             where="trainer_spec.byte_fallback")

    def special_id(name_key: str) -> int | None:
        # sentencepiece: PieceToId(bos_piece), -1 when that is the unknown piece or absent
        tid = seen.get(trainer[name_key].encode("utf-8"))
        return None if tid is None or types[tid] == TokenType.UNKNOWN else tid

    bos_id, eos_id, pad_id = special_id("bos_piece"), special_id("eos_piece"), special_id("pad_piece")

    # the model may produce exactly the pieces sentencepiece keeps in its `pieces_` map
    mergeable = (types == TokenType.NORMAL) | (types == TokenType.USER_DEFINED) | (types == TokenType.UNUSED)
    if model_type == "CHAR":
        # a CHAR model cuts text into characters (user-defined pieces matched first, longest) and looks
        # each up: the Unigram lattice over the one-character pieces and the user-defined ones gives
        # exactly that path
        one_char = np.array([len(s) == 1 for s in strings], bool)
        mergeable &= one_char | (types == TokenType.USER_DEFINED)

    added: list[AddedToken] = []
    user_defined: list[str] = []
    for i in range(n):
        t = types[i]
        if t == TokenType.USER_DEFINED:
            user_defined.append(strings[i])
            if model_type == "BPE":
                added.append(AddedToken(strings[i], i, special=False, normalized=True))
        elif t in (TokenType.CONTROL, TokenType.UNKNOWN):
            added.append(AddedToken(strings[i], i, special=True, normalized=False))

    norm = proto["normalizer"] or dict(NORMALIZER_DEFAULTS)
    charsmap = norm["precompiled_charsmap"] or None
    normalizer = {
        "type": "SentencePieceNormalizer",
        "precompiled_charsmap": charsmap,
        "add_dummy_prefix": bool(norm["add_dummy_prefix"]),
        "remove_extra_whitespaces": bool(norm["remove_extra_whitespaces"]),
        "escape_whitespaces": bool(norm["escape_whitespaces"]),
        "treat_whitespace_as_suffix": bool(trainer["treat_whitespace_as_suffix"]),
        "user_defined": user_defined,
    }
    denorm = proto["denormalizer"]
    denormalizer = None
    if denorm and denorm["precompiled_charsmap"]:  # sentencepiece ignores a denormalizer without rules
        denormalizer = {"type": "SentencePieceNormalizer", "precompiled_charsmap": denorm["precompiled_charsmap"],
                        "add_dummy_prefix": bool(denorm["add_dummy_prefix"]),
                        "remove_extra_whitespaces": bool(denorm["remove_extra_whitespaces"]),
                        "escape_whitespaces": bool(denorm["escape_whitespaces"]),
                        "treat_whitespace_as_suffix": False}

    if model_type == "BPE":
        model = {"type": "BPE", "merge_rule": "scores", "byte_level": False, "byte_fallback": byte_fallback,
                 "fuse_unk": True, "unk_id": unk_id, "resegment_unused": True}
    else:
        model = {"type": "Unigram", "unk_id": unk_id, "byte_fallback": byte_fallback}

    post = None
    if bos_id is not None:
        bos = strings[bos_id]
        post = {"type": "TemplateProcessing",
                "single": [{"SpecialToken": {"id": bos, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
                "special_tokens": {bos: {"id": bos, "ids": [bos_id], "tokens": [bos]}}}

    decoder = {
        "type": "SentencePieceDecoder",
        # sentencepiece drops the U+2581 its normalizer put in front of the first word
        "strip_leading_space": bool(norm["add_dummy_prefix"] or norm["remove_extra_whitespaces"]),
        "remove_extra_whitespaces": bool(norm["remove_extra_whitespaces"]),
        "unk_surface": trainer["unk_surface"],
        "denormalizer": denormalizer,
    }

    return TokenizerSpec(
        model=model, tokens=tokens, token_types=types, scores=scores, model_mask=mergeable,
        normalizer=normalizer, pre_tokenizer=None, post_processor=post, decoder=decoder,
        added_tokens=added, bos_id=bos_id, eos_id=eos_id, unk_id=unk_id, pad_id=pad_id,
        source={"format": "sentencepiece", "path": None if path is None else str(path),
                "token_strings": strings, "model_type": model_type, "normalizer_name": norm["name"]},
    )


__all__ = ["load_sentencepiece", "parse_model_proto"]
