"""Split patterns that are a run of one class, found by ``tokjit.kernels.regex_vm.class_run_matches``
without the VM: their form (which run, which classes) and their classes' bitmaps, worked out once at
load from the compiled program (the kernels read them from a REGEX's step rows and ``run_bits``)."""

from __future__ import annotations

import numpy as np

from tokjit.regex.compiler import (A_TEXT_END, MODE_GREEDY, MODE_LAZY, OP_ASSERT, OP_CLASS, OP_LOOK_END,
                                   OP_LOOK_START, OP_MATCH, OP_REP, Program)
from tokjit.kernels.split import SPLIT_ISOLATED
from tokjit.kernels.structs import KEPT_ALL, KEPT_NONE
from tokjit.regex.known import class_members, pure_runs
from tokjit.regex.unicode_tables import CATEGORIES


def class_run(program: Program) -> tuple[tuple, list[np.ndarray]] | None:
    """``(form, bitmaps)`` of a pattern that is a run of one class (:func:`class_run_form`; the
    bitmaps of its class and, when it has one, its prefix class), else ``None``: what
    ``tokjit.kernels.structs.make_regex`` takes for each split."""
    form = class_run_form(program)
    if form[0] == 0:
        return None
    return form, [bmp_bits(program, k) for k in (form[2], form[3]) if k >= 0]


def class_run_form(program) -> tuple[int, int, int, int, int, int]:
    """``(min, max, class, prefix class, to_end, ASCII ranges)`` when ``program`` is a run of one class
    that ``tokjit.kernels.regex_vm.class_run_matches`` finds without the VM, else zeros. The forms: ``B{min,max}``
    (``\\p{N}{1,3}``, ``[...]+``, one class alone or written m times; max -1 = unbounded),
    ``A?B{1,max}`` with a greedy optional prefix (prefix class >= 0; llama.cpp's ``\\s?[A-Za-z...]+``),
    and ``B{min,}`` that must reach the subject's end (to_end 1: ``\\s+(?![\\s\\S])``, ``\\s+\\z``).
    Greedy or possessive runs only (a lazy run's matches are min characters each; a possessive prefix
    does not give its character back). The ASCII ranges (:func:`ascii_ranges`; -1 with a prefix) let the kernel pass
    over ASCII text outside the class eight bytes at a time."""
    form = _class_run(program)
    ranges = ascii_ranges(program.cls_ascii[form[2]]) if form[0] > 0 and form[3] < 0 else -1
    return (*form, ranges)


def stream_plan(programs: list[Program], behaviors: list[int], inverts: list[bool], runs: list) -> list[tuple]:
    """Per split of a sequence, ``(joined, inline, skipped, ranges, kept, joined_kept)`` (the
    ``STEP_JOINED`` .. ``STEP_KEPT + 1`` columns of ``tokjit.kernels.structs.make_regex``): which splits
    a class run takes into its own pass over a piece (``tokjit.kernels.regex_vm.split_in_steps``), as
    DeepSeek-V3's ``\\p{N}{1,3}`` takes its ``[一-龥぀-ゟ゠-ヿ]+`` and the word split after them.

    A run ``B{1,max}`` isolated (``runs[k]``'s form) joins the next split when that is one too and the
    classes share no character: the two splits' pieces are then each class's runs (cut every max
    characters from their start) and what lies between them, found in one pass. The split after them
    runs in the same pass on what lies between the runs, and on a run unless each of its characters is
    one the split keeps whole, when it isolates: a run of characters outside its class, when it is a
    class run, or of a recognized pattern's ``tokjit.regex.known.PURE_RUNS`` (all matched whole, or
    none matched); and any run of one character (at most one a run: StarCoder's digits before its
    byte-level split). ``kept``: :data:`KEPT_ALL`, :data:`KEPT_NONE`, or the flags of the kept characters
    of the class (:func:`bmp_bits`' layout; a run holding a character past U+FFFF goes through the
    split). ``ranges``: the ASCII members of the classes together (:func:`ascii_ranges`)."""
    n = len(programs)
    alone = (-1, -1, 0, -1, KEPT_NONE, KEPT_NONE)
    plan = [alone] * n

    def plain(k):
        form = runs[k][0] if runs[k] is not None else None
        return (form is not None and form[0] == 1 and form[3] < 0 and form[4] == 0
                and behaviors[k] == SPLIT_ISOLATED and not inverts[k])

    k = 0
    while k < n:
        if not plain(k):
            k += 1
            continue
        classes = [class_members(programs[k], runs[k][0][2])]
        j = k + 1
        joined = inline = -1
        if j < n and plain(j):
            members = class_members(programs[j], runs[j][0][2])
            if not (classes[0] & members).any():
                joined = j
                classes.append(members)
                j += 1
        kept = [KEPT_NONE] * 2
        if j < n and behaviors[j] == SPLIT_ISOLATED:
            keeps = _kept_whole(programs[j], runs[j])
            # a run of one character is one piece under Isolated, whatever the split matches in it
            kept = [KEPT_ALL if runs[s][0][1] == 1 else _kept(c, keeps) for s, c in zip((k, joined), classes)]
            kept += [KEPT_NONE] * (2 - len(classes))
            if not all(isinstance(x, int) and x == KEPT_NONE for x in kept):
                inline = j
        if joined < 0 and inline < 0:
            k += 1
            continue
        together = np.logical_or.reduce(classes)
        plan[k] = (joined, inline, 0, ascii_ranges(together[:128]), *kept)
        for taken in (joined, inline):
            if taken >= 0:
                plan[taken] = (-1, -1, 1, -1, KEPT_NONE, KEPT_NONE)
        k = max(joined, inline) + 1
    return plan


