"""Normalizers: text -> normalized text, with an alignment back to the caller's bytes.

A normalizer maps ``(buf, align)`` to a new ``(buf, align)``: ``buf`` is UTF-8 (uint8) and ``align``
(int64, ``len(buf) + 1``) gives, for every byte, the offset in the original text it came from
(``None`` = identity). Components are built from HF-style dicts by :func:`build_normalizer`.
"""

from __future__ import annotations

import unicodedata
from typing import Callable

import numpy as np
from numba import njit

from tokjit.pipeline.registry import build_normalizer
from tokjit.errors import UnsupportedComponentError



def identity_align(buf: np.ndarray, align: np.ndarray | None) -> np.ndarray:
    return np.arange(buf.shape[0] + 1, dtype=np.int64) if align is None else align


def char_starts(buf: np.ndarray) -> np.ndarray:
    """Byte offset of every UTF-8 character start in ``buf``."""
    return np.flatnonzero((buf & 0xC0) != 0x80).astype(np.int64)


def map_chars(buf: np.ndarray, align: np.ndarray | None, fn: Callable[[str], str]):
    """Apply a per-character mapping ``fn`` (str -> str), keeping each output character aligned to
    the input character it came from. Used by the Python-level normalizers."""
    text = buf.tobytes().decode("utf-8")
    base = identity_align(buf, align)
    starts = char_starts(buf)
    out: list[bytes] = []
    out_align: list[int] = []
    for ch, pos in zip(text, starts.tolist()):
        rep = fn(ch).encode("utf-8")
        out.append(rep)
        out_align.extend([int(base[pos])] * len(rep))
    out_align.append(int(base[-1]))
    return np.frombuffer(b"".join(out), np.uint8), np.asarray(out_align, np.int64)


def map_whole(buf: np.ndarray, align: np.ndarray | None, fn: Callable[[str], str], form: str | None = None):
    """Apply a whole-string transform (unicode normal forms). Unchanged text keeps its alignment;
    otherwise, when the characters transformed one by one give the same text, each output byte is
    aligned to the character it came from; else, for a Unicode normal ``form``, to the start of its
    chunk (:func:`_normalize_in_chunks`), and else all of them to the start."""
    text = buf.tobytes().decode("utf-8")
    new = fn(text)
    if new == text:
        return buf, align
    base = identity_align(buf, align)
    out = np.frombuffer(new.encode("utf-8"), np.uint8)
    out_align = np.full(out.shape[0] + 1, base[-1], np.int64)
    # one call of fn per distinct character, the rest in numpy (a Python step per character made
    # the few non-NFC lines of Arabic text cost more than encoding all the others)
    distinct, which = np.unique(np.frombuffer(text.encode("utf-32-le"), np.uint32), return_inverse=True)
    reps = [fn(chr(c)).encode("utf-8") for c in distinct.tolist()]
    rep_len = np.fromiter(map(len, reps), np.int64, count=len(reps))
    lengths = rep_len[which]
    if int(lengths.sum()) == out.shape[0]:
        padded = np.zeros((len(reps), max(int(rep_len.max()), 1)), np.uint8)
        for k, rep in enumerate(reps):
            padded[k, :len(rep)] = np.frombuffer(rep, np.uint8)
        used = np.arange(padded.shape[1]) < rep_len[:, None]
        if np.array_equal(padded[which][used[which]], out):
            out_align[:-1] = np.repeat(base[char_starts(buf)], lengths)
            return out, out_align
    if form is not None:
        chunked = _normalize_in_chunks(buf, base, new, form, distinct, which)
        if chunked is not None:
            return out, chunked
    out_align[:-1] = base[0]
    return out, out_align


