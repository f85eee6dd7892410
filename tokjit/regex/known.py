"""Recognize the split patterns that have a straight-line scanner (:mod:`tokjit.kernels.split_known`).

A pattern is recognized by its exact text (as tokenizer files and tiktoken spell it); any other pattern,
however close, keeps the VM. Its Unicode classes come from the pattern's own compiler output (the same
syntax and Unicode table), and before a scanner is used it must reproduce the VM's matches on a probe
text of edge cases, so a recognition mistake costs speed, never ids.
"""

from __future__ import annotations

import functools
import re

import numpy as np

from tokjit.kernels import split_known as sk
from tokjit.regex.compiler import Program, compile_pattern

_CL100K_HF = r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
_WORDS_CL100K = sk.CONTRACTIONS_ANY_CASE | sk.PREFIX_ANY | sk.OTHER_THEN_BREAKS | sk.SPACE_TO_BREAK

# pattern text -> (shape, flags, max_digits (0 = unbounded))
KNOWN: dict[str, tuple[int, int, int]] = {
    # GPT-2 (HF ByteLevel's built-in regex) and tiktoken's r50k / p50k / gpt2
    r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""":
        (sk.SHAPE_WORDS, sk.NUMBER_AFTER_SPACE, 0),
    r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s""":
        (sk.SHAPE_WORDS, sk.NUMBER_AFTER_SPACE | sk.SPACE_TO_END, 0),
    # cl100k as tokenizer.json spells it (Llama 3, GPT-3.5/4), tiktoken's cl100k_base, Qwen 2 (one digit)
    _CL100K_HF: (sk.SHAPE_WORDS, _WORDS_CL100K, 3),
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s""":
        (sk.SHAPE_WORDS, _WORDS_CL100K | sk.SPACE_TO_END, 3),
    _CL100K_HF.replace(r"\p{N}{1,3}", r"\p{N}"): (sk.SHAPE_WORDS, _WORDS_CL100K, 1),
    # o200k (GPT-4o), the same text in tiktoken and tokenizer.json
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+""":
        (sk.SHAPE_CASED, sk.CONTRACTIONS_ANY_CASE | sk.OTHER_THEN_BREAKS_SLASH | sk.SPACE_TO_BREAK, 3),
    # DeepSeek-V3's third split (tokenizer.json, and llama.cpp's deepseek-v3 pre type)
    "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+|"
    " ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+": (sk.SHAPE_DEEPSEEK, sk.SPACE_TO_BREAK, 0),
}

# What a recognized pattern does with a subject made of one kind of character, for a split that
# follows a class run (tokjit.regex.class_runs.stream_plan): every nonempty string of the first class is
# one match of the whole string, and no string of the second class holds a match (None: no such class).
# DeepSeek's: a letter or mark run is the second alternative's match (its optional prefix takes no
# letter); every alternative needs a letter, mark, punctuation, symbol or space. The words shape's
# letter run is its `` ?\p{L}+`` / ``[^\r\n\p{L}\p{N}]?\p{L}+`` (the contractions start with ').
PURE_RUNS: dict[int, tuple[str | None, str | None]] = {
    sk.SHAPE_DEEPSEEK: (r"[\p{L}\p{M}]", r"[^\p{L}\p{M}\p{P}\p{S}\s]"),
    sk.SHAPE_WORDS: (r"\p{L}", None),
}

_ROLES = ((sk.ROLE_LETTER, r"\p{L}"), (sk.ROLE_NUMBER, r"\p{N}"), (sk.ROLE_SPACE, r"\s"),
          (sk.ROLE_UPPER, r"[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]"), (sk.ROLE_LOWER, r"[\p{Ll}\p{Lm}\p{Lo}\p{M}]"),
          (sk.ROLE_FOLDS_TO_CONTRACTION, r"(?i:[sdmtlvre])"), (sk.ROLE_MARK, r"\p{M}"),
          (sk.ROLE_PUNCT_SYM, r"[\p{P}\p{S}]"))

