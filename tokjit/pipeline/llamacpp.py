"""llama.cpp's own text splitting, for GGUF vocabularies.

llama.cpp does not run the HF pre-tokenizer regexes the way HF does (``src/unicode.cpp``,
``unicode_regex_split``); the differences change ids, so they are mirrored here:

* the regexes of a ``tokenizer.ggml.pre`` type are applied in sequence, each one splitting every piece
  of the previous one; matches *and* the text between them become pieces (nothing is dropped);
* the GPT-2 and Llama 3 patterns are replaced by hand-written splitters (``custom_split`` below), and
  so are Kimi K2's list (``kimi_k2_split``) and the afmoe / tiny_aya digit patterns
  (``digit_group_split``);
* any other pattern runs in ``std::regex``. A pattern that names a Unicode category (``\\p{L}`` ...) runs
  on a *collapsed* copy of the text where each non-ASCII code point is one placeholder per category
  (and non-ASCII whitespace is ``\\v``); a pattern without categories runs on the code points with
  non-ASCII whitespace replaced by ``\\v``. In both, ``\\s \\d \\w \\b`` are ASCII-only. We build the
  same copy (:func:`build_view`), translate the pattern to one with identical meaning for our engine
  (:func:`translate_pattern`), match, and map the spans back to the original bytes;
* code point classes come from Unicode 15.1 (``data/llamacpp_unicode.npz``, see
  ``scripts/gen_llamacpp_unicode.py``), like llama.cpp's generated tables.

Also here: llama.cpp's SentencePiece-BPE (``llama``) normaliser and model, its WordPiece (``bert``)
preprocessing and model, and its Unigram (``t5``) normaliser, each registered under a ``LlamaCpp*``
component type.
"""

from __future__ import annotations

import functools
import os

import numpy as np
from numba import njit

from tokjit.kernels.added_tokens import _trie_child
from tokjit.errors import InputError, UnsupportedComponentError
from tokjit.load.gguf_pretypes import custom_splitter
from tokjit.kernels.regex_vm import find_matches
from tokjit.kernels.split import apply_split_behavior
from tokjit.kernels.utf8 import put_utf8
from tokjit.pipeline.pre_tokenizers import BEHAVIORS, Pieces, RegexSplitter
from tokjit.kernels.llamacpp_split import (CAT_MASK, CONTROL, LETTER, MARK, NUMBER, PLACEHOLDER_OF_CATEGORY, PUNCT,
                                           SYMBOL, UNDEF, WS_BIT, _ascii_lower, _flag_at, _is_cat, _is_other, _is_ws,
                                           build_view, custom_split, decode_utf8, isolate_view_matches,
                                           number_chunks)


_DATA = os.path.join(os.path.dirname(os.path.dirname(__file__)), "data", "llamacpp_unicode.npz")


@functools.lru_cache(maxsize=None)
def _tables() -> dict:
    with np.load(_DATA) as z:
        d = {k: z[k] for k in z.files}
    starts = d["flag_starts"].astype(np.int64)
    lengths = np.diff(np.append(starts, 0x110000))
    flags = np.repeat(d["flag_values"], lengths).astype(np.uint8)
    flags.setflags(write=False)
    lower = np.arange(0x110000, dtype=np.int32)
    lower[d["lower_from"]] = d["lower_to"]
    nfd = np.arange(0x110000, dtype=np.int32)
    nfd[d["nfd_from"]] = d["nfd_to"]
    return {"flags": flags, "lower": lower, "nfd": nfd}


def cpt_flags() -> np.ndarray:
    """uint8 per code point: category code | WS_BIT (llama.cpp's ``unicode_cpt_flags``, Unicode 15.1)."""
    return _tables()["flags"]


# --------------------------------------------------------------------------------------------------
# std::regex paths: a per-code-point view of the text, and the pattern translated to match it
# --------------------------------------------------------------------------------------------------

# placeholders of llama.cpp's collapsed text (k_ucat_cpt), by category
_PLACEHOLDER = np.array(PLACEHOLDER_OF_CATEGORY, np.int64)


