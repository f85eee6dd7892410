"""The WordPiece family (BERT, DistilBERT, MiniLM, BGE, ...): ``BertNormalizer``,
``BertPreTokenizer`` / ``Whitespace`` / ``WhitespaceSplit``, the ``WordPiece`` model and decoder.

Components are registered under their HF ``tokenizers`` type names and mirror HF exactly, including
its Unicode tables (see ``scripts/gen_wordpiece_tables.py``: HF classifies characters with Unicode
8.0 categories, lowercases with Rust's Unicode 16.0). The hot paths are the kernels in
:mod:`tokjit.kernels.wordpiece`.
"""

from __future__ import annotations

import functools
import os

import numpy as np

from tokjit.compile import pack_bytes
from tokjit.errors import InputError, ModelFileError
from tokjit.kernels import wordpiece as K
from tokjit.kernels.lookup import table_size
from tokjit.models.bpe import model_mask
from tokjit.pipeline.pre_tokenizers import Pieces, RegexSplitter, split_pieces, BEHAVIORS
from tokjit.spec import TokenizerSpec

_TABLES_PATH = os.path.join(os.path.dirname(os.path.dirname(__file__)), "data", "bert_unicode.npz")


class BertTables:
    """The per-code-point arrays the BERT kernels read (loaded once per process)."""

    def __init__(self, data: dict):
        self.flags = data["flags"]
        self.dec_keys, self.dec_off, self.dec_data = data["decomp_keys"], data["decomp_offsets"], data["decomp_data"]
        self.low_keys, self.low_off, self.low_data = data["lower_keys"], data["lower_offsets"], data["lower_data"]
        self.ccc_keys, self.ccc_vals = data["ccc_keys"], data["ccc_values"]
        if self.flags.shape[0] != 0x110000:
            raise ModelFileError("flag table must cover every code point", path=_TABLES_PATH, where="flags")
        for keys, off, values in ((self.dec_keys, self.dec_off, self.dec_data),
                                  (self.low_keys, self.low_off, self.low_data)):
            if off.shape[0] != keys.shape[0] + 1 or off[-1] != values.shape[0] or np.any(np.diff(off) < 1) \
                    or np.any(np.diff(keys) <= 0) or (values.size and (values.min() < 0 or values.max() >= 0x110000)):
                raise ModelFileError("malformed mapping table", path=_TABLES_PATH)
        if np.diff(self.dec_off).max() > K.MAX_LOCAL - 2:
            raise ModelFileError("decomposition longer than the kernel's scratch", path=_TABLES_PATH)
        # flags promise a table entry; the kernels do not check the lookup succeeded
        for bit, keys in ((K.FLAG_DECOMP, self.dec_keys), (K.FLAG_LOWER, self.low_keys), (K.FLAG_CCC, self.ccc_keys)):
            if not np.array_equal(np.flatnonzero(self.flags & bit), keys):
                raise ModelFileError("flag table disagrees with a mapping table", path=_TABLES_PATH)
        self.expansion = self._max_expansion()

    def _max_expansion(self) -> int:
        """Largest number of output bytes one input byte can become (all options on)."""
        def utf8_len(cp):
            return 1 if cp < 0x80 else 2 if cp < 0x800 else 3 if cp < 0x10000 else 4

        def lowered(cp):
            i = np.searchsorted(self.low_keys, cp)
            if i < len(self.low_keys) and self.low_keys[i] == cp:
                return sum(utf8_len(int(c)) for c in self.low_data[self.low_off[i]:self.low_off[i + 1]])
            return utf8_len(cp)

        worst = 5 / 3  # ' ' + CJK ideograph + ' '
        for i, key in enumerate(self.dec_keys.tolist()):
            total = sum(lowered(int(c)) for c in self.dec_data[self.dec_off[i]:self.dec_off[i + 1]])
            if self.flags[key] & K.FLAG_CJK:
                total += 2
            worst = max(worst, total / utf8_len(key))
        for key in self.low_keys.tolist():
            worst = max(worst, lowered(key) / utf8_len(key))
        return int(np.ceil(worst))


