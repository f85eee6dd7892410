"""Regex compiler for tokjit's pre-tokenization engine (pure Python, runs once at load).

Parses the regex dialect used by tokenizer pre-tokenizers (Python ``regex`` / Oniguruma /
fancy-regex common subset) and emits flat numpy tables for the numba backtracking VM in
:mod:`tokjit.kernels.regex_vm`.

Supported: literals, ``.``, classes ``[...]`` with ranges/negation/nested escapes, ``\\s \\S \\d \\D
\\w \\W``, ``\\p{..}``/``\\P{..}``/``\\pL`` (general categories, short and long names, ``LC``,
``Any``), escapes ``\\r \\n \\t \\f \\v \\a \\e \\0 \\xHH \\x{H..} \\uHHHH \\UHHHHHHHH``, alternation,
groups ``(...)`` ``(?:...)`` ``(?P<n>...)`` ``(?<n>...)`` (captures are not reported), atomic
groups ``(?>...)``, lookahead ``(?=...)``/``(?!...)``, fixed-length lookbehind ``(?<=...)``/``(?<!...)``,
quantifiers ``* + ? {m} {m,} {m,n} {,n}`` with lazy ``?`` and possessive ``+`` suffixes, inline
flags ``i`` ``m`` ``s`` (scoped ``(?i:...)`` anywhere, ``(?i)`` only at the start of the pattern),
anchors ``^ $ \\A \\z \\Z \\b \\B``.

Anything else raises :class:`UnsupportedPatternError` so the caller can fall back to ``regex``.

Anchor semantics differ between the reference engines and are selected with ``syntax``:

=========== ===================== ============================ ===========================
syntax      ``^`` / ``$``          ``\\Z``                       reference
=========== ===================== ============================ ===========================
"python"    text start / end or   end only                     Python ``regex`` module
            before a final \\n
"onig"      line start / line end end or before a final \\n     HF tokenizers (Oniguruma,
            (any \\n)                                            Ruby syntax)
"rust"      text start / end      end or before a final \\n     tiktoken (fancy-regex)
=========== ===================== ============================ ===========================

The ``(?m)`` flag turns ``^``/``$`` into line anchors ("python", "rust"); under "onig" they always
are, and ``(?m)`` is Ruby's dot-matches-newline.  ``(?i)`` uses the simple case-folding orbits of
the ``regex`` module (``k`` ~ ``K`` ~ U+212A, ``s`` ~ ``S`` ~ U+017F), without dotless i in i's
orbit under "onig" and "rust" (CaseFolding.txt gives it no folding); a character matches a
case-insensitive set if any of its case variants is in the set.
"""
from __future__ import annotations

import functools
import hashlib
import io
import os
import tempfile

import numpy as np

from tokjit.regex import unicode_tables as ut

__all__ = [
    "UnsupportedPatternError",
    "Program",
    "compile_pattern",
    "OP_CLASS", "OP_REP", "OP_SPLIT", "OP_JMP", "OP_MATCH", "OP_ATOMIC_START", "OP_ATOMIC_END",
    "OP_LOOK_START", "OP_LOOK_END", "OP_ASSERT",
]


class UnsupportedPatternError(ValueError):
    """The pattern uses a construct the numba engine does not implement (fall back to ``regex``)."""


# the instruction set is the VM's (tokjit.kernels.regex_vm); the compiler emits it
from tokjit.kernels.regex_vm import (  # noqa: E402
    A_END_OR_FINAL_NL, A_LINE_END, A_LINE_START, A_NOT_WORD_B, A_TEXT_END, A_TEXT_START, A_WORD_B,
    EMPTY_NEXT_CHAR, EMPTY_RETRY, EMPTY_RULE_SHIFT, MODE_GREEDY, MODE_LAZY, MODE_POSSESSIVE, OP_ASSERT,
    OP_ATOMIC_END, OP_ATOMIC_START, OP_CLASS, OP_JMP, OP_LOOK_END, OP_LOOK_START, OP_MATCH, OP_REP, OP_SPLIT)

SYNTAXES = ("python", "onig", "rust")
MAX_PROGRAM = 20000
INF = -1

# ----------------------------------------------------------------------------- char sets

_LONG_NAMES = {
    "letter": "L", "casedletter": "LC", "uppercaseletter": "Lu", "lowercaseletter": "Ll",
    "titlecaseletter": "Lt", "modifierletter": "Lm", "otherletter": "Lo",
    "mark": "M", "combiningmark": "M", "nonspacingmark": "Mn", "spacingmark": "Mc",
    "enclosingmark": "Me",
    "number": "N", "decimalnumber": "Nd", "digit": "Nd", "letternumber": "Nl", "othernumber": "No",
    "punctuation": "P", "punct": "P", "connectorpunctuation": "Pc", "dashpunctuation": "Pd",
    "openpunctuation": "Ps", "closepunctuation": "Pe", "initialpunctuation": "Pi",
    "finalpunctuation": "Pf", "otherpunctuation": "Po",
    "symbol": "S", "mathsymbol": "Sm", "currencysymbol": "Sc", "modifiersymbol": "Sk",
    "othersymbol": "So",
    "separator": "Z", "spaceseparator": "Zs", "lineseparator": "Zl", "paragraphseparator": "Zp",
    "other": "C", "control": "Cc", "cntrl": "Cc", "format": "Cf", "surrogate": "Cs",
    "privateuse": "Co", "unassigned": "Cn", "any": "Any",
}