# llama.cpp's k_ucat_map: the ASCII members written next to each placeholder
_UCAT = {
    r"\p{N}": (NUMBER, "0-9"),
    r"\p{L}": (LETTER, "A-Za-z"),
    r"\p{P}": (PUNCT, r"!-#%-*,-/:-;?-@\[-\]_\{\}"),
    r"\p{M}": (MARK, ""),
    r"\p{S}": (SYMBOL, r"\$\+<->^`\|"),
    r"\p{Lu}": (LETTER, "A-Za-z"),
    r"\p{Ll}": (LETTER, "A-Za-z"),
    r"\p{Lt}": (LETTER, "A-Za-z"),
    r"\p{Lm}": (LETTER, "A-Za-z"),
    r"\p{Lo}": (LETTER, "A-Za-z"),
}

_SPACE_SET = r"\t\n\x0b\x0c\r "
_ASCII_CLASSES = {"s": _SPACE_SET, "d": "0-9", "w": "A-Za-z0-9_"}
_WORD = "[A-Za-z0-9_]"


def uses_collapse(pattern: str) -> bool:
    """llama.cpp runs a pattern on the collapsed text iff it contains one of these substrings."""
    return any(k in pattern for k in _UCAT)


def _collapse_categories(pattern: str) -> str:
    """llama.cpp's textual rewrite of ``\\p{..}`` (``unicode_regex_split``), placeholders as ``\\xDn``."""
    if any(ord(c) >= 128 for c in pattern):
        raise UnsupportedComponentError(
            f"regex {pattern!r} mixes Unicode categories and non-ASCII characters; llama.cpp rejects it")
    out = []
    inside = False
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if c == "[" and (i == 0 or pattern[i - 1] != "\\"):
            out.append("[")
            inside = True
            i += 1
            continue
        if inside and c == "]" and pattern[i - 1] != "\\":
            out.append("]")
            inside = False
            i += 1
            continue
        if pattern.startswith("\\p{", i):
            close = pattern.find("}", i + 3)
            if close >= 0 and close <= i + 10 and pattern[i:close + 1] in _UCAT:
                cat, members = _UCAT[pattern[i:close + 1]]
                body = "\\x%02X" % int(_PLACEHOLDER[cat]) + members
                out.append(body if inside else "[" + body + "]")
                i = close + 1
                continue
        out.append(c)
        i += 1
    return "".join(out)


def translate_pattern(pattern: str) -> tuple[str, bool]:
    """(pattern for tokjit's engine / the ``regex`` module, runs on the collapsed view?).

    ECMAScript's ``\\s \\d \\w \\b`` are ASCII-only in llama.cpp's std::regex use (non-ASCII
    whitespace has already become ``\\v`` in the view); ``.`` stops at CR/LF/U+2028/U+2029 and ``$`` is
    the end of the piece. Everything is spelled out so the engine's Unicode tables never matter.
    """
    collapse = uses_collapse(pattern)
    src = _collapse_categories(pattern) if collapse else pattern
    if "\\p{" in src or "\\P{" in src:
        raise UnsupportedComponentError(f"regex {pattern!r} uses a Unicode property llama.cpp does not collapse")
    out = []
    inside = False
    i = 0
    while i < len(src):
        c = src[i]
        if c == "\\" and i + 1 < len(src):
            e = src[i + 1]
            if e in "sdw":
                out.append(_ASCII_CLASSES[e] if inside else "[" + _ASCII_CLASSES[e] + "]")
            elif e in "SDW":
                if inside:
                    raise UnsupportedComponentError(f"regex {pattern!r}: negated class escape inside []")
                out.append("[^" + _ASCII_CLASSES[e.lower()] + "]")
            elif e == "b" and not inside:
                out.append(f"(?:(?<={_WORD})(?!{_WORD})|(?<!{_WORD})(?={_WORD}))")
            elif e == "B" and not inside:
                out.append(f"(?:(?<={_WORD})(?={_WORD})|(?<!{_WORD})(?!{_WORD}))")
            else:
                out.append(src[i:i + 2])
            i += 2
            continue
        if inside:
            if c == "]":
                inside = False
            out.append(c)
        elif c == "[":
            inside = True
            out.append(c)
            if src.startswith("^", i + 1):
                out.append("^")
                i += 1
            if src.startswith("]", i + 1):  # a leading ] is a literal
                out.append("\\]")
                i += 1
        elif c == ".":
            out.append("[^\\n\\r\u2028\u2029]")
        elif c == "$":
            out.append("(?![\\s\\S])")
        elif c == "^":
            out.append("(?<![\\s\\S])")
        else:
            out.append(c)
        i += 1
    return "".join(out), collapse


