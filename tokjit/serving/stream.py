"""Incremental detokenization: turn generated ids into text one token at a time.

:class:`DecodeStream` keeps a short window of ids: the ids of the previously emitted chunk (context, so
decoders that look at neighbouring tokens -- Metaspace's first-token rule, WordPiece ``##``, byte
fallback -- decode the new ids the way a full decode would) followed by the ids not yet emitted. Each
step decodes the window, and once the text is longer than the decoded context and does not end in
U+FFFD (an incomplete UTF-8 character), the difference is emitted and the window slides forward. The
window only ever holds two chunks, so a step costs O(1) amortized.

The state machine is the one of HF ``tokenizers.decoders.DecodeStream`` (tokenizers >= 0.21), step for
step, including its handling of a prompt (``prompt_ids``) and its error when a decoder rewrites text
that was already emitted.
"""

from __future__ import annotations

from typing import Iterable

import numpy as np

from tokjit.errors import InputError, TokjitError
from tokjit.token_ids import as_token_id
from tokjit.serving import metrics as _metrics

_REPLACEMENT = "\ufffd"


class DecodeStreamError(TokjitError, ValueError):
    """The decoder changed text that was already emitted (HF ``DecodeStreamError::InvalidPrefix``)."""


class WindowDecoder:
    """``tok.decode(ids, skip_special_tokens=...)`` for short id lists, without per-call numpy overhead.

    Tokenizers whose decoder is a per-id byte table (byte-level BPE, tiktoken, SentencePiece-style
    tables) decode by joining cached per-id byte strings; the others go through ``tok.decode``.
    """

    __slots__ = ("tok", "skip_special_tokens", "_bytes", "_post", "_skip", "_n_vocab", "decode",
                 "concatenates")

    def __init__(self, tok, skip_special_tokens: bool = False):
        self.tok = tok
        self.skip_special_tokens = bool(skip_special_tokens)
        self._n_vocab = tok.vocab_size
        blob = getattr(tok, "_decode_blob", None)
        self.concatenates = False
        if blob is None:
            self.decode = self._decode_general
            return
        offsets = tok._decode_offsets
        self._bytes = _token_bytes_cache(tok, blob, offsets)
        self._post = getattr(tok.decoder, "post_bytes", None)
        special = tok._special_ids
        self._skip = frozenset(np.flatnonzero(special).tolist()) if skip_special_tokens else frozenset()
        self.decode = self._decode_table
        self.concatenates = self._post is None

    def check(self, tid) -> int:
        """``tid`` as an in-vocabulary int; a float is refused, not truncated."""
        if type(tid) is not int:
            tid = as_token_id(tid)
        if not 0 <= tid < self._n_vocab:
            raise InputError(f"token id {tid} is outside the vocabulary (size {self._n_vocab})")
        return tid

    def _decode_table(self, ids: list[int]) -> str:
        table = self._bytes
        if self._skip:
            skip = self._skip
            data = b"".join([table[t] for t in ids if t not in skip])
        else:
            data = b"".join([table[t] for t in ids])
        if self._post is not None:
            data = self._post(data)
        return data.decode("utf-8", "replace")

    def _decode_general(self, ids: list[int]) -> str:
        return self.tok.decode(ids, skip_special_tokens=self.skip_special_tokens)


def _token_bytes_cache(tok, blob, offsets) -> list[bytes]:
    """Per-id bytes, built once per tokenizer (a list of bytes objects indexes faster than numpy)."""
    cache = getattr(tok, "_serving_token_bytes", None)
    if cache is None:
        raw = blob.tobytes()
        offs = offsets.tolist()
        cache = [raw[offs[i]:offs[i + 1]] for i in range(len(offs) - 1)]
        tok._serving_token_bytes = cache
    return cache


