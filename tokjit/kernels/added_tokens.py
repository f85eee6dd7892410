"""Added-token scanning kernels over the byte trie of :class:`tokjit.pipeline.added_tokens.AddedTokenMatcher`.

``find_added_tokens`` is HF ``AddedVocabulary``'s (and tiktoken's special regex's) leftmost-longest scan;
``token_occurrences`` + ``claim_longest_first`` are llama.cpp's ``tokenizer_st_partition`` order (longest
token text first, each claiming its occurrences left to right). The fused kernels call the first one,
and :func:`ruled_token_matches` for a token set with rules (HF's lstrip / rstrip, llama.cpp's order).
"""

from __future__ import annotations

from numba import njit

from tokjit.kernels.structs import RULE_LSTRIP, RULE_RSTRIP, RULE_SINGLE_WORD, RULES_LLAMACPP, RULES_NONE, borrow


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def _trie_child(node, b, child_start, child_count, edge_byte, edge_target):
    """The child of ``node`` along byte ``b``, or -1 (edges of a node are a contiguous run)."""
    cs = child_start[node]
    for c in range(cs, cs + child_count[node]):
        if edge_byte[c] == b:
            return edge_target[c]
    return -1


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def _starts_in_word(first_byte, buf, i):
    """Whether any of ``buf[i:i + 8]`` may start a token."""
    return (first_byte[buf[i]] | first_byte[buf[i + 1]] | first_byte[buf[i + 2]] | first_byte[buf[i + 3]]
            | first_byte[buf[i + 4]] | first_byte[buf[i + 5]] | first_byte[buf[i + 6]] | first_byte[buf[i + 7]])


@njit(cache=True, nogil=True, _nrt=False)
def find_added_tokens(buf, start, end, first_byte, child_start, child_count, edge_byte, edge_target,
                      node_token, out_starts, out_ends, out_ids):
    """Leftmost-longest matches of the trie's tokens in ``buf[start:end]``; returns the count.

    At each position the trie is walked as far as the text allows and the longest token seen is
    taken; no match -> next position. O(n * longest token). Capacity: (end - start) matches. A trie
    with no token is its callers' to skip (:func:`added_token_matches`, ``AddedTokenMatcher.empty``):
    it would only visit every byte for nothing.
    """
    n = 0
    i = start
    while i < end:
        # text between added tokens is skipped eight bytes per test (one branch per word, not per byte)
        while i + 8 <= end and not _starts_in_word(first_byte, buf, i):
            i += 8
        if i >= end:
            break
        if not first_byte[buf[i]]:
            i += 1
            continue
        node = 0
        best_tok = -1
        best_end = -1
        j = i
        while j < end:
            node = _trie_child(node, buf[j], child_start, child_count, edge_byte, edge_target)
            if node < 0:
                break
            j += 1
            if node_token[node] >= 0:
                best_tok = node_token[node]
                best_end = j
        if best_tok >= 0:
            out_starts[n] = i
            out_ends[n] = best_end
            out_ids[n] = best_tok
            n += 1
            i = best_end
        else:
            i += 1
    return n


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def added_token_matches(buf, start, end, first_byte, child_start, child_count, edge_byte, edge_target,
                        node_token, out_starts, out_ends, out_ids):
    """:func:`find_added_tokens`, called only when the trie holds a token (the usual ordinary text has
    none): a call passes each of its 9 arrays as 7 machine words even when it returns at once."""
    if child_count[0] == 0:
        return 0
    return find_added_tokens(buf, start, end, first_byte, child_start, child_count, edge_byte, edge_target,
                             node_token, out_starts, out_ends, out_ids)


@njit(cache=True, nogil=True, _nrt=False)
def token_occurrences(buf, start, end, first_byte, child_start, child_count, edge_byte, edge_target,
                      node_token, token_priority, out_key, out_start, out_id):
    """Every (position, token) occurrence of the trie's tokens in ``buf[start:end]``; returns their
    number and writes as many as ``out_*`` hold (call once with empty arrays to size them). ``key =
    priority * (n + 1) + offset``: sorting the keys orders the occurrences as llama.cpp visits them,
    token by token, left to right. O(n * longest token)."""
    n = 0
    cap = out_key.shape[0]
    span = end - start + 1
    for i in range(start, end):
        if not first_byte[buf[i]]:
            continue
        node = 0
        j = i
        while j < end:
            node = _trie_child(node, buf[j], child_start, child_count, edge_byte, edge_target)
            if node < 0:
                break
            j += 1
            tid = node_token[node]
            if tid >= 0:
                if n < cap:
                    out_key[n] = token_priority[tid] * span + (i - start)
                    out_start[n] = i
                    out_id[n] = tid
                n += 1
    return n


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def _ascii_space(b):
    return b == 32 or (9 <= b <= 13)