@njit(cache=True, nogil=True)
def split_pieces_on_view(view, v_of_o, o_of_v, starts, ends, n_pieces, program, step_budget_per_byte, vm_word,
                         m_starts, m_ends, stack, out_starts, out_ends):
    """``unicode_regex_split_stl`` for every piece in one call: the regex runs on the view span of each
    piece alone, and matches plus the gaps between them become pieces (in original byte offsets).
    ``program`` = the compiled regex's (prog, rep_info, cls_ascii, cls_mask, cls_neg, cls_roff, cls_ranges, gc).

    Returns the number of pieces, or a negative ``find_matches`` error code (the caller then retries
    piece by piece with growing buffers / memoization). O(view bytes * regex cost).
    ``m_*`` hold the matches of one piece (capacity = longest view span + 1); ``out_*`` need
    2 * (view bytes) + n_pieces slots.
    """
    prog, rep_info, cls_ascii, cls_mask, cls_neg, cls_roff, cls_ranges, gc = program
    n_out = 0
    params = np.empty(3, np.int64)
    for p in range(n_pieces):
        s = starts[p]
        e = ends[p]
        vs = v_of_o[s]
        ve = v_of_o[e]
        params[0] = 0
        params[1] = step_budget_per_byte * (ve - vs + 1) + 100_000
        params[2] = vm_word
        r = find_matches(view, vs, ve, prog, rep_info, cls_ascii, cls_mask, cls_neg, cls_roff, cls_ranges, gc,
                         params, m_starts, m_ends, stack)
        if r < 0:
            return r
        n_out = isolate_view_matches(s, e, m_starts, m_ends, r, o_of_v, 0, out_starts, out_ends, n_out)
    return n_out


@njit(cache=True, nogil=True)
def digit_group_split(buf, starts, ends, n_pieces, flags, cps, offs, out_starts, out_ends):
    """llama.cpp's ``unicode_regex_split_custom_afmoe`` (also used for tiny_aya's digit regex): each
    run of \\p{N} is cut into its first ``len % 3`` digits, then groups of three. Cuts are made only
    inside digit runs, so the text before a run stays glued to the run's first group (``ab12345`` ->
    ``ab12``, ``345``), as in llama.cpp; the text after the last run is one piece. Returns the number
    of sub-pieces. O(bytes)."""
    n_out = 0
    for p in range(n_pieces):
        n = decode_utf8(buf, starts[p], ends[p], cps, offs)
        prev = 0
        pos = 0
        while pos < n:
            if not _is_cat(_flag_at(cps, flags, pos, n), NUMBER):
                pos += 1
                continue
            first = pos
            while _is_cat(_flag_at(cps, flags, pos, n), NUMBER):
                pos += 1
            cut = first + (pos - first) % 3
            if cut == first:
                cut += 3
            while cut <= pos:
                if cut > prev:
                    out_starts[n_out] = offs[prev]
                    out_ends[n_out] = offs[cut]
                    n_out += 1
                prev = cut
                cut += 3
        if prev < n:
            out_starts[n_out] = offs[prev]
            out_ends[n_out] = offs[n]
            n_out += 1
    return n_out


@njit(cache=True, nogil=True, forceinline=True)
def _is_han(cp):
    """llama.cpp's ``unicode_cpt_is_han``: the CJK ideograph blocks it lists (not Unicode's Script=Han)."""
    return ((0x4E00 <= cp <= 0x9FFF) or (0x3400 <= cp <= 0x4DBF) or (0x20000 <= cp <= 0x2A6DF)
            or (0x2A700 <= cp <= 0x2B73F) or (0x2B740 <= cp <= 0x2B81F) or (0x2B820 <= cp <= 0x2CEAF)
            or (0x2CEB0 <= cp <= 0x2EBEF) or (0xF900 <= cp <= 0xFAFF) or (0x2F800 <= cp <= 0x2FA1F))