def _category_names(name: str) -> list[str]:
    """Map a \\p{...} name to a list of two-letter categories (or ['Any'])."""
    raw = name
    if "&" in name:  # regex reads \p{L&} as \p{L}, other engines as \p{LC}: ambiguous
        raise UnsupportedPatternError(f"ambiguous property \\p{{{raw}}}")
    n = name.replace(" ", "").replace("_", "").replace("-", "")
    for prefix in ("generalcategory=", "gc=", "generalcategory:", "gc:"):
        if n.lower().startswith(prefix):
            n = n[len(prefix):]
            break
    if n.lower() in _LONG_NAMES:
        n = _LONG_NAMES[n.lower()]
    else:
        n = n[:1].upper() + n[1:].lower() if n else n
    if n == "Any":
        return ["Any"]
    if n in ("LC", "Lc"):
        return ["Lu", "Ll", "Lt"]
    if len(n) == 1 and n in "LMNPSZC":
        return [c for c in ut.CATEGORIES if c[0] == n]
    if n in ut.CATEGORY_INDEX:
        return [n]
    raise UnsupportedPatternError(f"unsupported property \\p{{{raw}}} (only general categories)")


class _Ctx:
    """Unicode data for one table version, with set-building helpers (bool arrays over code points)."""

    def __init__(self, table: str):
        self.gc = ut.general_category_table(table)
        self.n = ut.MAX_CODEPOINT + 1
        orbits = ut.case_orbits()
        cps = np.array(sorted(orbits), dtype=np.int64)
        ids = {}
        fid = np.empty(len(cps), dtype=np.int64)
        for i, c in enumerate(cps.tolist()):
            fid[i] = ids.setdefault(orbits[c], len(ids))
        self.fold_cp, self.fold_id, self.n_orbits = cps, fid, len(ids)
        ws = np.zeros(self.n, bool)
        for lo, hi in ut.white_space_ranges().tolist():
            ws[lo:hi + 1] = True
        self.ws = ws
        word = np.zeros(self.n, bool)
        for lo, hi in ut.word_ranges().tolist():
            word[lo:hi + 1] = True
        word &= self.gc != 0  # code points unassigned in this table are not word characters
        word[0x200C:0x200E] = True  # Join_Control
        self.word = word
        # Oniguruma's Unicode \w inside a bracket ([\w], [^\w\s]): the regex module's without
        # Join_Control (Alphabetic, Mark, Nd, Pc; so Ⓐ and Ⅻ, not ① or ½). Outside a bracket (\w, \W,
        # \b, \B) it reads code points below 256 from its Latin-1 table, which also counts ² ³ ¹ ¼ ½ ¾
        # as word characters (measured against HF tokenizers over every code point)
        self.onig_word = word.copy()
        self.onig_word[0x200C:0x200E] = False
        self.onig_bare_word = self.onig_word.copy()
        self.onig_bare_word[[0xB2, 0xB3, 0xB9, 0xBC, 0xBD, 0xBE]] = True

    def word_of(self, syntax, in_class):
        r"""The code points \w matches under ``syntax``, inside a bracket or not."""
        if syntax != "onig":
            return self.word
        return self.onig_word if in_class else self.onig_bare_word

    def empty(self):
        return np.zeros(self.n, bool)

    def cats(self, names):
        if names == ["Any"]:
            return np.ones(self.n, bool)
        idx = [ut.CATEGORY_INDEX[c] for c in names]
        return np.isin(self.gc, np.array(idx, dtype=np.uint8))

    def fold_close(self, s, syntax="python"):
        """``s`` and every case variant of its members. Oniguruma and Rust's regex fold by Unicode's
        CaseFolding.txt, where dotless i folds to nothing (only Turkic folding joins it to i); the
        regex module puts it in i's orbit, which stays so for ``syntax`` "python" only."""
        exact = syntax != "python"
        plain = s
        if exact and s[DOTLESS_I]:
            plain = s.copy()
            plain[DOTLESS_I] = False
        orb = np.zeros(self.n_orbits, bool)
        orb[self.fold_id[plain[self.fold_cp]]] = True
        out = s.copy()
        out[self.fold_cp] |= orb[self.fold_id]
        if exact:
            out[DOTLESS_I] = s[DOTLESS_I]
        return out


