"""A tiktoken-shaped surface: ``from tokjit import tiktoken`` and keep writing tiktoken code.

``get_encoding``, ``encoding_for_model``, ``encoding_name_for_model``, ``list_encoding_names`` and
:class:`Encoding` behave as tiktoken's do (same ids, same errors), computed by tokjit's kernels over
the encodings bundled with tokjit (nothing is downloaded). ``Encoding.tokenizer`` is the underlying
:class:`tokjit.Tokenizer` for everything else tokjit offers.

Special tokens follow tiktoken: ``encode`` raises ``ValueError`` when the text spells a special token
that is neither allowed nor explicitly permitted as ordinary text (``disallowed_special=()``).
"""

from __future__ import annotations

import functools
import threading
from typing import AbstractSet, Collection, Literal, Sequence

import numpy as np

from tokjit.errors import InputError, UnknownEncodingError
from tokjit.compat.models import MODEL_PREFIX_TO_ENCODING, MODEL_TO_ENCODING, encoding_name_for_model

__all__ = ["Encoding", "get_encoding", "encoding_for_model", "encoding_name_for_model",
           "list_encoding_names", "MODEL_TO_ENCODING", "MODEL_PREFIX_TO_ENCODING"]

_ALL = "all"


def _raise_disallowed(token: str):
    raise ValueError(
        f"Encountered text corresponding to disallowed special token {token!r}.\n"
        "If you want this text to be encoded as a special token, "
        f"pass it to `allowed_special`, e.g. `allowed_special={{{token!r}, ...}}`.\n"
        "If you want this text to be encoded as normal text, disable the check for this token "
        f"by passing `disallowed_special=(enc.special_tokens_set - {{{token!r}}})`.\n"
        "To disable this check for all special tokens, pass `disallowed_special=()`.\n")


class _LiteralScan:
    """Finds the leftmost occurrence of any of a set of literal strings. A shared prefix of all of
    them (``<|`` for OpenAI's specials) is checked with ``str.__contains__`` first, so text without
    it (nearly all text) costs one substring scan and no regex."""

    def __init__(self, literals: frozenset[str]):
        import regex
        ordered = sorted(literals, key=lambda s: (-len(s), s))  # longest first at equal starts
        self.prefix = _common_prefix(ordered)
        self.pattern = regex.compile("|".join(regex.escape(s) for s in ordered)) if ordered else None

    def search(self, text: str):
        if self.pattern is None or (self.prefix and self.prefix not in text):
            return None
        return self.pattern.search(text)


def _common_prefix(strings: list[str]) -> str:
    if not strings:
        return ""
    lo, hi = min(strings), max(strings)
    n = 0
    while n < len(lo) and lo[n] == hi[n]:
        n += 1
    return lo[:n]


@functools.lru_cache(maxsize=256)
def _scan(literals: frozenset[str]) -> _LiteralScan:
    return _LiteralScan(literals)


def _rank_bpe(piece: bytes, ranks: dict[bytes, int]) -> list[int]:
    """tiktoken's byte-pair encoding of one piece: merge the adjacent pair whose concatenation has
    the lowest rank (leftmost on ties) until no pair is a token. Used only on short tails
    (``_encode_bytes``, ``_encode_single_piece``); whole texts go through tokjit's kernels."""
    if piece in ranks:
        return [ranks[piece]]
    parts = [piece[i:i + 1] for i in range(len(piece))]
    while len(parts) > 1:
        best, best_rank = -1, None
        for i in range(len(parts) - 1):
            r = ranks.get(parts[i] + parts[i + 1])
            if r is not None and (best_rank is None or r < best_rank):
                best, best_rank = i, r
        if best < 0:
            break
        parts[best:best + 2] = [parts[best] + parts[best + 1]]
    return [ranks[p] for p in parts]