@functools.lru_cache(maxsize=None)
def bert_tables() -> BertTables:
    try:
        with np.load(_TABLES_PATH) as z:
            return BertTables({k: z[k] for k in z.files})
    except OSError as exc:
        raise ModelFileError(f"cannot read BERT Unicode tables ({exc})", path=_TABLES_PATH) from None


# ==================================================================================================
# Normalizer
# ==================================================================================================

class BertNormalizer:
    """HF ``BertNormalizer``; ``strip_accents`` None follows ``lowercase`` as in HF."""

    def __init__(self, config: dict):
        lowercase = bool(config.get("lowercase", True))
        strip = config.get("strip_accents")
        strip = lowercase if strip is None else bool(strip)
        opts = 0
        if config.get("clean_text", True):
            opts |= K.OPT_CLEAN
        if config.get("handle_chinese_chars", True):
            opts |= K.OPT_CJK
        if strip:
            opts |= K.OPT_STRIP
        if lowercase:
            opts |= K.OPT_LOWER
        self.opts = np.int64(opts)
        self.tables = bert_tables()

    def __call__(self, buf, align):
        t = self.tables
        n = buf.shape[0]
        buf = np.ascontiguousarray(buf, dtype=np.uint8)
        run_cap = 64 + K.MAX_LOCAL
        while True:
            out = np.empty(t.expansion * n + 8, np.uint8)
            out_align = np.empty(out.shape[0] + 1, np.int64)
            run_cp = np.empty(run_cap, np.int64)
            run_src = np.empty(run_cap, np.int64)
            run_ccc = np.empty(run_cap, np.int64)
            m = K.bert_normalize(buf, np.int64(n), t.flags, (t.dec_keys, t.dec_off, t.dec_data, t.low_keys,
                                 t.low_off, t.low_data, t.ccc_keys, t.ccc_vals), self.opts, (run_cp, run_src, run_ccc),
                                 out, out_align)
            if m >= 0:
                break
            run_cap = 4 * n + 16 + K.MAX_LOCAL  # a run of combining marks longer than 64: the worst case
        out_align = out_align[:m + 1]
        if align is not None:
            out_align = align[out_align]
        return out[:m], out_align




# ==================================================================================================
# Pre-tokenizers
# ==================================================================================================

class BertPreTokenizer:
    """HF ``BertPreTokenizer``: split on whitespace (removed), isolate each punctuation character."""

    isolate_punct = True

    def __init__(self, config: dict):
        self.flags = bert_tables().flags

    def __call__(self, pieces: Pieces) -> Pieces:
        cap = pieces.buf.shape[0] + 1
        out_s = np.empty(cap, np.int64)
        out_e = np.empty(cap, np.int64)
        n = K.bert_pre_tokenize(pieces.buf, pieces.starts, pieces.ends, np.int64(pieces.starts.shape[0]),
                                self.flags, self.isolate_punct, out_s, out_e)
        return pieces.derive(pieces.buf, out_s[:n], out_e[:n], pieces.align)


class WhitespaceSplit(BertPreTokenizer):
    """HF ``WhitespaceSplit``: split on ``char::is_whitespace``, whitespace removed."""

    isolate_punct = False


class Whitespace:
    """HF ``Whitespace``: the regex ``\\w+|[^\\w\\s]+``, everything between matches removed."""

    PATTERN = r"\w+|[^\w\s]+"

    def __init__(self, config: dict):
        self.find = RegexSplitter(self.PATTERN, syntax="rust").find  # HF runs it on the regex crate

    def __call__(self, pieces: Pieces) -> Pieces:
        return split_pieces(pieces, self.find, BEHAVIORS["Removed"], True)




# ==================================================================================================
# Model
# ==================================================================================================