DOTLESS_I = 0x131


@functools.lru_cache(maxsize=1)
def _multi_foldings() -> dict[int, str]:
    """The characters whose full case folding is more than one character (``ß`` -> ``ss``, ``ﬁ`` ->
    ``fi``, ...), all in the Basic Multilingual Plane (~100 of them, up to U+FB17)."""
    return {c: f for c, f in ((c, chr(c).casefold()) for c in range(0x10000) if not 0xD800 <= c < 0xE000)
            if len(f) > 1}


@functools.lru_cache(maxsize=1)
def _folding_strings() -> frozenset:
    return frozenset(_multi_foldings().values())


@functools.lru_cache(maxsize=2)
def _multi_folding(n: int) -> np.ndarray:
    """bool[n]: the code points whose full case folding is more than one character."""
    out = np.zeros(n, bool)
    out[list(_multi_foldings())] = True
    return out


@functools.lru_cache(maxsize=4)
def _ctx(table: str) -> _Ctx:
    return _Ctx(table)


# ----------------------------------------------------------------------------- AST
# nodes: ("set", boolarray) ("cat", [..]) ("alt", [..]) ("rep", node, min, max, mode)
#        ("atomic", node) ("look", node, neg, behind) ("assert", kind) ("empty",)


class _Parser:
    def __init__(self, pattern: str, ctx: _Ctx, syntax: str):
        self.p = pattern
        self.i = 0
        self.ctx = ctx
        self.syntax = syntax
        self.flags = {"i": False, "m": False, "s": False}
        self.depth = 0
        self.folded_literals: list[tuple[int, int]] = []  # (position after it, code point) under (?i)

    def error(self, msg):
        raise UnsupportedPatternError(f"{msg} at position {self.i} in pattern {self.p!r}")

    def peek(self, k=0):
        j = self.i + k
        return self.p[j] if j < len(self.p) else ""

    def parse(self):
        # global inline flags only at the very start
        while self.p.startswith("(?", self.i):
            j = self.i + 2
            k = j
            while k < len(self.p) and self.p[k].isalpha():
                k += 1
            if k < len(self.p) and self.p[k] == ")" and k > j:
                self._apply_flags(self.p[j:k])
                self.i = k + 1
            else:
                break
        node = self.parse_alt()
        if self.i != len(self.p):
            self.error("unbalanced ')'")
        self.check_folded_runs()
        return node

    def _apply_flags(self, s, flags=None):
        flags = self.flags if flags is None else flags
        on = True
        for ch in s:
            if ch == "-":
                on = False
            elif ch in "ims":
                flags[ch] = on
            elif ch in "uV0" and on:
                pass  # unicode (default) / version0
            else:
                self.error(f"unsupported inline flag {ch!r}")

    def parse_alt(self):
        alts = [self.parse_concat()]
        while self.peek() == "|":
            self.i += 1
            alts.append(self.parse_concat())
        return alts[0] if len(alts) == 1 else ("alt", alts)

    def parse_concat(self):
        items = []
        while self.i < len(self.p) and self.peek() not in "|)":
            atom = self.parse_atom()
            if atom is None:
                continue
            atom = self.parse_quant(atom)
            items.append(atom)
        if not items:
            return ("empty",)
        return items[0] if len(items) == 1 else ("cat", items)

    def parse_quant(self, atom):
        quantified = False
        while True:
            c = self.peek()
            lo = hi = None
            start = self.i
            if c == "*":
                lo, hi = 0, INF
                self.i += 1
            elif c == "+":
                lo, hi = 1, INF
                self.i += 1
            elif c == "?":
                lo, hi = 0, 1
                self.i += 1
            elif c == "{":
                q = self._parse_braces()
                if q is None:
                    return atom
                lo, hi = q
            else:
                return atom
            mode = MODE_GREEDY
            if self.peek() == "?":
                mode = MODE_LAZY
                self.i += 1
            elif self.peek() == "+":
                mode = MODE_POSSESSIVE
                self.i += 1
            if atom[0] in ("assert", "look"):
                self.error("quantifier on a zero-width assertion")
            if quantified:
                self.i = start
                self.error("nested quantifier")
            quantified = True
            if hi != INF and hi < lo:
                self.error("bad repetition bounds")
            atom = ("rep", atom, lo, hi, mode)

    def _parse_braces(self):
        j = self.i + 1
        k = self.p.find("}", j)
        if k < 0:
            return None
        body = self.p[j:k]
        if "," in body:
            a, _, b = body.partition(",")
            if not (a.isdigit() or a == "") or not (b.isdigit() or b == "") or (a == "" and b == ""):
                return None
            lo = int(a) if a else 0
            hi = int(b) if b else INF
        else:
            if not body.isdigit():
                return None
            lo = hi = int(body)
        self.i = k + 1
        return lo, hi

    def lit(self, cp):
        s = self.ctx.empty()
        s[cp] = True
        if self.flags["i"]:
            s = self.folded(s)
            self.folded_literals.append((self.i, cp))
        return ("set", s)

    def folded(self, s):
        """``s`` closed under (?i). Oniguruma also folds to strings: (?i:ss) matches "ß", (?i:[ß])
        matches "ss", (?i:st) matches "ﬆ"; the VM matches one character at a time, so under "onig" a
        member with a folding of several characters is refused (literal runs: ``check_folded_runs``)."""
        s = self.ctx.fold_close(s, self.syntax)
        if self.syntax == "onig" and (s & _multi_folding(self.ctx.n)).any():
            self.error("(?i) over a character whose case folding is several characters")
        return s

    def check_folded_runs(self):
        """Under "onig", refuse (?i) literals in a row that spell a folding of several characters
        (``ss``, ``st``, ``fi``, ...): Oniguruma matches them against one character."""
        if self.syntax != "onig" or not self.folded_literals:
            return
        runs: list[tuple[str, int]] = []  # (casefolded run, position after its last literal)
        for end, cp in self.folded_literals:
            if runs and runs[-1][1] == end - 1:
                runs[-1] = (runs[-1][0] + chr(cp).casefold(), end)
            else:
                runs.append((chr(cp).casefold(), end))
        targets = _folding_strings()
        for run, end in runs:
            if any(t in run for t in targets):
                self.i = end
                self.error(f"(?i) literals {run!r} that spell a case folding of one character")

    def parse_atom(self):
        c = self.peek()
        if c == "(":
            return self.parse_group()
        if c == "[":
            self.i += 1
            return ("set", self.parse_class())
        if c == ".":
            self.i += 1
            s = np.ones(self.ctx.n, bool)
            # Ruby syntax (Oniguruma's, HF's) spells dot-matches-newline (?m): its ^ and $ always
            # match at lines
            if not (self.flags["s"] or self.flags["m"] and self.syntax == "onig"):
                s[10] = False
            return ("set", s)
        if c == "^":
            self.i += 1
            if self.flags["m"] or self.syntax == "onig":
                return ("assert", A_LINE_START)
            return ("assert", A_TEXT_START)
        if c == "$":
            self.i += 1
            if self.flags["m"] or self.syntax == "onig":
                return ("assert", A_LINE_END)
            if self.syntax == "rust":
                return ("assert", A_TEXT_END)
            return ("assert", A_END_OR_FINAL_NL)
        if c == "\\":
            return self.parse_escape()
        if c in "*+?":
            self.error("nothing to repeat")
        if c == "{" and self._looks_like_quant():
            self.error("nothing to repeat")
        self.i += 1
        return self.lit(ord(c))

    def _looks_like_quant(self):
        save = self.i
        q = self._parse_braces()
        self.i = save
        return q is not None

    def parse_group(self):
        self.i += 1  # (
        saved = dict(self.flags)
        kind = None
        if self.peek() == "?":
            self.i += 1
            c = self.peek()
            if c == ":":
                self.i += 1
            elif c == ">":
                self.i += 1
                kind = ("atomic",)
            elif c == "=":
                self.i += 1
                kind = ("look", False, False)
            elif c == "!":
                self.i += 1
                kind = ("look", True, False)
            elif c == "<" and self.peek(1) in "=!":
                kind = ("look", self.peek(1) == "!", True)
                self.i += 2
            elif c == "P" and self.peek(1) == "<" or c == "<" or c == "'":
                end = {"<": ">", "'": "'"}[self.peek(1) if c == "P" else c]
                k = self.p.find(end, self.i + 2)
                if k < 0:
                    self.error("bad group name")
                self.i = k + 1
            elif c == "#":
                k = self.p.find(")", self.i)
                if k < 0:
                    self.error("unterminated comment")
                self.i = k + 1
                return None
            else:
                j = self.i
                while self.peek() and (self.peek().isalpha() or self.peek() == "-"):
                    self.i += 1
                flags = self.p[j:self.i]
                if not flags:
                    self.error("unsupported group syntax")
                if self.peek() == ":":
                    self._apply_flags(flags)
                    self.i += 1
                elif self.peek() == ")":
                    self.error("inline flags are only supported at the start of the pattern")
                else:
                    self.error("unsupported group syntax")
        self.depth += 1
        body = self.parse_alt()
        self.depth -= 1
        if self.peek() != ")":
            self.error("missing ')'")
        self.i += 1
        self.flags = saved
        if kind is None:
            return body
        if kind[0] == "atomic":
            return ("atomic", body)
        return ("look", body, kind[1], kind[2])

    # escapes -------------------------------------------------------------
    _SIMPLE = {"n": 10, "r": 13, "t": 9, "f": 12, "v": 11, "a": 7, "e": 27}

    def _hex(self, n_min, n_max, braces=False):
        if braces:
            k = self.p.find("}", self.i)
            if k < 0:
                self.error("bad \\x{...}")
            h = self.p[self.i:k]
            self.i = k + 1
        else:
            h = self.p[self.i:self.i + n_max]
            if len(h) < n_min:
                self.error("bad hex escape")
            self.i += len(h)
        try:
            v = int(h, 16)
        except ValueError:
            self.error("bad hex escape")
        if v > ut.MAX_CODEPOINT:
            self.error("code point out of range")
        return v

    def _escape_value(self, in_class):
        """Parse after a backslash. Returns ('cp', int) or ('set', array) or ('assert', kind)."""
        c = self.peek()
        if not c:
            self.error("trailing backslash")
        self.i += 1
        if c in self._SIMPLE:
            return ("cp", self._SIMPLE[c])
        if c == "x":
            if self.peek() == "{":
                self.i += 1
                return ("cp", self._hex(1, 8, braces=True))
            return ("cp", self._hex(2, 2))
        if c == "u":
            return ("cp", self._hex(4, 4))
        if c == "U":
            return ("cp", self._hex(8, 8))
        if c == "0":
            j = self.i
            while self.i < j + 2 and self.peek() in "01234567" and self.peek():
                self.i += 1
            return ("cp", int("0" + self.p[j:self.i], 8))
        ctx = self.ctx
        if c in "sS":
            s = ctx.ws
            return ("set", s if c == "s" else ~s)
        if c in "dD":
            s = ctx.cats(["Nd"])
            return ("set", s if c == "d" else ~s)
        if c in "wW":
            s = ctx.word_of(self.syntax, in_class)
            return ("set", s if c == "w" else ~s)
        if c in "pP":
            if self.syntax == "onig" and self.peek() != "{":
                # Ruby's syntax knows \p only with braces: Oniguruma (HF) reads \pL as "p" then "L"
                return ("cp", ord(c))
            neg = c == "P"
            if self.peek() == "{":
                k = self.p.find("}", self.i)
                if k < 0:
                    self.error("bad \\p{...}")
                name = self.p[self.i + 1:k]
                self.i = k + 1
                if name.startswith("^"):
                    neg = not neg
                    name = name[1:]
            else:
                name = self.peek()
                if not name:
                    self.error("bad \\p")
                self.i += 1
            s = ctx.cats(_category_names(name))
            if self.flags["i"]:
                s = ctx.fold_close(s, self.syntax)
            return ("set", ~s if neg else s)
        if in_class:
            if c == "b":
                return ("cp", 8)
        else:
            if c == "b":
                return ("assert", A_WORD_B)
            if c == "B":
                return ("assert", A_NOT_WORD_B)
            if c == "A":
                return ("assert", A_TEXT_START)
            if c == "z":
                return ("assert", A_TEXT_END)
            if c == "Z":
                return ("assert", A_TEXT_END if self.syntax == "python" else A_END_OR_FINAL_NL)
        if c.isalnum():
            self.i -= 1
            self.error(f"unsupported escape \\{c}")
        return ("cp", ord(c))

    def parse_escape(self):
        self.i += 1
        kind, v = self._escape_value(in_class=False)
        if kind == "cp":
            return self.lit(v)
        if kind == "set":
            return ("set", v)
        return ("assert", v)

    def parse_class(self):
        ctx = self.ctx
        neg = False
        if self.peek() == "^":
            neg = True
            self.i += 1
        acc = ctx.empty()
        first = True
        while True:
            c = self.peek()
            if not c:
                self.error("unterminated character class")
            if c == "]" and not first:
                self.i += 1
                break
            first = False
            if c == "[":
                self.error("nested sets / POSIX classes inside [...] are not supported")
            if c == "&" and self.peek(1) == "&":
                self.error("set operations inside [...] are not supported")
            item = self._class_item()
            if item[0] == "set":
                acc |= item[1]
                continue
            lo = item[1]
            if self.peek() == "-" and self.peek(1) not in ("]", ""):
                save = self.i
                self.i += 1
                item2 = self._class_item()
                if item2[0] == "cp":
                    hi = item2[1]
                    if hi < lo:
                        self.error("bad character range")
                    r = ctx.empty()
                    r[lo:hi + 1] = True
                    acc |= self.folded(r) if self.flags["i"] else r
                    continue
                self.i = save  # '-' literal before a class escape: regex treats as literal
            r = ctx.empty()
            r[lo] = True
            acc |= self.folded(r) if self.flags["i"] else r
        return ~acc if neg else acc

    def _class_item(self):
        c = self.peek()
        if c == "\\":
            self.i += 1
            kind, v = self._escape_value(in_class=True)
            if kind == "assert":
                self.error("assertion inside class")
            return (kind, v)
        self.i += 1
        return ("cp", ord(c))