class DecodeStream:
    """Streaming decode of generated ids.

    ``step(id)`` (or a list of ids) returns the newly completed text, or ``None`` while the text
    would end in an incomplete character or has not grown. ``flush()`` returns whatever is still
    pending (incomplete characters as U+FFFD) at the end of generation.
    The concatenation of every returned chunk plus ``flush()`` equals
    ``tok.decode(prompt_ids + ids)[len(tok.decode(prompt_ids)):]`` whenever the prompt decodes to
    complete characters.

    For decoders that are a plain per-id byte table the window reduces to the pending bytes: the
    emitted context always ends on a complete character, so decoding the window minus decoding the
    context is exactly decoding the pending bytes, and a step is one bytes append plus one
    UTF-8 decode.
    """

    __slots__ = ("_dec", "_ids", "_prefix", "_prefix_index", "_pending", "_table", "_skip", "_n_vocab")

    def __init__(self, tok, prompt_ids: Iterable[int] = (), skip_special_tokens: bool = False):
        self._dec = dec = WindowDecoder(tok, skip_special_tokens)
        prompt = [dec.check(t) for t in prompt_ids]
        self._n_vocab = dec._n_vocab
        self._prefix = ""
        self._prefix_index = 0
        self._ids: list[int] = prompt
        self._pending = b""
        if dec.concatenates:
            self._table = dec._bytes
            self._skip = dec._skip
            if prompt and dec.decode(prompt).endswith(_REPLACEMENT):
                # the reference keeps a prompt that ends inside a character in the window, and emits
                # its text together with the first complete chunk
                skip = self._skip
                self._pending = b"".join([self._table[t] for t in prompt if t not in skip])
            self._ids = []
        else:
            self._table = None

    @property
    def skip_special_tokens(self) -> bool:
        return self._dec.skip_special_tokens

    @property
    def window_size(self) -> int:
        """Ids currently kept for context and pending text (0 on the byte-table path)."""
        return len(self._ids)

    def step(self, token_id) -> str | None:
        table = self._table
        if table is None:
            return self._step_window(token_id)
        if isinstance(token_id, (list, tuple, np.ndarray)):
            data = self._pending
            for t in token_id:
                t = self._dec.check(t)
                if t not in self._skip:
                    data += table[t]
        else:
            if type(token_id) is not int or not 0 <= token_id < self._n_vocab:
                token_id = self._dec.check(token_id)
            data = self._pending + table[token_id] if token_id not in self._skip else self._pending
        m = _metrics.ACTIVE
        if data:
            text = data.decode("utf-8", "replace")
            if not text.endswith(_REPLACEMENT):
                self._pending = b""
                if m is not None:
                    m.on_stream_step(held=False)
                return text
        self._pending = data
        if m is not None:
            m.on_stream_step(held=True)
        return None

    def _step_window(self, token_id) -> str | None:
        decode = self._dec.decode
        ids = self._ids
        if not self._prefix and ids:
            # a prompt (or a context that decoded to nothing) becomes the prefix once it is complete text
            head = decode(ids)
            if not head.endswith(_REPLACEMENT):
                self._prefix = head
                self._prefix_index = len(ids)
        if isinstance(token_id, (list, tuple, np.ndarray)):
            ids.extend([self._dec.check(t) for t in token_id])  # all checked before any is kept
        else:
            ids.append(self._dec.check(token_id))
        text = decode(ids)
        prefix = self._prefix
        if text.startswith(prefix):
            grew = len(text) > len(prefix)
        else:
            # compare UTF-8 lengths, as the reference does, to decide between "wait" and "error"
            grew = len(text.encode("utf-8", "surrogatepass")) > len(prefix.encode("utf-8", "surrogatepass"))
            if grew and not text.endswith(_REPLACEMENT):
                raise DecodeStreamError(
                    f"decoding token {ids[-1]} changed text that was already emitted "
                    f"(expected prefix {prefix!r}, decoded {text!r})")
        m = _metrics.ACTIVE
        if not grew or text.endswith(_REPLACEMENT):
            if m is not None:
                m.on_stream_step(held=True)
            return None
        if m is not None:
            m.on_stream_step(held=False)
        return self._emit(text[len(prefix):])

    def _emit(self, new_text: str) -> str:
        # the ids of the chunk just emitted stay as context for the next chunk
        ids = self._ids
        read_start = self._prefix_index
        self._prefix_index = len(ids) - read_start
        del ids[:read_start]
        self._prefix = self._dec.decode(ids)
        return new_text

    def flush(self) -> str:
        """Text of the ids not emitted yet, incomplete characters as U+FFFD ("" if none)."""
        if self._table is not None:
            data, self._pending = self._pending, b""
            return data.decode("utf-8", "replace")
        ids = self._ids
        if len(ids) <= self._prefix_index:
            return ""
        text = self._dec.decode(ids)
        prefix = self._prefix
        if not text.startswith(prefix) or len(text) == len(prefix):
            return ""
        return self._emit(text[len(prefix):])

    def __repr__(self) -> str:
        return f"<DecodeStream window={len(self._ids)} pending={self._pending!r}>"