class Trie:
    """Byte trie of a vocabulary over flat arrays (see :func:`tokjit.kernels.wordpiece.build_trie`)."""

    def __init__(self, tokens: list[bytes], include: np.ndarray):
        blob, offsets = pack_bytes(tokens)
        total = int(np.diff(offsets)[include].sum()) if len(tokens) else 0
        self.edges = np.zeros((table_size(total + 1), 2), np.int64)
        self.edges[:, 0] = -1
        self.node_token = np.full(total + 1, -1, np.int32)
        self.n_nodes = int(K.build_trie(blob, offsets, include.astype(np.bool_), self.edges, self.node_token))
        compact = np.zeros((table_size(self.n_nodes), 2), np.int64)
        compact[:, 0] = -1
        K.rehash_edges(self.edges, compact)
        self.edges = compact
        self.node_token = self.node_token[:self.n_nodes].copy()

    def row(self, node: int) -> np.ndarray:
        out = np.zeros(256, np.int64)
        K.node_edges(np.int64(node), self.edges, out)
        return out

    def node(self, prefix: bytes) -> int:
        """Node reached by ``prefix`` from the root (-1 if no token starts with it)."""
        arr = np.frombuffer(prefix, np.uint8)
        return int(K.trie_walk(arr, np.int64(0), np.int64(arr.shape[0]), self.edges))


def checked_unk_id(spec: TokenizerSpec) -> np.int64:
    """The spec's ``unk_id`` (-1 when it has none), refused when outside the vocabulary."""
    unk = spec.model.get("unk_id")
    if unk is not None and not 0 <= int(unk) < len(spec.tokens):
        raise ModelFileError(f"unk id {unk} outside the vocabulary", path=spec.source.get("path"),
                             where="model.unk_id")
    return np.int64(-1 if unk is None else int(unk))


class WordPieceModel:
    """Greedy longest-match-first WordPiece (HF ``WordPiece``); spec options:
    ``continuing_subword_prefix`` (default ``##``), ``max_input_chars_per_word`` (default 100),
    ``unk_id``, and ``word_prefix`` / ``first_may_be_empty`` for llama.cpp's WPM flavour, whose
    vocabulary marks word starts (``▁word``) instead of continuations."""

    def __init__(self, spec: TokenizerSpec):
        opts = spec.model
        self.trie = Trie(spec.tokens, model_mask(spec))
        word_prefix = opts.get("word_prefix", "").encode("utf-8")
        cont_prefix = opts.get("continuing_subword_prefix", "##")
        cont_prefix = b"" if cont_prefix is None else cont_prefix.encode("utf-8")
        self.word_node = np.int64(self.trie.node(word_prefix))
        self.cont_node = np.int64(self.trie.node(cont_prefix))
        self.word_row = self.trie.row(self.word_node)
        self.cont_row = self.trie.row(self.cont_node)
        # llama.cpp WPM: the phantom prefix alone may be a word's first token
        self.word_node_token = np.int64(-1)
        if opts.get("first_may_be_empty", False) and self.word_node >= 0:
            self.word_node_token = np.int64(self.trie.node_token[self.word_node])
        max_chars = opts.get("max_input_chars_per_word", 100)
        self.max_chars = np.int64(2 ** 62 if max_chars is None else int(max_chars))
        self.unk_id = checked_unk_id(spec)
        self.unk_token = opts.get("unk_token")
        # a byte-level vocabulary: HF's word length counts the mapped characters, one per byte
        self.char_mask = np.int64(0 if opts.get("byte_level") else 0xC0)

    def encode_pieces(self, buf, starts, ends, ws=None):
        cap = int(buf.shape[0]) + int(starts.shape[0]) + 1
        out_ids = np.empty(cap, np.int32)
        out_s = np.empty(cap, np.int64)
        out_e = np.empty(cap, np.int64)
        t = self.trie
        n = K.wordpiece_encode(buf, starts, ends, np.int64(starts.shape[0]), t.edges, self.word_row, self.word_node,
                               self.word_node_token, self.cont_row, self.cont_node, self.unk_id, self.max_chars,
                               self.char_mask, out_ids, out_s, out_e)
        if n < 0:
            # HF raises too (WordPiece error MissingUnkToken)
            raise InputError(f"text needs the unknown token {self.unk_token!r}, which is not in the vocabulary")
        return out_ids[:n], out_s[:n], out_e[:n]