# ----------------------------------------------------------------------------- analysis

def _width(node):
    """(min, max) length in code points; max None = unbounded."""
    t = node[0]
    if t == "set":
        return 1, 1
    if t in ("assert", "look", "empty"):
        return 0, 0
    if t == "cat":
        lo, hi = 0, 0
        for n in node[1]:
            a, b = _width(n)
            lo += a
            hi = None if hi is None or b is None else hi + b
        return lo, hi
    if t == "alt":
        ws = [_width(n) for n in node[1]]
        lo = min(w[0] for w in ws)
        hi = None if any(w[1] is None for w in ws) else max(w[1] for w in ws)
        return lo, hi
    if t == "rep":
        a, b = _width(node[1])
        hi = None if node[3] == INF or b is None else b * node[3]
        return a * node[2], hi
    if t == "atomic":
        return _width(node[1])
    raise AssertionError(t)


def _first(node):
    """Bool array of code points a match of ``node`` can start with (ignoring what follows when
    ``node`` can match empty), or None when unknown (assertions / lookaround up front)."""
    t = node[0]
    if t == "set":
        return node[1]
    if t == "empty":
        return False
    if t in ("assert", "look"):
        return None
    if t in ("rep", "atomic"):
        return _first(node[1])
    if t == "alt":
        acc = False
        for n in node[1]:
            f = _first(n)
            if f is None:
                return None
            acc = acc | f
        return acc
    if t == "cat":
        acc = False
        for n in node[1]:
            f = _first(n)
            if f is None:
                return None
            acc = acc | f
            if _width(n)[0] > 0:
                break
        return acc
    raise AssertionError(t)


