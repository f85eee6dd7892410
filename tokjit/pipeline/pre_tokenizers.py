"""Pre-tokenizers: normalized text -> pieces the model encodes one by one.

The working state is :class:`Pieces`: one UTF-8 buffer, the spans of the pieces inside it, and an
optional alignment from buffer bytes back to the caller's text. Components are built from HF-style
dicts by :func:`build_pre_tokenizer`; each one maps a ``Pieces`` to a new ``Pieces``.
"""

from __future__ import annotations

import functools
import os
import warnings
from dataclasses import dataclass
from typing import Callable

import numpy as np

from tokjit.pipeline.registry import build_pre_tokenizer
from tokjit.errors import UnsupportedComponentError
from tokjit.kernels.split import SCRIPT_ANY, apply_split_behavior, metaspace_pieces, script_pieces
from tokjit.text import bytes_to_unicode



@dataclass
class Pieces:
    """Text being pre-tokenized: ``buf[starts[i]:ends[i]]`` is piece ``i``.

    ``align[j]`` is the byte offset in the caller's text that byte ``j`` of ``buf`` came from
    (length ``len(buf) + 1``); ``None`` means the identity.
    """

    buf: np.ndarray
    starts: np.ndarray
    ends: np.ndarray
    align: np.ndarray | None = None
    origin: int = 0  # caller's text offset that ``align`` values are relative to (Metaspace "first")

    def derive(self, buf, starts, ends, align) -> "Pieces":
        """New spans (and possibly a new buffer) of the same text: the origin carries over."""
        return Pieces(buf, starts, ends, align, self.origin)

    @classmethod
    def whole(cls, buf: np.ndarray, align: np.ndarray | None = None) -> "Pieces":
        return cls(buf, np.zeros(1, np.int64), np.full(1, buf.shape[0], np.int64), align)


# --------------------------------------------------------------------------------------------------
# Split behaviours
# --------------------------------------------------------------------------------------------------

BEHAVIORS = {"Removed": 0, "Isolated": 1, "MergedWithPrevious": 2, "MergedWithNext": 3, "Contiguous": 4}


class RegexSplitter:
    """Finds regex matches in UTF-8 buffers.

    Uses tokjit's numba regex engine (:mod:`tokjit.regex`) with the anchor semantics of the
    reference engine named by ``syntax`` (``"onig"``: HF tokenizers, ``"rust"``: tiktoken,
    ``"python"``: the ``regex`` module). A pattern it cannot compile is refused
    (:class:`~tokjit.errors.UnsupportedComponentError`) when the reference is Oniguruma or
    fancy-regex: the ``regex`` module reads some of those constructs differently (``\\h`` is a hex
    digit to Oniguruma and horizontal space to ``regex``; ``&&``, ``\\R``, ``\\N``, POSIX classes and
    ``\\X`` differ too), so running it there would give other ids without saying so. Under
    "python" (llama.cpp's translated patterns, whose reference the ``regex`` module stands in for)
    it runs on the ``regex`` module instead, slower, with a warning when ``warn``.
    """

    def __init__(self, pattern: str, *, syntax: str = "onig", warn: bool = True):
        from tokjit.regex.compiler import UnsupportedPatternError
        from tokjit.regex.compiled import CompiledRegex

        self.pattern = pattern
        self.compiled = None
        try:
            self.compiled = CompiledRegex(pattern, syntax=syntax)
        except UnsupportedPatternError as exc:
            if syntax != "python":
                raise UnsupportedComponentError(
                    f"split pattern {pattern!r} uses {exc}: tokjit's regex engine does not support it, and "
                    f"the `regex` module may read it differently from the reference engine") from None
            if warn:
                warnings.warn(f"tokjit: pattern {pattern!r} uses {exc}; using the slower `regex` "
                              "module for it", RuntimeWarning, stacklevel=3)
        if self.compiled is None:
            import regex
            self.py_regex = regex.compile(pattern)

    def find(self, buf: np.ndarray, start: int, end: int) -> tuple[np.ndarray, np.ndarray]:
        """Byte spans of successive matches inside ``buf[start:end]``."""
        if self.compiled is not None:
            return self.compiled.find_spans(buf, start, end)
        text = buf[start:end].tobytes().decode("utf-8")
        spans = [m.span() for m in self.py_regex.finditer(text)]
        if not spans:
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        arr = np.asarray(spans, dtype=np.int64)
        char_starts = np.flatnonzero((buf[start:end] & 0xC0) != 0x80).astype(np.int64)
        char_starts = np.append(char_starts, end - start) + start
        return char_starts[arr[:, 0]], char_starts[arr[:, 1]]


