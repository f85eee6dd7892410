"""Numba backtracking VM for tokjit's pre-tokenization regexes.

The program comes from :mod:`tokjit.regex.compiler`; :class:`tokjit.regex.compiled.CompiledRegex` is
the Python entry point.  Matching semantics mirror
the backtracking engines the references use (Python ``regex``, Oniguruma in HF tokenizers,
fancy-regex in tiktoken): leftmost-first alternation, greedy/lazy/possessive quantifiers, atomic
groups and lookaround, successive non-overlapping matches like ``finditer``.
"""
from __future__ import annotations

import numpy as np
from numba import njit
from numba.cpython.unsafe.numbers import trailing_zeros

from tokjit.kernels.split import SPLIT_ISOLATED, apply_split_behavior
from tokjit.kernels.split_known import DEFER, SHAPE_VM, split_known
from tokjit.kernels.structs import (STEP_BEHAVIOR, STEP_CLASSES, STEP_INLINE, STEP_INVERT, STEP_JOINED,
                                    STEP_MAX_DIGITS, STEP_VM_WORD, STEP_PROG, STEP_RANGES, STEP_REP, STEP_ROFF,
                                    STEP_RUN, STEP_SHAPE, STEP_SHAPE_FLAGS, STEP_SKIP, STEP_STREAM_RANGES, STEP_KEPT,
                                    KEPT_ALL, KEPT_NONE, borrow)
from tokjit.kernels.memops import HIGH_BITS, LOW7_BITS, bytes_in, load_word, low_bytes_mask
from tokjit.kernels.utf8 import decode_at, utf8_len

__all__ = ["find_matches", "ERR_OUT_FULL", "ERR_STACK_FULL", "ERR_BUDGET"]

# ----------------------------------------------------------------------------- instruction set
# prog is int32[n, 5]: (op, a, b, c, guard); guard (SPLIT only) = class every match of the first
# branch must start with (-1: none): if the next code point is not in it, the VM takes the second
# branch directly.
OP_CLASS = 0         # a=class: consume one code point in class
OP_REP = 1           # a=class b=min c=index into rep_info (max, mode, memo slot)
OP_SPLIT = 2         # a=first pc, b=second pc, c=memo slot (-1: none), guard
OP_JMP = 3           # a=target
OP_MATCH = 4
OP_ATOMIC_START = 5
OP_ATOMIC_END = 6
OP_LOOK_START = 7    # a=kind (bit0 negative, bit1 behind), b=pc after LOOK_END, c=behind length
OP_LOOK_END = 8
OP_ASSERT = 9        # a=assert kind, b=word class

# repetition modes
MODE_GREEDY, MODE_LAZY, MODE_POSSESSIVE = 0, 1, 2

# assertion kinds
A_TEXT_START = 0      # \A
A_TEXT_END = 1        # \z
A_END_OR_FINAL_NL = 2  # python $, onig/rust \Z
A_LINE_START = 3      # multiline ^
A_LINE_END = 4        # multiline $
A_WORD_B = 5
A_NOT_WORD_B = 6

# return codes
ERR_OUT_FULL = -1
ERR_STACK_FULL = -2
ERR_BUDGET = -3

# frame kinds (4 int64 per frame: kind, a, b, c)
_F_BT = 0          # a=pc b=pos
_F_BARRIER = 1     # atomic group
_F_LOOK_POS = 2    # a=saved pos
_F_LOOK_NEG = 3    # a=saved pos b=continuation pc
_F_GREEDY = 4      # a=next pc b=pos c=min pos
_F_LAZY = 5        # a=rep pc b=pos c=count


@njit(cache=True, nogil=True)
def _prev(buf, p):
    p -= 1
    while (buf[p] & 0xC0) == 0x80:
        p -= 1
    return p


@njit(cache=True, nogil=True, _nrt=False)
def _class_len_slow(k, buf, p, cls_mask, cls_neg, cls_roff, cls_ranges, gc):
    """Length of the non-ASCII code point at ``p`` if it is in class ``k``, else 0."""
    cp, ln = decode_at(buf, p)
    hit = ((cls_mask[k] >> np.uint64(gc[cp])) & np.uint64(1)) != 0
    if not hit:
        lo = np.int64(cls_roff[k])
        end = np.int64(cls_roff[k + 1])
        hi = end
        while lo < hi:
            mid = (lo + hi) >> 1
            if cls_ranges[2 * mid + 1] < cp:
                lo = mid + 1
            else:
                hi = mid
        if lo < end and cls_ranges[2 * lo] <= cp:
            hit = True
    if hit != (cls_neg[k] != 0):
        return ln
    return 0


# ``params[2]`` of find_matches, a program's word (``Program.vm_word``): its memo slots in the low
# bits, and above them what follows an empty match. EMPTY_RETRY (Python's regex module, std::regex):
# the next attempt at the same position must be non-empty. EMPTY_NEXT_CHAR (Oniguruma and Rust's
# regex crates, as HF tokenizers and tiktoken iterate): the next search starts a character on, and an
# empty match where the previous match ended is dropped.
MEMO_SLOTS_MASK = (1 << 32) - 1
EMPTY_RULE_SHIFT = 32
EMPTY_RETRY = 0
EMPTY_NEXT_CHAR = 1


