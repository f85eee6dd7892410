"""The token trie: every token's bytes in one flat DFS-ordered array, plus what each token contributes.

What a token "is" for a constraint: the bytes it adds to the output *in the middle of a sequence*,
i.e. what ``tok.decode_bytes(prev + [id])`` appends after ``tok.decode_bytes(prev)``. Per family:

- byte-level BPE (GPT-2 / tiktoken / Llama 3): the raw token bytes;
- SentencePiece-style (Metaspace, Replace U+2581 -> ' ', ByteFallback): the piece with U+2581 -> ' '
  and ``<0xXX>`` -> that single byte. A leading space the decoder drops from the *first* token of a
  text is not dropped here (that rule is about position 0 of the whole text, not the token);
- WordPiece: ``##x`` -> ``x`` (continues the word), a word-initial token ``w`` -> ``' ' + w``.
  Clean-up rules that look at neighbours (HF ``cleanup``: ``" ."`` -> ``"."``) cannot be expressed
  per token and are not applied.

Special and control tokens (added tokens marked special, CONTROL/UNKNOWN/UNUSED types) contribute
nothing: no regex ever allows them (EOS is handled by the constraint itself).

:func:`token_bytes` derives this from the decoder's component types (byte-level: the token bytes;
per-token string chains and WordPiece: the rules above, applied to the token string). A decoder
chain it does not know is asked directly: the bytes ``decode([anchor, id])`` adds after
``decode([anchor])`` for a plain one-letter anchor token (slow: two decodes per id).
"""

from __future__ import annotations

import re
import threading
import weakref

import numpy as np

from tokjit.compile import pack_bytes
from tokjit.errors import InputError, TokjitError
from tokjit.spec import TokenType
from tokjit.constrain.kernels import (NODE_DTYPE, PACKED_DEPTH_LIMIT, PACKED_TOKEN_LIMIT, build_trie_nodes,
                      count_trie_nodes, find_prefix_node, greedy_tokenize_kernel, pack_trie_nodes,
                      validate_trie)

_BYTE_PIECE = re.compile(r"<0x([0-9A-Fa-f]{2})>")
_NO_BYTES_TYPES = (TokenType.CONTROL, TokenType.UNKNOWN, TokenType.UNUSED)


def _excluded_ids(tok) -> np.ndarray:
    """Bool per id: special/control tokens that never contribute text."""
    spec = tok.spec
    n = len(spec.tokens)
    out = np.zeros(n, np.bool_)
    types = np.asarray(spec.token_types)
    for kind in _NO_BYTES_TYPES:
        out[: len(types)] |= types == kind
    for t in spec.added_tokens:
        if t.special and 0 <= t.id < n:
            out[t.id] = True
    return out


def _anchor_id(tok) -> int:
    """A plain word-initial token (decodes to one ASCII letter) to put in front of each id."""
    for text in ("a", "x", "the", "A"):
        tid = tok.token_to_id(text)
        if tid is not None and tok.decode_bytes([tid]).strip():
            return tid
    for tid in range(tok.vocab_size):
        try:
            data = tok.decode_bytes([tid])
        except TokjitError:
            continue
        if len(data) == 1 and data.isalpha():
            return tid
    raise InputError("no plain one-letter token to anchor mid-sequence decoding")


def token_bytes_by_anchor(tok, tid: int, anchor: int, anchor_bytes: bytes) -> bytes:
    """Mid-sequence bytes of ``tid`` from the decoder chain: decode(anchor, tid) minus decode(anchor)."""
    both = tok.decode_bytes([anchor, tid])
    if both.startswith(anchor_bytes):
        return both[len(anchor_bytes):]
    return tok.decode_bytes([tid])


_PER_TOKEN_STEPS = ("Replace", "ByteFallback", "Fuse", "Strip", "Metaspace")