def _normalize_in_chunks(buf, base, new: str, form: str, distinct, which):
    """``new``'s alignment when the characters of ``buf`` do not normalize one by one (composition,
    reordering): the text is cut before every character that is a boundary for ``form`` (combining
    class 0 and in the form on its own: nothing before it can compose with it or move past it), the
    chunks that are not one such character are normalized alone, and each output byte aligns to its
    chunk's start (HF aligns a composed character to the characters it was made of, so a piece starts
    where its chunk does). None when the chunks do not give ``new``. O(characters), Python work per
    changed chunk only (and the form's quick-check table, built once a process, ~0.3 s)."""
    from tokjit.kernels.normal_form import quick_check_table
    inert = (quick_check_table(form)[distinct] == 0)[which]  # quick check Yes, combining class 0
    n = inert.shape[0]
    bounds = np.flatnonzero(inert)
    if not bounds.shape[0] or bounds[0] != 0:
        bounds = np.concatenate(([0], bounds))
    bounds = np.append(bounds, n)
    lengths = np.diff(bounds)
    changed = np.flatnonzero((lengths > 1) | ~inert[bounds[:-1]])
    starts = char_starts(buf)
    byte_at = np.append(starts, buf.shape[0])  # character index -> byte offset
    out_parts, align_parts = [], []
    done = 0  # characters copied or normalized so far
    for k in changed.tolist():
        a, b = int(bounds[k]), int(bounds[k + 1])
        if a > done:
            out_parts.append(buf[byte_at[done]:byte_at[a]])
            align_parts.append(base[byte_at[done]:byte_at[a]])
        chunk = unicodedata.normalize(form, buf[byte_at[a]:byte_at[b]].tobytes().decode("utf-8")).encode("utf-8")
        out_parts.append(np.frombuffer(chunk, np.uint8))
        align_parts.append(np.full(len(chunk), base[byte_at[a]], np.int64))
        done = b
    out_parts.append(buf[byte_at[done]:])
    align_parts.append(base[byte_at[done]:buf.shape[0]])
    if b"".join(part.tobytes() for part in out_parts) != new.encode("utf-8"):
        return None
    return np.concatenate(align_parts + [base[-1:]]).astype(np.int64)


class Lowercase:
    def __init__(self, config: dict):
        pass

    def __call__(self, buf, align):
        return map_chars(buf, align, str.lower)


class UnicodeForm:
    def __init__(self, config: dict):
        self.form = config["type"]

    def __call__(self, buf, align):
        return map_whole(buf, align, lambda s: unicodedata.normalize(self.form, s), self.form)


class Replace:
    def __init__(self, config: dict):
        pattern = config["pattern"]
        self.content = config["content"]
        if "String" in pattern:
            self.needle = pattern["String"]
            self.regex = None
            self._needle_bytes = np.frombuffer(self.needle.encode("utf-8"), np.uint8).copy()
            self._content_bytes = np.frombuffer(self.content.encode("utf-8"), np.uint8).copy()
        elif "Regex" in pattern:
            # tokjit's engine with Oniguruma's reading of the pattern (HF's), as a Split's
            from tokjit.pipeline.pre_tokenizers import RegexSplitter
            self.regex = RegexSplitter(pattern["Regex"])
            self.needle = None
        else:
            raise UnsupportedComponentError(f"Replace pattern {pattern!r}")

    def __call__(self, buf, align):
        if self.needle is not None:
            if not self.needle:
                return buf, align
            return replace_literal(buf, align, self._needle_bytes, self._content_bytes)
        starts, ends = self.regex.find(buf, 0, buf.shape[0])
        if starts.shape[0] == 0:
            return buf, align
        return replace_spans(buf, align, zip(starts.tolist(), ends.tolist()), self.content)


@njit(cache=True, nogil=True)
def replace_literal_kernel(buf, align, n, needle, content, out, out_align):
    """Replace non-overlapping occurrences of ``needle`` (leftmost first) by ``content``; replacement
    bytes align to the match start. O(n * len(needle)). Capacity: n * max(1, len(content)) + 1.
    Returns the output length, or -1 when nothing matched."""
    k = needle.shape[0]
    c = content.shape[0]
    m = 0
    i = 0
    hits = 0
    first = needle[0]
    while i < n:
        if buf[i] == first and i + k <= n:
            same = True
            for t in range(1, k):
                if buf[i + t] != needle[t]:
                    same = False
                    break
            if same:
                for t in range(c):
                    out[m] = content[t]
                    out_align[m] = align[i]
                    m += 1
                i += k
                hits += 1
                continue
        out[m] = buf[i]
        out_align[m] = align[i]
        m += 1
        i += 1
    out_align[m] = align[n]
    return m if hits else -1


def replace_literal(buf, align, needle: np.ndarray, content: np.ndarray):
    n = buf.shape[0]
    if n == 0:
        return buf, align
    base = identity_align(buf, align)
    cap = n * max(1, content.shape[0]) + 1
    out = np.empty(cap, np.uint8)
    out_align = np.empty(cap + 1, np.int64)
    m = replace_literal_kernel(buf, base, np.int64(n), needle, content, out, out_align)
    if m < 0:
        return buf, align
    return out[:m], out_align[:m + 1]


