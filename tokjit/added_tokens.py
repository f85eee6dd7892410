"""Splitting added / special tokens out of the text before the model sees it.

All references scan for the leftmost match and take the longest token there (HF ``AddedVocabulary``
uses a leftmost-longest Aho-Corasick automaton; tiktoken's special regex and llama.cpp's
``tokenizer_st_partition`` give the same result for token sets in real vocabularies). The tokens are
compiled into a byte trie walked by a numba kernel; lstrip / rstrip / single_word, which are rare,
are applied to the few matches in Python.
"""

from __future__ import annotations

import unicodedata

import numpy as np
from numba import njit

from .spec import AddedToken


@njit(cache=True, nogil=True)
def find_added_tokens(buf, start, end, first_byte, child_start, child_count, edge_byte, edge_target,
                      node_token, out_starts, out_ends, out_ids):
    """Leftmost-longest matches of the trie's tokens in ``buf[start:end]``; returns the count.

    At each position the trie is walked as far as the text allows and the longest token seen is
    taken; no match -> next position. O(n * longest token). Capacity: (end - start) matches.
    """
    n = 0
    i = start
    while i < end:
        if not first_byte[buf[i]]:
            i += 1
            continue
        node = 0
        best_tok = -1
        best_end = -1
        j = i
        while j < end:
            b = buf[j]
            cs = child_start[node]
            nxt = -1
            for c in range(cs, cs + child_count[node]):
                if edge_byte[c] == b:
                    nxt = edge_target[c]
                    break
            if nxt < 0:
                break
            node = nxt
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


class AddedTokenMatcher:
    """Trie over a set of added tokens (matched on the raw text)."""

    def __init__(self, tokens: list[AddedToken]):
        self.tokens = {t.id: t for t in tokens}
        children: list[dict[int, int]] = [{}]
        token_at: list[int] = [-1]
        for tok in tokens:
            data = tok.content.encode("utf-8")
            if not data:
                continue
            node = 0
            for b in data:
                nxt = children[node].get(b)
                if nxt is None:
                    nxt = len(children)
                    children[node][b] = nxt
                    children.append({})
                    token_at.append(-1)
                node = nxt
            if token_at[node] < 0:  # first definition of a content wins
                token_at[node] = tok.id
        n_nodes = len(children)
        self.child_start = np.zeros(n_nodes, np.int64)
        self.child_count = np.zeros(n_nodes, np.int64)
        edges_b, edges_t = [], []
        for node, kids in enumerate(children):
            self.child_start[node] = len(edges_b)
            self.child_count[node] = len(kids)
            for b, t in sorted(kids.items()):
                edges_b.append(b)
                edges_t.append(t)
        self.edge_byte = np.asarray(edges_b or [0], np.uint8)
        self.edge_target = np.asarray(edges_t or [0], np.int64)
        self.node_token = np.asarray(token_at, np.int64)
        self.first_byte = np.zeros(256, np.bool_)
        for b in children[0]:
            self.first_byte[b] = True
        self.has_flags = any(t.lstrip or t.rstrip or t.single_word for t in tokens)
        self.empty = not children[0]

    def find(self, buf: np.ndarray, start: int, end: int):
        """(starts, ends, ids) of matches in ``buf[start:end]``, honouring lstrip/rstrip/single_word."""
        if self.empty or end <= start:
            z = np.zeros(0, np.int64)
            return z, z, z
        cap = end - start
        s = np.empty(cap, np.int64)
        e = np.empty(cap, np.int64)
        ids = np.empty(cap, np.int64)
        n = find_added_tokens(buf, np.int64(start), np.int64(end), self.first_byte, self.child_start,
                              self.child_count, self.edge_byte, self.edge_target, self.node_token,
                              s, e, ids)
        s, e, ids = s[:n], e[:n], ids[:n]
        if self.has_flags and n:
            s, e, ids = self._apply_flags(buf, start, end, s, e, ids)
        return s, e, ids

    def _apply_flags(self, buf, start, end, s, e, ids):
        """HF ``AddedVocabulary::find_matches``: a single_word token must not touch a word
        character (Rust regex ``\\w``) on either side of the match as found; lstrip/rstrip then
        widen the match over Unicode whitespace, lstrip never reaching back past the previous match."""
        raw = buf.tobytes()
        out_s, out_e, out_i = [], [], []
        prev_end = start
        for ms, me, tid in zip(s.tolist(), e.tolist(), ids.tolist()):
            tok = self.tokens[tid]
            if tok.single_word:
                before = _char_before(raw, start, ms)
                after = _char_after(raw, me, end)
                if (before and _is_word_char(before)) or (after and _is_word_char(after)):
                    continue
            if tok.lstrip:
                floor = max(start, prev_end)
                while ms > floor:
                    ch = _char_before(raw, floor, ms)
                    if ch not in _WHITE_SPACE:
                        break
                    ms -= len(ch.encode("utf-8"))
            if tok.rstrip:
                while me < end:
                    ch = _char_after(raw, me, end)
                    if ch not in _WHITE_SPACE:
                        break
                    me += len(ch.encode("utf-8"))
            out_s.append(ms)
            out_e.append(me)
            out_i.append(tid)
            prev_end = me
        return (np.asarray(out_s, np.int64), np.asarray(out_e, np.int64), np.asarray(out_i, np.int64))


# Unicode White_Space (Rust regex ``\s``), not Python's ``str.isspace`` (which adds U+001C..U+001F)
_WHITE_SPACE = "\t\n\x0b\x0c\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008" \
    "\u2009\u200a\u2028\u2029\u202f\u205f\u3000"


def _char_before(raw: bytes, lower: int, pos: int) -> str:
    """The character ending at byte ``pos`` (not before ``lower``), or ""."""
    i = pos - 1
    while i > lower and (raw[i] & 0xC0) == 0x80:
        i -= 1
    return raw[i:pos].decode("utf-8", "replace") if pos > lower else ""


def _char_after(raw: bytes, pos: int, upper: int) -> str:
    """The character starting at byte ``pos`` (before ``upper``), or ""."""
    if pos >= upper:
        return ""
    j = pos + 1
    while j < upper and (raw[j] & 0xC0) == 0x80:
        j += 1
    return raw[pos:j].decode("utf-8", "replace")


def _is_word_char(ch: str) -> bool:
    """Rust regex ``\\w``: Alphabetic, marks, decimal digits, connector punctuation, joiners."""
    cat = unicodedata.category(ch)
    return ch.isalpha() or cat[0] == "M" or cat in ("Nd", "Nl", "Pc") or ch in "\u200c\u200d"
