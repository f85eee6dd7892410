"""Unigram (SentencePiece / HF ``tokenizers``) kernels: a byte trie over the vocabulary and the Viterbi
search for the best-scoring segmentation.

The trie is first built as a set of edges ``(node, byte) -> child`` in an open-addressing hash table
(``keys`` int64 = ``node * 256 + byte``, -1 empty; ``children`` int32; ``node_value`` = token id ending
at a node or -1), then laid out as a double array for the search: row ``s`` of ``da`` (int32, shape
(n, 4)) holds ``[base, check, value, 0]``; the child of the node in row ``s`` along byte ``b`` is row
``c = base + b`` if ``da[c, 1] == s``. One 16-byte row per step (base, check and value share a cache
line) instead of three hashed loads; siblings sit next to each other. Walking it from each position
enumerates every vocabulary piece starting there in one pass.

Both references run the same "optimized" Viterbi (best path ending at each byte offset, lattice
generated on the fly) but with different arithmetic, and ties (equal path scores) are common enough
that the arithmetic decides ids:

* ``ARITH_SPM`` (sentencepiece 0.2.3 ``unigram_model.cc`` ``EncodeOptimized``): everything in float32.
  A user-defined piece of ``length`` bytes scores ``0.1 * (length - 1)``. Whenever the path score at
  the current start leaves [-1e5, 1e5], it is subtracted from every reached entry from there to the
  furthest end seen so far (the "score reset"): that keeps float32 precise on long texts, and which
  candidates tie afterwards depends on it, so it is replayed exactly.
* ``ARITH_HF`` (tokenizers ``models/unigram/model.rs``): everything in float64.

In both a candidate replaces the stored best only when strictly greater, so the earliest start wins ties.
"""

from __future__ import annotations

import numpy as np
from numba import njit

ARITH_SPM = 0
ARITH_HF = 1
# llama.cpp UGM: float64 sums like HF, but a fused run of unknowns is never looked up in the vocabulary
ARITH_LLAMACPP = 2
# sentencepiece's float32 scores summed exactly (float64) with decision margins tracked: the word
# cache's certificate, never used to produce ids on its own
ARITH_CERT = 3

# sentencepiece rebases path scores once they leave [-1e5, 1e5] (kScoreResetThreshold)
SPM_SCORE_RESET = 100000.0

# per-id flags
ID_USER_DEFINED = 1

# result codes
MISSING_UNK = -1


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def _slot(key, mask):
    return ((key * np.int64(-7046029254386353131)) >> 24) & mask


@njit(cache=True, nogil=True, forceinline=True)
def trie_child(keys, children, node, byte):
    """Child of ``node`` along ``byte``, or -1."""
    mask = keys.shape[0] - 1
    key = node * 256 + byte
    h = _slot(key, mask)
    while True:
        k = keys[h]
        if k == key:
            return np.int64(children[h])
        if k < 0:
            return np.int64(-1)
        h = (h + 1) & mask


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def _common_prefix(blob, offsets, a, b):
    """Length of the common prefix of keys ``a`` and ``b``."""
    sa = offsets[a]
    sb = offsets[b]
    limit = min(offsets[a + 1] - sa, offsets[b + 1] - sb)
    n = 0
    while n < limit and blob[sa + n] == blob[sb + n]:
        n += 1
    return n


@njit(cache=True, nogil=True)
def count_trie_nodes(blob, offsets, order, n_keys):
    """Number of trie nodes (root included) for keys visited in sorted ``order``: 1 + sum of each key's
    length beyond its common prefix with the previous key. O(total key bytes)."""
    nodes = 1
    prev = -1
    for r in range(n_keys):
        t = order[r]
        s = offsets[t]
        length = offsets[t + 1] - s
        lcp = _common_prefix(blob, offsets, prev, t) if prev >= 0 else 0
        nodes += length - lcp
        prev = t
    return nodes