def replace_spans(buf, align, spans, content: str):
    """Replace byte spans of ``buf`` (on character boundaries, in order) by ``content``. Replacement
    bytes align to the span's last character, as HF's ``NormalizedString::replace`` does (it drops
    the matched characters first and aligns inserted ones to the previous): a collapsed run of
    spaces maps to its final space."""
    base = identity_align(buf, align)
    starts = char_starts(buf)
    raw = buf.tobytes()
    rep = content.encode("utf-8")
    out: list[bytes] = []
    out_align: list[np.ndarray] = []
    prev = 0
    for bs, be in spans:
        out.append(raw[prev:bs])
        out_align.append(base[prev:bs])
        out.append(rep)
        last = int(starts[np.searchsorted(starts, be) - 1]) if be > bs else bs
        out_align.append(np.full(len(rep), base[last], np.int64))
        prev = be
    out.append(raw[prev:])
    out_align.append(base[prev:])
    return np.frombuffer(b"".join(out), np.uint8), np.concatenate(out_align)


class Prepend:
    def __init__(self, config: dict):
        self.prefix = config["prepend"].encode("utf-8")

    def __call__(self, buf, align):
        if buf.shape[0] == 0:
            return buf, align
        base = identity_align(buf, align)
        out = np.concatenate([np.frombuffer(self.prefix, np.uint8), buf])
        return out, np.concatenate([np.full(len(self.prefix), base[0], np.int64), base])


WHITE_SPACE = "\t\n\x0b\x0c\r \x85\xa0\u1680" + "".join(map(chr, range(0x2000, 0x200B))) + \
    "\u2028\u2029\u202f\u205f\u3000"


class Strip:
    def __init__(self, config: dict):
        self.left = bool(config.get("strip_left", True))
        self.right = bool(config.get("strip_right", True))

    def __call__(self, buf, align):
        text = buf.tobytes().decode("utf-8")
        # HF strips Rust `char::is_whitespace` (Unicode White_Space), not Python's wider isspace()
        stripped_left = text.lstrip(WHITE_SPACE) if self.left else text
        stripped = stripped_left.rstrip(WHITE_SPACE) if self.right else stripped_left
        if stripped == text:
            return buf, align
        base = identity_align(buf, align)
        lcut = len(text[:len(text) - len(stripped_left)].encode("utf-8"))
        n = len(stripped.encode("utf-8"))
        return buf[lcut:lcut + n], base[lcut:lcut + n + 1]


class Sequence:
    def __init__(self, config: dict):
        self.steps = [build_normalizer(c) for c in config["normalizers"]]

    def __call__(self, buf, align):
        for step in self.steps:
            buf, align = step(buf, align)
        return buf, align


def without_identity(normalizer):
    """``None`` for a normalizer that changes nothing (a Sequence of no steps, or of such Sequences:
    DeepSeek-V3's tokenizer.json has one), else ``normalizer``: the fused paths take a tokenizer
    without a normalizer, and would refuse it as an unknown normalizer otherwise."""
    if isinstance(normalizer, Sequence) and all(without_identity(step) is None for step in normalizer.steps):
        return None
    return normalizer




# HF ``Nmt`` (SentencePiece's nmt_nfkc without the NFKC): ASCII and C1 controls other than the
# whitespace ones are removed, and the rest of what counts as a space becomes U+0020
_NMT = str.maketrans({**{chr(c): None for c in [*range(0x01, 0x09), 0x0B, *range(0x0E, 0x20), 0x7F, 0x8F, 0x9F]},
                      **{chr(c): " " for c in [0x09, 0x0A, 0x0C, 0x0D, 0x1680, *range(0x200B, 0x2010), 0x2028,
                                                0x2029, 0x2581, 0xFEFF, 0xFFFD]}})


class Nmt:
    def __init__(self, config: dict):
        pass

    def __call__(self, buf, align):
        text = buf.tobytes().decode("utf-8")
        if text.translate(_NMT) == text:
            return buf, align
        return map_chars(buf, align, lambda ch: ch.translate(_NMT))


class StripAccents:
    """HF ``StripAccents``: drop combining marks (Mn, Mc, Me, as the unicode-normalization crate's
    ``is_combining_mark``); meaningful after an NFD/NFKD step."""

    def __init__(self, config: dict):
        pass

    def __call__(self, buf, align):
        return map_chars(buf, align, lambda ch: "" if unicodedata.category(ch)[0] == "M" else ch)