# ----------------------------------------------------------------------------- code generation

class Program:
    """Flat tables for :func:`tokjit.kernels.regex_vm.find_matches`."""

    def __init__(self, pattern, syntax, table, prog, rep_info, cls_ascii, cls_mask, cls_neg,
                 cls_roff, cls_ranges, gc, n_memo):
        self.pattern = pattern
        self.syntax = syntax
        self.table = table
        self.prog = prog
        self.rep_info = rep_info
        self.cls_ascii = cls_ascii
        self.cls_mask = cls_mask
        self.cls_neg = cls_neg
        self.cls_roff = cls_roff
        self.cls_ranges = cls_ranges
        self.gc = gc
        self.n_memo = n_memo

    @property
    def vm_word(self) -> int:
        """``params[2]`` of :func:`~tokjit.kernels.regex_vm.find_matches` for this program: its memo
        slots and how its reference engine goes on after an empty match (``EMPTY_*`` there)."""
        rule = EMPTY_RETRY if self.syntax == "python" else EMPTY_NEXT_CHAR
        return self.n_memo | (rule << EMPTY_RULE_SHIFT)

    def dump(self) -> str:
        names = ["CLASS", "REP", "SPLIT", "JMP", "MATCH", "ATOMIC_START", "ATOMIC_END",
                 "LOOK_START", "LOOK_END", "ASSERT"]
        lines = []
        for pc, (op, a, b, c, g) in enumerate(self.prog.tolist()):
            extra = f" guard={g}" if g >= 0 else ""
            if op == OP_REP:
                extra = " max=%d mode=%d memo=%d" % tuple(self.rep_info[c])
            lines.append(f"{pc:4d} {names[op]:12s} {a} {b} {c}{extra}")
        return "\n".join(lines)


