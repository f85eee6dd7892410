"""Splitting added / special tokens out of the text before the model sees it.

HF ``AddedVocabulary`` and tiktoken's special regex scan for the leftmost match and take the longest
token there. llama.cpp's ``tokenizer_st_partition`` goes over the tokens instead, longest text first,
each claiming all its occurrences left to right in the text not yet claimed; its lstrip / rstrip eat
only ASCII ``isspace`` bytes. The two orders differ only when a token's proper suffix is a proper
prefix of a token at least as long (falcon's ``>>TITLE<<`` and ``<|endoftext|>``: in
``>>TITLE<<|endoftext|>`` llama.cpp takes ``<|endoftext|>``), so a GGUF token set with such a pair, or
with strip flags, takes the llama.cpp partition kernel; every other set shares the leftmost-longest
trie kernel, which the fused paths also walk. HF's lstrip / rstrip / single_word, which are rare, are
applied to the few matches in Python.
"""

from __future__ import annotations

import bisect
import functools

import numpy as np

from tokjit.kernels.added_tokens import claim_longest_first, find_added_tokens, token_occurrences
from tokjit.kernels.structs import RULE_LSTRIP, RULE_RSTRIP, RULE_SINGLE_WORD
from tokjit.regex.unicode_tables import word_ranges
from tokjit.spec import AddedToken


class AddedTokenMatcher:
    """Trie over a set of added tokens (matched on the raw text)."""

    def __init__(self, tokens: list[AddedToken], semantics: str = "hf"):
        """``semantics``: "hf" (leftmost-longest, Unicode whitespace for lstrip/rstrip) or "llamacpp"."""
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
        self.longest_first = semantics == "llamacpp" and (self.has_flags or _has_overlapping_pair(tokens))
        if self.longest_first:
            # the set is ruled (structs.make_added_rules: the fused kernels run llama.cpp's order)
            self.has_flags = True
        if self.has_flags:
            # per token id: lstrip, rstrip, single_word bits (the staged claim and the kernels' rules)
            self.token_flags = np.zeros(max(self.tokens) + 1, np.uint8)
            for t in self.tokens.values():
                self.token_flags[t.id] = (RULE_LSTRIP if t.lstrip else 0) | (RULE_RSTRIP if t.rstrip else 0) | \
                    (RULE_SINGLE_WORD if t.single_word else 0)
        if self.longest_first:
            n_ids = max(self.tokens) + 1
            self.token_len = np.zeros(n_ids, np.int64)
            self.token_priority = np.zeros(n_ids, np.int64)
            # llama.cpp sorts by text length, longest first (std::sort: equal lengths in no set order;
            # here by id)
            ranked = sorted(self.tokens.values(), key=lambda t: (-len(t.content.encode("utf-8")), t.id))
            for rank, t in enumerate(ranked):
                self.token_len[t.id] = len(t.content.encode("utf-8"))
                self.token_priority[t.id] = rank

    def find(self, buf: np.ndarray, start: int, end: int):
        """(starts, ends, ids) of matches in ``buf[start:end]``, honouring lstrip/rstrip/single_word."""
        if self.empty or end <= start:
            z = np.zeros(0, np.int64)
            return z, z, z
        if self.longest_first:
            return self._find_longest_first(buf, start, end)
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

    def _find_longest_first(self, buf, start, end):
        trie = (self.first_byte, self.child_start, self.child_count, self.edge_byte, self.edge_target,
                self.node_token)
        start, end = np.int64(start), np.int64(end)
        none = np.zeros(0, np.int64)
        n_occ = token_occurrences(buf, start, end, *trie, self.token_priority, none, none, none)
        key = np.empty(n_occ, np.int64)
        occ_start = np.empty(n_occ, np.int64)
        occ_id = np.empty(n_occ, np.int64)
        token_occurrences(buf, start, end, *trie, self.token_priority, key, occ_start, occ_id)
        order = np.argsort(key, kind="stable").astype(np.int64)
        cap = end - start
        s = np.empty(cap, np.int64)
        e = np.empty(cap, np.int64)
        ids = np.empty(cap, np.int64)
        claimed = np.empty(cap, np.uint8)
        n = claim_longest_first(buf, start, end, order, occ_start, occ_id, self.token_len, self.token_flags,
                                claimed, s, e, ids)
        by_position = np.argsort(s[:n], kind="stable")
        return s[:n][by_position], e[:n][by_position], ids[:n][by_position]

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


def _has_overlapping_pair(tokens: list[AddedToken]) -> bool:
    """Whether a proper suffix of one token is a proper prefix of another at least as long."""
    texts = {t.content.encode("utf-8") for t in tokens}
    prefixes: dict[bytes, int] = {}
    for t in texts:
        for k in range(1, len(t)):
            prefixes[t[:k]] = max(prefixes.get(t[:k], 0), len(t))
    return any(prefixes.get(t[k:], 0) >= len(t) for t in texts for k in range(1, len(t)))


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
    """Rust regex ``\\w``: Alphabetic, marks, decimal digits, connector punctuation, joiners. Alphabetic
    is the Unicode property, not ``str.isalpha`` (letters only): Ⓐ, Ⅻ and the Other_Alphabetic marks
    and signs are word characters to HF."""
    starts, ends = _word_ranges()
    k = bisect.bisect_right(starts, ord(ch)) - 1
    return k >= 0 and ord(ch) <= ends[k]


@functools.lru_cache(maxsize=1)
def _word_ranges() -> tuple[list[int], list[int]]:
    ranges = word_ranges()
    return ranges[:, 0].tolist(), ranges[:, 1].tolist()
