"""Decoders: token ids -> text.

Most decoder chains reduce to "concatenate a fixed byte string per token" (byte-level BPE; SentencePiece
with U+2581 -> space and ``<0xXX>`` -> byte), plus at most a rule about the very first token. Those are
compiled into a per-id byte table gathered by one kernel. Chains that need per-token context keep the
HF semantics: a list of token strings passed through each decoder's ``decode_chain``.
"""

from __future__ import annotations

from array import array
from operator import itemgetter

import numpy as np
from numba import njit

from tokjit.pipeline.registry import build_decoder
from tokjit.errors import UnsupportedComponentError
from tokjit.spec import PackedBytes



@njit(cache=True, nogil=True)
def gather_token_bytes(ids, n_ids, blob, offsets, skip, out):
    """Concatenate ``blob[offsets[id]:offsets[id+1]]`` for each id not marked in ``skip``.

    ``out`` must hold the total; ids are validated by the caller. O(output bytes).
    """
    n = 0
    for i in range(n_ids):
        t = ids[i]
        if skip[t]:
            continue
        s = offsets[t]
        e = offsets[t + 1]
        for k in range(s, e):
            out[n] = blob[k]
            n += 1
    return n


@njit(cache=True, nogil=True)
def gathered_length(ids, n_ids, offsets, skip):
    total = 0
    for i in range(n_ids):
        t = ids[i]
        if not skip[t]:
            total += offsets[t + 1] - offsets[t]
    return total


class ByteLevel:
    """HF ``ByteLevel`` decoder: token strings are byte-mapped, so the raw bytes are the text."""

    per_token_bytes = True

    def __init__(self, config: dict):
        pass

    def decode_chain(self, tokens: list[str]) -> list[str]:
        return tokens


class Sequence:
    def __init__(self, config: dict):
        self.steps = [build_decoder(c) for c in config["decoders"]]

    def decode_chain(self, tokens: list[str]) -> list[str]:
        for step in self.steps:
            tokens = step.decode_chain(tokens)
        return tokens




# --------------------------------------------------------------------------------------------------
# SentencePiece-family decoders (HF ``decode_chain`` semantics) and their fast per-id path
# --------------------------------------------------------------------------------------------------

def _byte_token_value(token: str) -> int:
    """The byte of an HF ``<0xXX>`` token string, else -1 (HF ``ByteFallback`` test)."""
    if len(token) == 6 and token.startswith("<0x") and token.endswith(">"):
        digits = token[3:5]
        if all(c in "0123456789abcdefABCDEF" for c in digits):
            return int(digits, 16)
    return -1


class Replace:
    """HF ``Replace`` decoder: a String or Regex pattern replaced in every token."""

    def __init__(self, config: dict):
        pattern = config["pattern"]
        self.content = config["content"]
        if "String" in pattern:
            self.needle = pattern["String"]
            self.regex = None
        elif "Regex" in pattern:
            import regex
            self.needle = None
            self.regex = regex.compile(pattern["Regex"])
        else:
            raise UnsupportedComponentError(f"Replace pattern {pattern!r}")

    def map_token(self, token: str, index: int) -> str:
        if self.needle is not None:
            return token.replace(self.needle, self.content) if self.needle else token
        return self.regex.sub(lambda _m: self.content, token)

    def decode_chain(self, tokens: list[str]) -> list[str]:
        return [self.map_token(t, i) for i, t in enumerate(tokens)]


class ByteFallback:
    """HF ``ByteFallback``: runs of ``<0xXX>`` tokens become their bytes as UTF-8; a run that is not
    valid UTF-8 becomes one U+FFFD per byte token."""

    def __init__(self, config: dict):
        pass

    def decode_chain(self, tokens: list[str]) -> list[str]:
        out: list[str] = []
        run = bytearray()
        for tok in tokens:
            b = _byte_token_value(tok)
            if b >= 0:
                run.append(b)
                continue
            if run:
                out.extend(_byte_run(run))
                run = bytearray()
            out.append(tok)
        if run:
            out.extend(_byte_run(run))
        return out