@njit(cache=True, nogil=True, _nrt=False)
def find_matches(buf, start, end, prog, rep_info, cls_ascii, cls_mask, cls_neg, cls_roff,
                 cls_ranges, gc, params, out_starts, out_ends, stack):
    """All successive non-overlapping matches of a compiled regex in ``buf[start:end]`` (UTF-8).

    Backtracking VM over ``prog`` (int32[n, 5]: op, a, b, c, guard) with an explicit frame stack
    (4 int64 per frame), decoding UTF-8 on the fly; leftmost-first alternation, greedy / lazy /
    possessive repetition (single-class loops run as one instruction that gives back one code
    point per backtrack), alternatives skipped without a frame when the next code point cannot
    start them (SPLIT guard class), atomic groups and lookaround via barrier frames.  Semantics follow
    Python ``regex.finditer`` / Oniguruma / fancy-regex, including each one's empty-match rule
    (``EMPTY_*``, from ``params[2]``).
    ``[start, end)`` is the whole subject for anchors and lookbehind.

    ``params`` = (use_memo, step_budget, program word: memo slots and empty-match rule).  With
    use_memo, loop states (pc, pos) that already failed are remembered in a bitset at the front of
    ``stack`` (valid because the pattern has no backreferences; states inside lookaround are not
    memoized), which bounds the work by O(n_memo_slots * n) plus lookaround bodies.  Without it the
    VM is plain backtracking and gives up with ERR_BUDGET (-3) when ``step_budget`` is exceeded so
    the caller can retry with memo.

    Returns the number of matches written to ``out_starts``/``out_ends`` (byte offsets), or
    -1 (output arrays too small) / -2 (stack too small) / -3 (step budget exceeded).
    """
    use_memo = params[0] != 0
    budget = params[1]
    n_memo = params[2] & MEMO_SLOTS_MASK
    next_char_after_empty = (params[2] >> EMPTY_RULE_SHIFT) == EMPTY_NEXT_CHAR
    last_end = np.int64(-1)
    nlen = end - start + 1
    memo_words = 0
    if use_memo:
        memo_words = (n_memo * nlen + 63) // 64
        if memo_words + 64 > stack.shape[0]:
            return -2
        for i in range(memo_words):
            stack[i] = 0
    base = memo_words
    cap = stack.shape[0] - 4
    n_out = 0
    steps = np.int64(0)
    s = start
    notempty = False
    max_out = out_starts.shape[0]
    while s <= end:
        sp = base
        pc = 0
        pos = s
        matched = False
        while True:
            steps += 1
            if steps > budget:
                return -3
            op = prog[pc, 0]
            fail = False
            if op == OP_CLASS:
                ln = 0
                if pos < end:
                    b0 = buf[pos]
                    if b0 < 128:
                        ln = np.int64(cls_ascii[prog[pc, 1], b0])
                    else:
                        ln = _class_len_slow(prog[pc, 1], buf, pos, cls_mask, cls_neg, cls_roff, cls_ranges, gc)
                if ln:
                    pos += ln
                    pc += 1
                else:
                    fail = True
            elif op == OP_REP:
                k = prog[pc, 1]
                mn = prog[pc, 2]
                ri = prog[pc, 3]
                mx = rep_info[ri, 0]
                mode = rep_info[ri, 1]
                slot = rep_info[ri, 2]
                p = pos
                cnt = 0
                while cnt < mn:
                    ln = 0
                    if p < end:
                        b0 = buf[p]
                        if b0 < 128:
                            ln = np.int64(cls_ascii[k, b0])
                        else:
                            ln = _class_len_slow(k, buf, p, cls_mask, cls_neg, cls_roff, cls_ranges, gc)
                    if ln == 0:
                        fail = True
                        break
                    p += ln
                    cnt += 1
                if not fail:
                    memo_on = use_memo and slot >= 0
                    if memo_on:
                        bit = slot * nlen + (p - start)
                        if (stack[bit >> 6] >> (bit & 63)) & 1:
                            fail = True
                    pm = p
                    if not fail:
                        if mode == MODE_LAZY:
                            if mx < 0 or cnt < mx:
                                if sp + 4 > cap:
                                    return -2
                                stack[sp] = _F_LAZY
                                stack[sp + 1] = pc
                                stack[sp + 2] = p
                                stack[sp + 3] = cnt
                                sp += 4
                            pos = p
                            pc += 1
                        else:
                            plast = p
                            truncated = False
                            while mx < 0 or cnt < mx:
                                if memo_on:
                                    bit = slot * nlen + (p - start)
                                    w = bit >> 6
                                    m = np.int64(1) << (bit & 63)
                                    if p > pm and (stack[w] & m) != 0:
                                        # the loop state at p already failed: so did every
                                        # continuation at or after p; stop consuming here
                                        truncated = True
                                        break
                                    stack[w] |= m
                                if p >= end:
                                    break
                                b0 = buf[p]
                                if b0 < 128:
                                    ln = np.int64(cls_ascii[k, b0])
                                else:
                                    ln = _class_len_slow(k, buf, p, cls_mask, cls_neg, cls_roff, cls_ranges, gc)
                                if ln == 0:
                                    break
                                plast = p
                                p += ln
                                cnt += 1
                            steps += cnt
                            if truncated:
                                if mode == MODE_POSSESSIVE:
                                    fail = True
                                p = plast
                        if not fail and mode != 1:
                            if mode == MODE_GREEDY and p > pm:
                                if sp + 4 > cap:
                                    return -2
                                stack[sp] = _F_GREEDY
                                stack[sp + 1] = pc + 1
                                stack[sp + 2] = p
                                stack[sp + 3] = pm
                                sp += 4
                            pos = p
                            pc += 1
            elif op == OP_SPLIT:
                g = prog[pc, 4]
                if g >= 0:
                    skip = True
                    if pos < end:
                        b0 = buf[pos]
                        if b0 < 128:
                            lnx = np.int64(cls_ascii[g, b0])
                        else:
                            lnx = _class_len_slow(g, buf, pos, cls_mask, cls_neg, cls_roff, cls_ranges, gc)
                        skip = lnx == 0
                    if skip:
                        pc = prog[pc, 2]
                        continue
                slot = prog[pc, 3]
                if use_memo and slot >= 0:
                    bit = slot * nlen + (pos - start)
                    w = bit >> 6
                    m = np.int64(1) << (bit & 63)
                    if stack[w] & m:
                        fail = True
                    else:
                        stack[w] |= m
                if not fail:
                    if sp + 4 > cap:
                        return -2
                    stack[sp] = _F_BT
                    stack[sp + 1] = prog[pc, 2]
                    stack[sp + 2] = pos
                    sp += 4
                    pc = prog[pc, 1]
            elif op == OP_JMP:
                pc = prog[pc, 1]
            elif op == OP_MATCH:
                if notempty and pos == s:
                    fail = True
                else:
                    matched = True
                    break
            elif op == OP_ATOMIC_START:
                if sp + 4 > cap:
                    return -2
                stack[sp] = _F_BARRIER
                sp += 4
                pc += 1
            elif op == OP_ATOMIC_END:
                q = sp - 4
                while stack[q] != _F_BARRIER:
                    q -= 4
                sp = q
                pc += 1
            elif op == OP_LOOK_START:
                kind = prog[pc, 1]
                neg = (kind & 1) != 0
                p = pos
                ok = True
                if kind & 2:
                    for _ in range(prog[pc, 3]):
                        if p <= start:
                            ok = False
                            break
                        p -= 1
                        while (buf[p] & 0xC0) == 0x80:
                            p -= 1
                if not ok:
                    if neg:
                        pc = prog[pc, 2]
                    else:
                        fail = True
                else:
                    if sp + 4 > cap:
                        return -2
                    stack[sp] = _F_LOOK_NEG if neg else _F_LOOK_POS
                    stack[sp + 1] = pos
                    stack[sp + 2] = prog[pc, 2]
                    sp += 4
                    pos = p
                    pc += 1
            elif op == OP_LOOK_END:
                q = sp - 4
                while stack[q] != _F_LOOK_POS and stack[q] != _F_LOOK_NEG:
                    q -= 4
                sp = q
                if stack[q] == _F_LOOK_POS:
                    pos = stack[q + 1]
                    pc = stack[q + 2]
                else:
                    fail = True
            else:  # ASSERT
                kind = prog[pc, 1]
                ok = False
                if kind == A_TEXT_START:
                    ok = pos == start
                elif kind == A_TEXT_END:
                    ok = pos == end
                elif kind == A_END_OR_FINAL_NL:
                    ok = pos == end or (pos == end - 1 and buf[pos] == 10)
                elif kind == A_LINE_START:
                    ok = pos == start or buf[pos - 1] == 10
                elif kind == A_LINE_END:
                    ok = pos == end or buf[pos] == 10
                else:
                    wk = prog[pc, 2]
                    before = False
                    after = False
                    if pos > start:
                        pq = pos - 1
                        while (buf[pq] & 0xC0) == 0x80:
                            pq -= 1
                        b0 = buf[pq]
                        if b0 < 128:
                            lnx = np.int64(cls_ascii[wk, b0])
                        else:
                            lnx = _class_len_slow(wk, buf, pq, cls_mask, cls_neg, cls_roff, cls_ranges, gc)
                        before = lnx != 0
                    if pos < end:
                        b0 = buf[pos]
                        if b0 < 128:
                            lnx = np.int64(cls_ascii[wk, b0])
                        else:
                            lnx = _class_len_slow(wk, buf, pos, cls_mask, cls_neg, cls_roff, cls_ranges, gc)
                        after = lnx != 0
                    ok = (before != after) == (kind == A_WORD_B)
                if ok:
                    pc += 1
                else:
                    fail = True
            if fail:
                resumed = False
                while sp > base:
                    sp -= 4
                    fk = stack[sp]
                    if fk == _F_BT:
                        pc = stack[sp + 1]
                        pos = stack[sp + 2]
                        resumed = True
                        break
                    elif fk == _F_GREEDY:
                        npc = stack[sp + 1]
                        p = stack[sp + 2] - 1
                        while (buf[p] & 0xC0) == 0x80:
                            p -= 1
                        pm = stack[sp + 3]
                        if p > pm:
                            stack[sp + 2] = p
                            sp += 4
                        pc = npc
                        pos = p
                        resumed = True
                        break
                    elif fk == _F_LOOK_NEG:
                        pos = stack[sp + 1]
                        pc = stack[sp + 2]
                        resumed = True
                        break
                    elif fk == _F_LAZY:
                        rpc = stack[sp + 1]
                        p = stack[sp + 2]
                        cnt = stack[sp + 3]
                        k = prog[rpc, 1]
                        mx = rep_info[prog[rpc, 3], 0]
                        if (mx < 0 or cnt < mx) and p < end:
                            b0 = buf[p]
                            if b0 < 128:
                                ln = np.int64(cls_ascii[k, b0])
                            else:
                                ln = _class_len_slow(k, buf, p, cls_mask, cls_neg, cls_roff, cls_ranges, gc)
                            if ln:
                                p += ln
                                cnt += 1
                                if mx < 0 or cnt < mx:
                                    stack[sp + 2] = p
                                    stack[sp + 3] = cnt
                                    sp += 4
                                pc = rpc + 1
                                pos = p
                                resumed = True
                                break
                    # barriers / positive-lookaround frames: discard and keep failing
                if not resumed:
                    break
        if matched and next_char_after_empty and pos == s and pos == last_end:
            matched = False  # an empty match where the last one ended is dropped (Oniguruma, Rust)
        if matched:
            if n_out >= max_out:
                return -1
            out_starts[n_out] = s
            out_ends[n_out] = pos
            n_out += 1
            last_end = pos
            if use_memo:
                for sl in range(n_memo):
                    bit = sl * nlen + (pos - start)
                    stack[bit >> 6] &= ~(np.int64(1) << (bit & 63))
            if pos != s:
                notempty = False
                s = pos
            elif not next_char_after_empty:
                notempty = True
            else:
                # the next search starts a character on (a non-empty match here is never tried)
                if s >= end:
                    break
                s += utf8_len(buf[s])
        else:
            notempty = False
            if s >= end:
                break
            b0 = buf[s]
            s += utf8_len(b0)
    return n_out




