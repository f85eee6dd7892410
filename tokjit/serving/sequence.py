"""A token sequence with incremental detokenization state (the SGLang router's ``Sequence`` design).

The sequence owns every token id (prompt and generated) and two offsets into them: ``prefix_offset``,
where the context used to decode the next text starts, and ``read_offset``, the end of the ids whose
text was already returned. ``append_token`` decodes only ``ids[prefix_offset:]``, so a step costs
O(1) amortized however long the sequence grows.
"""

from __future__ import annotations

from typing import Iterable

from tokjit.serving.stream import _REPLACEMENT, WindowDecoder


class Sequence:
    """Token ids plus incremental-decode offsets.

    ``append_text(text)`` encodes text (e.g. the prompt) onto the sequence; its text is not returned
    again by ``append_token``. ``append_token(id)`` returns the new text ("" while the text would end
    in an incomplete character). ``text()`` decodes the whole sequence.
    """

    def __init__(self, tok, token_ids: Iterable[int] = (), *, skip_special_tokens: bool = False):
        self.tok = tok
        self._dec = WindowDecoder(tok, skip_special_tokens)
        self.token_ids: list[int] = [self._dec.check(t) for t in token_ids]
        self.prefix_offset = 0
        self.read_offset = len(self.token_ids)
        self._prefix_text: str | None = None  # decode(ids[prefix_offset:read_offset]), cached

    @property
    def skip_special_tokens(self) -> bool:
        return self._dec.skip_special_tokens

    def __len__(self) -> int:
        return len(self.token_ids)

    def is_empty(self) -> bool:
        return not self.token_ids

    def clear(self) -> None:
        self.token_ids.clear()
        self.prefix_offset = self.read_offset = 0
        self._prefix_text = None

    def append_text(self, text: str, *, parse_special: bool = False) -> list[int]:
        """Encode ``text`` onto the sequence; returns the new ids."""
        ids = self.tok.encode(text, parse_special=parse_special)
        self.token_ids.extend(ids)
        self.read_offset = len(self.token_ids)
        self._prefix_text = None
        return ids

    def append_token(self, token_id: int) -> str:
        ids = self.token_ids
        ids.append(self._dec.check(token_id))
        decode = self._dec.decode
        prefix_text = self._prefix_text
        if prefix_text is None:
            prefix_text = self._prefix_text = decode(ids[self.prefix_offset:self.read_offset])
        new_text = decode(ids[self.prefix_offset:])
        if len(new_text) <= len(prefix_text) or new_text.endswith(_REPLACEMENT):
            return ""
        if not new_text.startswith(prefix_text):
            # the context ended inside a character (e.g. a prompt cut mid-character) that the new id
            # completes: the completed character is new text
            base = prefix_text.rstrip(_REPLACEMENT)
            if not new_text.startswith(base):
                return ""
            prefix_text = base
        out = new_text[len(prefix_text):]
        self.prefix_offset = self.read_offset
        self.read_offset = len(ids)
        clean = self._dec.concatenates and not prefix_text.endswith(_REPLACEMENT)
        self._prefix_text = out if clean else None
        return out

    def append_tokens(self, token_ids: Iterable[int]) -> str:
        return "".join(self.append_token(t) for t in token_ids)

    def text(self) -> str:
        return self._dec.decode(self.token_ids)

    def __repr__(self) -> str:
        return (f"<Sequence n={len(self.token_ids)} prefix_offset={self.prefix_offset} "
                f"read_offset={self.read_offset}>")


__all__ = ["Sequence"]