# ==================================================================================================
# Decoder
# ==================================================================================================

def cleanup(text: str) -> str:
    """HF's ``cleanup`` of tokenization spaces (the WordPiece decoder applies it per token)."""
    return (text.replace(" .", ".").replace(" ?", "?").replace(" !", "!").replace(" ,", ",")
            .replace(" ' ", "'").replace(" n't", "n't").replace(" 'm", "'m").replace(" do not", " don't")
            .replace(" 's", "'s").replace(" 've", "'ve").replace(" 're", "'re"))


class CTCDecoder:
    """HF ``decoders.CTC`` (speech models' outputs): repeats of a token collapse to one, the pad
    token is removed from every token and, with ``cleanup``, the tokenization spaces are cleaned up
    and the word delimiter becomes a space (HF replaces it only then); empty tokens are dropped."""

    def __init__(self, config: dict):
        for key, kind in (("pad_token", str), ("word_delimiter_token", str), ("cleanup", bool)):
            if not isinstance(config.get(key), kind):  # HF has no defaults for them and refuses the file
                raise ModelFileError(f"CTC decoder needs '{key}' ({kind.__name__})", where=f"decoder.{key}")
        self.pad, self.delimiter, self.cleanup = config["pad_token"], config["word_delimiter_token"], config["cleanup"]

    def decode_chain(self, tokens: list[str]) -> list[str]:
        out = []
        for i, token in enumerate(tokens):
            if i and token == tokens[i - 1]:
                continue
            token = token.replace(self.pad, "")
            if self.cleanup:
                # an empty delimiter puts a space between every two characters, as Rust's replace does
                token = cleanup(token).replace(self.delimiter, " ")
            if token:
                out.append(token)
        return out


class WordPieceDecoder:
    """HF ``decoders.WordPiece``: a token after the first loses its ``prefix`` (one occurrence, at
    the start) or gains a leading space; with ``cleanup`` every resulting token is cleaned up."""

    def __init__(self, config: dict):
        self.prefix = config.get("prefix", "##")
        self.cleanup = bool(config.get("cleanup", True))
        self._forms = None  # (first, later): every id's text at the start / after it, built on first use

    def _build_forms(self, tok):
        """HF's chain handles each token on its own (prefix or space, then cleanup), so a token's
        text depends only on its id and on whether it comes first: both forms are computed once per
        id, and decoding is one list lookup per id."""
        if self._forms is None:
            names = [tok.id_to_token(i) for i in range(tok.vocab_size)]
            first = [self.decode_chain([t])[0] for t in names]
            later = [self.decode_chain(["", t])[1] for t in names]
            self._forms = (first, later)
        return self._forms

    def pieces_decoder(self, tok, special):
        from tokjit.pipeline.decoders import JoinedPieces
        first, later = self._build_forms(tok)
        return JoinedPieces(later, special, lambda text, errors: text, first.__getitem__)

    def decode_ids(self, tok, arr, skip_special_tokens: bool, errors: str) -> str:
        self._build_forms(tok)
        ids = arr.tolist()
        if skip_special_tokens:
            special = tok._special_ids
            ids = [i for i in ids if not special[i]]
        if not ids:
            return ""
        first, later = self._forms
        return first[ids[0]] + "".join([later[i] for i in ids[1:]])

    def decode_chain(self, tokens: list[str]) -> list[str]:
        out = []
        prefix = self.prefix
        for i, tok in enumerate(tokens):
            if i != 0:
                if tok.startswith(prefix):
                    tok = tok.replace(prefix, "", 1)
                else:
                    tok = " " + tok
            if self.cleanup:
                tok = cleanup(tok)
            out.append(tok)
        return out



__all__ = ["BertNormalizer", "BertPreTokenizer", "Whitespace", "WhitespaceSplit", "WordPieceModel",
           "WordPieceDecoder", "Trie", "bert_tables", "cleanup"]