def _byte_run(run: bytearray) -> list[str]:
    try:
        return [run.decode("utf-8")]
    except UnicodeDecodeError:
        return ["\ufffd"] * len(run)


class Fuse:
    """HF ``Fuse``: all tokens joined into one."""

    def __init__(self, config: dict):
        pass

    def decode_chain(self, tokens: list[str]) -> list[str]:
        return ["".join(tokens)]


class Strip:
    """HF ``Strip`` decoder: up to ``start`` leading and ``stop`` trailing ``content`` characters are
    removed from every token."""

    def __init__(self, config: dict):
        self.content = config.get("content", " ")
        self.start = int(config.get("start", 0))
        self.stop = int(config.get("stop", 0))

    def map_token(self, token: str, index: int) -> str:
        lo = 0
        while lo < min(self.start, len(token)) and token[lo] == self.content:
            lo += 1
        hi = len(token)
        for _ in range(self.stop):
            if hi > lo and token[hi - 1] == self.content:
                hi -= 1
            else:
                break
        return token[lo:hi]

    def decode_chain(self, tokens: list[str]) -> list[str]:
        return [self.map_token(t, i) for i, t in enumerate(tokens)]


class BPEDecoder:
    """HF ``BPEDecoder``: the end-of-word suffix becomes a space in every token but the last, where it
    goes (a token's text depends on whether it comes last: no per-id table)."""

    def __init__(self, config: dict):
        self.suffix = str(config.get("suffix", "</w>"))

    def decode_chain(self, tokens: list[str]) -> list[str]:
        last = len(tokens) - 1
        return [t.replace(self.suffix, "" if i == last else " ") for i, t in enumerate(tokens)]


def metaspace_prepend_scheme(config: dict) -> str:
    """``always`` / ``first`` / ``never`` of an HF Metaspace dict (old files: ``add_prefix_space``)."""
    scheme = config.get("prepend_scheme")
    if scheme is None:
        return "always" if config.get("add_prefix_space", True) else "never"
    scheme = str(scheme).lower()
    if scheme not in ("always", "first", "never"):
        raise UnsupportedComponentError(f"Metaspace prepend_scheme {scheme!r}")
    return scheme


class Metaspace:
    """HF ``Metaspace`` decoder: the replacement character becomes a space, except in the first token,
    where it is dropped (unless ``prepend_scheme`` is ``never``)."""

    def __init__(self, config: dict):
        self.replacement = config.get("replacement", "\u2581")
        self.prepend_scheme = metaspace_prepend_scheme(config)

    def map_token(self, token: str, index: int) -> str:
        if index == 0 and self.prepend_scheme != "never":
            return token.replace(self.replacement, "")
        return token.replace(self.replacement, " ")

    def decode_chain(self, tokens: list[str]) -> list[str]:
        return [self.map_token(t, i) for i, t in enumerate(tokens)]