def _string_rules(config: dict | None):
    """Mid-sequence rule for decoder chains that act on each token string on its own, as a function
    piece -> bytes; ``None`` when the chain needs context (then the anchor method is used).

    Replace (string pattern) and Metaspace map U+2581 to a space, ByteFallback turns ``<0xXX>`` into
    that byte, WordPiece drops the ``##`` of continuations and puts a space before word-initial
    tokens. Steps after ``Fuse`` act on the whole text (in practice: strip the first token's space)
    and are not per-token rules, so they are left out. Byte-level chains are handled by the caller.
    """
    if config is None:
        return None
    kind = config.get("type")
    if kind == "WordPiece":
        prefix = config.get("prefix", "##")

        def wordpiece(piece: str) -> bytes:
            if prefix and piece.startswith(prefix):
                return piece[len(prefix):].encode("utf-8")
            return (" " + piece).encode("utf-8")
        return wordpiece
    if kind == "SentencePieceDecoder":
        config = {"type": "Sequence", "decoders": [{"type": "Metaspace"}, {"type": "ByteFallback"}]}
        kind = "Sequence"
    steps = config.get("decoders", []) if kind == "Sequence" else [config]
    if not steps or any(step.get("type") not in _PER_TOKEN_STEPS for step in steps):
        return None
    per_token = []
    for step in steps:
        t = step["type"]
        if t == "Fuse":
            break
        if t == "Replace":
            needle = step.get("pattern", {}).get("String")
            if needle is None:
                return None
            per_token.append(("replace", needle, step.get("content", "")))
        elif t == "Metaspace":
            per_token.append(("replace", step.get("replacement", "\u2581"), " "))
        elif t == "Strip":
            per_token.append(("strip", step.get("content", " "), int(step.get("start", 0)),
                              int(step.get("stop", 0))))
        elif t == "ByteFallback":
            per_token.append(("bytes",))

    def chain(piece: str) -> bytes:
        for step in per_token:
            if step[0] == "replace":
                piece = piece.replace(step[1], step[2]) if step[1] else piece
            elif step[0] == "strip":
                _, ch, start, stop = step
                lo = 0
                while lo < min(start, len(piece)) and piece[lo] == ch:
                    lo += 1
                hi = len(piece)
                while stop and hi > lo and piece[hi - 1] == ch and len(piece) - hi < stop:
                    hi -= 1
                piece = piece[lo:hi]
            else:
                m = _BYTE_PIECE.fullmatch(piece)
                if m:
                    return bytes([int(m.group(1), 16)])
        return piece.encode("utf-8", "surrogatepass")
    return chain


def token_bytes(tok) -> list[bytes]:
    """The bytes each token id contributes in the middle of a sequence (see module docstring);
    ``b""`` for special/control tokens."""
    spec = tok.spec
    n = len(spec.tokens)
    excluded = _excluded_ids(tok)
    decoder = spec.decoder
    if decoder is None or decoder.get("type") == "ByteLevel":
        # byte-level vocabularies: the model's token bytes are the text (added tokens: their content)
        out = list(spec.tokens)
        for t in spec.added_tokens:
            if 0 <= t.id < n:
                out[t.id] = t.content.encode("utf-8")
    else:
        rule = _string_rules(decoder)
        if rule is not None:
            out = [rule(tok.id_to_token(i)) for i in range(n)]
        else:
            anchor = _anchor_id(tok)
            anchor_bytes = tok.decode_bytes([anchor])
            types = np.asarray(spec.token_types)
            out = []
            for i in range(n):
                m = _BYTE_PIECE.fullmatch(tok.id_to_token(i)) if types[i] == TokenType.BYTE else None
                if excluded[i]:
                    out.append(b"")
                elif m:  # decoders repair a lone byte to U+FFFD; the token itself is that byte
                    out.append(bytes([int(m.group(1), 16)]))
                else:
                    out.append(token_bytes_by_anchor(tok, i, anchor, anchor_bytes))
    for i in np.flatnonzero(excluded).tolist():
        out[i] = b""
    return out


