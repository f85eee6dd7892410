"""Models: pre-tokenized pieces -> token ids, each a thin owner of compiled arrays around one kernel.

A model is built from a :class:`~tokjit.spec.TokenizerSpec` by :func:`build_model`, which dispatches on
``spec.model["type"]``. Every model has ``encode_pieces(buf, starts, ends) -> (ids, tok_starts,
tok_ends)`` where the spans are byte offsets into ``buf`` (used for offsets and streaming).
"""

from __future__ import annotations




import numpy as np

from tokjit.compile import PairTable, TokenTable, check_ids, reachable_pair_table, split_merge_rows
from tokjit.errors import ModelFileError, UnsupportedComponentError
from tokjit.kernels import atoms as atom_kernel
from tokjit.kernels import bpe as bpe_kernel
from tokjit.kernels import piece_cache
from tokjit.kernels import structs
from tokjit.spec import TokenizerSpec, TokenType
from tokjit.text import byte_level_values



def model_mask(spec: TokenizerSpec) -> np.ndarray:
    if spec.model_mask is not None:
        return spec.model_mask.astype(np.bool_)
    return np.ones(len(spec.tokens), dtype=np.bool_)


def _no_piece_cache():
    """The staged path's BPE scratch caches no pieces (a two-row cache fills the structure's slot), but
    its pair cache remembers one model's pair table: one per scratch, never shared."""
    return structs.make_piece_cache(slots=2)


