"""Serving features: streaming decode, stop sequences, chat templates, metrics.

- :class:`DecodeStream` (``tok.decode_stream()``): ids -> text one token at a time, never emitting a
  split UTF-8 character, equal step for step to HF ``tokenizers.decoders.DecodeStream``.
- :class:`Sequence`: prompt + generated ids with incremental-decode offsets.
- :class:`StopSequenceDecoder`: stop token ids / stop strings, hidden or visible, with held text.
- :func:`render_chat` (``tok.apply_chat_template()``): Jinja chat templates rendered as ``transformers``
  renders them (needs ``jinja2``: ``pip install tokjit[chat]``).
- :mod:`tokjit.serving.metrics`: optional counters and histograms, Prometheus export.
"""

from tokjit.serving import metrics
from tokjit.serving.chat import render as render_chat
from tokjit.serving.sequence import Sequence
from tokjit.serving.stop import Held, Stopped, StoppedWithText, StopSequenceDecoder, Text
from tokjit.serving.stream import DecodeStream, DecodeStreamError

__all__ = ["DecodeStream", "DecodeStreamError", "Sequence", "StopSequenceDecoder", "Text", "Held",
           "Stopped", "StoppedWithText", "render_chat", "metrics"]
