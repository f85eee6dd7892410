"""Regex -> byte DFA for structured output.

The supported subset is what structured-generation patterns use: literals, escapes (``\\n \\t \\r \\f
\\v \\0 \\xHH \\uHHHH \\UHHHHHHHH`` and escaped punctuation), classes ``[...]`` with ranges and negation,
``\\d \\w \\s`` (and ``\\D \\W \\S``), ``.``, alternation, groups (``(...)``, ``(?:...)``, ``(?P<n>...)``,
``(?<n>...)``), ``* + ?`` (lazy forms too: for a full match they describe the same language),
``{m} {m,} {m,n} {,n}``. The whole pattern must match (``^`` at the start and ``$`` at the end are
accepted and change nothing). Anything else (lookaround, backreferences, ``\\b``, ``\\p{..}``, inline
flags, possessive quantifiers) raises :class:`UnsupportedRegexError` rather than being guessed at.

Semantics are those of Python's ``re``/``regex`` on ``str`` with the ASCII flag, over UTF-8 bytes:
``\\d`` = ``[0-9]``, ``\\w`` = ``[A-Za-z0-9_]``, ``\\s`` = ``[ \\t\\n\\r\\f\\v]``; ``.`` is any code point but
``\\n``; a class or ``.`` matches one whole code point, encoded as the UTF-8 byte sequences of its
ranges (surrogates excluded), so the DFA accepts exactly the UTF-8 encodings of matching strings.

Pipeline: parse -> Thompson NFA over byte ranges -> subset construction on byte equivalence classes
(with a state cap) -> keep only states reachable from the start *and* able to reach an accepting
state (so a live state means "the bytes so far are a prefix of some match") -> Moore minimization ->
``transitions int32[n_states, 256]`` (-1 = dead) and ``accepting bool[n_states]``, start state 0.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tokjit.errors import InputError

MAX_CODEPOINT = 0x10FFFF
DEFAULT_MAX_STATES = 10_000
MAX_NFA_STATES = 200_000
MAX_REPEAT = 1_000


class RegexError(InputError):
    """A pattern that cannot be compiled (syntax error, or too large)."""


class UnsupportedRegexError(RegexError, NotImplementedError):
    """A valid regex feature outside the structured-output subset."""


class RegexTooLargeError(RegexError):
    """The pattern's DFA (or NFA) exceeds the configured state cap."""


# ================================================================================================
# Parsing -> AST
# ================================================================================================
# AST nodes are tuples:
#   ("chars", ranges)         one code point within sorted, disjoint inclusive ranges
#   ("cat", [nodes]) / ("alt", [nodes])
#   ("rep", node, lo, hi)     hi None = unbounded

_DIGIT = [(0x30, 0x39)]
_WORD = [(0x30, 0x39), (0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A)]
_SPACE = [(0x09, 0x0D), (0x20, 0x20)]
_SIMPLE_ESCAPES = {"n": 0x0A, "t": 0x09, "r": 0x0D, "f": 0x0C, "v": 0x0B, "a": 0x07, "0": 0x00}
_SHORTHANDS = {"d": (_DIGIT, False), "D": (_DIGIT, True), "w": (_WORD, False), "W": (_WORD, True),
               "s": (_SPACE, False), "S": (_SPACE, True)}


def _normalize_ranges(ranges):
    out = []
    for lo, hi in sorted(ranges):
        if out and lo <= out[-1][1] + 1:
            if hi > out[-1][1]:
                out[-1] = (out[-1][0], hi)
        else:
            out.append((lo, hi))
    return out


def _negate(ranges):
    out = []
    prev = 0
    for lo, hi in _normalize_ranges(ranges):
        if lo > prev:
            out.append((prev, lo - 1))
        prev = hi + 1
    if prev <= MAX_CODEPOINT:
        out.append((prev, MAX_CODEPOINT))
    return out