class Workspace:
    """Per-thread scratch buffers for the BPE kernel, grown on demand, never shrunk."""

    def __init__(self):
        self.cap = 0
        self.grow(256)

    def grow(self, n: int) -> None:
        if n <= self.cap:
            return
        cap = max(n, 2 * self.cap)
        self.start = np.empty(cap, np.int64)
        self.end = np.empty(cap, np.int64)
        self.id = np.empty(cap, np.int32)
        self.rank = np.empty(cap, np.int64)
        self.prev = np.empty(cap, np.int64)
        self.next = np.empty(cap, np.int64)
        self.links = np.empty(bpe_kernel.LINK_WORDS * cap, np.int32)
        # a long piece's candidates (bpe_kernel._merge_long): heap and bucket entries, sorted first pairs,
        # the bucket being read; the stack also sorts them (radix counts)
        self.heap = np.empty(5 * cap + 16, np.int64)
        self.stack = np.empty(2 * cap + 4 + (1 << bpe_kernel.RADIX_BITS), np.int64)
        self.cap = cap

    def rev_left(self, n: int) -> np.ndarray:
        """Per-id scratch (-1 filled between calls) for sentencepiece's UNUSED-piece resegmentation."""
        arr = getattr(self, "_rev_left", None)
        if arr is None or arr.shape[0] != n:
            arr = self._rev_left = np.full(n, -1, np.int32)
        return arr

    def rank_buckets(self, n_ranks: int) -> tuple[np.ndarray, np.ndarray]:
        """Per-rank list heads (-1 filled between calls) and their occupancy bits, for the candidates of
        pieces of ``bpe_kernel.SORTED_PAIRS_MIN`` symbols or more; one-element stand-ins while the
        buffers cannot hold such a piece (the kernel then keeps every candidate on its heap)."""
        if self.cap < bpe_kernel.SORTED_PAIRS_MIN:
            n_ranks = 1
        arr = getattr(self, "_rank_heads", None)
        if arr is None or arr.shape[0] != n_ranks:
            self._rank_heads = np.full(n_ranks, -1, np.int32)
            n_words = (n_ranks + 63) // 64
            self._rank_bits = np.zeros(n_words + (n_words + 63) // 64, np.uint64)
        return self._rank_heads, self._rank_bits

    def touched(self, n: int) -> np.ndarray:
        """Per-thread list of the ids whose ``rev_left`` the BPE kernel must reset (capacity ``n``)."""
        arr = getattr(self, "_touched", None)
        if arr is None or arr.shape[0] != n:
            arr = self._touched = np.zeros(n, np.int64)
        return arr

    def bpe_scratch(self, model: "BPEModel"):
        """These buffers as the BPE kernel's :data:`~tokjit.kernels.structs.BPE_SCRATCH` for ``model``
        (rebuilt only when the buffers grow or the model changes)."""
        key = (self.cap, model)
        old = getattr(self, "_scratch_key", None)
        if old is None or old[0] != key[0] or old[1] is not model:
            self._scratch = structs.make_bpe_scratch(self, model, self.touched(model.touched.shape[0]),
                                                     _no_piece_cache())
            self._scratch_key = key
        return self._scratch


class BPEModel:
    """Byte-pair encoding; see :mod:`tokjit.kernels.bpe` for the flavours one kernel covers."""

    def __init__(self, spec: TokenizerSpec):
        opts = spec.model
        path = spec.source.get("path")
        n = len(spec.tokens)
        self.vocab = TokenTable.build(spec.tokens, model_mask(spec))
        rule = opts.get("merge_rule", "pairs")
        flags = 0
        if opts.get("byte_level", False):
            flags |= bpe_kernel.FLAG_BYTE_SYMBOLS
        if opts.get("ignore_merges", False):
            flags |= bpe_kernel.FLAG_WHOLE_PIECE_FIRST
        if opts.get("byte_fallback", False):
            flags |= bpe_kernel.FLAG_BYTE_FALLBACK
            if opts.get("fallback_whole_char", False):
                flags |= bpe_kernel.FLAG_FALLBACK_WHOLE_CHAR
        if opts.get("fuse_unk", False):
            flags |= bpe_kernel.FLAG_FUSE_UNK
        prefix, suffix = opts.get("continuing_subword_prefix") or "", opts.get("end_of_word_suffix") or ""
        if prefix:
            flags |= bpe_kernel.FLAG_PREFIX
        if suffix:
            flags |= bpe_kernel.FLAG_SUFFIX
        self.affixed = bool(prefix or suffix)
        self.affix_keys, self.affix_ids = _affixed_symbols(spec, prefix, suffix, bool(opts.get("byte_level")))
        self.merge_rank = np.full(max(n, 1), -1, dtype=np.int64)
        if rule == "pairs":
            merges = spec.merges if spec.merges is not None else np.zeros((0, 2), np.int32)
            merges = np.asarray(merges, dtype=np.int32)
            if merges.ndim != 2 or merges.shape[1] not in (2, 3):
                raise ModelFileError("merges must be (n, 2) or (n, 3) id rows", path=path, where="merges")
            check_ids(merges[:, :2], n, "merges", path)
            if merges.shape[1] == 3:
                merged = merges[:, 2].copy()
                if merged.size and int(merged.max()) >= n:
                    raise ModelFileError("merged token id outside the vocabulary", path=path, where="merges")
            else:
                merged = self._merged_ids(spec, merges)
            keep = merged >= 0
            produced = merged[keep]
            ranks = np.arange(len(merges), dtype=np.int32)
            self.pairs = PairTable.build(merges[keep, 0], merges[keep, 1], ranks[keep], merged[keep])
        elif rule == "ranks":
            # tiktoken: any two adjacent parts merge if their concatenation is a token; rank = its id
            flags |= bpe_kernel.FLAG_RANK_BY_BYTES
            self.merge_rank[:n] = np.arange(n)
            self.merge_rank[:n][~model_mask(spec)] = -1
            self.pairs = PairTable.empty()
        elif rule == "scores":
            # SentencePiece BPE: merge the pair whose concatenated piece has the highest score
            flags |= bpe_kernel.FLAG_RANK_BY_BYTES
            scores = np.asarray(spec.scores, dtype=np.float64)
            if scores.shape[0] != n or not np.all(np.isfinite(scores)):
                raise ModelFileError("scores must be finite, one per token", path=path, where="scores")
            mergeable = model_mask(spec)
            order = np.unique(-scores[mergeable], return_inverse=True)[1]
            self.merge_rank[:n][mergeable] = order
            self.pairs = PairTable.empty()
            produced = np.flatnonzero(mergeable)
            pairs = _score_pairs(spec.tokens, mergeable, self.merge_rank)
            if pairs is not None:  # same merges, looked up by id pair instead of hashing bytes
                flags &= ~bpe_kernel.FLAG_RANK_BY_BYTES
                self.pairs = pairs
        else:
            raise UnsupportedComponentError(f"BPE merge rule {rule!r}")
        # ranks are below this: merge indices, token ids, or score orders (the long-piece buckets)
        self.n_ranks = max(n, len(merges) if rule == "pairs" else 0, 1)
        types = np.asarray(spec.token_types)
        self.token_flags = np.zeros(1, np.uint8)
        # only its size is used: the kernel writes a per-thread copy (Workspace.touched, BPEScratch)
        self.touched = np.zeros(1, np.int64)
        if opts.get("resegment_unused", False) and types.shape[0] == n:
            unused = (types == TokenType.UNUSED) & model_mask(spec)
            if unused.any():
                # sentencepiece splits merged UNUSED pieces back into the pieces they came from
                flags |= bpe_kernel.FLAG_RESEGMENT_UNUSED
                self.token_flags = unused.astype(np.uint8) * np.uint8(bpe_kernel.TOKEN_UNUSED)
                self.touched = np.zeros(int(unused.sum()) + 1, np.int64)
        self.unsafe_prev = np.full(1, -1, np.int64)
        if rule in ("pairs", "scores") and not self.affixed and not flags & (bpe_kernel.FLAG_BYTE_SYMBOLS |
                                                                             bpe_kernel.FLAG_WHOLE_PIECE_FIRST):
            made = _produced_tokens(spec.tokens, produced)
            unsafe = _space_symbol_unsafe_prev(made, self.vocab)
            if unsafe is not None:
                flags |= bpe_kernel.FLAG_SPLIT_SPACE_SYMBOL
                self.unsafe_prev = unsafe
        self.flags = np.int64(flags)
        unk = opts.get("unk_id")
        self.unk_id = np.int64(-1 if unk is None else unk)
        self.byte_ids = self._byte_ids(spec, flags)
        if rule == "ranks" and flags & bpe_kernel.FLAG_BYTE_SYMBOLS and (self.byte_ids >= 0).all():
            # every part is a token from the first byte on, so the same merges can be looked up by id
            # pair: one cache line per lookup instead of hashing and comparing the merged bytes
            rows = spec.merges
            if rows is None or np.ndim(rows) != 2 or np.shape(rows)[1] != 3:
                rows = split_merge_rows(self.vocab, model_mask(spec))
            rows = np.asarray(rows, np.int32)
            check_ids(rows, n, "merges", path)
            self.pairs = PairTable.build(rows[:, 0], rows[:, 1], self.merge_rank[rows[:, 2]], rows[:, 2])
            flags &= ~bpe_kernel.FLAG_RANK_BY_BYTES
            self.flags = np.int64(flags)
        byte_symbols = bool(flags & bpe_kernel.FLAG_BYTE_SYMBOLS)
        if rule == "pairs" and not flags & bpe_kernel.FLAG_RESEGMENT_UNUSED and not self.affixed \
                and (not byte_symbols or (self.byte_ids >= 0).all()):
            # of a merge list only the rules BPE can ever apply, one per token (Llama 3: 127k of 280k,
            # Gemma 3: 236k of 515k); resegmenting UNUSED pieces reads every rule proposed, so keeps all
            self.pairs = reachable_pair_table(self.vocab, self.byte_ids if byte_symbols else None, self.pairs)
        if flags & bpe_kernel.FLAG_BYTE_FALLBACK and not flags & bpe_kernel.FLAG_FALLBACK_WHOLE_CHAR \
                and unk is not None:
            self.byte_ids[self.byte_ids < 0] = unk  # a byte without a <0xXX> token is unknown
        self.max_len = np.int64(max(self.vocab.max_len, 1))
        self.char_ids = np.full(1, -1, np.int32)
        if not byte_symbols:
            # initial symbols by index: a hash probe per character was ~12% of Gemma 3 on Japanese
            self.char_ids = np.empty(0x10000, np.int32)
            bpe_kernel.char_token_ids(self.vocab.blob, self.vocab.offsets, self.vocab.table, self.char_ids)
        self.cut_bits = np.zeros(1, np.uint64)
        if self.flags & bpe_kernel.FLAG_SPLIT_SPACE_SYMBOL and not self.flags & bpe_kernel.FLAG_RESEGMENT_UNUSED:
            # (resegmenting keeps, per UNUSED piece, the split of its latest proposal in the whole piece)
            # (under HF's whole-character fallback an unknown token may wait past the characters after
            # it, up to the next known one: cuts only beside known characters keep that inside a part)
            fallback_bytes = bpe_kernel.FLAG_BYTE_FALLBACK | bpe_kernel.FLAG_FALLBACK_WHOLE_CHAR
            alone = not self.flags & bpe_kernel.FLAG_FUSE_UNK or (
                self.flags & fallback_bytes == bpe_kernel.FLAG_BYTE_FALLBACK)
            self.cut_bits = _cut_characters(made, self.char_ids, unknown_alone=alone)
        self._find_atoms(spec)

    def _find_atoms(self, spec: TokenizerSpec) -> None:
        """Characters that may start as one symbol, and where their runs may be cut
        (:mod:`tokjit.kernels.atoms`): byte-level BPE merging by id pairs only. Also drops the
        whole-piece rule where it changes nothing."""
        self.atom_ids = np.full(1, -1, np.int32)
        self.edge_bits = np.zeros(1, np.uint64)
        self.pair_bits = np.zeros(1, np.uint64)
        self.unreachable_bits = np.zeros(atom_kernel.UNREACHABLE_BITS // 64, np.uint64)  # read with any atoms
        flags = int(self.flags)
        # (affixes make a symbol's token depend on where it stands: no atoms, no tokens built from bytes)
        if not flags & bpe_kernel.FLAG_BYTE_SYMBOLS or flags & bpe_kernel.FLAG_RANK_BY_BYTES or self.affixed \
                or (self.byte_ids < 0).any() or not self.pairs.size:
            return
        include = model_mask(spec).astype(np.bool_)
        self.builds_itself = np.zeros(include.shape[0], np.bool_)
        unreachable = atom_kernel.mark_unreachable(self.vocab.blob, self.vocab.offsets, include, self.byte_ids,
                                                   self.pairs.arrays, np.empty(int(self.max_len) + 1, np.int64),
                                                   self.unreachable_bits, self.builds_itself)
        if not unreachable:
            # BPE builds every token from its bytes (o200k, cl100k): "a piece that is a token is that
            # token" says nothing BPE does not, and its lookup costs a miss on most pieces it is asked
            flags &= ~bpe_kernel.FLAG_WHOLE_PIECE_FIRST
        flags |= bpe_kernel.FLAG_UNREACHABLE_KNOWN
        self.flags = np.int64(flags)
        atom_ids = np.full(atom_kernel.ATOM_CODE_POINTS, -1, np.int32)
        edge_bits = np.zeros(atom_kernel.EDGE_BITS // 64, np.uint64)
        pair_bits = np.zeros((1 << atom_kernel.PAIR_BITS_LOG2) // 64, np.uint64)
        if atom_kernel.find_atoms(self.vocab.blob, self.vocab.offsets, include, self.byte_ids, self.pairs.arrays,
                                  atom_ids, edge_bits, pair_bits):
            self.atom_ids, self.edge_bits, self.pair_bits = atom_ids, edge_bits, pair_bits
            self.flags = np.int64(flags | bpe_kernel.FLAG_ATOMS)

    def piece_cache_seed(self):
        """(rows, fill) of a piece cache holding every short token BPE builds from its own bytes (sized
        by :func:`~tokjit.kernels.piece_cache.seeded_slots`), for every thread's cache to start from; None
        where the model has no such list (only byte-level BPE by id pairs has one). Built once."""
        seed = self.__dict__.get("_piece_cache_seed", False)
        if seed is not False:
            return seed
        seed = None
        builds = getattr(self, "builds_itself", None)
        if builds is not None:
            lengths = np.diff(self.vocab.offsets)
            ids = np.flatnonzero(builds & (lengths >= 2) & (lengths <= piece_cache.INLINE_BYTES))
            rows = piece_cache.line_aligned_rows(piece_cache.seeded_slots(len(ids)))
            fill = np.zeros(3, np.int64)
            # inline entries only: the pools stay empty (one-element stand-ins)
            piece_cache.seed_cache(rows, np.zeros(1, np.uint8), np.zeros(1, np.int32), fill, self.vocab.blob,
                                   self.vocab.offsets, ids, len(ids))
            seed = (rows, fill)
        self._piece_cache_seed = seed
        return seed

    def _merged_ids(self, spec: TokenizerSpec, merges: np.ndarray) -> np.ndarray:
        merged = np.full(len(merges), -1, dtype=np.int32)
        lookup = {tok: i for i, tok in enumerate(spec.tokens) if spec.model_mask is None or spec.model_mask[i]}
        toks = spec.tokens
        for row, (a, b) in enumerate(merges.tolist()):
            merged[row] = lookup.get(toks[a] + toks[b], -1)
        return merged

    def _byte_ids(self, spec: TokenizerSpec, flags: int) -> np.ndarray:
        byte_ids = np.full(256, -1, dtype=np.int32)
        if flags & bpe_kernel.FLAG_BYTE_SYMBOLS:
            offsets = self.vocab.offsets
            single = np.flatnonzero((np.diff(offsets) == 1) & model_mask(spec))
            values = self.vocab.blob[offsets[single]]
            _, first = np.unique(values, return_index=True)  # the lowest id of each byte
            byte_ids[values[first]] = single[first]
        elif flags & bpe_kernel.FLAG_BYTE_FALLBACK:
            byte_ids[:] = byte_fallback_ids(spec)
        return byte_ids

    def encode_pieces(self, buf, starts, ends, ws: Workspace):
        total = int(buf.shape[0])
        longest = int((ends - starts).max()) if starts.shape[0] else 0
        ws.grow(longest + 1)
        out_ids = np.empty(total, np.int32)
        out_starts = np.empty(total, np.int64)
        out_ends = np.empty(total, np.int64)
        n = bpe_kernel.bpe_encode(self.kernel_vocab(), ws.bpe_scratch(self), buf, starts, ends, np.int64(0),
                                  np.int64(starts.shape[0]), out_ids, out_starts, out_ends)
        return out_ids[:n], out_starts[:n], out_ends[:n]

    def kernel_vocab(self):
        """The compiled vocabulary as the kernels' :data:`~tokjit.kernels.structs.BPE_VOCAB` (built once)."""
        vocab = self.__dict__.get("_kernel_vocab")
        if vocab is None:
            vocab = self._kernel_vocab = structs.make_bpe_vocab(self, bpe_kernel.merge_long_address())
        return vocab


SPACE_SYMBOL = "\u2581".encode("utf-8")


def _affixed_symbols(spec: TokenizerSpec, prefix: str, suffix: str, byte_level: bool):
    """(keys, ids) of the tokens spelling one symbol with HF BPE's affixes
    (:func:`~tokjit.kernels.bpe.affixed_symbol_id`): key ``variant << 32 | code``, variant 1 the
    continuing-subword prefix before it, 2 the end-of-word suffix after it, 3 both; code the
    symbol's byte (byte-level: the byte its character stands for) or code point. Sorted by key,
    the lowest id of a key kept (HF's vocabulary has one id per string)."""
    keys, ids = [], []
    strings = spec.source.get("token_strings") if prefix or suffix else None
    if strings:
        mask = model_mask(spec)
        byte_of = byte_level_values() if byte_level else None
        variants = [(v, prefix if v & 1 else "", suffix if v & 2 else "") for v in (1, 2, 3)
                    if (not v & 1 or prefix) and (not v & 2 or suffix)]
        for tid, s in enumerate(strings):
            if not mask[tid]:
                continue
            for v, head, tail in variants:
                if len(s) > len(head) + len(tail) and s.startswith(head) and s.endswith(tail) \
                        and len(s) - len(head) - len(tail) == 1:
                    ch = s[len(head)]
                    code = ord(ch) if byte_of is None else byte_of.get(ch, -1)
                    if code >= 0:
                        keys.append((v << 32) | code)
                        ids.append(tid)
    if not keys:
        return np.full(1, -1, np.int64), np.full(1, -1, np.int32)
    keys_arr, ids_arr = np.asarray(keys, np.int64), np.asarray(ids, np.int32)
    order = np.lexsort((ids_arr, keys_arr))
    keys_arr, ids_arr = keys_arr[order], ids_arr[order]
    first = np.concatenate(([True], keys_arr[1:] != keys_arr[:-1]))
    return keys_arr[first], ids_arr[first]


def _produced_tokens(tokens, produced: np.ndarray) -> list[bytes]:
    """The tokens whose ids are in ``produced``, each once, in id order."""
    items = tokens.tolist() if hasattr(tokens, "tolist") else list(tokens)
    made = np.zeros(len(items), np.bool_)
    made[produced] = True
    return list(map(items.__getitem__, np.flatnonzero(made).tolist()))


def _space_symbol_unsafe_prev(made: list[bytes], vocab: TokenTable):
    """Code points X such that some token a merge can produce (``made``) contains X followed by U+2581
    (the cuts :data:`~tokjit.kernels.bpe.FLAG_SPLIT_SPACE_SYMBOL` must not make), or None when cutting
    does not apply (U+2581 is not itself a token, so unknown-run fusing could differ)."""
    space_id = _lookup(vocab, SPACE_SYMBOL)
    if space_id < 0:
        return None
    unsafe = set()
    for tok in made:
        pos = tok.find(SPACE_SYMBOL, 1)
        while pos > 0:
            try:
                unsafe.add(ord(tok[:pos].decode("utf-8")[-1]))
            except (UnicodeDecodeError, IndexError):
                return None
            pos = tok.find(SPACE_SYMBOL, pos + 1)
    return np.asarray(sorted(unsafe) or [-1], np.int64)


def _cut_characters(made: list[bytes], char_ids: np.ndarray, unknown_alone: bool):
    """Where a SentencePiece-style piece may be cut (:func:`tokjit.kernels.bpe.piece_part_end`), as
    uint64[1024 + 256], or one zero word when nowhere: words 0..1023 a bit per BMP code point for the
    characters in no token a merge can produce (``made``; so no merge joins them to a neighbour),
    then from ``bpe.TAIL_CUTS`` (1024) two words per ASCII character y with bit x set when no such
    token holds "xy" (so no merge joins a word's last character y to the x before it). A character counts
    only when it is a token itself or, when an unknown character comes out alone (``unknown_alone``:
    no fusing of unknown runs), not one either."""
    # every character of the tokens of two characters or more (a merge makes no single character;
    # over 4 bytes a token has two at least); bytes that are not UTF-8 end the search: no cuts
    try:
        texts = [t.decode("utf-8") for t in made
                 if len(t) > 4 or len(t.decode("utf-8", "surrogateescape")) != 1]
    except UnicodeDecodeError:
        return np.zeros(1, np.uint64)
    # U+FFFF between tokens: no pair of ASCII characters spans two of them
    code_points = np.frombuffer("\uffff".join(texts).encode("utf-32-le"), np.uint32)
    known = np.ones(0x10000, np.bool_) if unknown_alone else char_ids >= 0
    cut = np.ones(0x10000, np.bool_)
    cut[code_points[code_points < 0x10000]] = False
    cut[0xD800:0xE000] = False
    cut &= known
    left, right = code_points[:-1], code_points[1:]
    inside = (left < 128) & (right < 128)
    joined = np.zeros((128, 128), np.bool_)  # [right, left]: some merged token holds "left right"
    joined[right[inside], left[inside]] = True
    tail = ~joined & known[:128][None, :] & known[:128][:, None]
    if not cut.any() and not tail.any():
        return np.zeros(1, np.uint64)
    words = (np.packbits(cut, bitorder="little").view("<u8"),
             np.packbits(tail, axis=1, bitorder="little").view("<u8").reshape(-1))
    return np.concatenate(words).astype(np.uint64)


def _lookup(vocab: TokenTable, data: bytes) -> int:
    from tokjit.kernels.lookup import lookup_bytes
    buf = np.frombuffer(data, np.uint8)
    return int(lookup_bytes(buf, np.int64(0), np.int64(len(data)), vocab.blob, vocab.offsets, vocab.table))


def _score_pairs(tokens: list[bytes], mergeable: np.ndarray, merge_rank: np.ndarray):
    """Pair table (left id, right id) -> (rank, merged id) equivalent to merging by concatenated bytes.

    Exact only if every symbol that can take part in a merge has an id: merged symbols always do,
    initial symbols (single characters) do when each character of every mergeable piece is itself a
    mergeable piece. Returns None (keep the byte-hash path) otherwise.
    """
    index: dict[bytes, int] = {}
    for i in np.flatnonzero(mergeable).tolist():
        index.setdefault(tokens[i], i)
    lefts, rights, ranks, merged = [], [], [], []
    for tok, tid in index.items():
        try:
            text = tok.decode("utf-8")
        except UnicodeDecodeError:
            return None
        if len(text) == 1:
            continue
        pos = 0
        cuts = []
        for ch in text:
            pos += len(ch.encode("utf-8"))
            cuts.append(pos)
            if ch.encode("utf-8") not in index:
                return None
        for cut in cuts[:-1]:
            lid = index.get(tok[:cut])
            rid = index.get(tok[cut:])
            if lid is not None and rid is not None:
                lefts.append(lid)
                rights.append(rid)
                ranks.append(merge_rank[tid])
                merged.append(tid)
    if len(lefts) > 50_000_000:
        return None
    return PairTable.build(lefts, rights, ranks, merged)


def byte_fallback_ids(spec: TokenizerSpec) -> np.ndarray:
    """Ids of the ``<0xXX>`` byte tokens (-1 where a byte has none)."""
    ids = np.full(256, -1, dtype=np.int32)
    index = {tok: i for i, tok in enumerate(spec.tokens)}
    for b in range(256):
        tid = index.get(b"<0x%02X>" % b)
        if tid is not None:
            ids[b] = tid
    return ids



__all__ = ["BPEModel", "Workspace", "byte_fallback_ids", "TokenType"]