class _Gen:
    def __init__(self, ctx: _Ctx, syntax: str):
        self.ctx = ctx
        self.syntax = syntax
        self.code: list[list[int]] = []
        self.rep_info: list[tuple[int, int, int]] = []
        self.classes: list[bytes] = []
        self.class_index: dict[bytes, int] = {}
        self.class_sets: list[np.ndarray] = []
        self.n_memo = 0
        self.in_look = 0

    def cls(self, s: np.ndarray) -> int:
        key = np.packbits(s).tobytes()
        k = self.class_index.get(key)
        if k is None:
            k = len(self.class_sets)
            self.class_index[key] = k
            self.class_sets.append(s)
        return k

    def emit(self, op, a=0, b=0, c=0, guard=-1):
        if len(self.code) >= MAX_PROGRAM:
            raise UnsupportedPatternError("pattern too large after expanding counted repetitions")
        self.code.append([op, a, b, c, guard])
        return len(self.code) - 1

    def guard(self, node):
        """Class index every match of ``node`` starts with, or -1 (node nullable / unknown)."""
        if _width(node)[0] == 0:
            return -1
        f = _first(node)
        if f is None or f is False or f.all():
            return -1
        return self.cls(f)

    def memo_slot(self):
        if self.in_look:
            return -1
        self.n_memo += 1
        return self.n_memo - 1

    def gen(self, node):
        t = node[0]
        if t == "set":
            self.emit(OP_CLASS, self.cls(node[1]))
        elif t == "empty":
            pass
        elif t == "cat":
            for n in node[1]:
                self.gen(n)
        elif t == "alt":
            jumps = []
            alts = node[1]
            for k, n in enumerate(alts):
                if k < len(alts) - 1:
                    sp = self.emit(OP_SPLIT, 0, 0, -1, self.guard(n))
                    self.code[sp][1] = len(self.code)
                    self.gen(n)
                    jumps.append(self.emit(OP_JMP))
                    self.code[sp][2] = len(self.code)
                else:
                    self.gen(n)
            for j in jumps:
                self.code[j][1] = len(self.code)
        elif t == "assert":
            kind = node[1]
            word = self.ctx.word_of(self.syntax, in_class=False)
            self.emit(OP_ASSERT, kind, self.cls(word) if kind in (A_WORD_B, A_NOT_WORD_B) else 0)
        elif t == "atomic":
            self.emit(OP_ATOMIC_START)
            self.gen(node[1])
            self.emit(OP_ATOMIC_END)
        elif t == "look":
            body, neg, behind = node[1], node[2], node[3]
            blen = 0
            if behind:
                lo, hi = _width(body)
                if hi != lo:
                    raise UnsupportedPatternError("lookbehind must have a fixed length")
                blen = lo
            st = self.emit(OP_LOOK_START, (1 if neg else 0) | (2 if behind else 0), 0, blen)
            self.in_look += 1
            self.gen(body)
            self.in_look -= 1
            self.emit(OP_LOOK_END)
            self.code[st][2] = len(self.code)
        elif t == "rep":
            self.gen_rep(node)
        else:
            raise AssertionError(t)

    def gen_rep(self, node):
        _, body, lo, hi, mode = node
        if body[0] == "set":
            slot = self.memo_slot() if hi == INF and mode != MODE_LAZY else -1
            self.rep_info.append((hi, mode, slot))
            self.emit(OP_REP, self.cls(body[1]), lo, len(self.rep_info) - 1)
            return
        if mode == MODE_POSSESSIVE:
            self.emit(OP_ATOMIC_START)
            self.gen_rep(("rep", body, lo, hi, MODE_GREEDY))
            self.emit(OP_ATOMIC_END)
            return
        bmin, _ = _width(body)
        if hi == INF and bmin == 0:
            raise UnsupportedPatternError("unbounded repetition of a sub-pattern that can match empty")
        if lo > 1000 or (hi != INF and hi > 1000):
            raise UnsupportedPatternError("counted repetition too large")
        for _ in range(lo):
            self.gen(body)
        if hi == INF:
            # L: SPLIT body, exit ; body ; JMP L
            sp = self.emit(OP_SPLIT, 0, 0, self.memo_slot(),
                           self.guard(body) if mode != MODE_LAZY else -1)
            start = len(self.code)
            self.gen(body)
            self.emit(OP_JMP, sp)
            end = len(self.code)
            if mode == MODE_LAZY:
                self.code[sp][1:3] = [end, start]
            else:
                self.code[sp][1:3] = [start, end]
            return
        splits = []
        for _ in range(hi - lo):
            sp = self.emit(OP_SPLIT, 0, 0, -1, self.guard(body) if mode != MODE_LAZY else -1)
            splits.append(sp)
            self.code[sp][1] = len(self.code)
            self.gen(body)
        end = len(self.code)
        for sp in splits:
            if mode == MODE_LAZY:
                self.code[sp][1:3] = [end, self.code[sp][1]]
            else:
                self.code[sp][2] = end