@njit(cache=True, nogil=True)
def build_trie(blob, offsets, order, n_keys, values, max_len, keys, children, node_value):
    """Insert keys (visited in lexicographic ``order``; equal keys later in the order overwrite the
    value) into the edge table ``keys``/``children`` (size a power of two, at least twice the number of
    edges, filled with -1) and ``node_value`` (filled with -1). O(total key bytes)."""
    mask = keys.shape[0] - 1
    path = np.zeros(max_len + 1, np.int64)
    n_nodes = 1
    prev = -1
    for r in range(n_keys):
        t = order[r]
        s = offsets[t]
        length = offsets[t + 1] - s
        lcp = _common_prefix(blob, offsets, prev, t) if prev >= 0 else 0
        for d in range(lcp, length):
            node = n_nodes
            n_nodes += 1
            key = path[d] * 256 + np.int64(blob[s + d])
            h = _slot(key, mask)
            while keys[h] >= 0:
                h = (h + 1) & mask
            keys[h] = key
            children[h] = node
            path[d + 1] = node
        if length > 0:
            node_value[path[length]] = values[t]
        prev = t
    return n_nodes


DA_BASE = 0
DA_CHECK = 1
DA_VALUE = 2


SEARCH_TRIES = 16  # a free row that failed this often as a first-child candidate leaves the search list


@njit(cache=True, nogil=True, _nrt=False)
def _unlink(nxt, prv, r):
    a = prv[r]
    b = nxt[r]
    nxt[a] = b
    prv[b] = a
    nxt[r] = r
    prv[r] = r


@njit(cache=True, nogil=True)
def build_double_array(n_nodes, edge_start, edge_byte, edge_child, node_value, da):
    """Lay out a trie given as sorted edge lists (children of node ``v`` are
    ``edge_child[edge_start[v]:edge_start[v + 1]]`` along increasing ``edge_byte``) as a double array
    in ``da`` (rows filled with ``[0, -1, -1, 0]``). Nodes are placed breadth first; each base is the
    first whose child rows are all free, trying the free rows of a linked list in order as the first
    child's row (darts-style: a row that failed ``SEARCH_TRIES`` times leaves the list, which keeps the
    build near-linear). Returns the number of rows used, or -1 when ``da`` is too small (the caller
    doubles it). Every base is at most rows - 256, so ``base + byte`` stays inside the array."""
    cap = da.shape[0]
    slot_of = np.full(n_nodes, -1, np.int64)
    queue = np.empty(n_nodes, np.int64)
    # circular free list over rows 1..cap-1 with sentinel row 0 (the root, never free)
    nxt = np.empty(cap, np.int64)
    prv = np.empty(cap, np.int64)
    for r in range(cap):
        nxt[r] = r + 1 if r + 1 < cap else 0
        prv[r] = r - 1 if r > 0 else cap - 1
    fails = np.zeros(cap, np.int32)
    head = 0
    tail = 0
    slot_of[0] = 0
    da[0, DA_CHECK] = -2  # the root is nobody's child
    da[0, DA_VALUE] = node_value[0]
    queue[tail] = 0
    tail += 1
    used = 1
    while head < tail:
        v = queue[head]
        head += 1
        e0 = edge_start[v]
        e1 = edge_start[v + 1]
        if e1 == e0:
            continue
        first = np.int64(edge_byte[e0])
        cand = nxt[0]
        while True:
            if cand == 0:
                return -1  # list exhausted
            base = cand - first
            if base + 256 > cap:
                return -1
            if base >= 0:
                ok = True
                for e in range(e0 + 1, e1):
                    if da[base + edge_byte[e], DA_CHECK] != -1:
                        ok = False
                        break
                if ok:
                    break
            following = nxt[cand]
            fails[cand] += 1
            if fails[cand] >= SEARCH_TRIES:
                _unlink(nxt, prv, cand)
            cand = following
        sv = slot_of[v]
        da[sv, DA_BASE] = base
        for e in range(e0, e1):
            c = base + edge_byte[e]
            child = edge_child[e]
            da[c, DA_CHECK] = sv
            da[c, DA_VALUE] = node_value[child]
            if nxt[c] != c:
                _unlink(nxt, prv, c)
            slot_of[child] = c
            queue[tail] = child
            tail += 1
            if c + 1 > used:
                used = c + 1
    return used


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def da_child(da, row, byte):
    """Row of the child of ``row`` along ``byte``, or -1."""
    c = np.int64(da[row, DA_BASE]) + byte
    if da[c, DA_CHECK] == row:
        return c
    return np.int64(-1)


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def _char_len(b0):
    """sentencepiece ``OneCharLen`` (a stray continuation byte counts as one character)."""
    if b0 < 0xC0:
        return 1
    if b0 < 0xE0:
        return 2
    if b0 < 0xF0:
        return 3
    return 4