@njit(cache=True, nogil=True, _nrt=False)
def claim_longest_first(buf, start, end, order, occ_start, occ_id, token_len, strip_flags, claimed,
                        out_starts, out_ends, out_ids):
    """llama.cpp ``tokenizer_st_partition``: visit occurrences in ``order`` (token priority, then
    position); one whose bytes are all unclaimed becomes a token and claims them, then lstrip (flag 1) /
    rstrip (flag 2) claim the unclaimed ASCII whitespace bytes next to it. Returns the number of
    tokens, written in visiting order. O(occurrences * token length)."""
    for i in range(end - start):
        claimed[i] = 0
    n = 0
    for k in range(order.shape[0]):
        o = order[k]
        s = occ_start[o] - start
        tid = occ_id[o]
        e = s + token_len[tid]
        free = True
        for i in range(s, e):
            if claimed[i]:
                free = False
                break
        if not free:
            continue
        for i in range(s, e):
            claimed[i] = 1
        if strip_flags[tid] & 1:
            while s > 0 and claimed[s - 1] == 0 and _ascii_space(buf[start + s - 1]):
                s -= 1
                claimed[s] = 1
        if strip_flags[tid] & 2:
            while e < end - start and claimed[e] == 0 and _ascii_space(buf[start + e]):
                claimed[e] = 1
                e += 1
        out_starts[n] = start + s
        out_ends[n] = start + e
        out_ids[n] = tid
        n += 1
    return n


DEFER_TO_STAGED = -1  # ruled_token_matches: the staged pipeline decides this text


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def _white_space_bytes(buf, s, e):
    """Whether ``buf[s:e]`` is exactly one Unicode White_Space character (Rust regex ``\\s``, HF's
    strip): tab to carriage return, space, U+0085, U+00A0, U+1680, U+2000-U+200A, U+2028, U+2029,
    U+202F, U+205F, U+3000."""
    n = e - s
    b0 = buf[s]
    if n == 1:
        return b0 == 32 or 9 <= b0 <= 13
    if n == 2:
        return b0 == 0xC2 and (buf[s + 1] == 0x85 or buf[s + 1] == 0xA0)
    if n != 3:
        return False
    b1, b2 = buf[s + 1], buf[s + 2]
    if b0 == 0xE1:
        return b1 == 0x9A and b2 == 0x80
    if b0 == 0xE2:
        return (b1 == 0x80 and (0x80 <= b2 <= 0x8A or b2 == 0xA8 or b2 == 0xA9 or b2 == 0xAF)) or \
            (b1 == 0x81 and b2 == 0x9F)
    return b0 == 0xE3 and b1 == 0x80 and b2 == 0x80


@njit(cache=True, nogil=True, _nrt=False)
def _apply_hf_rules(buf, start, end, flags, n, out_starts, out_ends, out_ids):
    """HF ``AddedVocabulary``'s lstrip / rstrip on ``n`` leftmost-longest matches, in place: lstrip
    widens a match left over whitespace characters, never past ``start`` nor the previous match,
    rstrip right up to ``end``; a character is the bytes from a lead byte to the next one (malformed
    UTF-8 is no whitespace). Returns ``n``, or DEFER_TO_STAGED for what the staged pipeline decides
    (a single_word token, which asks for ``\\w`` on both sides; an rstrip that reaches the next
    match). O(matches + bytes widened over)."""
    prev_end = start
    for k in range(n):
        ms, me = out_starts[k], out_ends[k]
        if ms < prev_end:
            return DEFER_TO_STAGED
        f = flags[out_ids[k]]
        if f & RULE_SINGLE_WORD:
            return DEFER_TO_STAGED
        if f & RULE_LSTRIP:
            while ms > prev_end:
                i = ms - 1
                while i > prev_end and (buf[i] & 0xC0) == 0x80:
                    i -= 1
                if not _white_space_bytes(buf, i, ms):
                    break
                ms = i
        if f & RULE_RSTRIP:
            while me < end:
                j = me + 1
                while j < end and (buf[j] & 0xC0) == 0x80:
                    j += 1
                if not _white_space_bytes(buf, me, j):
                    break
                me = j
        out_starts[k] = ms
        out_ends[k] = me
        prev_end = me
    return n


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def _sift_down(key, a, b, root, n):
    """Restore the max-heap below ``root`` of ``key[:n]``, moving ``a`` and ``b`` along."""
    while True:
        child = 2 * root + 1
        if child >= n:
            return
        if child + 1 < n and key[child + 1] > key[child]:
            child += 1
        if key[root] >= key[child]:
            return
        key[root], key[child] = key[child], key[root]
        a[root], a[child] = a[child], a[root]
        b[root], b[child] = b[child], b[root]
        root = child