class FastChain:
    """Per-id byte table for a decoder chain made of per-token steps (Replace with a string pattern,
    Strip, Metaspace), optionally ``ByteFallback`` last, then optionally ``Fuse`` followed by
    whole-string Strip / Replace. Only the first token may decode differently (Metaspace), and a run
    of byte tokens is context dependent only when it is not valid UTF-8, which the text as a whole then
    is not either (every other token is a valid string): such ids go through the exact slow chain."""

    def __init__(self, steps: list):
        self.per_token: list = []
        self.byte_fallback = False
        self.after: list = []
        fused = False
        for step in steps:
            if fused:
                if isinstance(step, Strip) or (isinstance(step, Replace) and step.needle is not None):
                    self.after.append(step)
                elif isinstance(step, Fuse):
                    continue
                else:
                    raise UnsupportedComponentError("no fast path")
            elif isinstance(step, Fuse):
                fused = True
            elif self.byte_fallback:
                raise UnsupportedComponentError("no fast path")  # steps after ByteFallback see its output
            elif isinstance(step, ByteFallback):
                self.byte_fallback = True
            elif isinstance(step, (Strip, Metaspace)) or (isinstance(step, Replace) and step.needle is not None):
                self.per_token.append(step)
            else:
                raise UnsupportedComponentError("no fast path")
        self.first_differs = any(isinstance(s, Metaspace) for s in self.per_token)
        self.table = None

    def token_bytes(self, token: str, index: int) -> bytes:
        for step in self.per_token:
            token = step.map_token(token, index)
        if self.byte_fallback:
            b = _byte_token_value(token)
            if b >= 0:
                return bytes([b])
        return token.encode("utf-8", "surrogatepass")

    def build(self, tokenizer):
        if self.table is None:
            from tokjit.compile import pack_bytes
            n = tokenizer.vocab_size
            self.table = pack_bytes([self.token_bytes(tokenizer.id_to_token(i), 1) for i in range(n)])
        return self.table

    def decode(self, tokenizer, arr: np.ndarray, slow, errors: str) -> str:
        blob, offsets = self.build(tokenizer)
        n = arr.shape[0]
        head = b""
        start = 0
        if n and self.first_differs:
            head = self.token_bytes(tokenizer.id_to_token(int(arr[0])), 0)
            start = 1
        rest = arr[start:]
        no_skip = _no_skip(offsets.shape[0] - 1)
        total = gathered_length(rest, np.int64(rest.shape[0]), offsets, no_skip)
        out = np.empty(total, np.uint8)
        gather_token_bytes(rest, np.int64(rest.shape[0]), blob, offsets, no_skip, out)
        data = head + out.tobytes()
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            if errors == "strict":
                raise
            return slow(arr)
        for step in self.after:
            text = step.map_token(text, 0)
        return text


class JoinedPieces:
    """Decoding as one list lookup per id: the text is the join of a fixed piece per id, except that
    the first kept id may read differently (Metaspace drops its leading space; WordPiece adds no
    space): ``first(id)`` gives that form, remembered in ``first_forms``. ``finish(joined, errors)``
    turns the join into the text, or returns None when the fast form does not apply (a byte run that
    is not valid UTF-8): the caller then takes the exact chain.

    Ids are checked by ``array('I', ids)``, which rejects negative ids (Python would count them from
    the end of the table) in C; an id past the end fails the lookup. A 50-id line costs ~2 us, less
    than one kernel dispatch.
    """

    __slots__ = ("pieces", "pieces_skip", "special", "first", "first_forms", "finish", "empty")

    def __init__(self, pieces: list, special: list, finish, first=None):
        self.empty = pieces[0][:0] if pieces else b""
        self.pieces = pieces
        self.pieces_skip = [self.empty if special[i] else p for i, p in enumerate(pieces)]
        self.special = special
        self.first = first
        self.first_forms = None if first is None else {}
        self.finish = finish

    @property
    def raw_bytes(self) -> bool:
        """Whether the join of the pieces is the ids' bytes themselves (byte-level BPE)."""
        return self.first is None and self.finish is _utf8_finish and isinstance(self.empty, bytes)

    def joined(self, ids: list, skip: bool):
        """The join of the ids' pieces (``skip``: special tokens' pieces empty), or None when an id
        is outside the vocabulary or not an int."""
        table = self.pieces_skip if skip else self.pieces
        try:
            array("I", ids)  # OverflowError for a negative id
            n = len(ids)
            return self.empty.join(itemgetter(*ids)(table)) if n > 1 else table[ids[0]] if n else self.empty
        except (IndexError, TypeError, OverflowError):
            return None

    def decode(self, ids: list, skip: bool, errors: str):
        # joined() written out: a call more is ~8% of a short decode
        table = self.pieces_skip if skip else self.pieces
        n = len(ids)
        try:
            array("I", ids)  # OverflowError for a negative id
            if n > 1:
                joined = self.empty.join(itemgetter(*ids)(table))
            elif n == 1:
                joined = table[ids[0]]
            else:
                return self.finish(self.empty, errors)
            forms = self.first_forms
            if forms is not None:
                k = 0
                if skip:
                    special = self.special
                    while k < n and special[ids[k]]:
                        k += 1
                    if k == n:
                        return self.finish(joined, errors)
                tid = ids[k]
                head = forms.get(tid)
                if head is None:
                    head = forms[tid] = self.first(tid)
                joined = head + joined[len(table[tid]):]  # pieces before ids[k] are all empty
        except (IndexError, TypeError, OverflowError):  # an id outside the vocabulary, or not an int
            return None
        return self.finish(joined, errors)