@njit(cache=True, nogil=True)
def find_matches_in(rx, buf, start, end, params, out_starts, out_ends, stack):
    """The matches of a compiled :data:`~tokjit.kernels.structs.REGEX` in ``buf[start:end]``: its
    straight-line scanner when the pattern has one (:mod:`tokjit.kernels.split_known`), else (or when
    the scanner defers) :func:`find_matches`. The form the fused kernels call (one structure instead of
    eight arrays keeps their per-call cost down)."""
    if rx.shape != SHAPE_VM:
        n = split_known(rx.shape, rx.shape_flags, rx.max_digits, rx.roles, buf, start, end, out_starts, out_ends,
                        np.int64(0))
        if n != DEFER:
            return n
    return find_matches(buf, start, end, rx.prog, rx.rep_info, rx.cls_ascii, rx.cls_mask, rx.cls_neg, rx.cls_roff,
                        rx.cls_ranges, rx.gc, params, out_starts, out_ends, stack)


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def _bit(bits, at, cp):
    """Code point ``cp``'s flag in the BMP bitmap at ``bits[at:at + BMP_WORDS]``."""
    return (bits[at + (cp >> 6)] >> np.uint64(cp & 63)) & np.uint64(1) != 0


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def _is_kept(bits, kept, cp):
    """Whether BMP code point ``cp`` is among a class's kept characters (``kept``: KEPT_ALL, KEPT_NONE or
    their bitmap's offset in ``bits``)."""
    return kept == KEPT_ALL or kept >= 0 and _bit(bits, kept, cp)


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def _class_len(k, bits, at, buf, p, end, classes):
    """Length of the code point at ``p`` if it is in class ``k``, else 0 (also at ``end``); a BMP
    character is looked up in the class's bitmap ``bits[at:at + BMP_WORDS]``. ``classes``: the
    program's (cls_ascii, cls_mask, cls_neg, cls_roff, cls_ranges, gc)."""
    cls_ascii, cls_mask, cls_neg, cls_roff, cls_ranges, gc = classes
    if p >= end:
        return 0
    b = buf[p]
    if b < 0x80:
        return 1 if cls_ascii[k, b] != 0 else 0
    if b < 0xF0:
        cp, ln = decode_at(buf, p)
        return ln if _bit(bits, at, cp) else 0
    return _class_len_slow(k, buf, p, cls_mask, cls_neg, cls_roff, cls_ranges, gc)


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def _past_ascii_outside(buf, p, end, ranges):
    """The first position from ``p`` whose byte is not ASCII or lies in one of the two ASCII ranges
    ``ranges`` packs (``tokjit.regex.class_runs.ascii_ranges``), or ``end``: eight bytes a step."""
    lo1, hi1, lo2, hi2 = ranges & 0xFF, (ranges >> 8) & 0xFF, (ranges >> 16) & 0xFF, (ranges >> 24) & 0xFF
    while p < end:
        m = min(end - p, 8)
        w = load_word(buf, p, m)
        w7 = w & LOW7_BITS
        stops = w & HIGH_BITS
        if lo1 <= hi1:
            stops |= bytes_in(w7, lo1, hi1) & ~w
        if lo2 <= hi2:
            stops |= bytes_in(w7, lo2, hi2) & ~w
        stops &= low_bytes_mask(m)  # (padding bytes may be in a range)
        if stops != 0:
            return p + np.int64(trailing_zeros(stops) >> 3)
        p += m
    return p


