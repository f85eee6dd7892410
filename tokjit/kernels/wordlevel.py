"""WordLevel kernel: each pre-tokenized piece is one vocabulary entry, or the unknown token."""

from __future__ import annotations

from numba import njit

from tokjit.kernels.lookup import lookup_bytes


@njit(cache=True, nogil=True)
def wordlevel_ids(buf, starts, ends, n_pieces, blob, offsets, table, unk_id, out_ids):
    """Mirrors HF's ``WordLevel`` model: the id of each non-empty piece ``buf[starts[i]:ends[i]]``
    (a whole-piece lookup in the token hash table), or ``unk_id`` when the vocabulary lacks it.
    Writes ``out_ids[i]`` (-1 for an empty piece, which gives no token) and returns the number of
    ids, or -1 when a piece is unknown and there is no unknown token (HF raises MissingUnkToken).
    O(bytes)."""
    n = 0
    for i in range(n_pieces):
        s, e = starts[i], ends[i]
        if e <= s:
            out_ids[i] = -1
            continue
        tid = lookup_bytes(buf, s, e, blob, offsets, table)
        if tid < 0:
            if unk_id < 0:
                return -1
            tid = unk_id
        out_ids[i] = tid
        n += 1
    return n