class _Parser:
    def __init__(self, pattern: str):
        self.p = pattern
        self.i = 0

    def error(self, msg, cls=RegexError):
        return cls(f"{msg} at position {self.i} in regex {self.p!r}")

    def peek(self, k=0):
        j = self.i + k
        return self.p[j] if j < len(self.p) else None

    def parse(self):
        if self.p.startswith("^"):
            self.i = 1
        node = self.parse_alt(top=True)
        if self.i != len(self.p):
            raise self.error("unbalanced ')'")
        return node

    def parse_alt(self, top=False):
        branches = [self.parse_cat(top)]
        while self.peek() == "|":
            self.i += 1
            branches.append(self.parse_cat(top))
        return branches[0] if len(branches) == 1 else ("alt", branches)

    def parse_cat(self, top):
        items = []
        while True:
            c = self.peek()
            if c is None or c == "|" or c == ")":
                break
            if c == "$":
                # only as the very last character of the pattern: the match is whole anyway
                if top and self.i == len(self.p) - 1:
                    self.i += 1
                    break
                raise self.error("'$' is only supported at the end of the pattern", UnsupportedRegexError)
            if c == "^":
                raise self.error("'^' is only supported at the start of the pattern", UnsupportedRegexError)
            atom = self.parse_atom()
            items.append(self.parse_quantifiers(atom))
        return items[0] if len(items) == 1 else ("cat", items)

    def parse_quantifiers(self, atom):
        while True:
            c = self.peek()
            if c in ("*", "+", "?"):
                self.i += 1
                lo, hi = {"*": (0, None), "+": (1, None), "?": (0, 1)}[c]
            elif c == "{":
                bounds = self.try_braces()
                if bounds is None:
                    return atom
                lo, hi = bounds
            else:
                return atom
            nxt = self.peek()
            if nxt == "?":
                self.i += 1  # lazy: same language under full match
            elif nxt == "+":
                raise self.error("possessive quantifiers are not supported", UnsupportedRegexError)
            if atom is None:
                raise self.error("nothing to repeat")
            atom = ("rep", atom, lo, hi)

    def try_braces(self):
        """``{m}``, ``{m,}``, ``{m,n}``, ``{,n}``; anything else is a literal '{' (as in Python)."""
        j = self.p.find("}", self.i)
        if j < 0:
            return None
        body = self.p[self.i + 1:j]
        parts = body.split(",")
        if len(parts) > 2 or not all(x.isdigit() or x == "" for x in parts) or parts == [""] \
                or (len(parts) == 2 and parts[0] == "" and parts[1] == ""):
            return None
        lo = int(parts[0]) if parts[0] else 0
        hi = lo if len(parts) == 1 else (int(parts[1]) if parts[1] else None)
        if hi is not None and hi < lo:
            raise self.error(f"bad repetition bounds {{{body}}}")
        if max(lo, hi or 0) > MAX_REPEAT:
            raise self.error(f"repetition bound above {MAX_REPEAT}", RegexTooLargeError)
        self.i = j + 1
        return lo, hi

    def parse_atom(self):
        c = self.p[self.i]
        if c == "(":
            return self.parse_group()
        if c == "[":
            return ("chars", self.parse_class())
        if c == ".":
            self.i += 1
            return ("chars", _negate([(0x0A, 0x0A)]))
        if c in "*+?":
            raise self.error("nothing to repeat")
        if c == "\\":
            return ("chars", self.parse_escape(in_class=False))
        self.i += 1
        return ("chars", [(ord(c), ord(c))])

    def parse_group(self):
        self.i += 1
        if self.peek() == "?":
            rest = self.p[self.i + 1:]
            if rest.startswith(":"):
                self.i += 2
            elif rest.startswith("P<") or (rest.startswith("<") and rest[1:2] not in ("=", "!")):
                j = self.p.find(">", self.i)
                if j < 0:
                    raise self.error("unterminated group name")
                self.i = j + 1
            else:
                raise self.error("lookaround, inline flags and other '(?' groups are not supported",
                                 UnsupportedRegexError)
        node = self.parse_alt()
        if self.peek() != ")":
            raise self.error("missing ')'")
        self.i += 1
        return node if node is not None else ("cat", [])

    def parse_escape(self, in_class):
        """Ranges of one escape starting at backslash."""
        self.i += 1
        c = self.peek()
        if c is None:
            raise self.error("pattern ends with a backslash")
        self.i += 1
        if c in _SHORTHANDS:
            ranges, neg = _SHORTHANDS[c]
            return _negate(ranges) if neg else list(ranges)
        if c in _SIMPLE_ESCAPES:
            if c == "0" and self.peek() is not None and self.peek() in "01234567":
                raise self.error("octal escapes are not supported", UnsupportedRegexError)
            v = _SIMPLE_ESCAPES[c]
            return [(v, v)]
        if c == "b" and in_class:
            return [(0x08, 0x08)]
        for letter, width in (("x", 2), ("u", 4), ("U", 8)):
            if c == letter:
                digits = self.p[self.i:self.i + width]
                if len(digits) != width or any(d not in "0123456789abcdefABCDEF" for d in digits):
                    raise self.error(f"\\{letter} needs {width} hex digits")
                self.i += width
                v = int(digits, 16)
                if v > MAX_CODEPOINT:
                    raise self.error("code point above U+10FFFF")
                return [(v, v)]
        if c.isalnum():
            raise self.error(f"escape \\{c} (word boundaries, backreferences, Unicode properties, "
                             f"\\A/\\Z) is not supported", UnsupportedRegexError)
        return [(ord(c), ord(c))]

    def parse_class(self):
        self.i += 1
        negated = False
        if self.peek() == "^":
            negated = True
            self.i += 1
        ranges = []
        first = True
        while True:
            c = self.peek()
            if c is None:
                raise self.error("unterminated character class")
            if c == "]" and not first:
                self.i += 1
                break
            if c == "[" and self.peek(1) in (":", "=", "."):
                raise self.error("POSIX classes are not supported", UnsupportedRegexError)
            first = False
            lo_ranges = self.class_item()
            if self.peek() == "-" and self.peek(1) not in (None, "]"):
                if len(lo_ranges) != 1 or lo_ranges[0][0] != lo_ranges[0][1]:
                    raise self.error("bad class range")
                self.i += 1
                hi_ranges = self.class_item()
                if len(hi_ranges) != 1 or hi_ranges[0][0] != hi_ranges[0][1]:
                    raise self.error("bad class range")
                lo, hi = lo_ranges[0][0], hi_ranges[0][0]
                if hi < lo:
                    raise self.error("class range out of order")
                ranges.append((lo, hi))
            else:
                ranges.extend(lo_ranges)
        ranges = _normalize_ranges(ranges)
        return _negate(ranges) if negated else ranges

    def class_item(self):
        c = self.p[self.i]
        if c == "\\":
            return self.parse_escape(in_class=True)
        self.i += 1
        return [(ord(c), ord(c))]


