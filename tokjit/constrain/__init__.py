"""Constrained decoding: which tokens keep the output inside a byte-level constraint.

::

    c = tokjit.constrain.Regex(tok, r"\\d{4}-\\d{2}-\\d{2}")
    state = c.initial_state
    mask = c.mask(state)                # bool per id; EOS allowed iff c.is_accepting(state)
    state = c.advance(state, token_id)  # raises InputError for a token the mask forbids

A constraint is a byte DFA (``transitions int32[n_states, 256]``, -1 = dead, every state able to
reach an accepting state) walked over the flat DFS token trie of the tokenizer
(:class:`~tokjit.constrain.trie.TokenTrie`), so a token is allowed iff the bytes so far plus the
token's bytes are a prefix of some accepted string. Token bytes are the mid-sequence bytes described
in :mod:`tokjit.constrain.trie`. Objects are thread-safe: each call uses its own stack buffer, and the
per-state mask cache only ever gains entries that are never modified; masks of different states may be computed concurrently (the kernel
releases the GIL).
"""

from __future__ import annotations

from typing import Iterable

import numpy as np

from tokjit.errors import InputError, TokenIdTypeError
from tokjit.token_ids import as_token_id
from tokjit.constrain.kernels import NODE_DTYPE, dfa_token_mask, dfa_token_mask_packed, pack_mask_bits
from tokjit.constrain.regex_dfa import (DEFAULT_MAX_STATES, CompiledDFA, RegexError, RegexTooLargeError,
                        UnsupportedRegexError, compile_regex, parse_regex, utf8_sequences)
from tokjit.constrain.trie import TokenTrie, token_bytes


