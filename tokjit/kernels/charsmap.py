"""Kernels for SentencePiece's precompiled charsmap: an XOR-compressed compact double array (Darts-clone
units, uint32) whose leaves point into a blob of NUL-terminated replacement strings.

A unit packs: bit 8 "has leaf", bits 0-7 (and bit 31) the label, bits 10-31 the offset to the child block
(shifted by 8 more when bit 9 is set), and for leaf units bits 0-30 the value. Walking byte ``c`` from a
node at index ``i`` goes to ``(i ^ offset(units[i])) ^ c`` and succeeds when that unit's label is ``c``.

``units`` and ``strings`` are validated once by :func:`reachable_leaves` (every leaf a walk can reach has
its value unit inside ``units`` and its string inside ``strings``, NUL-terminated); walks also stop at any
child index past the end, so no kernel here reads out of bounds whatever the blob says.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from tokjit.kernels.utf8 import decode_bmp, put_utf8

# Grapheme_Cluster_Break values as stored in tokjit/data/grapheme_break.npz (bits 0-3)
GCB_OTHER, GCB_CR, GCB_LF, GCB_CONTROL, GCB_EXTEND, GCB_ZWJ, GCB_RI, GCB_PREPEND, GCB_SPACINGMARK, \
    GCB_L, GCB_V, GCB_T, GCB_LV, GCB_LVT = range(14)
PROP_EXTPICT = 16
INCB_CONSONANT, INCB_EXTEND, INCB_LINKER = 1, 2, 3


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def _offset(unit):
    return (unit >> 10) << ((unit & 512) >> 6)


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def _label(unit):
    return unit & 0x800000FF


@njit(cache=True, nogil=True)
def reachable_leaves(units, out_nodes, out_values):
    """Visit every node reachable from the root and list the leaf values a walk can produce.

    Returns the number of leaves written to ``out_nodes`` (node index) / ``out_values`` (value, or -1
    when the leaf's value unit lies outside ``units``). Breadth-first with a visited mark, so cycles
    in a corrupt array terminate. O(256 * reachable nodes). ``out_*`` need ``units.shape[0]`` slots.
    """
    n = units.shape[0]
    seen = np.zeros(n, np.uint8)
    queue = np.empty(n, np.int64)
    head = 0
    tail = 1
    queue[0] = 0
    seen[0] = 1
    n_leaves = 0
    while head < tail:
        node = queue[head]
        head += 1
        base = node ^ _offset(np.int64(units[node]))
        for c in range(256):
            child = base ^ c
            if child >= n:
                continue
            unit = np.int64(units[child])
            if _label(unit) != c:
                continue
            if (unit >> 8) & 1:
                leaf_at = child ^ _offset(unit)
                out_nodes[n_leaves] = child
                out_values[n_leaves] = (np.int64(units[leaf_at]) & 0x7FFFFFFF) if leaf_at < n else -1
                n_leaves += 1
            if not seen[child]:
                seen[child] = 1
                queue[tail] = child
                tail += 1
    return n_leaves


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def _step(units, n_units, pos, c):
    """One byte down the double array from base ``pos``: the child's base, or -1 (no child)."""
    child = pos ^ c
    if child >= n_units:
        return np.int64(-1), np.int64(0)
    unit = np.int64(units[child])
    if _label(unit) != c:
        return np.int64(-1), np.int64(0)
    return child ^ _offset(unit), (unit >> 8) & 1


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def _emit_string(strings, value, out, out_src, o, src):
    k = value
    while strings[k] != 0:
        out[o] = strings[k]
        out_src[o] = src
        o += 1
        k += 1
    return o


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def _spm_char_len(buf, i, n):
    """sentencepiece ``DecodeUTF8``: length of the valid UTF-8 character at ``i``, or 0 if invalid."""
    b0 = np.int64(buf[i])
    if b0 < 0x80:
        return 1
    cp, length = decode_bmp(buf, i, n)
    if cp >= 0:
        return length
    if n - i >= 4 and (b0 & 0xF8) == 0xF0:
        b1 = np.int64(buf[i + 1])
        b2 = np.int64(buf[i + 2])
        b3 = np.int64(buf[i + 3])
        cp = ((b0 & 0x07) << 18) | ((b1 & 0x3F) << 12) | ((b2 & 0x3F) << 6) | (b3 & 0x3F)
        if (b1 & 0xC0) == 0x80 and (b2 & 0xC0) == 0x80 and (b3 & 0xC0) == 0x80 and \
                0x10000 <= cp <= 0x10FFFF:
            return 4
    return 0


PLAIN_BYTES = 0x10000 // 8  # one bitmap of plain_chars: a bit per BMP code point


@njit(cache=True, nogil=True)
def plain_chars(units, plain):
    """Mark the BMP characters :func:`spm_normalize` copies unchanged, so it can skip their walk.
    ``plain`` (uint8[2 * PLAIN_BYTES]) holds two bitmaps (bit ``cp & 7`` of byte ``cp >> 3``): the
    first marks characters no key begins with (walking their UTF-8 bytes from the root fails before
    their end and passes no leaf); the second also those whose whole walk passes no leaf and ends at a
    node with no ASCII child, copied unchanged when ASCII or the end of the text follows (a letter
    that only begins keys with a combining mark after it). Surrogates (not UTF-8) stay unmarked.
    O(65536 * (3 + 128)) steps, once per charsmap."""
    n_units = units.shape[0]
    root = _offset(np.int64(units[0]))
    utf8 = np.zeros(3, np.uint8)
    for k in range(plain.shape[0]):
        plain[k] = 0
    for cp in range(0x10000):
        if 0xD800 <= cp < 0xE000:
            continue
        length = put_utf8(utf8, 0, cp)
        pos = root
        walked = 0  # bytes walked, or -1 when a leaf was passed
        for k in range(length):
            pos, leaf = _step(units, n_units, pos, np.int64(utf8[k]))
            if pos < 0:
                break
            if leaf:
                walked = -1
                break
            walked += 1
        bit = np.uint8(1 << (cp & 7))
        if 0 <= walked < length:
            plain[cp >> 3] |= bit
            plain[PLAIN_BYTES + (cp >> 3)] |= bit
        elif walked == length:
            ascii_child = False
            for c in range(0x80):
                if _step(units, n_units, pos, np.int64(c))[0] >= 0:
                    ascii_child = True
                    break
            if not ascii_child:
                plain[PLAIN_BYTES + (cp >> 3)] |= bit


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def _plain_len(buf, i, n, plain):
    """Length of the character at ``i`` when :func:`plain_chars` says it is copied unchanged here
    (valid UTF-8 in the BMP, marked in the first bitmap, or in the second with ASCII or the end of
    the text after it), else 0."""
    cp, length = np.int64(buf[i]), 1
    if cp >= 0x80:
        cp, length = decode_bmp(buf, i, n)
        if cp < 0:
            return 0
    byte = cp >> 3
    shift = cp & 7
    if (plain[byte] >> shift) & 1:
        return length
    if (plain[PLAIN_BYTES + byte] >> shift) & 1 and (i + length >= n or buf[i + length] < 0x80):
        return length
    return 0


@njit(cache=True, nogil=True, _nrt=False)
def spm_normalize(buf, i, n, units, strings, plain, max_step, out, out_src, o):
    """sentencepiece ``Normalizer::NormalizePrefix`` applied along ``buf[i:n]``.

    At each position the longest key of the double array that prefixes the rest of the input (bytes,
    NUL included) is replaced by its string; without a match one UTF-8 character is copied, an invalid
    byte becomes U+FFFD. Characters ``plain`` marks (:func:`plain_chars`; most text) are copied
    without the walk. ``out_src[j]`` = input offset where the rule that wrote byte ``j`` started.
    Stops early, before a step that might not fit (``max_step`` bytes), so the caller can grow ``out``.
    Returns (input position reached, output length, modified flag, deleted flag: some rule's string was
    empty, which sentencepiece's whitespace rules can tell from no unit at all). O(n * longest key).
    """
    n_units = units.shape[0]
    cap = out.shape[0]
    modified = False
    deleted = False
    root = _offset(np.int64(units[0]))
    while i < n:
        if o + max_step > cap:
            break
        length = _plain_len(buf, i, n, plain)
        if length > 0:
            for k in range(length):
                out[o + k] = buf[i + k]
                out_src[o + k] = i
            o += length
            i += length
            continue
        best_len = 0
        best_value = np.int64(0)
        pos = root
        k = i
        while k < n:
            pos, leaf = _step(units, n_units, pos, np.int64(buf[k]))
            if pos < 0:
                break
            k += 1
            if leaf:
                best_len = k - i
                best_value = np.int64(units[pos]) & 0x7FFFFFFF
        if best_len > 0:
            emitted = _emit_string(strings, best_value, out, out_src, o, i)
            deleted |= emitted == o
            o = emitted
            i += best_len
            modified = True
            continue
        length = _spm_char_len(buf, i, n)
        if length == 0:
            out[o] = 0xEF
            out[o + 1] = 0xBF
            out[o + 2] = 0xBD
            out_src[o] = i
            out_src[o + 1] = i
            out_src[o + 2] = i
            o += 3
            i += 1
            modified = True
            continue
        for k in range(length):
            out[o] = buf[i + k]
            out_src[o] = i
            o += 1
        i += length
    return i, o, modified, deleted


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def _utf8_len(b0):
    """Bytes the sequence at lead byte ``b0`` takes: as ``utf8.utf8_len`` (which assumes valid UTF-8),
    except that a continuation byte 0x80-0xBF in lead position counts as one, not two."""
    if b0 < 0x80:
        return 1
    if b0 >= 0xF0:
        return 4
    if b0 >= 0xE0:
        return 3
    if b0 >= 0xC0:
        return 2
    return 1


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def _decode_at(buf, i, n):
    """(code point, length) of the UTF-8 character at ``i`` (input is valid UTF-8; clamped at ``n``)."""
    b0 = np.int64(buf[i])
    length = _utf8_len(b0)
    if i + length > n:
        return b0, 1
    if length == 1:
        return b0, 1
    if length == 2:
        return ((b0 & 0x1F) << 6) | (np.int64(buf[i + 1]) & 0x3F), 2
    if length == 3:
        return ((b0 & 0x0F) << 12) | ((np.int64(buf[i + 1]) & 0x3F) << 6) | (np.int64(buf[i + 2]) & 0x3F), 3
    return (((b0 & 0x07) << 18) | ((np.int64(buf[i + 1]) & 0x3F) << 12) |
            ((np.int64(buf[i + 2]) & 0x3F) << 6) | (np.int64(buf[i + 3]) & 0x3F)), 4


@njit(cache=True, nogil=True, _nrt=False)
def grapheme_end(buf, i, n, props):
    """End of the extended grapheme cluster starting at ``i`` (UAX #29 rules GB3-GB13, as Rust
    ``unicode-segmentation`` applies them). ``props`` holds per code point the Grapheme_Cluster_Break
    value (bits 0-3), Extended_Pictographic (bit 4) and Indic_Conjunct_Break (bits 5-6). Every rule
    that looks back only looks inside the current cluster, so segmentation can start at any cluster
    boundary. O(cluster length)."""
    b0 = buf[i]
    if b0 < 0x80 and i + 1 < n and buf[i + 1] < 0x80:
        if b0 == 13 and buf[i + 1] == 10:
            return i + 2
        return i + 1  # two ASCII characters never join except CR LF
    cp, length = _decode_at(buf, i, n)
    prop = np.int64(props[cp]) if cp < props.shape[0] else np.int64(GCB_CONTROL)
    prev = prop & 15
    ri_count = 1 if prev == GCB_RI else 0
    emoji = 1 if prop & PROP_EXTPICT else 0  # 1: ExtPict Extend*, 2: ... ZWJ
    incb = 1 if (prop >> 5) == INCB_CONSONANT else 0  # 1: Consonant [Extend Linker]*, 2: ... a Linker seen
    j = i + length
    while j < n:
        cp, length = _decode_at(buf, j, n)
        prop = np.int64(props[cp]) if cp < props.shape[0] else np.int64(GCB_CONTROL)
        cur = prop & 15
        cur_incb = prop >> 5
        if prev == GCB_CR and cur == GCB_LF:
            join = True
        elif prev == GCB_CR or prev == GCB_LF or prev == GCB_CONTROL:
            join = False
        elif cur == GCB_CR or cur == GCB_LF or cur == GCB_CONTROL:
            join = False
        elif prev == GCB_L and (cur == GCB_L or cur == GCB_V or cur == GCB_LV or cur == GCB_LVT):
            join = True
        elif (prev == GCB_LV or prev == GCB_V) and (cur == GCB_V or cur == GCB_T):
            join = True
        elif (prev == GCB_LVT or prev == GCB_T) and cur == GCB_T:
            join = True
        elif cur == GCB_EXTEND or cur == GCB_ZWJ or cur == GCB_SPACINGMARK or prev == GCB_PREPEND:
            join = True
        elif cur_incb == INCB_CONSONANT and incb == 2:
            join = True
        elif prev == GCB_ZWJ and (prop & PROP_EXTPICT) and emoji == 2:
            join = True
        elif prev == GCB_RI and cur == GCB_RI and (ri_count & 1) == 1:
            join = True
        else:
            join = False
        if not join:
            break
        if cur_incb == INCB_CONSONANT:
            incb = 1
        elif incb > 0 and cur_incb == INCB_LINKER:
            incb = 2
        elif not (incb > 0 and cur_incb == INCB_EXTEND):
            incb = 0
        if prop & PROP_EXTPICT:
            emoji = 1
        elif emoji == 1 and cur == GCB_ZWJ:
            emoji = 2
        elif not (emoji == 1 and cur == GCB_EXTEND):
            emoji = 0
        ri_count = ri_count + 1 if cur == GCB_RI else 0
        prev = cur
        j += length
    return j


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def _first_match(buf, s, e, units, n_units, root):
    """HF ``spm_precompiled`` ``transform``: value of the SHORTEST key prefixing ``buf[s:e]`` (the walk
    stops at a NUL byte), or -1."""
    pos = root
    for k in range(s, e):
        c = np.int64(buf[k])
        if c == 0:
            return np.int64(-1)
        pos, leaf = _step(units, n_units, pos, c)
        if pos < 0:
            return np.int64(-1)
        if leaf:
            return np.int64(units[pos]) & 0x7FFFFFFF
    return np.int64(-1)


@njit(cache=True, nogil=True, _nrt=False)
def hf_normalize(buf, i, n, units, strings, props, max_rep, out, out_src, o):
    """HF ``tokenizers`` ``Precompiled`` normalizer along ``buf[i:n]`` (valid UTF-8).

    Per extended grapheme cluster: a cluster shorter than 6 bytes with a key prefixing it is replaced
    WHOLE by that (shortest) key's string; otherwise each character is looked up alone (shortest key
    within the character) and replaced or copied. ``out_src`` as in :func:`spm_normalize`. Stops before
    a cluster whose worst case might not fit. Returns (input position reached, output length, modified,
    output capacity needed for the next cluster).
    """
    n_units = units.shape[0]
    cap = out.shape[0]
    modified = False
    root = _offset(np.int64(units[0]))
    grow = max_rep if max_rep > 1 else 1
    while i < n:
        end = grapheme_end(buf, i, n, props)
        need = o + (end - i) * grow
        if need > cap:
            return i, o, modified, need
        if end - i < 6:
            value = _first_match(buf, i, end, units, n_units, root)
            if value >= 0:
                o = _emit_string(strings, value, out, out_src, o, i)
                modified = True
                i = end
                continue
        c = i
        while c < end:
            length = _utf8_len(np.int64(buf[c]))
            if c + length > end:
                length = end - c
            value = _first_match(buf, c, c + length, units, n_units, root) if (end - i >= 6 or c > i) \
                else np.int64(-1)
            if value >= 0:
                o = _emit_string(strings, value, out, out_src, o, c)
                modified = True
            else:
                for k in range(length):
                    out[o] = buf[c + k]
                    out_src[o] = c
                    o += 1
            c += length
        i = end
    return i, o, modified, np.int64(0)