def parse_regex(pattern: str):
    """The AST of ``pattern`` (see module docstring for the subset)."""
    if not isinstance(pattern, str):
        raise RegexError(f"pattern must be str, got {type(pattern).__name__}")
    return _Parser(pattern).parse()


# ================================================================================================
# Code point ranges -> UTF-8 byte-range sequences
# ================================================================================================

_SURROGATES = (0xD800, 0xDFFF)


def utf8_sequences(lo: int, hi: int) -> list[list[tuple[int, int]]]:
    """Byte-range sequences whose union is exactly the UTF-8 encodings of code points lo..hi
    (surrogates excluded). Each sequence is a list of (lo_byte, hi_byte), one per byte position."""
    out = []
    todo = [(lo, hi)]
    while todo:
        s, e = todo.pop()
        if s > e:
            continue
        if s <= _SURROGATES[1] and e >= _SURROGATES[0]:
            todo.append((s, _SURROGATES[0] - 1))
            todo.append((_SURROGATES[1] + 1, e))
            continue
        split = False
        for boundary in (0x7F, 0x7FF, 0xFFFF):
            if s <= boundary < e:
                todo.append((s, boundary))
                todo.append((boundary + 1, e))
                split = True
                break
        if split:
            continue
        if e <= 0x7F:
            out.append([(s, e)])
            continue
        # make every continuation position span its full 0x80..0xBF range or a single value
        for k in (1, 2, 3):
            m = (1 << (6 * k)) - 1
            if (s & ~m) != (e & ~m):
                if s & m:
                    todo.append((s, s | m))
                    todo.append(((s | m) + 1, e))
                    split = True
                    break
                if (e & m) != m:
                    todo.append((s, (e & ~m) - 1))
                    todo.append((e & ~m, e))
                    split = True
                    break
        if split:
            continue
        bs = chr(s).encode("utf-8")
        be = chr(e).encode("utf-8")
        out.append(list(zip(bs, be)))
    return out