@njit(cache=True, nogil=True, _nrt=False)
def class_run_matches(buf, start, end, form, bits, cls_ascii, cls_mask, cls_neg, cls_roff, cls_ranges, gc,
                      out_starts, out_ends):
    """The matches in ``buf[start:end]`` of a pattern that is a run of one class, as :func:`find_matches`
    finds them, in one pass with a class test or two per code point (O(n); the VM's search from every
    position cost ~15 ns a byte on ``\\p{N}{1,3}``, DeepSeek-V3's first split). ``form`` is
    ``(min, max, class B, prefix class A, to_end, ASCII ranges, B's bitmap, A's bitmap)``
    (``tokjit.regex.class_runs.class_run_form``; the bitmaps' offsets in ``bits``):

    * ``B{min,max}``: each run of B cut into matches of max characters from its start, the rest a
      match when it holds min or more (a match ends where the run or the count does, and every later
      start inside a run holds fewer); with ``to_end``, only a run that reaches the end (max unbounded);
    * ``A?B{1,max}``: at each position the prefix when B follows it, else B alone (a character in both
      sets starts the same run either way), else no match there.

    Returns the number of matches, or ERR_OUT_FULL."""
    run_min, run_max, k, prefix, to_end, ranges = form[0], form[1], form[2], form[3], form[4], form[5]
    k_at, prefix_at = form[6], form[7]
    classes = (cls_ascii, cls_mask, cls_neg, cls_roff, cls_ranges, gc)
    cap = out_starts.shape[0]
    n = 0
    p = start
    if prefix >= 0:
        while p < end:
            q = p
            la = _class_len(prefix, bits, prefix_at, buf, p, end, classes)
            if la > 0 and _class_len(k, bits, k_at, buf, p + la, end, classes) > 0:
                q = p + la
            elif _class_len(k, bits, k_at, buf, p, end, classes) == 0:
                b0 = buf[p]
                p += utf8_len(b0)
                continue
            count = 0
            while count != run_max:
                lb = _class_len(k, bits, k_at, buf, q, end, classes)
                if lb == 0:
                    break
                q += lb
                count += 1
            if n >= cap:
                return ERR_OUT_FULL
            out_starts[n] = p
            out_ends[n] = q
            n += 1
            p = q
        return n
    count = 0
    run_start = start
    while p <= end:
        if count == 0 and ranges >= 0:
            p = _past_ascii_outside(buf, p, end, ranges)  # (ASCII text between runs: digits in English)
        ln = _class_len(k, bits, k_at, buf, p, end, classes)
        if ln > 0:
            if count == 0:
                run_start = p
            count += 1
            p += ln
            if count != run_max:
                continue
        if count >= run_min and (to_end == 0 or p >= end):
            if n >= cap:
                return ERR_OUT_FULL
            out_starts[n] = run_start
            out_ends[n] = p
            n += 1
        if ln == 0:
            if p >= end:
                break
            b0 = buf[p]
            p += utf8_len(b0)
        count = 0
    return n


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def find_step_matches(rx, k, buf, start, end, params, m_starts, m_ends, stack):
    """The matches of split ``k`` of a REGEX holding several (its ``steps`` row ``k``, see
    ``tokjit.kernels.structs.make_regex``): :func:`class_run_matches` for a class repeated, the
    recognized pattern's scanner (:mod:`tokjit.kernels.split_known`) where it has one and does not
    defer, else :func:`find_matches` (sets ``params``' program word to that program's)."""
    row = borrow(rx, "steps")[k]
    p0, p1, r0, r1 = row[STEP_PROG], row[STEP_PROG + 1], row[STEP_REP], row[STEP_REP + 1]
    c0, c1, g0, g1 = row[STEP_CLASSES], row[STEP_CLASSES + 1], row[STEP_RANGES], row[STEP_RANGES + 1]
    o0, o1 = row[STEP_ROFF], row[STEP_ROFF + 1]
    if row[STEP_RUN] > 0:
        return class_run_matches(buf, start, end, row[STEP_RUN:STEP_RUN + 8], borrow(rx, "run_bits"),
                                 borrow(rx, "cls_ascii")[c0:c1],
                                 borrow(rx, "cls_mask")[c0:c1], borrow(rx, "cls_neg")[c0:c1],
                                 borrow(rx, "cls_roff")[o0:o1], borrow(rx, "cls_ranges")[g0:g1], borrow(rx, "gc"),
                                 m_starts, m_ends)
    if row[STEP_SHAPE] != SHAPE_VM:
        n = split_known(row[STEP_SHAPE], row[STEP_SHAPE_FLAGS], row[STEP_MAX_DIGITS], borrow(rx, "roles"), buf, start,
                        end, m_starts, m_ends, np.int64(0))
        if n != DEFER:
            return n
    params[2] = row[STEP_VM_WORD]
    return find_matches(buf, start, end, borrow(rx, "prog")[p0:p1], borrow(rx, "rep_info")[r0:r1],
                        borrow(rx, "cls_ascii")[c0:c1], borrow(rx, "cls_mask")[c0:c1], borrow(rx, "cls_neg")[c0:c1],
                        borrow(rx, "cls_roff")[o0:o1], borrow(rx, "cls_ranges")[g0:g1], borrow(rx, "gc"), params,
                        m_starts, m_ends, stack)


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def _step_classes(rx, k):
    """Split ``k``'s classes as :func:`_class_len` takes them."""
    row = borrow(rx, "steps")[k]
    c0, c1, g0, g1, o0, o1 = (row[STEP_CLASSES], row[STEP_CLASSES + 1], row[STEP_RANGES], row[STEP_RANGES + 1],
                              row[STEP_ROFF], row[STEP_ROFF + 1])
    return (borrow(rx, "cls_ascii")[c0:c1], borrow(rx, "cls_mask")[c0:c1], borrow(rx, "cls_neg")[c0:c1],
            borrow(rx, "cls_roff")[o0:o1], borrow(rx, "cls_ranges")[g0:g1], borrow(rx, "gc"))


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def _run_char(k, at, kept, bits, buf, p, end, classes):
    """``(length, kept)`` of the code point at ``p`` when it is in class ``k`` (:func:`_class_len`),
    else ``(0, False)``; ``kept``: whether it is among the class's kept characters (``kept``:
    KEPT_ALL, KEPT_NONE or their bitmap's offset in ``bits``; none past U+FFFF unless all are)."""
    if p >= end:
        return 0, False
    b = buf[p]
    if b < 0x80:
        if classes[0][k, b] == 0:
            return 0, False
        return 1, _is_kept(bits, kept, np.int64(b))
    if b < 0xF0:
        cp, ln = decode_at(buf, p)
        if not _bit(bits, at, cp):
            return 0, False
        return ln, _is_kept(bits, kept, cp)
    cls_ascii, cls_mask, cls_neg, cls_roff, cls_ranges, gc = classes
    return _class_len_slow(k, buf, p, cls_mask, cls_neg, cls_roff, cls_ranges, gc), kept == KEPT_ALL


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def _rest_of_run(k, at, kept, max_count, bits, buf, p, end, classes):
    """``(end, kept)`` of the run of class ``k`` whose first code point ends at ``p``: up to
    ``max_count`` code points in all (-1: no bound); ``kept``: every code point after the first is
    one of the class's kept ones (:func:`_run_char`)."""
    count = 1
    whole = True
    while count != max_count:
        ln, ok = _run_char(k, at, kept, bits, buf, p, end, classes)
        if ln == 0:
            break
        p += ln
        whole = whole and ok
        count += 1
    return p, whole


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def _next_run(buf, p, end, ranges, run_a, run_b, bits, classes_a, classes_b):
    """``(start, end, kept)`` of the first run from ``p`` of class a or class b (disjoint classes; a
    run of one class, cut at its max characters), or ``(end, end, False)``; ``kept``: every code point
    of it is one of its class's kept ones. ``run_*``: (class, bitmap offset in ``bits``, max, kept;
    :func:`_run_char`); class b -1: none. ``ranges``: the classes' ASCII members together, or -1."""
    ka, at_a, max_a, kept_a = run_a
    kb, at_b, max_b, kept_b = run_b
    while p < end:
        if ranges >= 0:
            p = _past_ascii_outside(buf, p, end, ranges)
            if p >= end:
                break
        b = buf[p]
        if 0x80 <= b < 0xF0:
            # a BMP character outside ASCII: decoded once for both bitmaps (Cyrillic between the runs
            # of DeepSeek's digit and CJK classes, Han inside them)
            cp, ln = decode_at(buf, p)
            if _bit(bits, at_a, cp):
                q, whole = _rest_of_run(ka, at_a, kept_a, max_a, bits, buf, p + ln, end, classes_a)
                return p, q, whole and _is_kept(bits, kept_a, cp)
            if kb >= 0 and _bit(bits, at_b, cp):
                q, whole = _rest_of_run(kb, at_b, kept_b, max_b, bits, buf, p + ln, end, classes_b)
                return p, q, whole and _is_kept(bits, kept_b, cp)
            p += ln
            continue
        ln, ok = _run_char(ka, at_a, kept_a, bits, buf, p, end, classes_a)
        if ln > 0:
            q, whole = _rest_of_run(ka, at_a, kept_a, max_a, bits, buf, p + ln, end, classes_a)
            return p, q, whole and ok
        if kb >= 0:
            ln, ok = _run_char(kb, at_b, kept_b, bits, buf, p, end, classes_b)
            if ln > 0:
                q, whole = _rest_of_run(kb, at_b, kept_b, max_b, bits, buf, p + ln, end, classes_b)
                return p, q, whole and ok
        p += utf8_len(buf[p])
    return end, end, False


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def _cuts_in_place(row):
    """Whether split step ``row`` can be run by its recognized pattern's scanner writing the pieces
    in place: no class run, a recognized shape, Isolated, not inverted. Under Isolated the matches
    that cover a piece are its pieces, so the scanner find_step_matches would run gives them
    directly (as the fused piece loop has it do for a single split)."""
    return row[STEP_RUN] <= 0 and row[STEP_SHAPE] != SHAPE_VM and row[STEP_BEHAVIOR] == SPLIT_ISOLATED \
        and row[STEP_INVERT] == 0


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def _inline_split(rx, k, buf, start, end, params, m_starts, m_ends, stack, out_starts, out_ends, n_out):
    """Split ``k``'s pieces of ``buf[start:end]`` appended at ``out_*[n_out:]``: the new count, or a
    negative :func:`find_matches` code."""
    row = borrow(rx, "steps")[k]
    if _cuts_in_place(row):
        n = split_known(row[STEP_SHAPE], row[STEP_SHAPE_FLAGS], row[STEP_MAX_DIGITS], borrow(rx, "roles"), buf, start,
                        end, out_starts[n_out:], out_ends[n_out:], np.int64(1))
        if n >= 0:
            return n_out + n
    n_m = find_step_matches(rx, k, buf, start, end, params, m_starts, m_ends, stack)
    if n_m < 0:
        return n_m
    return apply_split_behavior(start, end, m_starts, m_ends, n_m, row[STEP_BEHAVIOR], row[STEP_INVERT] != 0,
                                out_starts, out_ends, n_out)


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def ascii_gap_plan(rx):
    """(shape, shape flags, max digits, ASCII ranges) of the split that cuts a whole text when a
    sequence of splits runs in one streamed pass (every later split inside it) and the text is plain
    ASCII holding no character of the pass's run classes: then the text is one gap, and its pieces
    are what the inline split's recognized pattern matches under Isolated (``_runs_then_split``'s
    shortcut and ``_inline_split``'s). Shape SHAPE_VM when the sequence is not of that kind."""
    steps = borrow(rx, "steps")
    row = steps[0]
    inline = row[STEP_INLINE]
    none = (np.int64(SHAPE_VM), np.int64(0), np.int64(0), np.int64(-1))
    if inline < 0 or row[STEP_STREAM_RANGES] < 0 or row[STEP_SKIP] != 0:
        return none
    for k in range(1, steps.shape[0]):
        if steps[k, STEP_SKIP] == 0:
            return none
    cut = steps[inline]
    if not _cuts_in_place(cut):
        return none
    return cut[STEP_SHAPE], cut[STEP_SHAPE_FLAGS], cut[STEP_MAX_DIGITS], row[STEP_STREAM_RANGES]


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def ascii_gap_pieces(plan, roles, buf, start, end, out_starts, out_ends):
    """The pieces of ``buf[start:end]`` under :func:`ascii_gap_plan`'s ``plan`` when the text is plain
    ASCII outside the run classes and has more than one byte (``split_in_steps``' pieces, without its
    two calls: ~40 ns of a short text's ~330), else -1 (the caller runs ``split_in_steps``)."""
    shape, flags, max_digits, ranges = plan
    if shape == SHAPE_VM or end - start < 2 or _past_ascii_outside(buf, start, end, ranges) < end:
        return np.int64(-1)
    n = split_known(shape, flags, max_digits, roles, buf, start, end, out_starts, out_ends, np.int64(1))
    return n if n >= 0 else np.int64(-1)