class TokenTrie:
    """All tokens' bytes as one flat array of :data:`~tokjit.constrain.kernels.NODE_DTYPE` records
    in DFS order (children sorted by byte), validated at build time.

    ``nodes`` - the trie (node 0 is the root); ``dup_ids`` / ``dup_primary`` - tokens whose bytes
    equal another token's (the trie stores ``dup_primary``; masks copy its bit to ``dup_ids``);
    ``token_bytes`` - bytes per id; ``max_depth`` - longest token; ``packed`` - the same nodes as
    ``uint32[n_nodes, 2]`` (``token << 8 | byte``, ``subtree_size << 8 | num_parents``, token-less
    nodes carry ``vocab_size``) for the mask walk, ``None`` if a field does not fit.
    """

    def __init__(self, token_bytes_list: list[bytes], vocab_size: int | None = None):
        n = len(token_bytes_list) if vocab_size is None else int(vocab_size)
        if n < len(token_bytes_list):
            raise InputError("vocab_size is smaller than the token list")
        self.vocab_size = n
        self.token_bytes = list(token_bytes_list) + [b""] * (n - len(token_bytes_list))
        blob, offsets = pack_bytes(self.token_bytes)
        self.blob = np.asarray(blob, np.uint8)
        self.offsets = np.asarray(offsets, np.int64)
        with_bytes = [i for i in range(n) if self.token_bytes[i]]
        with_bytes.sort(key=self.token_bytes.__getitem__)
        order = np.asarray(with_bytes, np.int64)
        self.max_depth = int(max((len(b) for b in self.token_bytes), default=0))
        n_nodes = int(count_trie_nodes(self.blob, self.offsets, order))
        nodes = np.zeros(n_nodes, NODE_DTYPE)
        depth = np.zeros(n_nodes, np.int32)
        path = np.zeros(self.max_depth + 1, np.int64)
        dup_ids = np.zeros(order.shape[0], np.int32)
        dup_primary = np.zeros(order.shape[0], np.int32)
        n_dup = int(build_trie_nodes(self.blob, self.offsets, order, nodes, depth, path, dup_ids, dup_primary))
        self.nodes = nodes
        self.dup_ids = dup_ids[:n_dup].copy()
        self.dup_primary = dup_primary[:n_dup].copy()
        self.root_child = np.full(256, -1, np.int64)
        p = 1
        while p < n_nodes:
            self.root_child[nodes[p]["byte"]] = p
            p += int(nodes[p]["subtree_size"])
        self.validate()
        # the 8-byte packed copy the mask walk prefers, when every field fits
        self.packed = None
        if n < PACKED_TOKEN_LIMIT and n_nodes < PACKED_TOKEN_LIMIT and self.max_depth < PACKED_DEPTH_LIMIT:
            self.packed = np.zeros((n_nodes, 2), np.uint32)
            pack_trie_nodes(self.nodes, np.int64(n), self.packed)
            self.packed.setflags(write=False)
        for arr in (self.nodes, self.dup_ids, self.dup_primary, self.root_child, self.blob, self.offsets):
            arr.setflags(write=False)

    # ==============================================================================================
    # Construction
    # ==============================================================================================

    _cache: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
    _cache_lock = threading.Lock()

    @classmethod
    def for_tokenizer(cls, tok) -> "TokenTrie":
        """The trie of ``tok``'s mid-sequence token bytes (:func:`token_bytes`), built once per
        tokenizer and shared."""
        with cls._cache_lock:
            trie = cls._cache.get(tok)
        if trie is None:
            trie = cls(token_bytes(tok), tok.vocab_size)
            with cls._cache_lock:
                trie = cls._cache.setdefault(tok, trie)
        return trie

    def validate(self) -> None:
        """Raise :class:`TokjitError` unless every token with bytes is reachable exactly once
        (directly, or as a duplicate of a token with the same bytes) and subtrees nest."""
        n = self.vocab_size
        seen = np.zeros(n, np.int32)
        scratch_bytes = np.zeros(self.max_depth + 1, np.uint8)
        ends = np.zeros(self.max_depth + 2, np.int64)
        bad = int(validate_trie(self.nodes, self.blob, self.offsets, np.int64(n), seen, scratch_bytes, ends))
        if bad:
            raise TokjitError(f"token trie is inconsistent at node {bad - 1}")
        for d, pr in zip(self.dup_ids.tolist(), self.dup_primary.tolist()):
            if seen[pr] != 1 or self.token_bytes[d] != self.token_bytes[pr]:
                raise TokjitError(f"token trie duplicate {d} does not match token {pr}")
            seen[d] += 1
        lengths = np.diff(self.offsets)
        wrong = np.flatnonzero((lengths > 0) != (seen == 1))
        if wrong.size:
            raise TokjitError(f"token {int(wrong[0])} is reachable {int(seen[wrong[0]])} times in the trie")

    @property
    def n_nodes(self) -> int:
        return self.nodes.shape[0]

    # ==============================================================================================
    # Helpers
    # ==============================================================================================

    def tokens_with_prefix(self, prefix: bytes) -> np.ndarray:
        """Ids (sorted, int32) of every token whose bytes start with ``prefix`` (token healing)."""
        data = np.frombuffer(bytes(prefix), np.uint8)
        p = int(find_prefix_node(self.nodes, data, np.int64(0), np.int64(data.shape[0])))
        if p < 0:
            return np.zeros(0, np.int32)
        sub = self.nodes["token"][p:p + int(self.nodes[p]["subtree_size"])]
        ids = sub[sub >= 0]
        if self.dup_ids.size:
            inside = np.isin(self.dup_primary, ids)
            ids = np.concatenate([ids, self.dup_ids[inside]])
        return np.sort(ids).astype(np.int32)

    def greedy_tokenize(self, data: bytes) -> list[int]:
        """Longest-match tokenization of ``data`` (not the tokenizer's own algorithm: each step
        takes the longest token that is a prefix of the rest). Raises :class:`InputError` when a
        position starts no token."""
        buf = np.frombuffer(bytes(data), np.uint8)
        out = np.zeros(buf.shape[0], np.int32)
        n = int(greedy_tokenize_kernel(self.nodes, self.root_child, buf, out))
        if n < 0:
            raise InputError(f"no token starts with byte {buf[-n - 1]:#04x} at position {-n - 1}")
        return out[:n].tolist()