# ================================================================================================
# Thompson NFA over byte ranges
# ================================================================================================

class _NFA:
    def __init__(self):
        self.eps: list[list[int]] = []
        self.edges: list[list[tuple[int, int, int]]] = []  # (lo_byte, hi_byte, target)

    def new(self) -> int:
        if len(self.eps) >= MAX_NFA_STATES:
            raise RegexTooLargeError(f"regex NFA exceeds {MAX_NFA_STATES} states")
        self.eps.append([])
        self.edges.append([])
        return len(self.eps) - 1

    def build(self, node) -> tuple[int, int]:
        """Fragment (start, end) for ``node``; ``end`` has no outgoing edges yet."""
        kind = node[0]
        if kind == "chars":
            start, end = self.new(), self.new()
            seqs = []
            for lo, hi in node[1]:
                seqs.extend(utf8_sequences(lo, hi))
            for seq in seqs:
                cur = start
                for k, (blo, bhi) in enumerate(seq):
                    nxt = end if k == len(seq) - 1 else self.new()
                    self.edges[cur].append((blo, bhi, nxt))
                    cur = nxt
            return start, end
        if kind == "cat":
            start = cur = self.new()
            for child in node[1]:
                s, e = self.build(child)
                self.eps[cur].append(s)
                cur = e
            return start, cur
        if kind == "alt":
            start, end = self.new(), self.new()
            for child in node[1]:
                s, e = self.build(child)
                self.eps[start].append(s)
                self.eps[e].append(end)
            return start, end
        if kind == "rep":
            _, child, lo, hi = node
            start = cur = self.new()
            for _ in range(lo):
                s, e = self.build(child)
                self.eps[cur].append(s)
                cur = e
            if hi is None:
                s, e = self.build(child)
                end = self.new()
                self.eps[cur].extend((s, end))
                self.eps[e].extend((s, end))
                return start, end
            end = self.new()
            self.eps[cur].append(end)
            for _ in range(hi - lo):
                s, e = self.build(child)
                self.eps[cur].append(s)
                self.eps[e].append(end)
                cur = e
            return start, end
        raise AssertionError(kind)


# ================================================================================================
# NFA -> DFA -> pruned, minimized table
# ================================================================================================

@dataclass(frozen=True)
class CompiledDFA:
    """A byte DFA: ``transitions[state, byte]`` (-1 = dead), ``accepting[state]``, start state 0."""

    transitions: np.ndarray  # int32 [n_states, 256]
    accepting: np.ndarray  # bool [n_states]
    pattern: str | None = None

    @property
    def n_states(self) -> int:
        return self.transitions.shape[0]


def _closure(nfa: _NFA, states) -> frozenset:
    seen = set(states)
    stack = list(states)
    while stack:
        s = stack.pop()
        for t in nfa.eps[s]:
            if t not in seen:
                seen.add(t)
                stack.append(t)
    return frozenset(seen)


def _byte_classes(nfa: _NFA) -> np.ndarray:
    """class id per byte: bytes no edge distinguishes share a class."""
    cuts = np.zeros(257, np.bool_)
    for edges in nfa.edges:
        for lo, hi, _ in edges:
            cuts[lo] = True
            cuts[hi + 1] = True
    cuts[0] = False
    return np.cumsum(cuts[:256]).astype(np.int32)


