"""numba kernels over the flat DFS token trie (see :mod:`tokjit.constrain.trie` for the layout).

Every node is one record of :data:`NODE_DTYPE`; node 0 is the root (no byte). Nodes are in DFS
pre-order with children sorted by byte, so the subtree of node ``p`` is ``nodes[p : p + subtree_size]``
and its first child (if any) is ``p + 1``. ``num_parents`` of node ``p`` is how many stack levels to
pop, with ``p`` pushed, to reach the parent of the node that follows ``p``'s subtree:
``depth(p) - depth(p + subtree_size) + 1`` (the end of the array counts as depth 1).
"""

from __future__ import annotations

import numpy as np
from numba import njit

NODE_DTYPE = np.dtype([("token", np.int32), ("subtree_size", np.int32), ("num_parents", np.int32),
                       ("byte", np.uint8)], align=True)


@njit(cache=True, nogil=True)
def count_trie_nodes(blob, offsets, order):
    """Nodes needed for the tokens ``order`` (ids sorted by their bytes, all non-empty): one per
    distinct non-empty prefix, plus the root. O(total bytes)."""
    n = 1
    prev_s = 0
    prev_e = 0
    for k in range(order.shape[0]):
        t = order[k]
        s = offsets[t]
        e = offsets[t + 1]
        lcp = 0
        while lcp < e - s and lcp < prev_e - prev_s and blob[s + lcp] == blob[prev_s + lcp]:
            lcp += 1
        n += (e - s) - lcp
        prev_s = s
        prev_e = e
    return n


@njit(cache=True, nogil=True)
def build_trie_nodes(blob, offsets, order, nodes, depth, path, dup_ids, dup_primary):
    """Fill ``nodes`` (sized by :func:`count_trie_nodes`) in DFS order from tokens sorted by bytes.

    Sorted order is DFS pre-order of the trie, so each token adds the nodes for its bytes past the
    longest common prefix with the previous token; a subtree closes when a later token diverges
    above it. Tokens with bytes equal to the previous token's go to ``dup_ids``/``dup_primary``
    (primary = the id stored in the node). ``depth`` (int32, one per node) and ``path`` (int64,
    max token length + 1) are scratch. Returns the number of duplicates. O(total bytes).
    """
    n_nodes = nodes.shape[0]
    nodes[0].token = -1
    nodes[0].byte = 0
    depth[0] = 0
    path[0] = 0
    cur = 0  # depth of the current path
    n = 1
    n_dup = 0
    prev_s = 0
    prev_e = 0
    prev_t = -1
    for k in range(order.shape[0]):
        t = order[k]
        s = offsets[t]
        e = offsets[t + 1]
        ln = e - s
        lcp = 0
        while lcp < ln and lcp < prev_e - prev_s and blob[s + lcp] == blob[prev_s + lcp]:
            lcp += 1
        if lcp == ln and ln == prev_e - prev_s:
            dup_ids[n_dup] = t
            dup_primary[n_dup] = nodes[path[ln]].token
            n_dup += 1
            continue
        while cur > lcp:
            p = path[cur]
            nodes[p].subtree_size = n - p
            cur -= 1
        for d in range(lcp + 1, ln + 1):
            nodes[n].byte = blob[s + d - 1]
            nodes[n].token = -1
            depth[n] = d
            path[d] = n
            n += 1
        nodes[path[ln]].token = t
        cur = ln
        prev_s = s
        prev_e = e
        prev_t = t
    while cur > 0:
        p = path[cur]
        nodes[p].subtree_size = n - p
        cur -= 1
    nodes[0].subtree_size = n
    for p in range(n_nodes):
        after = p + nodes[p].subtree_size
        next_depth = depth[after] if after < n_nodes else 1
        nodes[p].num_parents = depth[p] - next_depth + 1
    nodes[0].num_parents = 0
    return n_dup


@njit(cache=True, nogil=True)
def validate_trie(nodes, blob, offsets, vocab_size, seen, path_bytes, ends):
    """Check the trie: subtrees nested inside their parent, ``num_parents`` consistent with depths,
    and the path bytes to every token node equal that token's bytes; counts each token in ``seen``.
    Returns 0 if fine, else (index of the first bad node) + 1. O(nodes)."""
    n = nodes.shape[0]
    if n == 0 or nodes[0].subtree_size != n:
        return 1
    ends[0] = n
    top = 0  # stack of open subtree ends; top = depth of the parent of the next node
    for p in range(1, n):
        while top >= 0 and ends[top] <= p:
            top -= 1
        if top < 0:
            return p + 1
        size = nodes[p].subtree_size
        if size < 1 or p + size > ends[top]:
            return p + 1
        d = top + 1
        path_bytes[d - 1] = nodes[p].byte
        t = nodes[p].token
        if t >= vocab_size or t < -1:
            return p + 1
        if t >= 0:
            s = offsets[t]
            e = offsets[t + 1]
            if e - s != d:
                return p + 1
            for k in range(d):
                if blob[s + k] != path_bytes[k]:
                    return p + 1
            seen[t] += 1
        elif size == 1:
            return p + 1  # a leaf must end a token
        top += 1
        ends[top] = p + size
        # depth of the node after this subtree: pop the stack past it
        after = p + size
        nd = top
        while nd >= 0 and ends[nd] <= after:
            nd -= 1
        next_depth = nd + 1 if after < n else 1
        if nodes[p].num_parents != d - next_depth + 1:
            return p + 1
    return 0


