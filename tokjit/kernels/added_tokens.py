"""Added-token scanning kernels over the byte trie of :class:`tokjit.pipeline.added_tokens.AddedTokenMatcher`.

``find_added_tokens`` is HF ``AddedVocabulary``'s (and tiktoken's special regex's) leftmost-longest scan;
``token_occurrences`` + ``claim_longest_first`` are llama.cpp's ``tokenizer_st_partition`` order (longest
token text first, each claiming its occurrences left to right). The fused kernels call the first one.
"""

from __future__ import annotations

from numba import njit

from tokjit.kernels.structs import borrow


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


@njit(cache=True, nogil=True, _nrt=False)
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


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def trie_arrays(trie):
    """The six arrays of a :data:`~tokjit.kernels.structs.TRIE` in :func:`find_added_tokens`' order."""
    return (borrow(trie, "first_byte"), borrow(trie, "child_start"), borrow(trie, "child_count"),
            borrow(trie, "edge_byte"), borrow(trie, "edge_target"), borrow(trie, "node_token"))