def _class_tables(ctx: _Ctx, sets: list[np.ndarray]):
    gc = ctx.gc
    ncat = len(ut.CATEGORIES)
    cat_sizes = np.bincount(gc, minlength=ncat)
    ascii_tab = np.zeros((max(1, len(sets)), 128), np.uint8)
    masks = np.zeros(max(1, len(sets)), np.uint64)
    negs = np.zeros(max(1, len(sets)), np.uint8)
    roff = [0]
    ranges: list[int] = []
    for k, s in enumerate(sets):
        s = s.copy()
        s[0xD800:0xE000] = False  # never in valid UTF-8
        best = None
        for neg, t in ((0, s), (1, ~s)):
            t = t.copy()
            t[0xD800:0xE000] = False
            counts = np.bincount(gc[t], minlength=ncat)
            full = (counts == cat_sizes) & (cat_sizes > 0)
            covered = full[gc]
            rest = t & ~covered
            rest[:128] = False  # ASCII handled by the fast table
            m = np.diff(np.concatenate([[0], rest.view(np.int8), [0]]))
            los = np.flatnonzero(m == 1)
            his = np.flatnonzero(m == -1) - 1
            cand = (len(los), neg, full, los, his)
            if best is None or cand[0] < best[0]:
                best = cand
        _, neg, full, los, his = best
        mask = 0
        for ci in np.flatnonzero(full).tolist():
            mask |= 1 << ci
        masks[k] = mask
        negs[k] = neg
        ascii_tab[k] = s[:128]
        for lo, hi in zip(los.tolist(), his.tolist()):
            ranges.extend((lo, hi))
        roff.append(len(ranges) // 2)
    return (ascii_tab, masks, negs, np.array(roff, np.int32),
            np.array(ranges if ranges else [0, -1], np.int32))


_PROGRAM_ARRAYS = ("prog", "rep_info", "cls_ascii", "cls_mask", "cls_neg", "cls_roff", "cls_ranges")
_PROGRAM_MAGIC = b"TOKJITRX"


@functools.lru_cache(maxsize=None)
def _compiler_fingerprint() -> str:
    """Changes whenever this compiler or the Unicode tables change (stale programs are never read)."""
    h = hashlib.sha256()
    for path in (__file__, ut.__file__):
        with open(path, "rb") as fh:
            h.update(fh.read())
    for table in ut.TABLE_VERSIONS:
        h.update(ut.general_category_table(table).tobytes())
    return h.hexdigest()


def _program_path(pattern: str, syntax: str, unicode_table: str) -> str | None:
    from tokjit.load.cache import cache_dir
    directory = cache_dir()
    if directory is None:
        return None
    key = hashlib.sha256(repr((pattern, syntax, unicode_table, _compiler_fingerprint())).encode()).hexdigest()
    return os.path.join(directory, "regex-" + key + ".npz")


def _read_program(path, pattern, syntax, unicode_table) -> Program | None:
    try:
        with open(path, "rb") as fh:
            data = fh.read()
        if data[:8] != _PROGRAM_MAGIC or hashlib.sha256(data[40:]).digest() != data[8:40]:
            return None
        with np.load(io.BytesIO(data[40:]), allow_pickle=False) as z:
            arrays = {k: z[k] for k in _PROGRAM_ARRAYS}
            n_memo = int(z["n_memo"])
    except (OSError, KeyError, ValueError):
        return None
    return Program(pattern, syntax, unicode_table, *(arrays[k] for k in _PROGRAM_ARRAYS),
                   ut.general_category_table(unicode_table), n_memo)


def _write_program(path, program: Program) -> None:
    buf = io.BytesIO()
    np.savez(buf, n_memo=np.int64(program.n_memo), **{k: getattr(program, k) for k in _PROGRAM_ARRAYS})
    payload = buf.getvalue()
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".tmp-", suffix=".npz")
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(_PROGRAM_MAGIC + hashlib.sha256(payload).digest() + payload)
            os.replace(tmp, path)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
    except OSError:
        pass  # an unwritable cache only means compiling again next time