@njit(cache=True, nogil=True, _nrt=False)
def _viterbi(buf, s, e, da, scores, id_flags, arith, unk_id, unk_score,
             best_score, best_start, best_id, start_score, byte_chars):
    """Best path over ``buf[s:e]``; fills ``best_*[k]`` for byte offsets k = 0..e-s (relative), the
    path scores starting from ``start_score`` (the score of the path that reached ``s``; 0 for a
    whole text).

    Returns ``(margin, largest |score|)``, tracked only with ``ARITH_CERT``: sentencepiece's float32
    candidate scores summed exactly in float64, and the smallest gap between a candidate and the best
    it was compared with (0 for a tie). Large gaps mean float32 rounding cannot change any decision,
    whatever score the path arrived with (see ``unigram_fused``'s word cache). With ``byte_chars``
    every byte is a character (a vocabulary in GPT-2's byte alphabet read as bytes: HF's characters
    are the mapped ones, one per byte)."""
    size = e - s
    for k in range(size + 1):
        best_start[k] = -1
        best_id[k] = -1
        best_score[k] = 0.0
    best_score[0] = start_score
    spm = arith == ARITH_SPM
    cert = arith == ARITH_CERT
    spm_scores = spm or cert
    margin = np.inf
    largest = 0.0
    unk_score32 = np.float32(unk_score)
    frontier = 0
    pos = 0
    while pos < size:
        here = best_score[pos]
        if spm and (here < -SPM_SCORE_RESET or here > SPM_SCORE_RESET):
            offset = np.float32(here)
            for i in range(pos, frontier + 1):
                if i == pos or best_start[i] != -1:
                    best_score[i] = np.float64(np.float32(best_score[i]) - offset)
            here = 0.0
        here32 = np.float32(here)
        mblen = 1 if byte_chars else _char_len(buf[s + pos])
        if mblen > size - pos:
            mblen = size - pos
        has_single = False
        node = np.int64(0)
        k = pos
        while k < size:
            node = da_child(da, node, np.int64(buf[s + k]))
            if node < 0:
                break
            k += 1
            tid = da[node, DA_VALUE]
            if tid < 0:
                continue
            length = k - pos
            if k > frontier:
                frontier = k
            if spm_scores:
                if id_flags[tid] & ID_USER_DEFINED:
                    score32 = np.float32(0.1 * (length - 1))
                else:
                    score32 = np.float32(scores[tid])
            if spm:
                cand32 = score32 + here32
                if best_start[k] == -1 or cand32 > np.float32(best_score[k]):
                    best_score[k] = np.float64(cand32)
                    best_start[k] = pos
                    best_id[k] = tid
            else:
                cand = (np.float64(score32) if cert else scores[tid]) + here
                if cert:
                    if best_start[k] != -1:
                        margin = min(margin, abs(cand - best_score[k]))
                    largest = max(largest, abs(cand))
                if best_start[k] == -1 or cand > best_score[k]:
                    best_score[k] = cand
                    best_start[k] = pos
                    best_id[k] = tid
            if length == mblen:
                has_single = True
        if not has_single:
            k = pos + mblen
            if k > frontier:
                frontier = k
            if spm:
                cand32 = unk_score32 + here32
                if best_start[k] == -1 or cand32 > np.float32(best_score[k]):
                    best_score[k] = np.float64(cand32)
                    best_start[k] = pos
                    best_id[k] = unk_id
            else:
                cand = (np.float64(unk_score32) if cert else unk_score) + here
                if cert:
                    if best_start[k] != -1:
                        margin = min(margin, abs(cand - best_score[k]))
                    largest = max(largest, abs(cand))
                if best_start[k] == -1 or cand > best_score[k]:
                    best_score[k] = cand
                    best_start[k] = pos
                    best_id[k] = unk_id
        pos += mblen
    return margin, largest