@njit(cache=True, nogil=True, forceinline=True)
def _cpt_at(cps, pos, n):
    return cps[pos] if 0 <= pos < n else -1


@njit(cache=True, nogil=True, forceinline=True)
def _letter_not_han(cps, flags, pos, n):
    return _is_cat(_flag_at(cps, flags, pos, n), LETTER) and not _is_han(_cpt_at(cps, pos, n))


@njit(cache=True, nogil=True)
def kimi_k2_split(buf, starts, ends, n_pieces, flags, cps, offs, out_starts, out_ends):
    """llama.cpp's ``unicode_regex_split_custom_kimi_k2``, the hand-written scan that stands for Kimi
    K2's whole pattern: runs of Han; letter words without Han (one optional leading character that is
    no letter, digit, CR or LF; an optional case-insensitive 's 't 're 've 'm 'll 'd); digits in groups
    of three from the left; `` ?`` + other characters + CR/LF; whitespace ending in CR/LF; whitespace
    runs but the last character (when more text follows); other whitespace; else one character.
    Returns the number of sub-pieces. O(bytes)."""
    n_out = 0
    for p in range(n_pieces):
        n = decode_utf8(buf, starts[p], ends[p], cps, offs)
        prev = 0
        pos = 0
        while pos < n:
            cpt = cps[pos]
            f = _flag_at(cps, flags, pos, n)
            if _is_han(cpt):
                while pos < n and _is_han(cps[pos]):
                    pos += 1
            else:
                matched = False
                lead_ok = not (cpt == 13 or cpt == 10 or _is_cat(f, LETTER) or _is_cat(f, NUMBER))
                if (_is_cat(f, LETTER) and not _is_han(cpt)) or (lead_ok and _letter_not_han(cps, flags, pos + 1, n)):
                    has_leading = False
                    if lead_ok:
                        has_leading = True
                        pos += 1
                    has_letters = False
                    while _letter_not_han(cps, flags, pos, n):
                        has_letters = True
                        pos += 1
                    if has_letters or (not has_leading and _letter_not_han(cps, flags, pos, n)):
                        if not has_letters:
                            pos += 1
                        while _letter_not_han(cps, flags, pos, n):
                            pos += 1
                        if _cpt_at(cps, pos, n) == 39 and pos + 1 < n:
                            nx = _ascii_lower(_cpt_at(cps, pos + 1, n))
                            if nx == 115 or nx == 116 or nx == 109 or nx == 100:
                                pos += 2
                            elif pos + 2 < n:
                                nn = _ascii_lower(_cpt_at(cps, pos + 2, n))
                                if (nx == 114 and nn == 101) or (nx == 118 and nn == 101) or (nx == 108 and nn == 108):
                                    pos += 3
                        matched = True
                    elif has_leading:
                        pos -= 1
                if not matched and _is_cat(f, NUMBER):
                    pos, prev, n_out = number_chunks(cps, flags, pos, n, prev, offs, out_starts, out_ends, n_out)
                    matched = True
                if not matched:
                    f2 = _flag_at(cps, flags, pos + 1, n) if cpt == 32 else f
                    if _is_other(f2):
                        if cpt == 32:
                            pos += 1
                        while _is_other(f2):
                            pos += 1
                            f2 = _flag_at(cps, flags, pos, n)
                        while _cpt_at(cps, pos, n) == 13 or _cpt_at(cps, pos, n) == 10:
                            pos += 1
                        matched = True
                if not matched:
                    n_ws = 0
                    last_crlf = 0
                    while _is_ws(_flag_at(cps, flags, pos + n_ws, n)):
                        c2 = cps[pos + n_ws]
                        if c2 == 13 or c2 == 10:
                            last_crlf = pos + n_ws + 1
                        n_ws += 1
                    if last_crlf > 0:
                        pos = last_crlf
                    elif n_ws > 1 and pos + n_ws < n:
                        pos += n_ws - 1
                    elif n_ws > 0:
                        pos += n_ws
                    else:
                        pos += 1
            if pos > prev:
                out_starts[n_out] = offs[prev]
                out_ends[n_out] = offs[pos]
                n_out += 1
            prev = pos
    return n_out