# edge cases a scanner must split exactly as the VM does before it is trusted
PROBE = "\n".join([
    "Hello world, it's a TEST. I'M here; we'LL see what'S what: don't WON'T they're we've I'd",
    "'s 'S 'tis 're 'RE 've 'll 'LL 'd ''s x's X'S 'ſ 'ﬅ ʼs",
    "numbers 1 12 123 1234 12345 ١٢٣٤ ²³ ⅫⅩ 3.14 1,000,000 -5 +7 0x1F",
    "  two  spaces\tand\ttabs\n\nnew lines \r\n crlf \n\n\n  \u00a0nbsp\u3000ideo \u2028sep\u2029 \x0b\x0c\x85",
    "trailing spaces   \n   \nmixed \t\n \t",
    "ÉCOLE école École CamelCaseWords iPhone McDonald'S ÀÉÎÕÜ ǅungla ǈ ʰʲ",
    "中文文本测试，标点。日本語のテキスト、カタカナ。한국어 텍스트 Русский ТЕКСТ текст العربية עברית हिन्दी",
    "e\u0301 a\u0308\u0304 \u0301lone marks\u0300 ก้ำ",
    "emoji 👍🏽👨‍👩‍👧 ❤️ 🇯🇵 symbols ©®™ §¶ ★☆ ∑∫ ← → /path/to/file.py ///",
    "code: def f(x):\n    return x**2  # comment\n\tif (a && b) { c++; }\r\n",
    "punct!!! ??? ... --- ((( ))) [[[]]] {{{}}} <<<>>> \"quoted\" 'single' `back`",
    "  ", " ", "\n", "\t\t", "a", "1", "!",
    "(x) .method @decorator #tag $var -flag x=y a_b [link](url) {key} ~home `tick` 'quote' \"dq\"",
    "\u0301\u0301ab \u0301 1abc 1 ab\u0300c \u00a0word \u3000語 _x _é .é ¿Qué? ¡Sí! «guillemets» €5 ±3",
    "line one:\n\n  ;\r\n  ^^ \t-- \n\t\n",
])


def roles_table(syntax: str, unicode_table: str) -> np.ndarray:
    """uint8 roles per code point (``ROLE_*`` bits), from the classes the compiler builds for this
    syntax and Unicode table."""
    return _roles_table(syntax, unicode_table)


@functools.lru_cache(maxsize=None)
def _roles_table(syntax: str, unicode_table: str) -> np.ndarray:
    roles = np.zeros(0x110000, np.uint8)
    for bit, atom in _ROLES:
        members = class_members(compile_pattern(atom, syntax=syntax, unicode_table=unicode_table))
        if bit == sk.ROLE_FOLDS_TO_CONTRACTION:
            members[:128] = False  # the scanner tests ASCII letters itself
        roles[members] |= bit
    roles.setflags(write=False)
    return roles


def class_members(program: Program, k: int = 0, n: int = 0x110000) -> np.ndarray:
    """Flags of the code points below ``n`` in class ``k`` of ``program``, as the VM decides membership."""
    gc = np.asarray(program.gc)[:n].astype(np.uint64)
    hit = ((np.uint64(program.cls_mask[k]) >> gc) & np.uint64(1)).astype(bool)
    lo, hi = int(program.cls_roff[k]), int(program.cls_roff[k + 1])
    for r in range(lo, hi):
        a, b = int(program.cls_ranges[2 * r]), int(program.cls_ranges[2 * r + 1])
        if b >= a:
            hit[a:min(b + 1, n)] = True
    if program.cls_neg[k]:
        hit = ~hit
    hit[:128] = program.cls_ascii[k] != 0
    return hit


def recognize(program: Program) -> tuple[int, int, int, np.ndarray] | None:
    """``(shape, flags, max_digits, roles)`` when ``program``'s pattern has a scanner that reproduces the VM
    on :data:`PROBE`, else ``None``."""
    return _recognize(program.pattern, program.syntax, program.table)


@functools.lru_cache(maxsize=64)
def _recognize(pattern: str, syntax: str, unicode_table: str):
    known = KNOWN.get(pattern)
    if known is None:
        return None
    shape, flags, max_digits = known
    roles = roles_table(syntax, unicode_table)
    if not _ascii_runs_hold(roles):
        return None
    if _plain_ascii_holds(roles) and (shape != sk.SHAPE_DEEPSEEK or _ascii_other_is_punctuation(roles)):
        flags |= sk.BLOCK_ASCII
    if not agrees_with_vm(pattern, syntax, unicode_table, (shape, flags, max_digits, roles), PROBE):
        return None
    return shape, flags, max_digits, roles