@njit(cache=True, nogil=True, _nrt=False)
def _exact_id(buf, s, e, da):
    node = np.int64(0)
    for k in range(s, e):
        node = da_child(da, node, np.int64(buf[k]))
        if node < 0:
            return np.int64(-1)
    return np.int64(da[node, DA_VALUE]) if e > s else np.int64(-1)


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)  # per word on the HF path: a call would cost ~10%
def emit_path(buf, s, e, best_start, best_id, da, byte_ids, arith, unk_id, byte_fallback,
              out_ids, out_starts, out_ends, n_out, path_start, path_end):
    """Backtrack the Viterbi result of ``buf[s:e]`` and append its tokens at ``out_*[n_out:]``: pieces
    as they are, runs of unknown nodes fused (or spelled as byte pieces), as ``unigram_encode``
    documents. Returns ``(new n_out, path length)`` with the path's nodes left in ``path_*``
    (reversed: index 0 is the last node), or ``(MISSING_UNK, 0)``."""
    # backtrack into path_* (reversed)
    n_path = 0
    k = e - s
    while k > 0:
        path_start[n_path] = best_start[k]
        path_end[n_path] = k
        n_path += 1
        k = best_start[k]
    j = n_path - 1
    while j >= 0:
        ts = path_start[j]
        te = path_end[j]
        tid = best_id[te]
        if tid < 0:
            return MISSING_UNK, 0
        if tid != unk_id:
            out_ids[n_out] = tid
            out_starts[n_out] = s + ts
            out_ends[n_out] = s + te
            n_out += 1
            j -= 1
            continue
        # a run of unknown nodes
        run_end = te
        j -= 1
        if not (arith == ARITH_SPM and byte_fallback):
            while j >= 0 and best_id[path_end[j]] == unk_id:
                run_end = path_end[j]
                j -= 1
        rid = unk_id
        if arith == ARITH_HF:
            found = _exact_id(buf, s + ts, s + run_end, da)
            if found >= 0:
                rid = found
        if rid == unk_id and byte_fallback:
            ok = True
            if arith == ARITH_HF:
                for b in range(s + ts, s + run_end):
                    if byte_ids[buf[b]] < 0:
                        ok = False
                        break
            if ok:
                for b in range(s + ts, s + run_end):
                    bid = byte_ids[buf[b]]
                    out_ids[n_out] = bid if bid >= 0 else unk_id
                    out_starts[n_out] = s + ts
                    out_ends[n_out] = s + run_end
                    n_out += 1
                continue
        out_ids[n_out] = rid
        out_starts[n_out] = s + ts
        out_ends[n_out] = s + run_end
        n_out += 1
    return n_out, n_path


@njit(cache=True, nogil=True, _nrt=False)
def unigram_encode(buf, starts, ends, n_pieces, model, model_scalars, out_ids, out_starts, out_ends, lattice):
    """Encode each piece ``buf[starts[i]:ends[i]]`` by Viterbi; append ids and byte spans to ``out_*``.

    ``model`` = (da, scores, id_flags, byte_ids), ``model_scalars`` = (arith, unk_id, unk_score,
    byte_fallback, byte_chars: see :func:`_viterbi`), ``lattice`` = (best_score, best_start, best_id,
    path_start, path_end).

    Unknown characters become one ``unk_id`` node each; afterwards runs of them are merged into one
    token (sentencepiece ``PopulateSentencePieceText`` / HF ``fuse_unk``), or with ``byte_fallback``
    spelled as ``<0xXX>`` tokens (``byte_ids``; sentencepiece maps a missing byte piece to unk; HF
    falls back to one unk for the run). HF also looks a fused run up in the vocabulary first.
    ``best_*`` / ``path_*`` need the longest piece + 1 slots; ``out_*`` the total piece bytes.
    Returns the number of tokens, or ``MISSING_UNK`` when an unknown character appears and the
    model has no unk id. O(bytes * longest match).
    """
    da, scores, id_flags, byte_ids = model
    arith, unk_id, unk_score, byte_fallback, byte_chars = model_scalars
    best_score, best_start, best_id, path_start, path_end = lattice
    n_out = 0
    for p in range(n_pieces):
        s = starts[p]
        e = ends[p]
        if e <= s:
            continue
        if unk_id < 0:
            # the reference fails only when the unknown node is actually needed; find out first
            _viterbi(buf, s, e, da, scores, id_flags, arith, np.int64(-2),
                     unk_score, best_score, best_start, best_id, 0.0, byte_chars)
        else:
            _viterbi(buf, s, e, da, scores, id_flags, arith, unk_id,
                     unk_score, best_score, best_start, best_id, 0.0, byte_chars)
        n_out, _ = emit_path(buf, s, e, best_start, best_id, da, byte_ids, arith, unk_id, byte_fallback,
                             out_ids, out_starts, out_ends, n_out, path_start, path_end)
        if n_out < 0:
            return MISSING_UNK
    return n_out
