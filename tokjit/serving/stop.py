"""Stop sequences for streamed generation.

:class:`StopSequenceDecoder` turns generated ids into text (through a :class:`DecodeStream`) and
stops on stop token ids or stop strings, hidden (not shown to the client) or visible (shown, then
stop). Text that could be the beginning of a stop string is held back ("jailed") -- exactly the
longest suffix of the text so far that is a proper prefix of some stop string -- and released as soon
as it can no longer become one, so a client never sees any part of a hidden stop string.

Where several stop strings match, generation stops at the match that is complete first, i.e. the one
ending earliest in the text (what a token-by-token check would see first, whatever the tokenization);
among matches ending at the same place a hidden one wins (so no hidden stop string is ever shown), then
the one starting earliest.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Union

from tokjit.errors import InputError
from tokjit.token_ids import as_token_id
from tokjit.serving import metrics as _metrics
from tokjit.serving.stream import DecodeStream


@dataclass(slots=True)
class Text:
    """Text the client may show now."""
    text: str


@dataclass(frozen=True)
class Held:
    """Nothing to show yet (incomplete character, or text held as a possible stop-string start)."""


@dataclass(frozen=True)
class Stopped:
    """Generation stopped; nothing more to show."""


@dataclass(slots=True)
class StoppedWithText:
    """Generation stopped; show ``text`` (held text released, or text up to / including the stop)."""
    text: str


StopOutput = Union[Text, Held, Stopped, StoppedWithText]

_HELD = Held()
_STOPPED = Stopped()


class StopStringMatcher:
    """Text-level part of stop handling: finds the first stop-string match and the text to hold."""

    def __init__(self, stop_strings: Iterable[str] = (), visible_stop_strings: Iterable[str] = ()):
        stops = []
        for hidden, strings in ((True, stop_strings), (False, visible_stop_strings)):
            for s in strings:
                if not isinstance(s, str) or not s:
                    raise InputError(f"stop strings must be non-empty str, got {s!r}")
                stops.append((s, hidden))
        self.stops = stops
        self.max_hold = max((len(s) for s, _ in stops), default=1) - 1
        self._prefixes = frozenset(s[:k] for s, _ in stops for k in range(1, len(s)))
        # a held suffix ends with the text's last character, which must occur in some proper prefix
        self._prefix_chars = frozenset("".join(s[:-1] for s, _ in stops))

    def first_match(self, text: str):
        """(start, end, hidden) of the match that ends first, or None."""
        best = None
        for s, hidden in self.stops:
            i = text.find(s)
            if i >= 0:
                key = (i + len(s), not hidden, i)
                if best is None or key < best:
                    best = key
        if best is None:
            return None
        end, visible, start = best
        return start, end, not visible

    def hold_length(self, text: str) -> int:
        """Length of the longest suffix of ``text`` that is a proper prefix of a stop string."""
        if not text or text[-1] not in self._prefix_chars:
            return 0
        prefixes = self._prefixes
        for k in range(min(len(text), self.max_hold), 0, -1):
            if text[-k:] in prefixes:
                return k
        return 0


class StopSequenceDecoder:
    """Streamed decode with stop tokens and stop strings.

    ``step(id)`` returns :class:`Text` (show it), :class:`Held` (nothing to show yet),
    :class:`StoppedWithText` (show it, then stop) or :class:`Stopped`. After a stop every further step
    returns :class:`Stopped`. ``flush()`` at the end of generation releases held text.
    """

    def __init__(self, tok, *, stop_token_ids: Iterable[int] = (), stop_strings: Iterable[str] = (),
                 visible_stop_token_ids: Iterable[int] = (), visible_stop_strings: Iterable[str] = (),
                 skip_special_tokens: bool = False, prompt_ids: Iterable[int] = ()):
        self.tok = tok
        self.stop_token_ids = frozenset(as_token_id(t) for t in stop_token_ids)
        self.visible_stop_token_ids = frozenset(as_token_id(t) for t in visible_stop_token_ids)
        self.matcher = StopStringMatcher(stop_strings, visible_stop_strings)
        self.skip_special_tokens = skip_special_tokens
        self._prompt_ids = tuple(prompt_ids)
        self.reset()

    def reset(self) -> None:
        self.stream = DecodeStream(self.tok, self._prompt_ids, self.skip_special_tokens)
        self.held = ""
        self.stopped = False
        self.stop_reason: tuple[str, object] | None = None

    # the SGLang-router spelling
    def process_token(self, token_id: int) -> StopOutput:
        return self.step(token_id)

    def process_tokens(self, token_ids: Iterable[int]) -> list[StopOutput]:
        return [self.step(t) for t in token_ids]

    def is_stopped(self) -> bool:
        return self.stopped

    def step(self, token_id: int) -> StopOutput:
        if self.stopped:
            return _STOPPED
        if type(token_id) is not int:
            token_id = as_token_id(token_id)  # 2.0 must not match stop id 2 before the stream refuses it
        if token_id in self.stop_token_ids:
            return self._finish(self.stream.flush(), ("token", token_id))
        if token_id in self.visible_stop_token_ids:
            text = self.stream.step(token_id) or ""
            return self._finish(text + self.stream.flush(), ("visible_token", token_id))
        new = self.stream.step(token_id)
        if new is None:
            return _HELD
        return self.push_text(new)

    def push_text(self, new: str) -> StopOutput:
        """Feed decoded text directly (for callers with their own detokenizer)."""
        if self.stopped:
            return _STOPPED
        buf = self.held + new if self.held else new
        matcher = self.matcher
        match = matcher.first_match(buf) if matcher.stops else None
        if match is not None:
            return self._stop_at(buf, match)
        k = matcher.hold_length(buf) if matcher.stops else 0
        if k:
            self.held = buf[-k:]
            out = buf[:-k]
        else:
            self.held = ""
            out = buf
        if out:
            return Text(out)
        m = _metrics.ACTIVE
        if m is not None and k:
            m.on_stop_held()
        return _HELD

    def flush(self) -> StopOutput:
        """End of generation: release held and pending text (stop strings are still honoured)."""
        if self.stopped:
            return _STOPPED
        buf = self.held + self.stream.flush()
        self.held = ""
        match = self.matcher.first_match(buf) if self.matcher.stops else None
        if match is not None:
            return self._stop_at(buf, match)
        return Text(buf)

    def _stop_at(self, buf: str, match) -> StopOutput:
        start, end, hidden = match
        stop_string = buf[start:end]
        return self._stop(buf[:start] if hidden else buf[:end],
                          ("string" if hidden else "visible_string", stop_string))

    def _finish(self, tail: str, reason) -> StopOutput:
        # a stop token ends the text; held text can no longer grow into a stop string, but the text
        # released with it may still complete one
        buf = self.held + tail
        match = self.matcher.first_match(buf) if self.matcher.stops else None
        if match is not None:
            return self._stop_at(buf, match)
        return self._stop(buf, reason)

    def _stop(self, text: str, reason) -> StopOutput:
        self.stopped = True
        self.held = ""
        self.stop_reason = reason
        m = _metrics.ACTIVE
        if m is not None:
            m.on_stop(reason[0])
        return StoppedWithText(text) if text else _STOPPED


__all__ = ["StopSequenceDecoder", "StopStringMatcher", "Text", "Held", "Stopped", "StoppedWithText",
           "StopOutput"]