@njit(cache=True, nogil=True, _nrt=False)
def _runs_then_split(rx, k, buf, start, end, params, m_starts, m_ends, stack, out_starts, out_ends, n_out):
    """Split ``k``'s class runs in ``buf[start:end]`` and the joined split's (``STEP_JOINED``), each a
    piece, and the gaps between them cut by the inline split (``STEP_INLINE``; else each a piece), as
    are the runs not made only of characters it keeps whole: what those splits make of the piece one
    after another, in one pass (the plan and why it holds: ``tokjit.regex.class_runs.stream_plan``).
    Appends at ``out_*[n_out:]``; returns the new count or a negative :func:`find_matches` code.
    O(bytes) plus the inline split's cost on what it gets."""
    steps = borrow(rx, "steps")
    row = steps[k]
    joined, inline, ranges = row[STEP_JOINED], row[STEP_INLINE], row[STEP_STREAM_RANGES]
    if end > start and ranges >= 0 and _past_ascii_outside(buf, start, end, ranges) >= end:
        # ASCII outside both classes (most short English texts): no run, the piece is one gap
        if inline < 0 or end - start == 1:
            out_starts[n_out] = start
            out_ends[n_out] = end
            return n_out + 1
        return _inline_split(rx, inline, buf, start, end, params, m_starts, m_ends, stack, out_starts, out_ends, n_out)
    run_a = (row[STEP_RUN + 2], row[STEP_RUN + 6], row[STEP_RUN + 1], row[STEP_KEPT])
    run_b = (np.int64(-1), np.int64(0), np.int64(0), np.int64(KEPT_NONE))
    other = k
    if joined >= 0:
        other = joined
        run_b = (steps[joined, STEP_RUN + 2], steps[joined, STEP_RUN + 6], steps[joined, STEP_RUN + 1],
                 row[STEP_KEPT + 1])
    classes_a, classes_b, bits = _step_classes(rx, k), _step_classes(rx, other), borrow(rx, "run_bits")
    pos = start
    while pos < end:
        run_start, run_end, kept = _next_run(buf, pos, end, ranges, run_a, run_b, bits, classes_a, classes_b)
        for half in range(2):  # the gap before the run, then the run
            s, e, whole = (pos, run_start, False) if half == 0 else (run_start, run_end, kept)
            if e <= s:
                continue
            # one character is one piece under Isolated, matched or not (63% of the gaps in Chinese)
            if whole or inline < 0 or e - s == utf8_len(buf[s]):
                out_starts[n_out] = s
                out_ends[n_out] = e
                n_out += 1
            else:
                n_out = _inline_split(rx, inline, buf, s, e, params, m_starts, m_ends, stack, out_starts,
                                      out_ends, n_out)
                if n_out < 0:
                    return n_out
        pos = run_end
    return n_out


