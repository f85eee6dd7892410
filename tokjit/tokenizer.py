"""The :class:`Tokenizer`: the pipeline load -> normalize -> pre-tokenize -> model -> post-process,
and decode, over one compiled :class:`~tokjit.spec.TokenizerSpec`."""

from __future__ import annotations

import dataclasses
import os
import threading
from typing import Iterable, Sequence

import numpy as np

from tokjit.pipeline import decoders as decoders_mod
from tokjit.compat.transformers import TransformersMixin
from tokjit.pipeline.added_tokens import AddedTokenMatcher
from tokjit.pipeline.normalizers import without_identity
from tokjit.fused import fused_path_for
from tokjit.errors import InputError, TextTypeError, UnknownEncodingError
from tokjit.models.bpe import Workspace
from tokjit.pipeline.pre_tokenizers import Pieces
from tokjit.pipeline.registry import (build_decoder, build_model, build_normalizer, build_post_processor,
                                     build_pre_tokenizer)
from tokjit.serving import metrics as _metrics
from tokjit.spec import TokenizerSpec, TokenType
from tokjit.thread_pool import default_threads, thread_pool
from tokjit.text import text_to_utf8
from tokjit.token_ids import as_token_id, id_array

_EMPTY_I64 = np.zeros(0, np.int64)


# A batch of at most this many texts and characters is encoded by single calls (Tokenizer._small_batch):
# 8 sentences of ~55 characters took 11 us through the batch path and 2.9 us as single calls (o200k)
SMALL_BATCH_TEXTS = 64
SMALL_BATCH_CHARS = 4096


def _text_list(texts) -> list:
    """A batch as a list; one ``str`` is refused rather than encoded as its characters."""
    if isinstance(texts, (str, bytes)):
        raise TextTypeError(f"a batch is a sequence of str, got one {type(texts).__name__}: wrap it in a list")
    return texts if type(texts) is list else list(texts)


def _display_name(path) -> str:
    """``llama3/tokenizer.json`` rather than a bare generic file name."""
    if not path:
        return "tokenizer"
    path = str(path)
    parent = os.path.basename(os.path.dirname(path))
    return f"{parent}/{os.path.basename(path)}" if parent else os.path.basename(path)


class Encoding:
    """Ids with the byte and character spans each covers in the original text."""

    __slots__ = ("ids", "byte_offsets", "text")

    def __init__(self, ids, byte_offsets, text):
        self.ids = ids
        self.byte_offsets = byte_offsets
        self.text = text

    def __len__(self):
        return len(self.ids)

    def __repr__(self):
        return f"Encoding(ids={self.ids[:8]}{'...' if len(self.ids) > 8 else ''}, n={len(self.ids)})"


def _any_inside(parts: list[str], wholes: list[str]) -> bool:
    """Whether a string of ``parts`` occurs inside one of ``wholes``: each part searched for in the
    wholes joined, or each substring of the wholes (up to the longest part) looked up among the
    parts, whichever costs less."""
    joined = "\x00".join(wholes)  # (a NUL inside a content can only add a "may")
    longest = max(map(len, parts))
    if len(parts) <= 200 * longest:  # (a search in C runs ~100x faster than a slice looked up in Python)
        return any(p in joined for p in parts)
    lookup = set(parts)
    return any(w[i:j] in lookup for w in wholes for i in range(len(w))
               for j in range(i + 1, min(len(w), i + longest) + 1))


def _matches_may_overlap(added) -> bool:
    """Whether a match of an added token flagged "normalized" may overlap a match of one that is not
    (then HF's order, the raw ones first, decides between them): one's content inside the other's, a
    proper suffix of one a prefix of the other, or lstrip / rstrip stretching a match over the
    whitespace the other begins or ends with. Substring searches (:func:`_any_inside`) and a set of
    one set's prefixes: fast for the thousands of added tokens some files carry."""
    raw = [t for t in added if not t.normalized and t.content]
    norm = [t for t in added if t.normalized and t.content]
    if not raw or not norm:
        return False
    for one, other in ((raw, norm), (norm, raw)):
        if _any_inside([t.content for t in one], [t.content for t in other]):
            return True
        prefixes = {t.content[:k] for t in one for k in range(1, len(t.content))}
        if any(t.content[i:] in prefixes for t in other for i in range(1, len(t.content))):
            return True
        if any(t.lstrip for t in one) and any(t.content[-1].isspace() for t in other):
            return True
        if any(t.rstrip for t in one) and any(t.content[0].isspace() for t in other):
            return True
    return False