def compile_regex(pattern: str, *, max_states: int = DEFAULT_MAX_STATES) -> CompiledDFA:
    """Compile ``pattern`` to a minimal byte DFA whose live states are exactly the viable prefixes.

    Raises :class:`RegexError` (syntax), :class:`UnsupportedRegexError` (outside the subset),
    :class:`RegexTooLargeError` (more than ``max_states`` DFA states during subset construction).
    """
    ast = parse_regex(pattern)
    nfa = _NFA()
    start, final = nfa.build(ast)
    byte_class = _byte_classes(nfa)
    n_classes = int(byte_class.max()) + 1
    class_rep = np.zeros(n_classes, np.int64)
    for b in range(255, -1, -1):
        class_rep[byte_class[b]] = b

    # per NFA state: class -> targets (so a subset step is a few dict lookups)
    by_class = []
    for edges in nfa.edges:
        d: dict[int, list[int]] = {}
        for lo, hi, t in edges:
            for c in range(int(byte_class[lo]), int(byte_class[hi]) + 1):
                d.setdefault(c, []).append(t)
        by_class.append(d)

    start_set = _closure(nfa, [start])
    index = {start_set: 0}
    sets = [start_set]
    rows = []
    k = 0
    while k < len(sets):
        cur = sets[k]
        row = np.full(n_classes, -1, np.int64)
        for c in range(n_classes):
            targets = []
            for s in cur:
                t = by_class[s].get(c)
                if t:
                    targets.extend(t)
            if not targets:
                continue
            nxt = _closure(nfa, targets)
            j = index.get(nxt)
            if j is None:
                if len(sets) >= max_states:
                    raise RegexTooLargeError(
                        f"regex {pattern!r} needs more than max_states={max_states} DFA states")
                j = index[nxt] = len(sets)
                sets.append(nxt)
            row[c] = j
        rows.append(row)
        k += 1
    table = np.stack(rows)
    accepting = np.array([final in s for s in sets], np.bool_)

    table, accepting = _prune_dead(table, accepting)
    if table.shape[0] == 0:
        raise RegexError(f"regex {pattern!r} matches no string")
    table, accepting = _minimize(table, accepting)
    full = table[:, byte_class].astype(np.int32)
    return CompiledDFA(np.ascontiguousarray(full), accepting, pattern)


def _prune_dead(table: np.ndarray, accepting: np.ndarray):
    """Drop states that cannot reach an accepting state; renumber keeping the start at 0.
    Returns an empty table when the start itself is dead."""
    n, n_classes = table.shape
    live = accepting.copy()
    while True:
        tgt = table
        reach = np.zeros(n, np.bool_)
        valid = tgt >= 0
        reach = (valid & live[np.where(valid, tgt, 0)]).any(axis=1)
        new_live = live | reach
        if (new_live == live).all():
            break
        live = new_live
    if not live[0]:
        return np.zeros((0, n_classes), np.int64), np.zeros(0, np.bool_)
    new_id = np.full(n, -1, np.int64)
    new_id[live] = np.arange(int(live.sum()))
    kept = table[live]
    kept = np.where(kept >= 0, new_id[np.where(kept >= 0, kept, 0)], -1)
    return kept, accepting[live]


def _minimize(table: np.ndarray, accepting: np.ndarray):
    """Moore partition refinement; the start state's block becomes state 0."""
    block = accepting.astype(np.int64)
    n_blocks = len(np.unique(block))
    while True:
        succ = np.where(table >= 0, block[np.where(table >= 0, table, 0)], -1)
        sig = np.column_stack([block, succ])
        _, new_block = np.unique(sig, axis=0, return_inverse=True)
        new_block = new_block.reshape(-1)
        count = int(new_block.max()) + 1
        block = new_block
        if count == n_blocks:
            break
        n_blocks = count
    # renumber blocks in first-seen order from the start state (start -> 0)
    order = np.full(n_blocks, -1, np.int64)
    nxt = 0
    for s in range(table.shape[0]):
        b = block[s]
        if order[b] < 0:
            order[b] = nxt
            nxt += 1
    block = order[block]
    rep = np.zeros(n_blocks, np.int64)
    rep[block[::-1]] = np.arange(table.shape[0])[::-1]
    small = table[rep]
    small = np.where(small >= 0, block[np.where(small >= 0, small, 0)], -1)
    return small, accepting[rep]


def dfa_run(transitions: np.ndarray, state: int, data: bytes) -> int:
    """State after feeding ``data`` from ``state`` (-1 once dead)."""
    for b in data:
        if state < 0:
            return -1
        state = int(transitions[state, b])
    return state