def split_pieces(pieces: Pieces, find: Callable, behavior: int, invert: bool) -> Pieces:
    out_s: list[np.ndarray] = []
    out_e: list[np.ndarray] = []
    for s, e in zip(pieces.starts.tolist(), pieces.ends.tolist()):
        ms, me = find(pieces.buf, s, e)
        cap = 2 * ms.shape[0] + 1
        os_ = np.empty(cap, np.int64)
        oe = np.empty(cap, np.int64)
        n = apply_split_behavior(np.int64(s), np.int64(e), ms, me, np.int64(ms.shape[0]),
                                 np.int64(behavior), invert, os_, oe, np.int64(0))
        out_s.append(os_[:n])
        out_e.append(oe[:n])
    if len(out_s) == 1:
        return pieces.derive(pieces.buf, out_s[0], out_e[0], pieces.align)
    return pieces.derive(pieces.buf, np.concatenate(out_s) if out_s else np.zeros(0, np.int64),
                         np.concatenate(out_e) if out_e else np.zeros(0, np.int64), pieces.align)


def find_literal(needle: bytes):
    pattern = np.frombuffer(needle, np.uint8)

    def find(buf, start, end):
        hay = buf[start:end].tobytes()
        out = []
        pos = hay.find(needle)
        while pos >= 0 and needle:
            out.append(pos)
            pos = hay.find(needle, pos + len(needle))
        st = np.asarray(out, dtype=np.int64) + start
        return st, st + pattern.shape[0]
    return find


class RegexSplitStep:
    """A pre-tokenizer that splits each piece at the matches of ``find`` under ``behavior`` and
    ``invert`` (HF's split behaviours): Split, and the character-class splits Digits, Punctuation and
    CharDelimiterSplit. The fused BPE path and a Sequence after ByteLevel read those three fields."""

    find: Callable
    behavior: int
    invert: bool

    def __call__(self, pieces: Pieces) -> Pieces:
        return split_pieces(pieces, self.find, self.behavior, self.invert)


class Split(RegexSplitStep):
    def __init__(self, config: dict):
        pattern = config["pattern"]
        behavior = config.get("behavior", "Isolated")
        if behavior not in BEHAVIORS:
            raise UnsupportedComponentError(f"Split behavior {behavior!r}")
        self.behavior = BEHAVIORS[behavior]
        self.invert = bool(config.get("invert", False))
        self.literal = None  # the String pattern, when it is one
        if "Regex" in pattern:
            # "syntax" is tokjit's own key: loaders of non-HF formats name their reference engine
            self.splitter = RegexSplitter(pattern["Regex"], syntax=config.get("syntax", "onig"))
            self.find = self.splitter.find
        elif "String" in pattern and pattern["String"] == "":
            # HF runs a String pattern as the escaped regex, and the empty regex matches between
            # every two characters: each character becomes a piece under Isolated
            self.splitter = RegexSplitter("", syntax=config.get("syntax", "onig"))
            self.find = self.splitter.find
        elif "String" in pattern:
            self.splitter = None
            self.literal = pattern["String"]
            self.find = find_literal(pattern["String"].encode("utf-8"))
        else:
            raise UnsupportedComponentError(f"Split pattern {pattern!r}")


GPT2_PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""