@njit(cache=True, nogil=True, _nrt=False)
def split_in_steps(rx, buf, start, end, params, m_starts, m_ends, stack, tmp_starts, tmp_ends, out_starts, out_ends):
    """The pieces of ``buf[start:end]`` after a sequence of regex splits (HF's Sequence of Split
    pre-tokenizers, DeepSeek's for one): each split's pattern runs on every piece of the split before
    it, alone (it is the whole subject for anchors and lookaround), and its behaviour makes that
    piece's pieces, as the staged pipeline does step after step. ``rx.steps`` row k says where split
    k's program lies in the structure's arrays (``tokjit.kernels.structs.make_regex``).

    Pieces go to ``out_*`` (returns their number), each step's to ``tmp_*`` first (both: one slot a
    byte); ``m_*`` hold one piece's matches (a slot a byte, plus one); ``params`` as
    :func:`find_matches` takes them, the program word set per split. Returns a negative :func:`find_matches`
    code when one fails (the caller takes the memoizing path). O(bytes x splits x pattern cost)."""
    steps = borrow(rx, "steps")
    n = 0
    if end > start:
        out_starts[0] = start
        out_ends[0] = end
        n = 1
    for k in range(steps.shape[0]):
        row = steps[k]
        if row[STEP_SKIP] != 0:
            continue  # an earlier split's pass ran this one
        streamed = row[STEP_JOINED] >= 0 or row[STEP_INLINE] >= 0
        n_next = 0
        for p in range(n):
            s, e = out_starts[p], out_ends[p]
            if streamed:
                n_next = _runs_then_split(rx, k, buf, s, e, params, m_starts, m_ends, stack, tmp_starts, tmp_ends,
                                          n_next)
                if n_next < 0:
                    return n_next
                continue
            n_m = find_step_matches(rx, k, buf, s, e, params, m_starts, m_ends, stack)
            if n_m < 0:
                return n_m
            # each piece's spans on their own: a merging behaviour never joins the pieces of two pieces
            n_next += apply_split_behavior(s, e, m_starts, m_ends, n_m, row[STEP_BEHAVIOR], row[STEP_INVERT] != 0,
                                           tmp_starts[n_next:], tmp_ends[n_next:], 0)
        for p in range(n_next):
            out_starts[p] = tmp_starts[p]
            out_ends[p] = tmp_ends[p]
        n = n_next
    return n