class ByteDFA:
    """A constraint given directly as a byte DFA.

    ``transitions``: int32 ``[n_states, 256]``, -1 = reject; ``accepting``: bool per state;
    ``initial``: start state. States from which no accepting state is reachable must be -1 (dead)
    for masks to be exact (:func:`compile_regex` output always is). ``eos_ids``: token ids allowed
    exactly in accepting states (default: the tokenizer's EOS, if it has one).

    A mask depends only on the DFA state, so masks are memoized per state (a regex DFA has few
    states): the first ``mask(state)`` walks the trie, later ones copy. ``mask_cache_bytes`` bounds
    the memory (0 disables the cache).
    """

    def __init__(self, tok, transitions, accepting, initial: int = 0, *,
                 eos_ids: Iterable[int] | int | None = None, trie: TokenTrie | None = None,
                 mask_cache_bytes: int = 256 << 20):
        table = np.ascontiguousarray(transitions, dtype=np.int32)
        acc = np.ascontiguousarray(accepting, dtype=np.bool_)
        if table.ndim != 2 or table.shape[1] != 256 or table.shape[0] == 0:
            raise InputError(f"transitions must be int32[n_states, 256], got shape {table.shape}")
        n_states = table.shape[0]
        if acc.shape != (n_states,):
            raise InputError(f"accepting must have one flag per state ({n_states}), got {acc.shape}")
        if table.min() < -1 or table.max() >= n_states:
            raise InputError("transitions hold a state outside [-1, n_states)")
        if not 0 <= int(initial) < n_states:
            raise InputError(f"initial state {initial} outside [0, {n_states})")
        self.tokenizer = tok
        self.trie = trie if trie is not None else TokenTrie.for_tokenizer(tok)
        self.vocab_size = self.trie.vocab_size
        self.transitions = table
        self.accepting = acc
        self.initial_state = int(initial)
        if eos_ids is None:
            eos = getattr(tok, "eos_token_id", None)
            eos_ids = [] if eos is None else [eos]
        elif isinstance(eos_ids, (int, np.integer)):
            eos_ids = [int(eos_ids)]
        self.eos_ids = np.asarray(sorted(set(as_token_id(e) for e in eos_ids)), np.int64)
        if self.eos_ids.size and (self.eos_ids.min() < 0 or self.eos_ids.max() >= self.vocab_size):
            raise InputError(f"eos_ids {self.eos_ids.tolist()} outside the vocabulary")
        self._eos_set = frozenset(self.eos_ids.tolist())
        self._cache: dict[int, np.ndarray] = {}
        self._cache_slots = max(0, int(mask_cache_bytes) // max(1, self.vocab_size))
        for arr in (self.transitions, self.accepting):
            arr.setflags(write=False)

    @property
    def n_states(self) -> int:
        return self.transitions.shape[0]

    def _check_state(self, state) -> int:
        s = int(state)
        if not 0 <= s < self.n_states:
            raise InputError(f"state {state} is not a live state of this constraint (0..{self.n_states - 1})")
        return s

    def is_accepting(self, state: int) -> bool:
        """True when the bytes so far are a complete match (EOS is allowed)."""
        return bool(self.accepting[self._check_state(state)])

    def mask(self, state: int, out: np.ndarray | None = None, *, cache: bool = True) -> np.ndarray:
        """Bool array of vocabulary size: the tokens allowed next in ``state``.

        ``out`` (bool, vocab size + 1: the last slot is scratch) may be passed to reuse a buffer;
        the returned view excludes the scratch slot. ``cache=False`` always walks the trie.
        """
        s = self._check_state(state)
        if out is None:
            out = np.empty(self.vocab_size + 1, np.bool_)
        elif out.dtype != np.bool_ or out.shape != (self.vocab_size + 1,):
            raise InputError(f"out must be bool[{self.vocab_size + 1}] (vocab size + 1 scratch slot)")
        cached = self._cache.get(s) if cache else None
        if cached is not None:
            out[: self.vocab_size] = cached
            return out[: self.vocab_size]
        out[:] = False
        self.walk(s, out)
        if self.eos_ids.size:
            out[self.eos_ids] = self.accepting[s]
        if cache and len(self._cache) < self._cache_slots:
            kept = out[: self.vocab_size].copy()
            kept.setflags(write=False)
            self._cache.setdefault(s, kept)
        return out[: self.vocab_size]

    def walk(self, state: int, out: np.ndarray) -> None:
        """Mark into ``out`` (bool, vocab size + 1, cleared by the caller) the tokens whose bytes the
        DFA accepts from ``state``; no EOS, no cache: the trie walk alone."""
        trie = self.trie
        stack = np.empty(trie.max_depth + 1, np.int32)
        if trie.packed is not None:
            dfa_token_mask_packed(trie.packed, self.transitions, np.int64(state), stack, trie.dup_ids,
                                  trie.dup_primary, out)
        else:
            dfa_token_mask(trie.nodes, self.transitions, np.int64(state), stack, trie.dup_ids,
                           trie.dup_primary, out)

    def mask_bits(self, state: int) -> np.ndarray:
        """The mask packed into uint32 words (token t = bit ``t & 31`` of word ``t >> 5``)."""
        m = self.mask(state)
        bits = np.empty((self.vocab_size + 31) // 32, np.uint32)
        pack_mask_bits(m, np.int64(self.vocab_size), bits)
        return bits

    def advance_bytes(self, state: int, data: bytes) -> int:
        """State after ``data``; raises :class:`InputError` if the bytes leave the constraint."""
        s = self._check_state(state)
        table = self.transitions
        for k, b in enumerate(bytes(data)):
            s = int(table[s, b])
            if s < 0:
                raise InputError(f"byte {k} ({b:#04x}) of {bytes(data)!r} is not allowed here")
        return s

    def advance(self, state: int, token_id: int) -> int:
        """State after token ``token_id``. EOS in an accepting state leaves the state unchanged;
        a token the mask forbids raises :class:`InputError`."""
        s = self._check_state(state)
        t = as_token_id(token_id)
        if not 0 <= t < self.vocab_size:
            raise InputError(f"token id {t} is outside the vocabulary (size {self.vocab_size})")
        if t in self._eos_set:
            if self.accepting[s]:
                return s
            raise InputError(f"EOS token {t} is not allowed: state {s} is not accepting")
        data = self.trie.token_bytes[t]
        if not data:
            raise InputError(f"token {t} has no text (special/control token) and is never allowed")
        try:
            return self.advance_bytes(s, data)
        except InputError:
            raise InputError(f"token {t} ({data!r}) is not allowed in state {s}") from None

    def is_allowed(self, state: int, token_id: int) -> bool:
        try:
            self.advance(state, token_id)
        except TokenIdTypeError:
            raise  # a float is a caller's bug, not a forbidden token
        except InputError:
            return False
        return True


class Regex(ByteDFA):
    """Tokens that keep the output a prefix of a full match of ``pattern`` (subset and semantics in
    :mod:`tokjit.constrain.regex_dfa`). ``max_states`` caps the DFA size."""

    def __init__(self, tok, pattern: str, *, eos_ids: Iterable[int] | int | None = None,
                 max_states: int = DEFAULT_MAX_STATES, trie: TokenTrie | None = None,
                 mask_cache_bytes: int = 256 << 20):
        self.pattern = pattern
        self.dfa = compile_regex(pattern, max_states=max_states)
        super().__init__(tok, self.dfa.transitions, self.dfa.accepting, 0, eos_ids=eos_ids, trie=trie,
                         mask_cache_bytes=mask_cache_bytes)

    def __repr__(self) -> str:
        return f"<tokjit.constrain.Regex {self.pattern!r} states={self.n_states} vocab={self.vocab_size}>"


__all__ = ["Regex", "ByteDFA", "TokenTrie", "token_bytes", "compile_regex", "CompiledDFA", "parse_regex",
           "utf8_sequences", "RegexError", "UnsupportedRegexError", "RegexTooLargeError", "NODE_DTYPE"]