@njit(cache=True, nogil=True, _nrt=False)
def _heap_sort(key, a, b, n):
    """Sort ``key[:n]`` ascending in place, ``a[:n]`` and ``b[:n]`` with it: heapsort, O(n log n) and
    no allocation (the kernels' sort of occurrences and claimed tokens; keys are distinct there, so
    stability does not matter)."""
    for root in range(n // 2 - 1, -1, -1):
        _sift_down(key, a, b, root, n)
    for end in range(n - 1, 0, -1):
        key[0], key[end] = key[end], key[0]
        a[0], a[end] = a[end], a[0]
        b[0], b[end] = b[end], b[0]
        _sift_down(key, a, b, 0, end)


@njit(cache=True, nogil=True, _nrt=False)
def ruled_token_matches(trie, rules, buf, start, end, occ_key, occ_start, occ_id, claimed, out_starts, out_ends,
                        out_ids):
    """The added tokens of ``buf[start:end]`` under the set's rules (``rules``, an ADDED_RULES), as
    (starts, ends, ids) in text order; returns their number, or DEFER_TO_STAGED when the staged
    pipeline must decide. HF: leftmost-longest matches, then :func:`_apply_hf_rules`. llama.cpp:
    every occurrence (:func:`token_occurrences`, as many as ``occ_*`` hold, else DEFER_TO_STAGED)
    sorted into its visiting order, :func:`claim_longest_first` (``claimed``: one byte per text byte),
    the tokens sorted by position. O(n * longest token + occurrences * log occurrences).
    Capacities: ``out_*`` and ``claimed`` end - start; ``occ_start`` and ``occ_id`` those of ``occ_key``."""
    first_byte, child_start, child_count, edge_byte, edge_target, node_token = trie_arrays(trie)
    if child_count[0] == 0 or end <= start:
        return 0
    mode = borrow(rules, "mode")
    flags = borrow(rules, "flags")
    if mode != RULES_LLAMACPP:
        n = find_added_tokens(buf, start, end, first_byte, child_start, child_count, edge_byte, edge_target,
                              node_token, out_starts, out_ends, out_ids)
        if mode == RULES_NONE or n == 0:
            return n
        return _apply_hf_rules(buf, start, end, flags, n, out_starts, out_ends, out_ids)
    n_occ = token_occurrences(buf, start, end, first_byte, child_start, child_count, edge_byte, edge_target,
                              node_token, borrow(rules, "priority"), occ_key, occ_start, occ_id)
    if n_occ == 0:
        return 0
    if n_occ > occ_key.shape[0]:
        return DEFER_TO_STAGED
    # the keys are distinct (rank, then offset): any sort gives llama.cpp's order; the occurrences
    # are sorted with them, and claim_longest_first visits them in place (order = identity)
    _heap_sort(occ_key, occ_start, occ_id, n_occ)
    for i in range(n_occ):
        occ_key[i] = i
    n = claim_longest_first(buf, start, end, occ_key[:n_occ], occ_start, occ_id, borrow(rules, "token_len"), flags,
                            claimed, out_starts, out_ends, out_ids)
    _heap_sort(out_starts, out_ends, out_ids, n)
    return n


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def trie_arrays(trie):
    """The six arrays of a :data:`~tokjit.kernels.structs.TRIE` in :func:`find_added_tokens`' order."""
    return (borrow(trie, "first_byte"), borrow(trie, "child_start"), borrow(trie, "child_count"),
            borrow(trie, "edge_byte"), borrow(trie, "edge_target"), borrow(trie, "node_token"))