class _ViewRegex:
    """One std::regex-path pattern: translated, compiled for tokjit's engine when it can."""

    def __init__(self, pattern: str):
        self.pattern = pattern
        self.translated, self.collapse = translate_pattern(pattern)
        self.find = None
        self.compiled = None
        try:
            from tokjit.regex import CompiledRegex, UnsupportedPatternError
            try:
                self.compiled = CompiledRegex(self.translated, syntax="python")
                self.find = self.compiled.find_spans
            except UnsupportedPatternError:
                self.find = None
        except ImportError:
            pass
        if self.find is None:
            self.find = RegexSplitter(self.translated, syntax="python", warn=False).find


class LlamaCppRegexSplit:
    """``{"type": "LlamaCppRegexSplit", "regexes": [...]}``: llama.cpp's ``unicode_regex_split``."""

    def __init__(self, config: dict):
        self.steps = []
        for pattern in config["regexes"]:
            kind = custom_splitter(pattern)
            if kind == "gpt2":
                self.steps.append(("custom", 0))
            elif kind == "llama3":
                self.steps.append(("custom", 1))
            elif kind == "digit_groups":
                self.steps.append(("scan", digit_group_split))
            elif kind == "kimi_k2":
                self.steps.append(("scan", kimi_k2_split))
            elif kind is not None:
                raise UnsupportedComponentError(f"llama.cpp's hand-written {kind!r} splitter is not implemented")
            else:
                self.steps.append(("regex", _ViewRegex(pattern)))
        self.flags = cpt_flags()

    def __call__(self, pieces: Pieces) -> Pieces:
        buf = pieces.buf
        starts, ends = pieces.starts, pieces.ends
        views: dict[bool, tuple] = {}
        for kind, arg in self.steps:
            if kind in ("custom", "scan"):
                cap = buf.shape[0] + 1
                cps = np.empty(cap, np.int64)
                offs = np.empty(cap, np.int64)
                os_ = np.empty(cap, np.int64)
                oe = np.empty(cap, np.int64)
                if kind == "custom":
                    n = custom_split(buf, starts, ends, np.int64(starts.shape[0]), self.flags, np.int64(arg),
                                     cps, offs, os_, oe)
                else:
                    n = arg(buf, starts, ends, np.int64(starts.shape[0]), self.flags, cps, offs, os_, oe)
                starts, ends = os_[:n], oe[:n]
            else:
                view = views.get(arg.collapse)
                if view is None:
                    view = views[arg.collapse] = self._view(buf, arg.collapse)
                starts, ends = self._split(arg, view, starts, ends)
        return pieces.derive(buf, starts, ends, pieces.align)

    def _view(self, buf, collapse):
        n = buf.shape[0]
        view = np.empty(3 * n + 1, np.uint8)  # a malformed byte is U+FFFD's three
        v_of_o = np.empty(n + 1, np.int64)
        o_of_v = np.empty(3 * n + 2, np.int64)
        m = build_view(buf, np.int64(n), self.flags, collapse, view, v_of_o, o_of_v, False)
        return view[:m], v_of_o, o_of_v[:m + 1]

    @staticmethod
    def _split(rx: _ViewRegex, view, starts, ends):
        vbuf, v_of_o, o_of_v = view
        if rx.compiled is not None and starts.shape[0]:
            # all pieces in one kernel call; any engine error (budget, buffers) -> the careful path below
            prog = rx.compiled.program
            longest = int((v_of_o[ends] - v_of_o[starts]).max())
            m_s = np.empty(longest + 1, np.int64)
            m_e = np.empty(longest + 1, np.int64)
            cap = 2 * vbuf.shape[0] + starts.shape[0] + 1
            os_ = np.empty(cap, np.int64)
            oe = np.empty(cap, np.int64)
            k = split_pieces_on_view(vbuf, v_of_o, o_of_v, starts, ends, np.int64(starts.shape[0]),
                                     (prog.prog, prog.rep_info, prog.cls_ascii, prog.cls_mask, prog.cls_neg,
                                      prog.cls_roff, prog.cls_ranges, prog.gc),
                                     np.int64(256), np.int64(prog.vm_word), m_s, m_e, np.empty(4096, np.int64), os_, oe)
            if k >= 0:
                return os_[:k], oe[:k]
        out_s, out_e = [], []
        isolated = np.int64(BEHAVIORS["Isolated"])
        for s, e in zip(starts.tolist(), ends.tolist()):
            vs, ve = int(v_of_o[s]), int(v_of_o[e])
            ms, me = rx.find(vbuf, vs, ve)
            ms = o_of_v[ms]
            me = o_of_v[me]
            cap = 2 * ms.shape[0] + 1
            os_ = np.empty(cap, np.int64)
            oe = np.empty(cap, np.int64)
            k = apply_split_behavior(np.int64(s), np.int64(e), ms, me, np.int64(ms.shape[0]), isolated, False,
                                     os_, oe, np.int64(0))
            out_s.append(os_[:k])
            out_e.append(oe[:k])
        if not out_s:
            return starts, ends
        return np.concatenate(out_s), np.concatenate(out_e)