def _utf8_finish(data: bytes, errors: str) -> str:
    return data.decode("utf-8", errors)


def _strict_finish(post):
    """UTF-8 text passed through ``post``, or None when the bytes are not valid UTF-8 (the exact
    chain decides about invalid byte runs; ``errors="strict"`` raises as it would)."""
    def finish(data: bytes, errors: str):
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            if errors == "strict":
                raise
            return None
        return post(text)
    return finish


class SpacedTokens:
    """HF without a decoder: the token strings joined by single spaces."""

    __slots__ = ("names", "special")

    def __init__(self, names: list, special: list):
        self.names = names
        self.special = special

    def decode(self, ids: list, skip: bool, errors: str):
        names = self.names
        try:
            if ids and min(ids) < 0:
                return None
            if skip:
                special = self.special
                return " ".join([names[i] for i in ids if not special[i]])
            return " ".join(map(names.__getitem__, ids))
        except (IndexError, TypeError):
            return None


def pieces_decoder_for(tokenizer):
    """The fast list-lookup decoder of ``tokenizer`` (:class:`JoinedPieces` or
    :class:`SpacedTokens`), or None when its decoder chain needs context."""
    special = tokenizer._special_ids.tolist()
    decoder = tokenizer.decoder
    if decoder is None and tokenizer.spec.source.get("format") == "tokenizer.json" \
            and not tokenizer.spec.model.get("byte_level"):
        names = [tokenizer.id_to_token(i) for i in range(tokenizer.vocab_size)]
        for t in tokenizer.spec.added_tokens:
            names[t.id] = t.content
        return SpacedTokens(names, special)
    build = getattr(decoder, "pieces_decoder", None) if decoder is not None else None
    if build is not None:
        return build(tokenizer, special)
    blob = tokenizer._decode_blob
    if blob is None or (decoder is not None and not isinstance(decoder, ByteLevel)):
        return None
    return JoinedPieces(_split_blob(blob, tokenizer._decode_offsets), special, _utf8_finish)


def _split_blob(blob: np.ndarray, offsets: np.ndarray) -> list[bytes]:
    return PackedBytes(blob, offsets).tolist()


def _fast_chain(decoder) -> "FastChain | None":
    """The decoder's :class:`FastChain`, built once, or None when its steps need context."""
    fast = decoder.__dict__.get("_fast", False)
    if fast is False:
        try:
            fast = FastChain(decoder.steps if isinstance(decoder, Sequence) else [decoder])
        except UnsupportedComponentError:
            fast = None
        decoder._fast = fast
    return fast


def _chain_pieces_decoder(decoder, tokenizer, special):
    """``pieces_decoder`` hook of the HF chain decoders (see :class:`FastChain`)."""
    fast = _fast_chain(decoder)
    if fast is None:
        return None
    pieces = _split_blob(*fast.build(tokenizer))
    first = None
    if fast.first_differs:
        def first(tid: int) -> bytes:
            return fast.token_bytes(tokenizer.id_to_token(tid), 0)

    def after(text: str) -> str:
        for step in fast.after:
            text = step.map_token(text, 0)
        return text
    return JoinedPieces(pieces, special, _strict_finish(after), first)


_NO_SKIP: dict[int, np.ndarray] = {}


