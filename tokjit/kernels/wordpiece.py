"""Kernels of the WordPiece family: BERT normalization, BERT pre-tokenization, the vocabulary trie
and the greedy longest-match-first walk.

All Unicode knowledge comes in as arrays built by ``scripts/gen_wordpiece_tables.py``: one flag byte
per code point (``FLAG_*``) plus sorted key/offset/data tables for canonical decomposition,
lowercase mapping and canonical combining class. Input buffers are valid UTF-8 (the caller encodes
Python strings), so decoding does no validation.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from tokjit.kernels.utf8 import put_utf8

FLAG_OTHER = 1        # dropped by clean_text (HF is_control: Cc/Cf/Co of Unicode 8, U+0000, U+FFFD)
FLAG_WHITESPACE = 2   # Rust char::is_whitespace
FLAG_CJK = 4          # isolated with spaces by handle_chinese_chars
FLAG_NONSPACING = 8   # dropped by strip_accents after NFD (Mn of Unicode 8)
FLAG_PUNCT = 16       # isolated by BertPreTokenizer
FLAG_DECOMP = 32      # has a canonical decomposition
FLAG_LOWER = 64       # to_lowercase changes the character
FLAG_CCC = 128        # canonical combining class != 0

OPT_CLEAN = 1
OPT_CJK = 2
OPT_STRIP = 4
OPT_LOWER = 8

MAX_LOCAL = 16  # code points one input character may become before reordering (3 CJK x decomposition)

EDGE_MIX = np.int64(-7046029254386353131)  # 0x9E3779B97F4A7C15 as a wrapping int64


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def _decode(buf, i):
    """(code point, byte length) of the UTF-8 character starting at ``buf[i]`` (valid UTF-8)."""
    b = np.int64(buf[i])
    if b < 0x80:
        return b, 1
    if b < 0xE0:
        return ((b & 0x1F) << 6) | (np.int64(buf[i + 1]) & 0x3F), 2
    if b < 0xF0:
        return ((b & 0x0F) << 12) | ((np.int64(buf[i + 1]) & 0x3F) << 6) | (np.int64(buf[i + 2]) & 0x3F), 3
    return (((b & 0x07) << 18) | ((np.int64(buf[i + 1]) & 0x3F) << 12)
            | ((np.int64(buf[i + 2]) & 0x3F) << 6) | (np.int64(buf[i + 3]) & 0x3F)), 4


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def _encode(cp, src, out, out_align, n):
    """Append the UTF-8 of ``cp`` to ``out``, every byte aligned to ``src``; returns the new length."""
    end = put_utf8(out, n, cp)
    for k in range(n, end):
        out_align[k] = src
    return end


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def _find(keys, cp):
    """Index of ``cp`` in the sorted int32 array ``keys``, or -1. O(log n)."""
    lo = 0
    hi = keys.shape[0]
    while lo < hi:
        mid = (lo + hi) >> 1
        k = keys[mid]
        if k < cp:
            lo = mid + 1
        elif k > cp:
            hi = mid
        else:
            return mid
    return -1


@njit(cache=True, nogil=True, _nrt=False)
def _emit_final(cp, src, flags, low_keys, low_off, low_data, opts, out, out_align, n):
    """Last two BERT steps for one code point: drop nonspacing marks, lowercase, write UTF-8."""
    f = flags[cp]
    if (opts & OPT_STRIP) and (f & FLAG_NONSPACING):
        return n
    if (opts & OPT_LOWER) and (f & FLAG_LOWER):
        idx = _find(low_keys, cp)
        for j in range(low_off[idx], low_off[idx + 1]):
            n = _encode(np.int64(low_data[j]), src, out, out_align, n)
        return n
    return _encode(cp, src, out, out_align, n)


@njit(cache=True, nogil=True, _nrt=False)
def bert_normalize(buf, n_in, flags, tables, opts, run, out, out_align):
    """HF ``BertNormalizer``: clean_text, handle_chinese_chars, strip_accents, lowercase, in that order.

    ``tables`` = (dec_keys, dec_off, dec_data, low_keys, low_off, low_data, ccc_keys, ccc_vals);
    ``run`` = (run_cp, run_src, run_ccc); the last ``MAX_LOCAL`` entries of ``run_cp`` hold the code
    points of the character being mapped (so nothing is allocated: the kernel runs without reference
    counting, as the fused WordPiece kernel that calls it does).

    Every step of HF's normalizer is a per-character map except NFD's canonical reordering, so one
    pass maps each character (drop controls, whitespace -> ' ', ' ' c ' ' around CJK ideographs,
    full decomposition) and keeps the current run of combining characters (ccc != 0) in ``run_*``,
    insertion-sorted by ccc (stable, as NFD requires); when a starter ends the run, the run is
    flushed through "drop Mn, then lowercase". ``out_align[j]`` = byte offset in ``buf`` of the
    character output byte j came from. ASCII outside a run takes a short path.

    O(n) (runs are sorted by insertion: O(r^2) for a run of r marks). ``out`` must hold the worst
    expansion (the caller computes it from the tables). Returns the output length, or -1 when a
    combining run is longer than ``run_cp`` less ``MAX_LOCAL`` (the caller retries with a larger buffer).
    """
    dec_keys, dec_off, dec_data, low_keys, low_off, low_data, ccc_keys, ccc_vals = tables
    run_cp, run_src, run_ccc = run
    clean = (opts & OPT_CLEAN) != 0
    cjk = (opts & OPT_CJK) != 0
    strip = (opts & OPT_STRIP) != 0
    lower = (opts & OPT_LOWER) != 0
    cap_run = run_cp.shape[0] - MAX_LOCAL
    if cap_run < 0:
        return -1
    local = run_cp[cap_run:]
    n = 0
    run = 0
    i = 0
    while i < n_in:
        b = buf[i]
        if b < 0x80 and run == 0:
            f = flags[b]
            if clean:
                if f & FLAG_OTHER:
                    i += 1
                    continue
                if f & FLAG_WHITESPACE:
                    b = 32
            if lower and (f & FLAG_LOWER):
                b = b + 32
            out[n] = b
            out_align[n] = i
            n += 1
            i += 1
            continue
        cp, width = _decode(buf, i)
        src = i
        i += width
        f = flags[cp]
        if clean:
            if f & FLAG_OTHER:
                continue
            if f & FLAG_WHITESPACE:
                cp = 32
                f = flags[32]
        # characters this one becomes before reordering
        k = 0
        if cjk and (f & FLAG_CJK):
            local[0] = 32
            k = 1
        if strip and (f & FLAG_DECOMP):
            idx = _find(dec_keys, cp)
            for j in range(dec_off[idx], dec_off[idx + 1]):
                local[k] = dec_data[j]
                k += 1
        else:
            local[k] = cp
            k += 1
        if cjk and (f & FLAG_CJK):
            local[k] = 32
            k += 1
        for t in range(k):
            c = local[t]
            ccc = 0
            if strip and (flags[c] & FLAG_CCC):
                ccc = np.int64(ccc_vals[_find(ccc_keys, c)])
            if ccc == 0:
                for r in range(run):
                    n = _emit_final(run_cp[r], run_src[r], flags, low_keys, low_off, low_data, opts,
                                    out, out_align, n)
                run = 0
                n = _emit_final(c, src, flags, low_keys, low_off, low_data, opts, out, out_align, n)
            else:
                if run == cap_run:
                    return -1
                pos = run
                while pos > 0 and run_ccc[pos - 1] > ccc:
                    run_cp[pos] = run_cp[pos - 1]
                    run_src[pos] = run_src[pos - 1]
                    run_ccc[pos] = run_ccc[pos - 1]
                    pos -= 1
                run_cp[pos] = c
                run_src[pos] = src
                run_ccc[pos] = ccc
                run += 1
    for r in range(run):
        n = _emit_final(run_cp[r], run_src[r], flags, low_keys, low_off, low_data, opts, out, out_align, n)
    out_align[n] = n_in
    return n


@njit(cache=True, nogil=True, _nrt=False)
def bert_pre_tokenize(buf, starts, ends, n_pieces, flags, isolate_punct, out_starts, out_ends):
    """HF ``BertPreTokenizer`` (``isolate_punct``) or ``WhitespaceSplit`` over each piece.

    Whitespace (Rust ``char::is_whitespace``) is removed; with ``isolate_punct`` every punctuation
    character (``FLAG_PUNCT``: ASCII punctuation or Unicode P* as HF's tables know them) becomes a
    piece of its own; the rest forms words. O(bytes). ``out_*`` need one slot per character.
    """
    n = 0
    for p in range(n_pieces):
        i = starts[p]
        e = ends[p]
        word = -1
        while i < e:
            b = buf[i]
            if b < 0x80:
                f = flags[b]
                width = 1
            else:
                cp, width = _decode(buf, i)
                f = flags[cp]
            if f & FLAG_WHITESPACE:
                if word >= 0:
                    out_starts[n] = word
                    out_ends[n] = i
                    n += 1
                    word = -1
            elif isolate_punct and (f & FLAG_PUNCT):
                if word >= 0:
                    out_starts[n] = word
                    out_ends[n] = i
                    n += 1
                    word = -1
                out_starts[n] = i
                out_ends[n] = i + width
                n += 1
            elif word < 0:
                word = i
            i += width
        if word >= 0:
            out_starts[n] = word
            out_ends[n] = e
            n += 1
    return n


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def _edge_slot(node, byte, edges):
    """Row of edge (node, byte) in the open-addressing table ``edges`` (found, or the empty row).

    ``edges`` is int64 (size, 2): column 0 the key ``node << 8 | byte`` (-1 = empty), column 1
    ``child << 32 | (token + 1)`` with the id of the token ending at the child, so one step of a
    walk touches one cache line.
    """
    key = (np.int64(node) << 8) | np.int64(byte)
    mask = edges.shape[0] - 1
    h = key * EDGE_MIX
    slot = (h ^ (h >> 29)) & mask
    while True:
        k = edges[slot, 0]
        if k == key or k == -1:
            return slot
        slot = (slot + 1) & mask


@njit(cache=True, nogil=True)
def build_trie(blob, offsets, include, edges, node_token):
    """Byte trie of the tokens ``include`` marks, edges in a hash table (see :func:`_edge_slot`).

    ``node_token[node]`` = id of the token ending there (-1: none); when two ids spell the same
    bytes, the lowest id wins. Node 0 is the root. ``edges`` (power-of-two rows, column 0 filled
    with -1) needs at least twice the total token bytes rows; ``node_token`` (filled with -1)
    total + 1. Returns the node count. O(total token bytes).
    """
    n_nodes = 1
    for tid in range(offsets.shape[0] - 1):
        if not include[tid]:
            continue
        node = np.int64(0)
        for k in range(offsets[tid], offsets[tid + 1]):
            slot = _edge_slot(node, blob[k], edges)
            if edges[slot, 0] == -1:
                edges[slot, 0] = (node << 8) | np.int64(blob[k])
                edges[slot, 1] = np.int64(n_nodes) << 32
                n_nodes += 1
            node = edges[slot, 1] >> 32
        if node_token[node] < 0:
            node_token[node] = tid
    for slot in range(edges.shape[0]):
        if edges[slot, 0] != -1:
            child = edges[slot, 1] >> 32
            edges[slot, 1] = (child << 32) | (np.int64(node_token[child]) + 1)
    return n_nodes


@njit(cache=True, nogil=True)
def rehash_edges(edges, out):
    """Copy every edge of ``edges`` into ``out`` (a smaller table, column 0 filled with -1): the
    trie is built in a table sized by total token bytes, then kept in one sized by its edge count
    so walks stay in cache."""
    for slot in range(edges.shape[0]):
        key = edges[slot, 0]
        if key != -1:
            dst = _edge_slot(key >> 8, key & 0xFF, out)
            out[dst, 0] = key
            out[dst, 1] = edges[slot, 1]


@njit(cache=True, nogil=True)
def node_edges(node, edges, out):
    """Dense row of ``node``'s 256 edges (value column of :func:`_edge_slot`, 0 = no edge), so a
    walk's first step, always from the same node, is one array read."""
    for b in range(256):
        out[b] = 0
        if node >= 0:
            slot = _edge_slot(node, b, edges)
            if edges[slot, 0] != -1:
                out[b] = edges[slot, 1]


@njit(cache=True, nogil=True, _nrt=False)
def trie_walk(buf, start, end, edges):
    """Node reached from the root by ``buf[start:end]``, or -1."""
    node = np.int64(0)
    for i in range(start, end):
        slot = _edge_slot(node, buf[i], edges)
        if edges[slot, 0] == -1:
            return -1
        node = edges[slot, 1] >> 32
    return node


@njit(cache=True, nogil=True, _nrt=False)
def wordpiece_encode(buf, starts, ends, n_pieces, edges, word_row, word_node, word_node_token,
                     cont_row, cont_node, unk_id, max_chars, char_mask, out_ids, out_starts, out_ends):
    """Greedy longest-match-first WordPiece over each piece (a word).

    From each position the trie is walked as far as the text allows, remembering the last node
    that ends a token: that is the longest vocabulary entry, found in one walk instead of HF's
    try-every-shorter-substring loop. The first token of a word is matched from ``word_node``
    (the root for HF), later ones from ``cont_node`` (the node of ``##`` for HF); ``word_row`` /
    ``cont_row`` are their dense edge rows (:func:`node_edges`). A word with more
    than ``max_chars`` characters or with a position where nothing matches becomes ``unk_id``
    (HF ``WordPiece.tokenize``). llama.cpp's WPM variant: ``word_node`` = node of its phantom
    prefix, ``cont_node`` = root, ``word_node_token`` = id of the prefix alone (it may be a word's
    first token; -1 for HF, where a match is never empty), ``max_chars`` unlimited. ``char_mask``: a
    byte ``b`` starts a character when ``b & char_mask != 0x80``: 0xC0 for UTF-8 text, 0 when every
    byte is one (a vocabulary in GPT-2's byte alphabet, where HF counts the mapped characters).

    O(total bytes * longest token). Returns the number of tokens written, or -1 when an unknown
    token is needed and ``unk_id`` < 0. ``out_*`` need one slot per byte plus one per piece.
    """
    n = 0
    for p in range(n_pieces):
        s = starts[p]
        e = ends[p]
        if e <= s:
            continue
        n_word = n
        chars = 0
        for i in range(s, e):
            if (buf[i] & char_mask) != 0x80:
                chars += 1
        bad = chars > max_chars or word_node < 0
        pos = s
        first = True
        while not bad and pos < e:
            best = word_node_token if first else -1
            best_end = pos
            v = word_row[buf[pos]] if first else cont_row[buf[pos]]
            if v != 0:
                node = v >> 32
                i = pos + 1
                tok = (v & 0xFFFFFFFF) - 1
                if tok >= 0:
                    best = tok
                    best_end = i
                while i < e:
                    slot = _edge_slot(node, buf[i], edges)
                    if edges[slot, 0] == -1:
                        break
                    v = edges[slot, 1]
                    node = v >> 32
                    i += 1
                    tok = (v & 0xFFFFFFFF) - 1
                    if tok >= 0:
                        best = tok
                        best_end = i
            if best < 0:
                bad = True
                break
            out_ids[n] = best
            out_starts[n] = pos
            out_ends[n] = best_end
            n += 1
            pos = best_end
            first = False
        if bad:
            if unk_id < 0:
                return -1
            n = n_word
            out_ids[n] = unk_id
            out_starts[n] = s
            out_ends[n] = e
            n += 1
    return n