# --------------------------------------------------------------------------------------------------
# WPM (bert): llama.cpp's word preprocessing (llm_tokenizer_wpm_session::preprocess)
# --------------------------------------------------------------------------------------------------

@njit(cache=True, nogil=True, forceinline=True)
def _is_chinese(cp):
    """llama.cpp's CJK ranges, copied from HF's BERT (2B920 rather than 2B820 included)."""
    return (0x4E00 <= cp <= 0x9FFF or 0x3400 <= cp <= 0x4DBF or 0x20000 <= cp <= 0x2A6DF
            or 0x2A700 <= cp <= 0x2B73F or 0x2B740 <= cp <= 0x2B81F or 0x2B920 <= cp <= 0x2CEAF
            or 0xF900 <= cp <= 0xFAFF or 0x2F800 <= cp <= 0x2FA1F)


@njit(cache=True, nogil=True)
def wpm_preprocess(buf, starts, ends, n_pieces, flags, lower, nfd, strip_accents, lowercase, cps, offs,
                   out, out_align, word_starts, word_ends):
    """llama.cpp's WPM word split, one code point at a time; returns (bytes written, words).

    Per code point: with ``strip_accents`` it becomes the first code point of its NFD (so a Hangul
    syllable keeps only its leading jamo), whitespace (llama.cpp's set) ends the word, U+0000, U+FFFD
    and control-category code points vanish, with ``strip_accents`` every mark (Mn/Mc/Me) vanishes,
    ``lowercase`` applies the simple 1:1 map, and punctuation, ASCII symbols and CJK ideographs are
    words of their own. Words are written to ``out`` without the word-start marker (the model adds it);
    ``out_align[j]`` = source byte offset of output byte j. O(bytes); ``out`` needs 4 bytes per input
    byte, ``word_*`` one slot per input byte.
    """
    m = 0
    n_words = 0
    for p in range(n_pieces):
        n = decode_utf8(buf, starts[p], ends[p], cps, offs)
        word_open = False
        for k in range(n):
            cp = cps[k]
            if strip_accents and cp < 0x110000:
                cp = np.int64(nfd[cp])
            f = np.int64(flags[cp]) if cp < 0x110000 else UNDEF
            if (f & WS_BIT) != 0:
                if word_open:
                    word_ends[n_words] = m
                    n_words += 1
                    word_open = False
                continue
            cat = f & CAT_MASK
            if cp == 0 or cp == 0xFFFD or cat == CONTROL:
                continue
            if strip_accents and cat == MARK:
                continue
            single = cat == PUNCT or (cp < 0x7F and cat == SYMBOL) or _is_chinese(cp)
            if lowercase and cp < 0x110000:
                cp = np.int64(lower[cp])
            if single and word_open:
                word_ends[n_words] = m
                n_words += 1
                word_open = False
            if not word_open:
                word_starts[n_words] = m
                word_open = True
            m2 = put_utf8(out, m, cp)
            for j in range(m, m2):
                out_align[j] = offs[k]
            m = m2
            if single:
                word_ends[n_words] = m
                n_words += 1
                word_open = False
        if word_open:
            word_ends[n_words] = m
            n_words += 1
    return m, n_words