def _no_skip(n: int) -> np.ndarray:
    arr = _NO_SKIP.get(n)
    if arr is None:
        arr = _NO_SKIP[n] = np.zeros(max(n, 1), np.bool_)
    return arr


def _chain_decode_ids(decoder, tokenizer, arr: np.ndarray, skip_special_tokens: bool, errors: str) -> str:
    """``decode_ids`` hook shared by the HF decoders: exact ``decode_chain`` semantics, fast when the
    chain allows a per-id table (see :class:`FastChain`)."""
    if skip_special_tokens:
        arr = arr[~tokenizer._special_ids[arr]]

    def slow(ids):
        return "".join(decoder.decode_chain([tokenizer.id_to_token(int(t)) for t in ids.tolist()]))

    fast = _fast_chain(decoder)
    if fast is None:
        return slow(arr)
    return fast.decode(tokenizer, arr, slow, errors)


def _install_decode_ids(cls):
    cls.decode_ids = _chain_decode_ids
    cls.pieces_decoder = _chain_pieces_decoder
    return cls


for _cls in (Replace, ByteFallback, Fuse, Strip, Metaspace, Sequence, BPEDecoder):
    _install_decode_ids(_cls)


# --------------------------------------------------------------------------------------------------
# sentencepiece ``SentencePieceProcessor::Decode``
# --------------------------------------------------------------------------------------------------

_SPACE_SYMBOL = "\u2581"


def spm_decode_utf8_runs(data: bytes) -> str:
    """Bytes -> text the way sentencepiece decodes a run of byte pieces: valid characters as they are,
    every byte of a malformed sequence as its own U+FFFD (``string_util::DecodeUTF8``)."""
    out = []
    i = 0
    n = len(data)
    while i < n:
        b = data[i]
        size = 1 if b < 0x80 else 2 if (b & 0xE0) == 0xC0 else 3 if (b & 0xF0) == 0xE0 else \
            4 if (b & 0xF8) == 0xF0 else 0
        if size == 1:
            out.append(chr(b))
            i += 1
            continue
        if size and i + size <= n and all((c & 0xC0) == 0x80 for c in data[i + 1:i + size]):
            cp = b & (0x7F >> size)
            for c in data[i + 1:i + size]:
                cp = (cp << 6) | (c & 0x3F)
            minimum = (0, 0, 0x80, 0x800, 0x10000)[size]
            if cp >= minimum and (cp < 0xD800 or 0xE000 <= cp <= 0x10FFFF):
                out.append(chr(cp))
                i += size
                continue
        out.append("\ufffd")
        i += 1
    return "".join(out)


@njit(cache=True, nogil=True)
def spm_gather(ids, n_ids, skip, kinds, leading_ws, blob, offsets, strip_leading, remove_extra, out):
    """sentencepiece ``Decode`` into bytes: per-id surfaces from ``blob`` (U+2581 already a space,
    control pieces empty, byte pieces one raw byte), dropping the leading space of pieces while the
    dummy-prefix rule applies (no text yet, no U+2581 consumed yet; with ``remove_extra`` it keeps
    applying until text appears). Ids marked in ``skip`` are left out. Returns bytes written; ``out``
    must hold the sum of the surfaces. Byte runs that are not valid UTF-8 are the caller's concern.
    """
    m = 0
    bos_ws_seen = False
    head = True
    for i in range(n_ids):
        t = ids[i]
        if skip[t]:
            continue
        s = offsets[t]
        e = offsets[t + 1]
        kind = kinds[t]
        if head:
            if kind == 3 or m > 0 or bos_ws_seen:
                head = False
            elif kind == 0 and strip_leading and leading_ws[t]:
                s += 1
                bos_ws_seen = not remove_extra
        for k in range(s, e):
            out[m] = blob[k]
            m += 1
    return m