class Encoding:
    """tiktoken's ``Encoding`` over a tokjit tokenizer.

    ``Encoding(name, pat_str=..., mergeable_ranks=..., special_tokens=...)`` builds one from ranks
    as tiktoken's constructor does; :func:`get_encoding` returns the bundled ones.
    """

    def __init__(self, name: str, *, pat_str: str, mergeable_ranks: dict[bytes, int],
                 special_tokens: dict[str, int], explicit_n_vocab: int | None = None):
        from tokjit.load.tiktoken_file import spec_from_ranks
        from tokjit.tokenizer import Tokenizer
        if explicit_n_vocab:
            size = max(max(mergeable_ranks.values()), max(special_tokens.values(), default=0)) + 1
            if len(mergeable_ranks) + len(special_tokens) != explicit_n_vocab or size != explicit_n_vocab:
                raise InputError(f"explicit_n_vocab={explicit_n_vocab} but the ranks and special tokens "
                                 f"give {len(mergeable_ranks) + len(special_tokens)} tokens up to id {size - 1}")
        spec = spec_from_ranks(dict(mergeable_ranks), pat_str, dict(special_tokens), name=name)
        self._setup(Tokenizer(spec), name, pat_str=pat_str, mergeable_ranks=dict(mergeable_ranks),
                    special_tokens=dict(special_tokens))

    @classmethod
    def from_tokenizer(cls, tokenizer, name: str | None = None) -> "Encoding":
        """Wrap a byte-level BPE tokjit tokenizer (a bundled encoding, a loaded ``.tiktoken``)."""
        self = cls.__new__(cls)
        self._setup(tokenizer, name or tokenizer.name)
        return self

    def _setup(self, tokenizer, name, *, pat_str=None, mergeable_ranks=None, special_tokens=None):
        self.tokenizer = tokenizer
        # encode_ordinary is the tokenizer's own encode: a built-in where it has one
        # (tokjit.fused.call_object), which a loop then reaches without a Python frame
        self.encode_ordinary = tokenizer.encode
        self.name = name
        spec = tokenizer.spec
        self._special_tokens = dict(special_tokens if special_tokens is not None else tokenizer.special_tokens)
        self._pat_str_value = pat_str
        self._ranks_value = mergeable_ranks
        self._special_token_values = set(self._special_tokens.values())
        self._all_specials = frozenset(self._special_tokens)
        self._scan_all = _scan(self._all_specials)
        self._special_by_id = {v: k.encode("utf-8") for k, v in self._special_tokens.items()}
        mask = spec.model_mask
        if mask is None:
            mask = np.ones(len(spec.tokens), np.bool_)
        self._model_mask = mask
        model_ids = np.flatnonzero(mask)
        self.max_token_value = int(max(model_ids[-1] if model_ids.size else 0,
                                       max(self._special_token_values, default=0)))
        known = mask.copy()
        for tid in self._special_token_values:
            if tid < known.shape[0]:
                known[tid] = True
        # ids inside the id range that name no token (cl100k's 100261-100275): tiktoken has no bytes
        # for them and raises KeyError where tokjit's tables would give b""
        self._gap_ids = frozenset(np.flatnonzero(~known[: self.max_token_value + 1]).tolist())
        self._lock = threading.Lock()

    # ----------------------------------------------------------------------------------------------
    # properties tiktoken exposes
    # ----------------------------------------------------------------------------------------------

    def __repr__(self) -> str:
        return f"<Encoding {self.name!r}>"

    @property
    def _pat_str(self) -> str:
        if self._pat_str_value is None:
            pre = self.tokenizer.spec.pre_tokenizer or {}
            self._pat_str_value = (pre.get("pattern") or {}).get("Regex")
        return self._pat_str_value

    @property
    def _mergeable_ranks(self) -> dict[bytes, int]:
        if self._ranks_value is None:
            with self._lock:
                if self._ranks_value is None:
                    tokens = self.tokenizer.spec.tokens
                    self._ranks_value = {tokens[i]: i for i in np.flatnonzero(self._model_mask).tolist()}
        return self._ranks_value

    @property
    def eot_token(self) -> int:
        return self._special_tokens["<|endoftext|>"]

    @property
    def special_tokens_set(self) -> set[str]:
        return set(self._all_specials)

    def is_special_token(self, token: int) -> bool:
        return token in self._special_token_values

    @property
    def n_vocab(self) -> int:
        return self.max_token_value + 1

    # ----------------------------------------------------------------------------------------------
    # encoding
    # ----------------------------------------------------------------------------------------------

    def _allowed_and_check(self, text_or_texts, allowed_special, disallowed_special, many: bool):
        """The allowed set (frozenset) after raising on any disallowed special-token text."""
        if allowed_special == _ALL:
            allowed = self._all_specials
        else:
            allowed = frozenset(allowed_special)
        if disallowed_special == _ALL:
            disallowed = self._all_specials - allowed
        else:
            disallowed = frozenset(disallowed_special)
        if disallowed:
            scan = _scan(disallowed)
            for text in (text_or_texts if many else (text_or_texts,)):
                if not isinstance(text, str):
                    raise InputError(f"expected str, got {type(text).__name__}")
                match = scan.search(text)
                if match is not None:
                    _raise_disallowed(match.group())
        return allowed & self._all_specials

    def _encode_allowed(self, text: str, allowed: frozenset) -> list[int]:
        tok = self.tokenizer
        if not allowed:
            return tok.encode(text)
        if len(allowed) == len(self._special_tokens):
            return tok.encode(text, parse_special=True)
        # some specials allowed: cut at each allowed one (leftmost, longest first), the text between
        # is ordinary text, as tiktoken's encoder does
        scan = _scan(allowed)
        out: list[int] = []
        start = 0
        while True:
            match = scan.pattern.search(text, start) if scan.pattern is not None else None
            if match is None:
                out.extend(tok.encode(text[start:]))
                return out
            if match.start() > start:
                out.extend(tok.encode(text[start:match.start()]))
            out.append(self._special_tokens[match.group()])
            start = match.end()

    def encode_ordinary(self, text: str) -> list[int]:
        """Ids of ``text`` with special-token text treated as ordinary text."""
        return self.tokenizer.encode(text)

    def encode(self, text: str, *, allowed_special: Literal["all"] | AbstractSet[str] = frozenset(),
               disallowed_special: Literal["all"] | Collection[str] = _ALL) -> list[int]:
        """Ids of ``text``. By default text spelling a special token raises ``ValueError``; name it in
        ``allowed_special`` (or ``"all"``) to get the special token, or leave it out of
        ``disallowed_special`` (``()`` for none) to encode it as ordinary text."""
        if not allowed_special and disallowed_special == _ALL:  # the common call: one substring scan
            if not isinstance(text, str):
                raise InputError(f"expected str, got {type(text).__name__}")
            match = self._scan_all.search(text)
            if match is not None:
                _raise_disallowed(match.group())
            return self.tokenizer.encode(text)
        allowed = self._allowed_and_check(text, allowed_special, disallowed_special, many=False)
        return self._encode_allowed(text, allowed)

    def encode_to_numpy(self, text: str, *, allowed_special: Literal["all"] | AbstractSet[str] = frozenset(),
                        disallowed_special: Literal["all"] | Collection[str] = _ALL) -> np.ndarray:
        """``encode`` as a uint32 array (tiktoken's dtype)."""
        allowed = self._allowed_and_check(text, allowed_special, disallowed_special, many=False)
        if not allowed or len(allowed) == len(self._special_tokens):
            ids = self.tokenizer.encode_to_numpy(text, parse_special=bool(allowed))
            return ids.astype(np.uint32)
        return np.asarray(self._encode_allowed(text, allowed), np.uint32)

    def encode_ordinary_batch(self, text: Sequence[str], *, num_threads: int = 8) -> list[list[int]]:
        return self.tokenizer.encode_batch(_text_list(text), num_threads=num_threads)

    def encode_batch(self, text: Sequence[str], *, num_threads: int = 8,
                     allowed_special: Literal["all"] | AbstractSet[str] = frozenset(),
                     disallowed_special: Literal["all"] | Collection[str] = _ALL) -> list[list[int]]:
        texts = _text_list(text)
        allowed = self._allowed_and_check(texts, allowed_special, disallowed_special, many=True)
        if not allowed or len(allowed) == len(self._special_tokens):
            return self.tokenizer.encode_batch(texts, num_threads=num_threads, parse_special=bool(allowed))
        return [self._encode_allowed(t, allowed) for t in texts]

    def encode_single_token(self, text_or_bytes: str | bytes) -> int:
        """The id of a single token given its text or bytes (special tokens included); ``KeyError``
        if it is not one token."""
        data = text_or_bytes.encode("utf-8") if isinstance(text_or_bytes, str) else bytes(text_or_bytes)
        tid = self._mergeable_ranks.get(data)
        if tid is not None:
            return tid
        special = self._special_tokens.get(data.decode("utf-8", "replace"))
        if special is not None:
            return special
        raise UnknownEncodingError(f"{text_or_bytes!r} is not a single token of {self.name}")

    def _encode_single_piece(self, text_or_bytes: str | bytes) -> list[int]:
        data = text_or_bytes.encode("utf-8") if isinstance(text_or_bytes, str) else bytes(text_or_bytes)
        return _rank_bpe(data, self._mergeable_ranks) if data else []

    def _encode_only_native_bpe(self, text: str) -> list[int]:
        import regex
        out: list[int] = []
        for piece in regex.findall(self._pat_str, text):
            out.extend(self._encode_single_piece(piece))
        return out

    def _encode_bytes(self, data: bytes) -> list[int]:
        """Ids of bytes that may not be UTF-8, as tiktoken computes them: the valid prefix is
        encoded as text; its last regex piece (grown over trailing whitespace tokens) is joined
        with the invalid tail and byte-pair encoded as one piece."""
        data = bytes(data)
        try:
            return self.tokenizer.encode(data.decode("utf-8"))
        except UnicodeDecodeError as exc:
            valid = exc.start
        import regex
        text = data[:valid].decode("utf-8")
        tokens = self.tokenizer.encode(text)
        ranks = self._mergeable_ranks
        last_len = 0
        if text:
            last = None
            for last in regex.finditer(self._pat_str, text):
                pass
            if last is not None and last.end() == len(text):
                last_len = len(_rank_bpe(last.group().encode("utf-8"), ranks))
        if last_len:
            table = self.tokenizer.spec.tokens

            def all_space(tid):
                return all(b in b" \n\t" for b in table[tid])
            if all_space(tokens[len(tokens) - last_len]):
                while last_len < len(tokens) and all_space(tokens[len(tokens) - last_len - 1]):
                    last_len += 1
        if tokens and last_len:
            tail = self.decode_bytes(tokens[len(tokens) - last_len:]) + data[valid:]
            del tokens[len(tokens) - last_len:]
        else:
            tail = data[valid:]
        if tail:
            tokens.extend(_rank_bpe(tail, ranks))
        return tokens

    # ----------------------------------------------------------------------------------------------
    # decoding
    # ----------------------------------------------------------------------------------------------

    def _check_known(self, tokens) -> None:
        gaps = self._gap_ids
        if gaps and not gaps.isdisjoint(tokens):
            bad = next(t for t in tokens if t in gaps)
            raise UnknownEncodingError(f"token id {bad} names no token in {self.name}")

    def decode_bytes(self, tokens: Sequence[int]) -> bytes:
        self._check_known(tokens)
        try:
            return self.tokenizer.decode_bytes(tokens)
        except InputError as exc:  # tiktoken raises KeyError for an id outside the vocabulary
            raise UnknownEncodingError(str(exc)) from None

    def decode(self, tokens: Sequence[int], errors: str = "replace") -> str:
        """Text of ``tokens``; bytes that are not UTF-8 are handled by ``errors`` (lossy by default)."""
        self._check_known(tokens)
        try:
            return self.tokenizer.decode(tokens, errors=errors)
        except InputError as exc:
            raise UnknownEncodingError(str(exc)) from None

    def decode_single_token_bytes(self, token: int) -> bytes:
        """The bytes of one token (special tokens included); ``KeyError`` for an unknown id."""
        special = self._special_by_id.get(token)
        if special is not None:
            return special
        if not 0 <= token < self._model_mask.shape[0] or not self._model_mask[token]:
            raise UnknownEncodingError(f"token id {token} names no token in {self.name}")
        return self.tokenizer.spec.tokens[token]

    def decode_tokens_bytes(self, tokens: Sequence[int]) -> list[bytes]:
        return [self.decode_single_token_bytes(t) for t in tokens]

    def decode_with_offsets(self, tokens: Sequence[int]) -> tuple[str, list[int]]:
        """(text, the character index where each token starts); a token that begins inside a
        character points at that character. Raises ``UnicodeDecodeError`` on invalid UTF-8."""
        pieces = self.decode_tokens_bytes(tokens)
        offsets, chars = [], 0
        for piece in pieces:
            starts_inside = bool(piece) and 0x80 <= piece[0] < 0xC0
            offsets.append(max(0, chars - starts_inside))
            chars += sum(1 for b in piece if not 0x80 <= b < 0xC0)
        return b"".join(pieces).decode("utf-8", errors="strict"), offsets

    def decode_batch(self, batch: Sequence[Sequence[int]], *, errors: str = "replace",
                     num_threads: int = 8) -> list[str]:
        return [self.decode(ids, errors=errors) for ids in batch]

    def decode_bytes_batch(self, batch: Sequence[Sequence[int]], *, num_threads: int = 8) -> list[bytes]:
        return [self.decode_bytes(ids) for ids in batch]

    def token_byte_values(self) -> list[bytes]:
        """Bytes of every ordinary (mergeable) token, sorted."""
        return sorted(self._mergeable_ranks)

    # ----------------------------------------------------------------------------------------------
    # pickling: bundled encodings by name, others by their ranks (as tiktoken)
    # ----------------------------------------------------------------------------------------------

    def __getstate__(self):
        if _REGISTRY.get(self.name) is self:
            return self.name
        return {"name": self.name, "pat_str": self._pat_str, "mergeable_ranks": self._mergeable_ranks,
                "special_tokens": self._special_tokens}

    def __setstate__(self, value) -> None:
        if isinstance(value, str):
            self.__dict__ = get_encoding(value).__dict__
            return
        self.__init__(**value)


def _text_list(texts) -> list[str]:
    if isinstance(texts, (str, bytes)):
        raise InputError("expected a list of texts, got a single "
                         f"{type(texts).__name__} (use encode() for one text)")
    return list(texts)


_REGISTRY: dict[str, Encoding] = {}
_REGISTRY_LOCK = threading.Lock()


def get_encoding(encoding_name: str) -> Encoding:
    """A bundled encoding by name (``o200k_base``, ``cl100k_base``, ``gpt2``, ...); one object per
    name per process."""
    from tokjit.api import get_encoding as get_tokenizer
    with _REGISTRY_LOCK:
        enc = _REGISTRY.get(encoding_name)
        if enc is None:
            enc = _REGISTRY[encoding_name] = Encoding.from_tokenizer(get_tokenizer(encoding_name), encoding_name)
        return enc


def encoding_for_model(model_name: str) -> Encoding:
    """The encoding an OpenAI model uses (``"gpt-4o"`` -> ``o200k_base``), tiktoken's routing."""
    return get_encoding(encoding_name_for_model(model_name))


def list_encoding_names() -> list[str]:
    from tokjit.load.encodings import list_encoding_names as names
    return names()