@njit(cache=True, nogil=True)
def dfa_token_mask(nodes, transitions, start_state, stack, dup_ids, dup_primary, mask):
    """Mark in ``mask`` (bool, vocab size + 1 scratch slot) every token whose bytes the byte DFA
    accepts as a live path from ``start_state``.

    Non-recursive DFS over the flat trie with a stack of DFA states, one per trie level: accept
    the byte -> push the next state, mark the node's token, step to the first child (popping
    ``num_parents`` levels only when the node is a leaf); reject -> skip the whole subtree and pop
    ``num_parents - 1``. Nodes without a token mark the scratch slot (no branch). Same walk as
    llguidance's toktrie ``add_bias``. O(visited nodes). ``transitions[s, b] = -1`` means dead, so
    the DFA must be pruned to live states for the mask to be exact. ``stack`` needs trie depth + 1.
    Tokens sharing bytes copy the mark of the token stored in the trie.
    """
    scratch = mask.shape[0] - 1
    n = nodes.shape[0]
    top = 0
    stack[0] = start_state
    p = 1
    next_pop = 0
    while p < n:
        top -= next_pop
        node = nodes[p]
        nxt = transitions[stack[top], node.byte]
        if nxt >= 0:
            top += 1
            stack[top] = nxt
            t = node.token
            mask[t + ((t >> 31) & (scratch + 1))] = True
            next_pop = node.num_parents if node.subtree_size == 1 else 0
            p += 1
        else:
            p += node.subtree_size
            next_pop = node.num_parents - 1
    mask[scratch] = False
    for k in range(dup_ids.shape[0]):
        mask[dup_ids[k]] = mask[dup_primary[k]]


PACKED_TOKEN_LIMIT = 1 << 24  # token ids and subtree sizes share a uint32 with an 8-bit field
PACKED_DEPTH_LIMIT = 255


@njit(cache=True, nogil=True)
def pack_trie_nodes(nodes, none_token, packed):
    """The walk's compact copy of the trie: ``packed[p, 0] = token << 8 | byte`` (``none_token`` for
    nodes without a token) and ``packed[p, 1] = subtree_size << 8 | num_parents``, 8 bytes per node
    (the layout llguidance's toktrie uses). Fields are range-checked by the caller."""
    for p in range(nodes.shape[0]):
        t = nodes[p].token
        if t < 0:
            t = none_token
        packed[p, 0] = (np.uint32(t) << np.uint32(8)) | np.uint32(nodes[p].byte)
        packed[p, 1] = (np.uint32(nodes[p].subtree_size) << np.uint32(8)) | np.uint32(nodes[p].num_parents)


@njit(cache=True, nogil=True)
def dfa_token_mask_packed(packed, transitions, start_state, stack, dup_ids, dup_primary, mask):
    """:func:`dfa_token_mask` over the 8-byte packed nodes of :func:`pack_trie_nodes` (token-less
    nodes carry the scratch id ``mask.shape[0] - 1``); about 1.6x faster from halved memory traffic."""
    n = packed.shape[0]
    top = 0
    stack[0] = start_state
    p = 1
    next_pop = 0
    while p < n:
        top -= next_pop
        a = packed[p, 0]
        b = packed[p, 1]
        nxt = transitions[stack[top], a & 0xFF]
        if nxt >= 0:
            top += 1
            stack[top] = nxt
            mask[a >> 8] = True
            next_pop = (b & 0xFF) if (b >> 8) == 1 else 0
            p += 1
        else:
            p += b >> 8
            next_pop = (b & 0xFF) - 1
    mask[mask.shape[0] - 1] = False
    for k in range(dup_ids.shape[0]):
        mask[dup_ids[k]] = mask[dup_primary[k]]


@njit(cache=True, nogil=True)
def pack_mask_bits(mask, n, bits):
    """Pack ``mask[:n]`` into ``bits`` (uint32; token t is bit ``t & 31`` of word ``t >> 5``)."""
    for w in range(bits.shape[0]):
        bits[w] = 0
    for t in range(n):
        if mask[t]:
            bits[t >> 5] |= np.uint32(1) << np.uint32(t & 31)


@njit(cache=True, nogil=True)
def find_prefix_node(nodes, data, start, end):
    """Index of the node whose path is ``data[start:end]`` (0 = root for an empty range), or -1.
    Children are scanned by skipping sibling subtrees: O(len * fan-out)."""
    p = 0
    for i in range(start, end):
        b = data[i]
        limit = p + nodes[p].subtree_size
        c = p + 1
        found = -1
        while c < limit:
            if nodes[c].byte == b:
                found = c
                break
            c += nodes[c].subtree_size
        if found < 0:
            return -1
        p = found
    return p


@njit(cache=True, nogil=True)
def greedy_tokenize_kernel(nodes, root_child, data, out):
    """Longest-match tokenization of ``data`` into ``out``: at each position take the longest token
    that is a prefix of the rest. Returns the count, or -(position + 1) where no token starts.
    ``root_child[b]`` = node of the one-byte path ``b`` (or -1). O(len * longest token * fan-out)."""
    n = data.shape[0]
    pos = 0
    count = 0
    while pos < n:
        p = root_child[data[pos]]
        best = -1
        best_len = 0
        i = pos
        while p >= 0:
            if nodes[p].token >= 0:
                best = nodes[p].token
                best_len = i - pos + 1
            i += 1
            if i >= n:
                break
            b = data[i]
            limit = p + nodes[p].subtree_size
            c = p + 1
            nxt = -1
            while c < limit:
                if nodes[c].byte == b:
                    nxt = c
                    break
                c += nodes[c].subtree_size
            p = nxt
        if best < 0:
            return -(pos + 1)
        out[count] = best
        count += 1
        pos += best_len
    return count