def _ascii_other_is_punctuation(roles: np.ndarray) -> bool:
    """Whether every printable ASCII byte that is no letter, digit or space is punctuation or a symbol:
    SHAPE_DEEPSEEK's block scan takes them as its ``[\\p{P}\\p{S}]`` (its other rules need no more)."""
    other = np.array([b for b in range(0x21, 0x7F) if not chr(b).isalnum()])
    return bool(np.all(roles[other] & sk.ROLE_PUNCT_SYM))


def _plain_ascii_holds(roles: np.ndarray) -> bool:
    """Whether the bytes the block scanner takes as plain (:func:`~tokjit.kernels.split_known._plain_masks`)
    have the roles it gives them. Letters, upper and lower letters and numbers are ASCII's ranges
    already (:func:`_ascii_runs_hold`, checked first); whitespace must be exactly 0x09-0x0D and the
    space among the plain bytes 0x09-0x0D and 0x20-0x7E (0x0E-0x1F and 0x7F stop a block)."""
    plain = np.r_[0x09:0x0E, 0x20:0x7F]
    space = (roles[plain] & sk.ROLE_SPACE) != 0
    return bool(np.array_equal(space, (plain <= 0x0D) | (plain == 0x20)))


def _ascii_runs_hold(roles: np.ndarray) -> bool:
    """Whether the ASCII members of each role the scanner runs over a word at a time are the ranges
    it assumes (``split_known.ASCII_RUN_ROLES``)."""
    for bit, ranges in sk.ASCII_RUN_ROLES.items():
        expected = np.zeros(128, bool)
        for lo, hi in re.findall(r"(.)-(.)", ranges):
            expected[ord(lo):ord(hi) + 1] = True
        if not np.array_equal((roles[:128] & bit) != 0, expected):
            return False
    return True


def agrees_with_vm(pattern: str, syntax: str, unicode_table: str, known, text: str) -> bool:
    """Whether the scanner gives the VM's matches on every line of ``text`` and on the whole of it."""
    from tokjit.regex.compiled import CompiledRegex
    shape, flags, max_digits, roles = known
    vm = CompiledRegex(pattern, syntax=syntax, unicode_table=unicode_table)
    roles = np.require(roles, np.uint8, ("C", "W"))  # the fused kernels' array type: one compile
    for piece in [text, *text.split("\n")]:
        buf = np.frombuffer(bytearray(piece.encode("utf-8")), np.uint8)
        starts, ends = vm.find_spans(buf)
        cap = buf.shape[0] + 16
        out_s, out_e = np.empty(cap, np.int64), np.empty(cap, np.int64)
        n = sk.split_known(np.int64(shape), np.int64(flags), np.int64(max_digits), roles, buf, np.int64(0),
                           np.int64(buf.shape[0]), out_s, out_e, np.int64(0))
        if n == sk.DEFER:
            continue
        if n < 0 or not (np.array_equal(out_s[:n], starts) and np.array_equal(out_e[:n], ends)):
            return False
    return True


def pure_runs(program: Program) -> tuple[np.ndarray | None, np.ndarray | None] | None:
    """``(whole, unmatched)``: flags per code point of the characters any nonempty run of which is one
    whole match of ``program``'s pattern, and of those no run of which holds a match (:data:`PURE_RUNS`,
    each ``None`` when the shape has none), when the pattern is recognized, else ``None``."""
    known = recognize(program)
    if known is None or known[0] not in PURE_RUNS:
        return None
    return tuple(None if atom is None else _members(atom, program.syntax, program.table)
                 for atom in PURE_RUNS[known[0]])


@functools.lru_cache(maxsize=16)
def _members(atom: str, syntax: str, unicode_table: str) -> np.ndarray:
    members = class_members(compile_pattern(atom, syntax=syntax, unicode_table=unicode_table))
    members.setflags(write=False)
    return members