def _kept_whole(program: Program, run) -> list[np.ndarray]:
    """Sets of characters any run of one of which the split by ``program`` (a class run when ``run`` is
    its ``class_run``) matches whole or not at all: under Isolated such a run is one piece, as it
    came in. Every class run's match holds a character of its class."""
    if run is not None:
        return [~class_members(program, run[0][2])]
    pure = pure_runs(program)
    return [c for c in pure if c is not None] if pure is not None else []


def _kept(members: np.ndarray, keeps: list[np.ndarray]):
    """:func:`stream_plan`'s ``kept`` for a class: of the sets in ``keeps``, the one holding the most of
    its characters (a run mixing two sets is not whole in both)."""
    best = max(keeps, key=lambda c: int((members & c).sum()), default=None)
    if best is None or not (members & best).any():
        return KEPT_NONE
    if not (members & ~best).any():
        return KEPT_ALL
    return _pack_bits(members[:0x10000] & best[:0x10000])


def bmp_bits(program, k: int) -> np.ndarray:
    """Class ``k``'s flags for U+0000..U+FFFF, 64 to a uint64 (bit ``cp & 63`` of word ``cp >> 6``): one
    load and a shift decide a BMP character, where the VM's test looks up its category and searches
    the class's ranges (CJK text through DeepSeek-V3's splits: ~25% of its time)."""
    return _pack_bits(class_members(program, k, 0x10000))


def _pack_bits(flags: np.ndarray) -> np.ndarray:
    return np.packbits(flags.reshape(-1, 8), axis=1, bitorder="little").reshape(-1).view("<u8").astype(np.uint64)


def ascii_ranges(members: np.ndarray) -> int:
    """The ASCII members of a class (``members``: 128 flags) as at most two ranges ``lo1 | hi1 << 8 |
    lo2 << 16 | hi2 << 24`` (an empty range has lo > hi), or -1 when they are more."""
    edges = np.flatnonzero(np.diff(np.r_[0, (np.asarray(members[:128]) != 0).astype(np.int8), 0]))
    bounds = [(int(a), int(b) - 1) for a, b in zip(edges[::2], edges[1::2])]
    if len(bounds) > 2:
        return -1
    bounds += [(1, 0)] * (2 - len(bounds))
    (lo1, hi1), (lo2, hi2) = bounds
    return lo1 | hi1 << 8 | lo2 << 16 | hi2 << 24


def _class_run(program) -> tuple[int, int, int, int, int]:
    """:func:`class_run_form` without the ASCII ranges."""
    none = (0, 0, 0, -1, 0)
    prog = np.asarray(program.prog)
    ops = prog[:, 0].tolist()

    def rep(row):  # (min, max, mode) of a REP row
        hi, mode, _ = (int(x) for x in program.rep_info[prog[row, 3]])
        return int(prog[row, 2]), hi, mode

    if len(ops) >= 2 and ops == [OP_CLASS] * (len(ops) - 1) + [OP_MATCH] and len(set(prog[:-1, 1].tolist())) == 1:
        return len(ops) - 1, len(ops) - 1, int(prog[0, 1]), -1, 0  # B{m}, the class written m times
    if ops == [OP_REP, OP_MATCH]:
        lo, hi, mode = rep(0)
        return (lo, hi, int(prog[0, 1]), -1, 0) if lo >= 1 and mode != MODE_LAZY else none
    if ops == [OP_REP, OP_REP, OP_MATCH]:
        (plo, phi, pmode), (lo, hi, mode) = rep(0), rep(1)
        if (plo, phi, pmode) == (0, 1, MODE_GREEDY) and lo == 1 and mode != MODE_LAZY:
            return 1, hi, int(prog[1, 1]), int(prog[0, 1]), 0
        return none
    ends = ops == [OP_REP, OP_ASSERT, OP_MATCH] and prog[1, 1] == A_TEXT_END
    if ops == [OP_REP, OP_LOOK_START, OP_CLASS, OP_LOOK_END, OP_MATCH] and prog[1, 1] == 1:
        # a negative lookahead of any one character (every category but the surrogates, which
        # UTF-8 text never holds): the subject's end
        k = int(prog[2, 1])
        every = (1 << len(CATEGORIES)) - 1 - (1 << CATEGORIES.index("Cs"))
        ends = bool(program.cls_neg[k] == 0 and program.cls_ascii[k].all()
                    and int(program.cls_mask[k]) & every == every)
    if ends:
        lo, hi, mode = rep(0)
        if lo >= 1 and hi == -1 and mode != MODE_LAZY:
            return lo, -1, int(prog[0, 1]), -1, 1
    return none