def prepend_to_pieces(pieces: Pieces, prefix: bytes, only_if_missing: bool) -> Pieces:
    """Insert ``prefix`` in front of every piece (that does not already start with it)."""
    buf = pieces.buf
    chunks: list[bytes] = []
    aligns: list[np.ndarray] = []
    starts, ends = [], []
    pos = 0
    base = pieces.align if pieces.align is not None else np.arange(buf.shape[0] + 1, dtype=np.int64)
    plen = len(prefix)
    raw = buf.tobytes()
    for s, e in zip(pieces.starts.tolist(), pieces.ends.tolist()):
        add = not (only_if_missing and raw[s:s + plen] == prefix)
        starts.append(pos)
        if add:
            chunks.append(prefix)
            aligns.append(np.full(plen, base[s], np.int64))
            pos += plen
        chunks.append(raw[s:e])
        aligns.append(base[s:e])
        pos += e - s
        ends.append(pos)
    new_buf = np.frombuffer(b"".join(chunks), np.uint8)
    aligns.append(base[-1:] if not ends else np.asarray([base[pieces.ends[-1]]], np.int64))
    return pieces.derive(new_buf, np.asarray(starts, np.int64), np.asarray(ends, np.int64),
                         np.concatenate(aligns))


class ByteLevel:
    """HF ``ByteLevel``: optional space prefix and GPT-2 regex split; the byte -> unicode mapping
    itself is a no-op here because kernels work on raw bytes."""

    def __init__(self, config: dict):
        self.add_prefix_space = bool(config.get("add_prefix_space", True))
        self.splitter = RegexSplitter(GPT2_PATTERN) if config.get("use_regex", True) else None
        self.split = self.splitter.find if self.splitter is not None else None

    def __call__(self, pieces: Pieces) -> Pieces:
        if self.add_prefix_space:
            pieces = prepend_to_pieces(pieces, b" ", only_if_missing=True)
        if self.split is not None:
            pieces = split_pieces(pieces, self.split, BEHAVIORS["Isolated"], False)
        return pieces


class Sequence:
    """HF ``Sequence``: each pre-tokenizer splits the pieces of the one before. After a ``ByteLevel``
    step HF's text is no longer the input's: every byte is one printable character of GPT-2's byte
    alphabet (``ĠHello``; the bytes E3 83 BC of 'ー' are 'ãĥ¼'), and the splits that follow match
    those characters, even inside a character of the input (a Digits step after it splits '¼', byte
    BC, off 'ー', as Falcon's tokenizer.json does). Those splits run on that text here too
    (:func:`byte_level_view`); a step after ``ByteLevel`` that is no regex split is refused."""

    def __init__(self, config: dict):
        self.steps = [build_pre_tokenizer(c) for c in config["pretokenizers"]]
        self.after_byte_level = len(self.steps)
        for k, step in enumerate(self.steps):
            if isinstance(step, ByteLevel):
                self.after_byte_level = k + 1
                break
        for step in self.steps[self.after_byte_level:]:
            if not isinstance(step, RegexSplitStep):
                raise UnsupportedComponentError(
                    f"pre-tokenizer {type(step).__name__} after a ByteLevel step in a Sequence (it would read "
                    f"GPT-2's byte alphabet): only regex splits are supported there")

    def __call__(self, pieces: Pieces) -> Pieces:
        for step in self.steps[:self.after_byte_level]:
            pieces = step(pieces)
        later = self.steps[self.after_byte_level:]
        if later:
            view, view_of_orig, orig_of_view = byte_level_view(pieces.buf)

            def on_view(find):
                def find_on_view(buf, start, end):
                    ms, me = find(view, view_of_orig[start], view_of_orig[end])
                    return orig_of_view[ms], orig_of_view[me]
                return find_on_view

            for step in later:
                pieces = split_pieces(pieces, on_view(step.find), step.behavior, step.invert)
        return pieces


def _byte_level_chars():
    """UTF-8 of each byte's character in GPT-2's byte alphabet: (first byte, second byte, length)."""
    table = bytes_to_unicode()
    first, second, length = np.zeros(256, np.uint8), np.zeros(256, np.uint8), np.zeros(256, np.int64)
    for b in range(256):
        utf8 = table[b].encode("utf-8")
        first[b], length[b] = utf8[0], len(utf8)
        second[b] = utf8[1] if len(utf8) > 1 else 0
    return first, second, length


_BYTE_LEVEL_CHARS = _byte_level_chars()