@functools.lru_cache(maxsize=64)
def compile_pattern(pattern: str, *, syntax: str = "python", unicode_table: str = "regex") -> Program:
    """Compile ``pattern`` into a :class:`Program` (raises :class:`UnsupportedPatternError`).

    Building the class tables over every code point costs ~0.3 s per pattern, most of a warm start-up;
    programs are memoized per process and stored in tokjit's cache directory (hash-verified, keyed by
    the pattern and a fingerprint of this compiler and its Unicode tables). Programs are read-only."""
    if syntax not in SYNTAXES:
        raise ValueError(f"syntax must be one of {SYNTAXES}")
    if not isinstance(pattern, str):
        raise TypeError("pattern must be str")
    path = _program_path(pattern, syntax, unicode_table)
    if path is not None:
        cached = _read_program(path, pattern, syntax, unicode_table)
        if cached is not None:
            return cached
    program = _compile_pattern(pattern, syntax, unicode_table)
    if path is not None:
        _write_program(path, program)
    return program


def _compile_pattern(pattern: str, syntax: str, unicode_table: str) -> Program:
    ctx = _ctx(unicode_table)
    ast = _Parser(pattern, ctx, syntax).parse()
    g = _Gen(ctx, syntax)
    g.gen(ast)
    g.emit(OP_MATCH)
    ascii_tab, masks, negs, roff, ranges = _class_tables(ctx, g.class_sets)
    code = g.code
    for ins in code:  # jump threading
        if ins[0] in (OP_JMP, OP_SPLIT):
            for j in (1, 2) if ins[0] == OP_SPLIT else (1,):
                seen = 0
                while code[ins[j]][0] == OP_JMP and seen < 100:
                    ins[j] = code[ins[j]][1]
                    seen += 1
    prog = np.array(code, np.int32).reshape(-1, 5)
    rep = np.array(g.rep_info if g.rep_info else [(0, 0, -1)], np.int32).reshape(-1, 3)
    return Program(pattern, syntax, unicode_table, prog, rep, ascii_tab, masks, negs, roff,
                   ranges, ctx.gc, g.n_memo)