class LlamaCppWpm:
    """``{"type": "LlamaCppWpm", "lowercase", "strip_accents"}``: llama.cpp's BERT preprocessing, which
    rewrites the text (accents, case) and cuts it into words; pairs with the WordPiece model's
    ``word_prefix`` flavour."""

    def __init__(self, config: dict):
        t = _tables()
        self.flags, self.lower, self.nfd = t["flags"], t["lower"], t["nfd"]
        self.lowercase = bool(config.get("lowercase", True))
        self.strip_accents = bool(config.get("strip_accents", True))

    def __call__(self, pieces: Pieces) -> Pieces:
        buf = pieces.buf
        n = buf.shape[0]
        cps = np.empty(n + 1, np.int64)
        offs = np.empty(n + 1, np.int64)
        out = np.empty(4 * n + 4, np.uint8)
        out_align = np.empty(4 * n + 5, np.int64)
        ws_ = np.empty(n + 1, np.int64)
        we = np.empty(n + 1, np.int64)
        m, k = wpm_preprocess(buf, pieces.starts, pieces.ends, np.int64(pieces.starts.shape[0]), self.flags,
                              self.lower, self.nfd, self.strip_accents, self.lowercase, cps, offs, out,
                              out_align, ws_, we)
        out_align[m] = n
        align = out_align[:m + 1]
        if pieces.align is not None:
            align = np.asarray(pieces.align, np.int64)[align]
        return pieces.derive(out[:m], ws_[:k].copy(), we[:k].copy(), align)




@njit(cache=True, nogil=True)
def rwkv_encode(buf, starts, ends, n_pieces, child_start, child_count, edge_byte, edge_target, node_token, unk_id,
                out_ids, out_starts, out_ends):
    """llama.cpp's ``llm_tokenizer_rwkv_session``: from each position the longest token of the byte trie,
    then on after it; a position where no token matches gives the unknown token and one byte. Returns
    the number of ids, or -1 - position of a byte that needs the unknown token when there is none.
    O(bytes * longest token)."""
    n_out = 0
    for p in range(n_pieces):
        i = starts[p]
        end = ends[p]
        while i < end:
            node = 0
            best = -1
            best_end = i + 1
            j = i
            while j < end:
                node = _trie_child(node, buf[j], child_start, child_count, edge_byte, edge_target)
                if node < 0:
                    break
                j += 1
                if node_token[node] >= 0:
                    best = node_token[node]
                    best_end = j
            if best < 0:
                if unk_id < 0:
                    return -1 - i
                best = unk_id
                best_end = i + 1
            out_ids[n_out] = best
            out_starts[n_out] = i
            out_ends[n_out] = best_end
            n_out += 1
            i = best_end
    return n_out


