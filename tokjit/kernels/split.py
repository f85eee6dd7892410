"""Pre-tokenizer span kernels: HF's split behaviours over regex matches, and the Metaspace split."""

from __future__ import annotations

from numba import njit

from tokjit.kernels.utf8 import decode_at, utf8_len

SPLIT_REMOVED = 0  # HF's SplitDelimiterBehavior::Removed: the gaps between matches (the matches, inverted)
SPLIT_ISOLATED = 1  # HF's SplitDelimiterBehavior::Isolated: matches and the gaps between them, each a piece
SPLIT_CONTIGUOUS = 4  # HF's SplitDelimiterBehavior::Contiguous: runs of matches, and of gaps, each a piece


@njit(cache=True, nogil=True, _nrt=False)
def apply_split_behavior(seg_start, seg_end, m_starts, m_ends, n_matches, behavior, invert,
                         out_starts, out_ends, n_out):
    """Turn the matches inside one piece into sub-pieces, appending at ``out_*[n_out:]``.

    Mirrors HF ``NormalizedString::split``: the piece is cut into alternating match / gap spans,
    ``invert`` swaps which is which, then the behaviour keeps, isolates or merges the match spans.
    Empty spans are dropped. O(n_matches). Capacity needed: 2 * n_matches + 1.
    """
    pos = seg_start
    prev_match = False
    k = 0
    while True:
        # next span: a gap [pos, m_start) or the match itself
        if k < n_matches and m_starts[k] == pos and m_ends[k] > m_starts[k]:
            s = m_starts[k]
            e = m_ends[k]
            is_match = True
            k += 1
        elif k < n_matches and m_starts[k] == pos:
            k += 1  # empty match: no span
            if behavior == SPLIT_CONTIGUOUS:
                # but HF folds it in as a match, which parts the gaps around it
                prev_match = not invert
            continue
        else:
            s = pos
            e = m_starts[k] if k < n_matches else seg_end
            is_match = False
        if e <= s:
            break
        pos = e
        if invert:
            is_match = not is_match
        if behavior == SPLIT_REMOVED:
            if not is_match:
                out_starts[n_out] = s
                out_ends[n_out] = e
                n_out += 1
        elif behavior == SPLIT_ISOLATED:
            out_starts[n_out] = s
            out_ends[n_out] = e
            n_out += 1
        elif behavior == 2:  # MergedWithPrevious: a match joins the span before it (if not a match)
            if is_match and not prev_match and n_out > 0 and out_ends[n_out - 1] == s:
                out_ends[n_out - 1] = e
            else:
                out_starts[n_out] = s
                out_ends[n_out] = e
                n_out += 1
        elif behavior == 3:  # MergedWithNext: a gap joins the match just before it
            if prev_match and not is_match and n_out > 0 and out_ends[n_out - 1] == s:
                out_ends[n_out - 1] = e
            else:
                out_starts[n_out] = s
                out_ends[n_out] = e
                n_out += 1
        else:  # Contiguous: consecutive spans of the same kind merge
            if is_match == prev_match and n_out > 0 and out_ends[n_out - 1] == s:
                out_ends[n_out - 1] = e
            else:
                out_starts[n_out] = s
                out_ends[n_out] = e
                n_out += 1
        prev_match = is_match
    return n_out


@njit(cache=True, nogil=True, _nrt=False)
def metaspace_pieces(buf, align, starts, ends, n_pieces, rep, prepend, split,
                     out_buf, out_align, out_starts, out_ends):
    """HF ``Metaspace`` over every piece: " " -> ``rep``; ``rep`` prepended where ``prepend[i]`` and
    the piece does not already start with it; with ``split``, a new piece starts at every ``rep``
    (``MergedWithNext``). Returns (bytes written, pieces written). O(total bytes). Capacity:
    ``out_buf``/``out_align`` >= len(rep) * (bytes + pieces) (+1 for align), pieces >= bytes + pieces.
    """
    r = rep.shape[0]
    m = 0
    k = 0
    for i in range(n_pieces):
        s = starts[i]
        e = ends[i]
        if e <= s:
            continue
        begin = m
        starts_with = e - s >= r
        if starts_with:
            for t in range(r):
                if buf[s + t] != rep[t]:
                    starts_with = False
                    break
        if buf[s] == 32:  # HF checks after replacing spaces, so a leading space counts as ``rep``
            starts_with = True
        if prepend[i] and not starts_with:
            for t in range(r):
                out_buf[m] = rep[t]
                out_align[m] = align[s]
                m += 1
        for j in range(s, e):
            if buf[j] == 32:
                for t in range(r):
                    out_buf[m] = rep[t]
                    out_align[m] = align[j]
                    m += 1
            else:
                out_buf[m] = buf[j]
                out_align[m] = align[j]
                m += 1
        if not split:
            out_starts[k] = begin
            out_ends[k] = m
            k += 1
            continue
        piece_start = begin
        j = begin + 1
        while j + r <= m:
            hit = True
            for t in range(r):
                if out_buf[j + t] != rep[t]:
                    hit = False
                    break
            if hit:
                out_starts[k] = piece_start
                out_ends[k] = j
                k += 1
                piece_start = j
                j += r
            else:
                j += 1
        out_starts[k] = piece_start
        out_ends[k] = m
        k += 1
    return m, k


SCRIPT_ANY = 0  # HF's Script::Any: joins whatever is around it, and opens no piece


@njit(cache=True, nogil=True, _nrt=False)
def script_pieces(buf, starts, ends, n_pieces, script_of, out_starts, out_ends):
    """HF's UnicodeScripts pre-tokenizer over pieces ``buf[starts[i]:ends[i]]``: a piece is cut before
    every character whose script (``script_of[code point]``, HF's adjusted table) differs from the
    last script seen in it that was not :data:`SCRIPT_ANY`; the characters of script Any before the
    first other one are dropped, as HF's split drops them (a piece of only spaces gives nothing).
    Writes the new pieces at ``out_*`` (room for one per character) and returns their number.
    O(bytes)."""
    n_out = 0
    n_scripts = script_of.shape[0]
    for i in range(n_pieces):
        p, end = starts[i], ends[i]
        last = SCRIPT_ANY
        while p < end:
            length = utf8_len(buf[p])
            script = SCRIPT_ANY
            if p + length <= end:
                cp, length = decode_at(buf, p)
                if cp < n_scripts:
                    script = script_of[cp]
            else:
                length = end - p
            if script != SCRIPT_ANY and script != last:
                if last != SCRIPT_ANY:
                    out_ends[n_out - 1] = p
                out_starts[n_out] = p
                out_ends[n_out] = end
                n_out += 1
                last = script
            p += length
    return n_out