class SentencePieceDecoder:
    """sentencepiece ``decode`` for a ``.model``: control pieces vanish, the unknown piece reads as
    ``unk_surface`` (" \u2047 "), runs of byte pieces are decoded as UTF-8 (U+FFFD per bad byte), U+2581
    becomes a space, and the first piece's leading U+2581 (the dummy prefix) is dropped; with
    ``remove_extra_whitespaces`` the leading U+2581 of every piece is dropped until text appears.

    tokjit-specific component (``{"type": "SentencePieceDecoder", "strip_leading_space",
    "remove_extra_whitespaces", "unk_surface", "denormalizer"}``), written by the ``.model`` loader.
    """

    def __init__(self, config: dict):
        self.strip_leading = bool(config.get("strip_leading_space", True))
        self.remove_extra = bool(config.get("remove_extra_whitespaces", False))
        self.unk_surface = config.get("unk_surface", " \u2047 ")
        denorm = config.get("denormalizer")
        self.denormalizer = None
        if denorm:
            from tokjit.pipeline.registry import build_normalizer
            self.denormalizer = build_normalizer(denorm)
        self._table = None
        self._piece_index = None

    # kinds of piece: 0 normal text, 1 control, 2 unknown, 3 byte
    def _setup(self, tokenizer):
        if self._table is not None:
            return
        from tokjit.compile import pack_bytes
        from tokjit.spec import TokenType
        spec = tokenizer.spec
        types = np.asarray(spec.token_types)
        n = tokenizer.vocab_size
        kinds = np.zeros(n, np.int8)
        items = []
        for i in range(n):
            t = types[i] if i < types.shape[0] else TokenType.NORMAL
            piece = tokenizer.id_to_token(i)
            if t == TokenType.CONTROL:
                kinds[i] = 1
                items.append(b"")
            elif t == TokenType.UNKNOWN:
                kinds[i] = 2
                items.append(self.unk_surface.encode("utf-8"))
            elif t == TokenType.BYTE and _byte_token_value(piece) >= 0:
                kinds[i] = 3
                items.append(bytes([_byte_token_value(piece)]))
            else:
                items.append(piece.replace(_SPACE_SYMBOL, " ").encode("utf-8"))
        self._kinds = kinds
        self._leading_ws = np.asarray([tokenizer.id_to_token(i).startswith(_SPACE_SYMBOL) for i in range(n)],
                                      np.bool_)
        self._piece_index = {tokenizer.id_to_token(i): i for i in range(n - 1, -1, -1)}
        self._unk_id = tokenizer.spec.unk_id
        self._table = pack_bytes(items)

    def _decode_piece(self, piece: str, kind: int, unk_piece: bool, is_bos_ws: bool):
        """(surface, consumed a leading U+2581) of one non-byte piece (``DecodeSentencePiece``)."""
        if kind == 1:
            return "", False
        if kind == 2:
            return (self.unk_surface if unk_piece else piece), False
        has_bos_ws = False
        if is_bos_ws and self.strip_leading:
            if piece.startswith(_SPACE_SYMBOL):
                piece = piece[1:]
                has_bos_ws = not self.remove_extra
        return piece.replace(_SPACE_SYMBOL, " "), has_bos_ws

    def _decode_pieces(self, pieces: list[str], kinds: list[int], unk_flags: list[bool]) -> str:
        """Exact ``SentencePieceProcessor::Decode`` over pieces with their kinds."""
        text: list[str] = []
        nonempty = False
        run = bytearray()
        is_bos_ws = True
        bos_ws_seen = False
        for piece, kind, is_unk_piece in zip(pieces, kinds, unk_flags):
            if kind == 3:
                run.append(_byte_token_value(piece))
                continue
            if run:
                text.append(spm_decode_utf8_runs(bytes(run)))
                nonempty = True
                run = bytearray()
            if bos_ws_seen or nonempty:
                is_bos_ws = False
            surface, bos_ws_seen = self._decode_piece(piece, kind, is_unk_piece, is_bos_ws)
            if surface:
                text.append(surface)
                nonempty = True
        if run:
            text.append(spm_decode_utf8_runs(bytes(run)))
        return self._denormalize("".join(text))

    def _denormalize(self, text: str) -> str:
        if self.denormalizer is None or not text:
            return text
        buf, _ = self.denormalizer(np.frombuffer(text.encode("utf-8"), np.uint8), None)
        return buf.tobytes().decode("utf-8", "replace")

    def decode_chain(self, tokens: list[str]) -> list[str]:
        """Decode piece strings as ``SentencePieceProcessor.decode(pieces)`` (pieces looked up by text)."""
        if self._piece_index is None:
            raise RuntimeError("SentencePieceDecoder.decode_chain needs decode_ids to run first")
        kinds, unk = [], []
        for tok in tokens:
            tid = self._piece_index.get(tok)
            if tid is None:
                kinds.append(2)
                unk.append(False)
            else:
                kinds.append(int(self._kinds[tid]))
                unk.append(True)
        return [self._decode_pieces(tokens, kinds, unk)]

    def decode_ids(self, tokenizer, arr: np.ndarray, skip_special_tokens: bool, errors: str) -> str:
        self._setup(tokenizer)
        blob, offsets = self._table
        skip = tokenizer._special_ids if skip_special_tokens else _no_skip(offsets.shape[0] - 1)
        n = np.int64(arr.shape[0])
        out = np.empty(gathered_length(arr, n, offsets, skip), np.uint8)
        m = spm_gather(arr, n, skip, self._kinds, self._leading_ws, blob, offsets, self.strip_leading,
                       self.remove_extra, out)
        try:
            text = out[:m].tobytes().decode("utf-8")
        except UnicodeDecodeError:
            if errors == "strict":
                raise
            if skip_special_tokens:
                arr = arr[~tokenizer._special_ids[arr]]
            kinds = self._kinds
            ids = arr.tolist()
            return self._decode_pieces([tokenizer.id_to_token(t) for t in ids], [int(kinds[t]) for t in ids],
                                       [True] * len(ids))
        return self._denormalize(text)

    def token_bytes_table(self, spec):
        return None, None  # decode goes through decode_ids

    def pieces_decoder(self, tokenizer, special):
        self._setup(tokenizer)
        return SentencePiecePieces(self, _split_blob(*self._table), special)