def byte_level_view(buf: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The UTF-8 of the text HF's later pre-tokenizers read after ``ByteLevel`` (each byte of ``buf``
    as its character of GPT-2's byte alphabet, one or two bytes), the view offset of each offset of
    ``buf`` (and of its end), and the offset in ``buf`` of each view offset (and of its end)."""
    first, second, length = _BYTE_LEVEL_CHARS
    lengths = length[buf]
    view_of_orig = np.zeros(buf.shape[0] + 1, np.int64)
    np.cumsum(lengths, out=view_of_orig[1:])
    view = np.empty(int(view_of_orig[-1]), np.uint8)
    view[view_of_orig[:-1]] = first[buf]
    two = lengths == 2
    view[view_of_orig[:-1][two] + 1] = second[buf][two]
    orig_of_view = np.append(np.repeat(np.arange(buf.shape[0], dtype=np.int64), lengths), buf.shape[0])
    return view, view_of_orig, orig_of_view




# --------------------------------------------------------------------------------------------------
# SentencePiece-style pre-tokenizers
# --------------------------------------------------------------------------------------------------



class Metaspace:
    """HF ``Metaspace``: spaces become ``replacement`` (U+2581), which is prepended per
    ``prepend_scheme`` (``always``: every piece; ``first``: only the piece at the start of the
    original text; ``never``; old files: ``add_prefix_space``), then pieces split before each
    replacement character when ``split`` (default true)."""

    def __init__(self, config: dict):
        from tokjit.pipeline.decoders import metaspace_prepend_scheme
        self.rep = np.frombuffer(config.get("replacement", "\u2581").encode("utf-8"), np.uint8).copy()
        if self.rep.shape[0] == 0:
            raise UnsupportedComponentError("Metaspace replacement must not be empty")
        self.scheme = metaspace_prepend_scheme(config)
        self.split = bool(config.get("split", True))

    def __call__(self, pieces: Pieces) -> Pieces:
        buf = pieces.buf
        n = pieces.starts.shape[0]
        align = pieces.align if pieces.align is not None else np.arange(buf.shape[0] + 1, dtype=np.int64)
        if self.scheme == "always":
            prepend = np.ones(n, np.bool_)
        else:
            prepend = np.zeros(n, np.bool_)
            if self.scheme == "first" and n:
                # HF: only a piece whose original offset is 0 (after normalization, so text the
                # normalizer removed at the start, or an added token there, means no prefix)
                prepend[:] = (pieces.origin + align[pieces.starts]) == 0
        r = self.rep.shape[0]
        total = int(buf.shape[0])
        cap = r * (total + n) + 1
        out_buf = np.empty(cap, np.uint8)
        out_align = np.empty(cap + 1, np.int64)
        out_s = np.empty(total + n + 1, np.int64)
        out_e = np.empty(total + n + 1, np.int64)
        m, k = metaspace_pieces(buf, align, pieces.starts, pieces.ends, np.int64(n), self.rep, prepend,
                                self.split, out_buf, out_align, out_s, out_e)
        out_align[m] = align[pieces.ends[n - 1]] if n else align[-1]
        return pieces.derive(out_buf[:m], out_s[:k], out_e[:k], out_align[:m + 1])


# WhitespaceSplit (HF semantics, as a kernel) is registered by tokjit.models.wordpiece


# --------------------------------------------------------------------------------------------------
# Character-class pre-tokenizers (HF Digits, Punctuation, CharDelimiterSplit), as regex splits
# --------------------------------------------------------------------------------------------------

# HF ``is_punc``: ASCII punctuation or any Unicode P* character
PUNCTUATION_CLASS = r"[\p{P}!-/:-@\[-`{-~]"


class Digits(RegexSplitStep):
    """HF ``Digits``: numeric characters (Rust ``char::is_numeric``: Nd, Nl, No) isolated, one by one
    with ``individual_digits`` or as contiguous runs otherwise."""

    def __init__(self, config: dict):
        pattern = r"\p{N}" if config.get("individual_digits", False) else r"\p{N}+"
        self.splitter = RegexSplitter(pattern)
        self.find = self.splitter.find
        self.behavior, self.invert = BEHAVIORS["Isolated"], False


class Punctuation(RegexSplitStep):
    """HF ``Punctuation``: every punctuation character is a delimiter handled by ``behavior``."""

    def __init__(self, config: dict):
        behavior = config.get("behavior", "Isolated")
        if behavior not in BEHAVIORS:
            raise UnsupportedComponentError(f"Punctuation behavior {behavior!r}")
        self.behavior = BEHAVIORS[behavior]
        self.invert = False
        self.splitter = RegexSplitter(PUNCTUATION_CLASS)
        self.find = self.splitter.find


class CharDelimiterSplit(RegexSplitStep):
    """HF ``CharDelimiterSplit``: split on one character, which is removed."""

    def __init__(self, config: dict):
        delimiter = config["delimiter"]
        if not isinstance(delimiter, str) or len(delimiter) != 1:
            raise UnsupportedComponentError(f"CharDelimiterSplit delimiter {delimiter!r}")
        self.find = find_literal(delimiter.encode("utf-8"))
        self.behavior, self.invert = BEHAVIORS["Removed"], False




# --------------------------------------------------------------------------------------------------
# UnicodeScripts
# --------------------------------------------------------------------------------------------------

_SCRIPTS_DATA = os.path.join(os.path.dirname(os.path.dirname(__file__)), "data", "unicode_scripts.npz")


@functools.lru_cache(maxsize=1)
def unicode_scripts_table() -> np.ndarray:
    """Script index of every code point as HF's UnicodeScripts pre-tokenizer compares them: its
    Unicode 9.0 table (``data/unicode_scripts.npz``, ``scripts/gen_unicode_scripts.py``) with its
    adjustments, those of SentencePiece's piece validity check: Hiragana, Katakana and U+30FC (the
    prolonged sound mark, Common) count as Han, and the space as Any."""
    with np.load(_SCRIPTS_DATA) as data:
        starts, scripts, names = data["starts"], data["scripts"], data["names"].tolist()
    lengths = np.diff(np.append(starts.astype(np.int64), 0x110000))
    table = np.repeat(scripts, lengths)
    han = names.index("Han")
    table[np.isin(table, [names.index("Hiragana"), names.index("Katakana")])] = han
    table[0x30FC] = han
    table[0x20] = SCRIPT_ANY
    return table


class UnicodeScripts:
    """HF ``UnicodeScripts``: each piece cut where the script changes (:func:`~tokjit.kernels.split.
    script_pieces`); characters of no script in HF's table (spaces, code points assigned after
    Unicode 9.0) stay with the piece they are in."""

    def __init__(self, config: dict):
        self.script_of = unicode_scripts_table()

    def __call__(self, pieces: Pieces) -> Pieces:
        n = pieces.starts.shape[0]
        cap = int((pieces.ends - pieces.starts).sum()) + 1
        out_s = np.empty(cap, np.int64)
        out_e = np.empty(cap, np.int64)
        k = script_pieces(pieces.buf, pieces.starts, pieces.ends, np.int64(n), self.script_of, out_s, out_e)
        return pieces.derive(pieces.buf, out_s[:k], out_e[:k], pieces.align)


class FixedLength:
    """HF ``FixedLength``: each piece cut into pieces of ``length`` characters (the last shorter)."""

    def __init__(self, config: dict):
        length = config.get("length", 5)
        if isinstance(length, bool) or not isinstance(length, int) or length < 1:
            raise UnsupportedComponentError(f"FixedLength length {length!r}")
        self.length = length

    def __call__(self, pieces: Pieces) -> Pieces:
        starts, ends = [], []
        is_start = (pieces.buf & 0xC0) != 0x80
        for s, e in zip(pieces.starts.tolist(), pieces.ends.tolist()):
            chars = np.flatnonzero(is_start[s:e]) + s
            cuts = chars[::self.length]
            starts.append(cuts)
            ends.append(np.append(cuts[1:], e))
        if not starts:
            return pieces
        return pieces.derive(pieces.buf, np.concatenate(starts).astype(np.int64),
                             np.concatenate(ends).astype(np.int64), pieces.align)