class LlamaCppRwkv:
    """``{"type": "LlamaCppRwkv", "unk_id"}``: RWKV's greedy tokenizer as llama.cpp runs it, over the
    token bytes (already unescaped by the GGUF loader); the last token with given bytes wins, as in
    llama.cpp's trie. Where no token starts, llama.cpp emits the unknown token (and, when a byte
    starts tokens but ends none, loops forever; here that byte is unknown too)."""

    def __init__(self, spec):
        children: list[dict[int, int]] = [{}]
        token_at = [-1]
        for tid, data in enumerate(spec.tokens):
            node = 0
            for b in data:
                nxt = children[node].get(b)
                if nxt is None:
                    nxt = children[node][b] = len(children)
                    children.append({})
                    token_at.append(-1)
                node = nxt
            if data:
                token_at[node] = tid
        self.child_start = np.zeros(len(children), np.int64)
        self.child_count = np.zeros(len(children), np.int64)
        edge_b, edge_t = [], []
        for node, kids in enumerate(children):
            self.child_start[node] = len(edge_b)
            self.child_count[node] = len(kids)
            for b, t in sorted(kids.items()):
                edge_b.append(b)
                edge_t.append(t)
        self.edge_byte = np.asarray(edge_b or [0], np.uint8)
        self.edge_target = np.asarray(edge_t or [0], np.int64)
        self.node_token = np.asarray(token_at, np.int64)
        unk = spec.model.get("unk_id")
        self.unk_id = np.int64(-1 if unk is None else int(unk))

    def encode_pieces(self, buf, starts, ends, ws=None):
        cap = int(buf.shape[0]) + 1
        out_ids = np.empty(cap, np.int32)
        out_s = np.empty(cap, np.int64)
        out_e = np.empty(cap, np.int64)
        n = rwkv_encode(buf, starts, ends, np.int64(starts.shape[0]), self.child_start, self.child_count,
                        self.edge_byte, self.edge_target, self.node_token, self.unk_id, out_ids, out_s, out_e)
        if n < 0:
            raise InputError(f"byte 0x{int(buf[-1 - n]):02X} starts no token and the vocabulary has no unknown "
                             "token (llama.cpp would emit an invalid id)")
        return out_ids[:n], out_s[:n], out_e[:n]




@njit(cache=True, nogil=True)
def whitespace_runs(buf, starts, ends, n_pieces, flags, lower, lowercase, cps, offs, out, out_align, run_starts,
                    run_ends):
    """llama.cpp's ``llm_tokenizer_whitespace_session``: code points re-encoded (malformed bytes become
    U+FFFD), whitespace (llama.cpp's flags) dropped, the others lowercased by the simple map when
    ``lowercase``; each run between whitespace is a piece. Returns (bytes written, runs); ``out_align[j]``
    = source offset of output byte j. O(bytes); ``out`` needs 4 bytes per input byte."""
    m = 0
    n_runs = 0
    for p in range(n_pieces):
        n = decode_utf8(buf, starts[p], ends[p], cps, offs)
        run_open = False
        for k in range(n):
            cp = cps[k]
            if _is_ws(_flag_at(cps, flags, k, n)):
                if run_open:
                    run_ends[n_runs] = m
                    n_runs += 1
                    run_open = False
                continue
            if lowercase and cp < 0x110000:
                cp = np.int64(lower[cp])
            if not run_open:
                run_starts[n_runs] = m
                run_open = True
            m2 = put_utf8(out, m, cp)
            for j in range(m, m2):
                out_align[j] = offs[k]
            m = m2
        if run_open:
            run_ends[n_runs] = m
            n_runs += 1
    return m, n_runs


class LlamaCppWhitespaceSegments:
    """``{"type": "LlamaCppWhitespaceSegments", "lowercase"}``: the ``whitespace`` tokenizer model of
    llama.cpp drops whitespace, optionally lowercases, and tokenizes each run between whitespace on its own."""

    def __init__(self, config: dict):
        t = _tables()
        self.flags, self.lower = t["flags"], t["lower"]
        self.lowercase = bool(config.get("lowercase", False))

    def __call__(self, pieces: Pieces) -> Pieces:
        buf = pieces.buf
        n = buf.shape[0]
        cps = np.empty(n + 1, np.int64)
        offs = np.empty(n + 1, np.int64)
        out = np.empty(4 * n + 4, np.uint8)
        out_align = np.empty(4 * n + 5, np.int64)
        rs = np.empty(n + 1, np.int64)
        re_ = np.empty(n + 1, np.int64)
        m, k = whitespace_runs(buf, pieces.starts, pieces.ends, np.int64(pieces.starts.shape[0]), self.flags,
                               self.lower, self.lowercase, cps, offs, out, out_align, rs, re_)
        out_align[m] = n
        align = out_align[:m + 1]
        if pieces.align is not None:
            align = np.asarray(pieces.align, np.int64)[align]
        return pieces.derive(out[:m], rs[:k].copy(), re_[:k].copy(), align)