class SentencePiecePieces(JoinedPieces):
    """:class:`JoinedPieces` with sentencepiece's dummy-prefix rule (``spm_gather``) run in Python over
    the few ids it can affect; texts whose byte pieces are not valid UTF-8 take the exact path."""

    __slots__ = ("kinds", "leading_ws", "strip_leading", "remove_extra")

    def __init__(self, decoder: SentencePieceDecoder, pieces: list, special: list):
        super().__init__(pieces, special, _strict_finish(decoder._denormalize))
        self.kinds = decoder._kinds.tolist()
        self.leading_ws = decoder._leading_ws.tolist()
        self.strip_leading = decoder.strip_leading
        self.remove_extra = decoder.remove_extra

    def decode(self, ids: list, skip: bool, errors: str):
        if not ids:
            return self.finish(b"", errors)
        table = self.pieces_skip if skip else self.pieces
        head = []
        k = 0
        try:
            if min(ids) < 0:
                return None
            if self.strip_leading:
                kinds, leading_ws, special = self.kinds, self.leading_ws, self.special
                n = len(ids)
                m = 0
                bos_ws_seen = False
                while k < n:
                    t = ids[k]
                    if skip and special[t]:
                        k += 1
                        continue
                    kind = kinds[t]
                    if kind == 3 or m > 0 or bos_ws_seen:
                        break
                    piece = table[t]
                    if kind == 0 and leading_ws[t]:
                        piece = piece[1:]
                        bos_ws_seen = not self.remove_extra
                    head.append(piece)
                    m += len(piece)
                    k += 1
            joined = b"".join(head) + b"".join(map(table.__getitem__, ids[k:] if k else ids))
        except (IndexError, TypeError):
            return None
        return self.finish(joined, errors)