class Tokenizer(TransformersMixin):
    """A compiled tokenizer. Build one with :func:`tokjit.load` or :func:`tokjit.get_encoding`.

    Thread-safe: the compiled arrays are read-only and every call uses its own (thread-local)
    scratch buffers, so one tokenizer may be shared by many threads.
    """

    # set by tokjit.api on tokenizers loaded from a file or a bundled name: rebuilds one from its origin
    _rebuild = None

    def __init__(self, spec: TokenizerSpec):
        self.spec = spec
        self.name = spec.source.get("name") or _display_name(spec.source.get("path"))
        self.normalizer = without_identity(build_normalizer(spec.normalizer))
        self.pre_tokenizer = build_pre_tokenizer(spec.pre_tokenizer)
        self.model = build_model(spec)
        self.post_processor = build_post_processor(spec.post_processor)
        self.decoder = build_decoder(spec.decoder)
        self._local = threading.local()
        added = spec.added_tokens
        # parse_special=True: every added token; False: only those the reference always matches
        # tokens flagged "normalized" match the normalized text after the others matched the raw text (HF:
        # two passes, also without a normalizer); one pass over both gives the same matches when no match
        # of one set can overlap one of the other, which keeps the fused paths for almost every file
        separate = self.normalizer is not None or (spec.source.get("format") == "tokenizer.json"
                                                   and _matches_may_overlap(added))
        raw = [t for t in added if not t.normalized or not separate]
        norm = [t for t in added if t.normalized and separate]
        if norm and self.normalizer is not None and spec.source.get("format") == "tokenizer.json":
            # HF matches a normalized added token by its normalized content ("Café" under Lowercase
            # matches "café")
            norm = [dataclasses.replace(t, content=self._normalize_text(t.content)) for t in norm]
        semantics = "llamacpp" if spec.source.get("format") == "gguf" else "hf"
        self._match_all = AddedTokenMatcher(raw, semantics)
        self._match_plain = AddedTokenMatcher([t for t in raw if not t.special], semantics)
        self._match_all_norm = AddedTokenMatcher(norm, semantics)
        self._match_plain_norm = AddedTokenMatcher([t for t in norm if not t.special], semantics)
        self._token_to_id: dict[str, int] | None = None
        self._special_ids = np.zeros(max(len(spec.tokens), 1), np.bool_)
        for t in added:
            if t.special:
                self._special_ids[t.id] = True
        types = spec.token_types
        self._special_ids[: len(types)] |= (types == TokenType.CONTROL)
        self._decode_blob, self._decode_offsets = self._build_decode_table()
        self._pieces_decoder = False  # built on first decode (decoders.pieces_decoder_for)
        self._fused = fused_path_for(self)
        self._encode_list = self._fused.encode_list if self._fused is not None else None
        if self._fused is not None:
            # one function per call instead of encode -> encode_list (the class's encode stays the
            # general path: Tokenizer.encode(tok, ...), metrics, subclasses)
            self.encode = self._fused.make_encode(type(self).encode.__get__(self), self.post_process, _metrics)
            self.encode_to_numpy = self._fused.make_encode(type(self).encode_to_numpy.__get__(self),
                                                           self._post_process_array, _metrics, as_array=True)

    def _normalize_text(self, text: str) -> str:
        buf, _ = self.normalizer(np.frombuffer(text.encode("utf-8"), np.uint8), None)
        return buf.tobytes().decode("utf-8")

    # ==============================================================================================
    # Encoding
    # ==============================================================================================

    def encode(self, text: str, *, add_special_tokens: bool = False, parse_special: bool = False) -> list[int]:
        """Encode ``text`` to token ids.

        ``parse_special=False`` (the default, safe for untrusted text): text spelling a special
        token is tokenized as ordinary text; tokens the reference always matches (non-special
        added tokens, SentencePiece user-defined pieces) are still matched. ``parse_special=True``:
        special-token text becomes the special token (HF ``encode``, tiktoken
        ``allowed_special="all"``, llama.cpp ``parse_special=true``).
        ``add_special_tokens=True`` adds BOS/EOS or the post-processor template.
        """
        m = _metrics.ACTIVE
        fast = self._encode_list
        if m is None and fast is not None:
            out = fast(text, parse_special)
            return self.post_process(out) if add_special_tokens else out
        t0 = _metrics.now() if m is not None else 0.0
        buf = text_to_utf8(text)
        if fast is not None:
            out = fast(text, parse_special)
        else:
            ids, _, _ = self._encode_array(buf, parse_special, want_spans=False)
            out = ids.tolist()
        if add_special_tokens:
            out = self.post_process(out)
        if m is not None:
            m.on_encode(buf.shape[0], len(out), _metrics.now() - t0)
        return out

    def encode_to_numpy(self, text: str, *, add_special_tokens: bool = False,
                        parse_special: bool = False) -> np.ndarray:
        """``encode`` as a new int32 array (the caller owns it: no later call changes it). Tokenizers
        with a fused path answer it with the kernel call ``encode`` makes (``FusedPath.make_encode``)."""
        m = _metrics.ACTIVE
        t0 = _metrics.now() if m is not None else 0.0
        buf = text_to_utf8(text)
        ids, _, _ = self._encode_array(buf, parse_special, want_spans=False)
        if add_special_tokens:
            ids = self._post_process_array(ids)
        if m is not None:
            m.on_encode(buf.shape[0], ids.shape[0], _metrics.now() - t0)
        return ids

    def encode_ordinary(self, text: str) -> list[int]:
        """tiktoken's name for ``encode(text, parse_special=False)``."""
        return self.encode(text)

    def encode_batch(self, texts: Sequence[str], *, num_threads: int | None = None,
                     add_special_tokens: bool = False, parse_special: bool = False) -> list[list[int]]:
        """Encode many texts over a thread pool; kernels release the GIL."""
        texts = _text_list(texts)
        threads = self._threads(num_threads)  # checked whichever way the batch goes
        if self._small_batch(texts):
            # a few short texts: one built-in call each (~0.1 us) beats the batch's fixed cost (~8 us)
            encode = self.encode
            out = [encode(t, parse_special=parse_special) for t in texts]
            return [self.post_process(x) for x in out] if add_special_tokens else out
        if self._fused is not None:
            flat, offsets = self._fused.encode_texts(texts, parse_special, threads)
            out = self._fused.id_lists(flat, offsets)
            return [self.post_process(x) for x in out] if add_special_tokens else out

        def one(t):
            return self.encode(t, add_special_tokens=add_special_tokens, parse_special=parse_special)
        return self._map(one, texts, num_threads)

    def encode_batch_numpy(self, texts: Sequence[str], *, num_threads: int | None = None,
                           add_special_tokens: bool = False, parse_special: bool = False):
        """Encode many texts into one flat int32 array plus int64 offsets (``len(texts) + 1``)."""
        texts = _text_list(texts)
        if self._fused is not None and not (add_special_tokens and self.post_processor is not None):
            return self._fused.encode_texts(texts, parse_special, self._threads(num_threads))

        def one(t):
            return self.encode_to_numpy(t, add_special_tokens=add_special_tokens, parse_special=parse_special)
        parts = self._map(one, texts, num_threads)
        offsets = np.zeros(len(parts) + 1, np.int64)
        if parts:
            np.cumsum([p.shape[0] for p in parts], out=offsets[1:])
        flat = np.concatenate(parts).astype(np.int32) if parts else np.zeros(0, np.int32)
        return flat, offsets

    def _small_batch(self, texts: list) -> bool:
        """Whether ``texts`` (a list) is a batch of a few short str that single calls encode faster
        than the batch path (packing, buffers and kernel calls of its own): at most SMALL_BATCH_TEXTS
        texts of SMALL_BATCH_CHARS characters in all, which one thread encodes either way."""
        if self._fused is None or len(texts) > SMALL_BATCH_TEXTS or _metrics.ACTIVE is not None:
            return False  # (metrics count single calls, not batches)
        # anything but str goes to the batch path, which says what is wrong with it
        return all(type(t) is str for t in texts) and sum(map(len, texts)) <= SMALL_BATCH_CHARS

    @staticmethod
    def _threads(num_threads: int | None) -> int:
        if num_threads is None:
            return default_threads()
        if isinstance(num_threads, bool) or not isinstance(num_threads, (int, np.integer)) or num_threads < 1:
            raise InputError(f"num_threads must be a positive int or None, got {num_threads!r}")
        return int(num_threads)

    def _map(self, fn, items, num_threads):
        items = list(items)
        num_threads = self._threads(num_threads)
        if num_threads <= 1 or len(items) <= 1:
            return [fn(x) for x in items]
        chunk = max(1, len(items) // (num_threads * 4))
        return list(thread_pool(num_threads).map(fn, items, chunksize=chunk))

    def encode_with_offsets(self, text: str, *, parse_special: bool = False, byte_offsets: bool = False,
                            add_special_tokens: bool = False):
        """(ids, offsets) into ``text``: offsets[i] = (start, end) of token i in characters (HF
        ``Encoding.offsets``), or in UTF-8 bytes with ``byte_offsets=True``. Tokens added by
        ``add_special_tokens=True`` get (0, 0), as in HF."""
        if add_special_tokens:
            ids, offsets = self.encode_with_offsets(text, parse_special=parse_special, byte_offsets=byte_offsets)
            return self._post_process_with_offsets(ids, offsets)
        buf = text_to_utf8(text)
        ids, s, e = self._encode_array(buf, parse_special, want_spans=True)
        char_index = np.zeros(buf.shape[0] + 1, np.int64)
        is_start = (buf & 0xC0) != 0x80
        char_index[1:] = np.cumsum(is_start)
        # a span that ends inside a character covers it; a start inside a character points to it
        starts = char_index[s] - ((s < buf.shape[0]) & ~np.append(is_start, True)[s])
        ends = char_index[e]
        starts, ends = self._trim_offsets(ids, starts, ends)  # ByteLevel / Roberta trim_offsets
        if byte_offsets:
            char_starts = np.append(np.flatnonzero(is_start), buf.shape[0])
            starts, ends = char_starts[starts], char_starts[ends]
        return ids.tolist(), list(zip(starts.tolist(), ends.tolist()))

    def post_process(self, ids: list[int]) -> list[int]:
        if self.post_processor is None:
            return ids
        return self.post_processor(ids)

    def _post_process_array(self, ids: np.ndarray) -> np.ndarray:
        """``post_process`` of an int32 array of ids (the array itself when there is nothing to add)."""
        if self.post_processor is None:
            return ids
        return np.asarray(self.post_process(ids.tolist()), np.int32)

    def _workspace(self) -> Workspace:
        ws = getattr(self._local, "ws", None)
        if ws is None:
            ws = self._local.ws = Workspace()
        return ws

    def _encode_array(self, buf: np.ndarray, parse_special: bool, want_spans: bool):
        """Ids (int32) and, with ``want_spans``, the byte span of each id in ``buf``."""
        if self._fused is not None and not want_spans:
            n = buf.shape[0]
            ids, _ = self._fused.encode_docs(buf, np.zeros(1, np.int64), np.full(1, n, np.int64), parse_special)
            return ids, None, None
        return self._encode_staged(buf, parse_special, want_spans)

    def _encode_staged(self, buf: np.ndarray, parse_special: bool, want_spans: bool):
        """The component-by-component pipeline (every tokenizer; spans for offsets)."""
        matcher = self._match_all if parse_special else self._match_plain
        ms, me, mids = matcher.find(buf, 0, buf.shape[0])
        if ms.shape[0] == 0:
            return self._encode_segment(buf, 0, buf.shape[0], parse_special, want_spans)
        ids_parts, s_parts, e_parts = [], [], []
        pos = 0
        for s, e, tid in zip(ms.tolist(), me.tolist(), mids.tolist()):
            if s > pos:
                a, b, c = self._encode_segment(buf, pos, s, parse_special, want_spans)
                ids_parts.append(a)
                s_parts.append(b)
                e_parts.append(c)
            ids_parts.append(np.asarray([tid], np.int32))
            if want_spans:
                s_parts.append(np.asarray([s], np.int64))
                e_parts.append(np.asarray([e], np.int64))
            pos = e
        if pos < buf.shape[0]:
            a, b, c = self._encode_segment(buf, pos, buf.shape[0], parse_special, want_spans)
            ids_parts.append(a)
            s_parts.append(b)
            e_parts.append(c)
        if not want_spans:
            return np.concatenate(ids_parts), None, None
        return np.concatenate(ids_parts), np.concatenate(s_parts), np.concatenate(e_parts)

    def _encode_segment(self, buf: np.ndarray, start: int, end: int, parse_special: bool, want_spans: bool):
        seg = buf[start:end]
        align = None
        if self.normalizer is not None:
            seg, align = self.normalizer(seg, None)
        norm_matcher = self._match_all_norm if parse_special else self._match_plain_norm
        if not norm_matcher.empty:
            return self._encode_normalized_with_added(seg, align, start, norm_matcher, want_spans)
        return self._encode_normalized(seg, align, start, want_spans)

    def _encode_normalized_with_added(self, seg, align, offset, matcher, want_spans=True):
        ms, me, mids = matcher.find(seg, 0, seg.shape[0])
        if ms.shape[0] == 0:
            return self._encode_normalized(seg, align, offset, want_spans)
        base = np.arange(seg.shape[0] + 1, dtype=np.int64) if align is None else align
        parts = []
        pos = 0
        for s, e, tid in zip(ms.tolist(), me.tolist(), mids.tolist()):
            if s > pos:
                parts.append(self._encode_normalized(seg[pos:s], base[pos:s + 1] - 0, offset, want_spans))
            parts.append((np.asarray([tid], np.int32), np.asarray([offset + base[s]], np.int64),
                          np.asarray([offset + base[e - 1] + 1], np.int64)))
            pos = e
        if pos < seg.shape[0]:
            parts.append(self._encode_normalized(seg[pos:], base[pos:], offset, want_spans))
        if not want_spans:
            return np.concatenate([p[0] for p in parts]), None, None
        return (np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts]),
                np.concatenate([p[2] for p in parts]))

    def _encode_normalized(self, seg, align, offset, want_spans=True):
        if seg.shape[0] == 0:
            return np.zeros(0, np.int32), _EMPTY_I64, _EMPTY_I64
        pieces = Pieces.whole(seg, align)
        if self.pre_tokenizer is not None:
            pieces.origin = offset
            pieces = self.pre_tokenizer(pieces)
        ids, ts, te = self.model.encode_pieces(pieces.buf, pieces.starts, pieces.ends, self._workspace())
        if not want_spans:  # encode() and batches: the mapping back to the source text is not needed
            return ids, None, None
        if pieces.align is not None:
            # HF aligns each normalized character with its source character, so a token ends inside
            # the source of its last byte: bytes the normalizer inserted or deleted after it (BERT's
            # padding around CJK, stripped accents) are not part of the token
            align = pieces.align
            # a byte inserted after the segment's last source character (the space sentencepiece
            # appends with treat_whitespace_as_suffix) ends the token at the segment's end, not past it
            te = np.where(te > ts, np.minimum(align[np.maximum(te - 1, 0)] + 1, align[-1]), align[ts])
            ts = align[ts]
        return ids, ts + offset, te + offset

    # ==============================================================================================
    # Decoding
    # ==============================================================================================

    def _build_decode_table(self):
        """Per-id bytes for the fast decode path (``None`` when the decoder chain needs context)."""
        spec = self.spec
        if self.decoder is not None and not isinstance(self.decoder, decoders_mod.ByteLevel):
            fast = getattr(self.decoder, "token_bytes_table", None)
            if fast is None:
                return None, None
            return fast(spec)
        from tokjit.compile import pack_bytes
        tokens = spec.tokens
        added = [(t.id, t.content.encode("utf-8")) for t in spec.added_tokens]
        if any(tokens[tid] != content for tid, content in added):
            tokens = list(tokens)
            for tid, content in added:
                tokens[tid] = content
        return pack_bytes(tokens)

    def _check_ids(self, ids) -> np.ndarray:
        arr = id_array(ids)
        n = len(self.spec.tokens)
        if arr.size and (arr.min() < 0 or arr.max() >= n):
            bad = int(arr[(arr < 0) | (arr >= n)][0])
            raise InputError(f"token id {bad} is outside the vocabulary (size {n})")
        return arr

    def decode_bytes(self, ids: Iterable[int], *, skip_special_tokens: bool = False) -> bytes:
        """The bytes the ids stand for (no UTF-8 repair)."""
        fast = self._fast_decoder()
        if type(ids) is list and getattr(fast, "raw_bytes", False) \
                and getattr(self.decoder, "post_bytes", None) is None:
            data = fast.joined(ids, skip_special_tokens)  # byte-level BPE: the pieces are the bytes
            if data is not None:
                return data
        arr = self._check_ids(ids)
        if self._decode_blob is None:
            return self._decode_chain(arr, skip_special_tokens).encode("utf-8", "surrogatepass")
        skip = self._special_ids if skip_special_tokens else self._no_special_ids()
        n = decoders_mod.gathered_length(arr, np.int64(arr.shape[0]), self._decode_offsets, skip)
        out = np.empty(n, np.uint8)
        decoders_mod.gather_token_bytes(arr, np.int64(arr.shape[0]), self._decode_blob,
                                        self._decode_offsets, skip, out)
        data = out.tobytes()
        post = getattr(self.decoder, "post_bytes", None)
        return post(data) if post is not None else data

    def _no_special_ids(self) -> np.ndarray:
        """An all-False mask like ``_special_ids`` (made once: it is as long as the vocabulary)."""
        mask = self.__dict__.get("_no_special_mask")
        if mask is None or mask.shape != self._special_ids.shape:
            mask = self._no_special_mask = np.zeros_like(self._special_ids)
        return mask

    def decode(self, ids: Iterable[int], *, skip_special_tokens: bool = False, errors: str = "replace") -> str:
        """Decode ids to text; invalid UTF-8 becomes U+FFFD unless ``errors`` says otherwise."""
        m = _metrics.ACTIVE
        if m is not None:
            t0 = _metrics.now()
            ids = ids if hasattr(ids, "__len__") else list(ids)
            text = self._decode_text(ids, skip_special_tokens, errors)
            m.on_decode(len(ids), len(text), _metrics.now() - t0)
            return text
        return self._decode_text(ids, skip_special_tokens, errors)

    def _fast_decoder(self):
        """The list-lookup decoder (``decoders.pieces_decoder_for``), built at first use, or None."""
        fast = self._pieces_decoder
        if fast is False:
            fast = self._pieces_decoder = decoders_mod.pieces_decoder_for(self)
        return fast

    def _decode_text(self, ids, skip_special_tokens: bool, errors: str) -> str:
        fast = self._fast_decoder()
        if fast is not None:
            if type(ids) is not list:
                if isinstance(ids, np.ndarray):
                    if ids.dtype.kind not in "iu":
                        ids = id_array(ids)  # tolist() would turn bools and floats into ids
                    ids = ids.tolist()
                else:
                    ids = list(ids)
            text = fast.decode(ids, skip_special_tokens, errors)
            if text is not None:
                return text
        arr = self._check_ids(ids)
        if self._decode_blob is None:
            return self._decode_chain(arr, skip_special_tokens)
        return self.decode_bytes(arr, skip_special_tokens=skip_special_tokens).decode("utf-8", errors)

    def _decode_chain(self, arr: np.ndarray, skip_special_tokens: bool) -> str:
        decode_ids = getattr(self.decoder, "decode_ids", None)
        if decode_ids is not None:  # decoders that need ids (token types) or have their own fast path
            return decode_ids(self, arr, skip_special_tokens, "replace")
        tokens = []
        for t in arr.tolist():
            if skip_special_tokens and self._special_ids[t]:
                continue
            tokens.append(self.id_to_token(t))
        if self.decoder is not None:
            tokens = self.decoder.decode_chain(tokens)
        return "".join(tokens)

    def decode_batch(self, batch: Sequence[Sequence[int]], *, skip_special_tokens: bool = False,
                     num_threads: int | None = None) -> list[str]:
        if self._pieces_decoder is not None:
            # list lookups hold the GIL: threads would only add hand-off costs
            return [self.decode(ids, skip_special_tokens=skip_special_tokens) for ids in batch]
        return self._map(lambda ids: self.decode(ids, skip_special_tokens=skip_special_tokens), batch,
                         num_threads)

    # ==============================================================================================
    # Serving (tokjit.serving)
    # ==============================================================================================

    def decode_stream(self, prompt_ids: Iterable[int] = (), skip_special_tokens: bool = False):
        """A :class:`~tokjit.serving.DecodeStream`: ``step(id) -> str | None``, ``flush()``."""
        from tokjit.serving.stream import DecodeStream
        return DecodeStream(self, prompt_ids, skip_special_tokens)

    def apply_chat_template(self, messages, add_generation_prompt: bool = False, tools=None, *,
                            tokenize: bool = False, chat_template=None, **kwargs):
        """Render ``messages`` with the chat template, as ``transformers`` does (text, or ids with
        ``tokenize=True``). Needs jinja2 (``pip install tokjit[chat]``)."""
        from tokjit.serving.chat import render
        text = render(self, messages, add_generation_prompt=add_generation_prompt, tools=tools,
                      chat_template=chat_template, **kwargs)
        if tokenize:
            return self.encode(text, parse_special=True)
        return text

    # ==============================================================================================
    # Bytes-level batches (tokjit.arrow), viewer (tokjit.viz), pickling (tokjit.dask)
    # ==============================================================================================

    def _encode_utf8_spans(self, buf: np.ndarray, starts: np.ndarray, ends: np.ndarray, *,
                           parse_special: bool = False, num_threads: int | None = None):
        """Encode rows ``buf[starts[i]:ends[i]]`` of one UTF-8 byte buffer (uint8) without making a
        Python str per row. Returns (flat int32 ids, int64 offsets of length ``len(starts) + 1``).
        The caller guarantees valid UTF-8 (``tokjit.arrow`` validates and repairs first)."""
        starts = np.asarray(starts, np.int64)
        ends = np.asarray(ends, np.int64)
        n = starts.shape[0]

        fused = getattr(self, "_fused", None)

        def run(bounds):
            """(ids, ids per row) of rows lo..hi: one fused kernel call when the pipeline has one."""
            lo, hi = bounds
            if fused is not None:
                ids, row_ends = fused.encode_docs(buf, starts[lo:hi], ends[lo:hi], parse_special)
                return ids, np.diff(row_ends, prepend=np.int64(0))
            parts = [self._encode_array(buf[s:e], parse_special, want_spans=False)[0]
                     for s, e in zip(starts[lo:hi].tolist(), ends[lo:hi].tolist())]
            counts = np.fromiter((a.shape[0] for a in parts), np.int64, count=len(parts))
            return (np.concatenate(parts) if parts else np.zeros(0, np.int32)), counts

        if num_threads is None:
            num_threads = min(os.cpu_count() or 1, 8)
        step = max(1, -(-n // max(1, num_threads * 4)))
        chunks = [(lo, min(n, lo + step)) for lo in range(0, n, step)]
        if num_threads <= 1 or len(chunks) <= 1:
            results = [run(c) for c in chunks]
        else:
            results = list(thread_pool(num_threads).map(run, chunks))
        offsets = np.zeros(n + 1, np.int64)
        if results:
            np.cumsum(np.concatenate([c for _, c in results]), out=offsets[1:])
        flat = (np.concatenate([a for a, _ in results]).astype(np.int32, copy=False) if results
                else np.zeros(0, np.int32))
        return flat, offsets

    def explain(self, text: str, *, parse_special: bool = False, add_special_tokens: bool = False):
        """The tokens of ``text`` with their spans and kinds; renders as coloured HTML in notebooks
        (see :class:`tokjit.viz.Explanation`)."""
        from tokjit.viz import explain
        return explain(self, text, parse_special=parse_special, add_special_tokens=add_special_tokens)

    def __reduce__(self):
        # Pickles as where it came from (path + SHA-256 + load options, or a bundled name), not as
        # arrays: a Dask task carries a few hundred bytes and each worker rebuilds from its cache.
        origin = _pickle_origin(self)
        if origin[0] == "spec":
            return (_tokenizer_from_spec_bytes, (origin[1],))
        return (self._rebuild, (origin,))

    # ==============================================================================================
    # Vocabulary
    # ==============================================================================================

    @property
    def vocab_size(self) -> int:
        return len(self.spec.tokens)

    @property
    def n_vocab(self) -> int:
        return self.vocab_size

    def id_to_token(self, tid: int) -> str:
        """The token's string as its source file spells it (GPT-2 byte-level strings for byte-level
        BPE, pieces with U+2581 for SentencePiece)."""
        spec = self.spec
        if type(tid) is not int:
            tid = as_token_id(tid)
        if not 0 <= tid < len(spec.tokens):
            raise InputError(f"token id {tid} is outside the vocabulary (size {len(spec.tokens)})")
        names = spec.source.get("token_strings")
        if names is not None:
            return names[tid]
        return spec.tokens[tid].decode("utf-8", "replace")

    def token_to_id(self, token: str) -> int | None:
        if self._token_to_id is None:
            mapping = {}
            for i in range(len(self.spec.tokens)):
                mapping.setdefault(self.id_to_token(i), i)
            for t in self.spec.added_tokens:
                mapping[t.content] = t.id
            self._token_to_id = mapping
        return self._token_to_id.get(token)

    @property
    def special_tokens(self) -> dict[str, int]:
        return {t.content: t.id for t in self.spec.added_tokens if t.special}

    @property
    def bos_token_id(self) -> int | None:
        return self.spec.bos_id

    @property
    def eos_token_id(self) -> int | None:
        return self.spec.eos_id

    def __repr__(self) -> str:
        return (f"<tokjit.Tokenizer {self.name!r} model={self.spec.model.get('type')} "
                f"vocab={self.vocab_size}>")


def _pickle_origin(tok) -> tuple:
    source = tok.spec.source
    name, path = source.get("name"), source.get("path")
    if name and str(path).startswith("<bundled") and tok._rebuild is not None:
        return ("bundled", name)
    options = getattr(tok, "_load_options", None)
    if options is not None and path and os.path.isfile(path) and tok._rebuild is not None:
        return ("file", os.path.abspath(path), source.get("sha256"), tuple(sorted(options.items())))
    # built from bytes in memory: nothing to point at, so the spec itself travels
    from tokjit.load.cache import spec_to_bytes
    return ("spec", spec_to_bytes(tok.spec))


def _tokenizer_from_spec_bytes(data: bytes) -> "Tokenizer":
    from tokjit.load.cache import spec_from_bytes
    return Tokenizer(spec_from_bytes(data))


__all__ = ["Tokenizer", "Encoding", "text_to_utf8", "UnknownEncodingError"]
