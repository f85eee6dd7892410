"""SentencePiece's normalizer (``normalizer.cc``) as a tokjit normalizer component.

SentencePiece normalizes text in one left-to-right pass over *units*: at each position a user-defined
piece (copied as is) or else the longest rule of the precompiled charsmap (or one UTF-8 character when
none applies) is consumed, and its replacement string is emitted, with whitespace handling woven in:

* ``remove_extra_whitespaces``: units that are exactly " " at the start are dropped; a unit following
  one that ended in " " loses its leading spaces; trailing space symbols are removed at the end;
* ``add_dummy_prefix``: one space symbol before the text (after it with
  ``treat_whitespace_as_suffix``);
* ``escape_whitespaces``: every " " becomes U+2581.

The charsmap pass is delegated to :class:`tokjit.pipeline.charsmap.PrecompiledCharsmap`, whose alignment gives
every output byte of a unit the unit's start offset; the whitespace pass (this module's kernel) finds
the unit boundaries again from that alignment, so it reproduces the unit-wise rules exactly.
"""

from __future__ import annotations

import numpy as np

from tokjit.pipeline.added_tokens import AddedTokenMatcher
from tokjit.errors import UnsupportedComponentError
from tokjit.kernels.spm_whitespace import (WS_DELETED_UNIT, WS_DUMMY_PREFIX, WS_ESCAPE, WS_LLAMACPP,
                                           WS_REMOVE_EXTRA, WS_SUFFIX, sentencepiece_whitespace)
from tokjit.spec import AddedToken



class SentencePieceNormalizer:
    """``{"type": "SentencePieceNormalizer", "precompiled_charsmap": bytes | None, "add_dummy_prefix",
    "remove_extra_whitespaces", "escape_whitespaces", "treat_whitespace_as_suffix", "user_defined",
    "llamacpp"}``; ``llamacpp``: llama.cpp's UGM rules for the same flags (a GGUF's)."""

    def __init__(self, config: dict):
        blob = config.get("precompiled_charsmap")
        self.charsmap = None
        if blob:
            try:
                from tokjit.pipeline.charsmap import PrecompiledCharsmap
            except ImportError as exc:
                raise UnsupportedComponentError(
                    "this SentencePiece model has a precompiled charsmap, which needs tokjit.pipeline.charsmap") from exc
            self.charsmap = PrecompiledCharsmap(bytes(blob))
        flags = 0
        if config.get("remove_extra_whitespaces", True):
            flags |= WS_REMOVE_EXTRA
        if config.get("add_dummy_prefix", True):
            flags |= WS_DUMMY_PREFIX
        if config.get("escape_whitespaces", True):
            flags |= WS_ESCAPE
        if config.get("treat_whitespace_as_suffix", False):
            flags |= WS_SUFFIX
        if config.get("llamacpp", False):
            flags |= WS_LLAMACPP
        self.flags = np.int64(flags)
        user = [s for s in config.get("user_defined") or [] if s]
        # user-defined pieces are copied through unnormalized; only the charsmap could change them
        self.protect = AddedTokenMatcher([AddedToken(s, i) for i, s in enumerate(user)]) \
            if user and self.charsmap is not None else None

    def _apply_charsmap(self, buf, align):
        """(buf, align, deleted) as :meth:`PrecompiledCharsmap.normalize_units`, user-defined pieces kept."""
        if self.protect is None:
            return self.charsmap.normalize_units(buf, align)
        ms, me, _ = self.protect.find(buf, 0, buf.shape[0])
        if ms.shape[0] == 0:
            return self.charsmap.normalize_units(buf, align)
        base = np.arange(buf.shape[0] + 1, dtype=np.int64) if align is None else align
        bufs, aligns = [], []
        deleted = False
        pos = 0
        for s, e in zip(ms.tolist(), me.tolist()):
            if s > pos:
                b, a, gone = self.charsmap.normalize_units(buf[pos:s], base[pos:s + 1])
                bufs.append(b)
                aligns.append(a[:-1])
                deleted = deleted or gone
            bufs.append(buf[s:e])
            aligns.append(np.full(e - s, base[s], np.int64))  # one unit: sentencepiece consumes it whole
            pos = e
        if pos < buf.shape[0]:
            b, a, gone = self.charsmap.normalize_units(buf[pos:], base[pos:])
            bufs.append(b)
            aligns.append(a[:-1])
            deleted = deleted or gone
        aligns.append(base[-1:])
        return np.concatenate(bufs).astype(np.uint8), np.concatenate(aligns).astype(np.int64), deleted

    def __call__(self, buf, align):
        flags = self.flags
        if self.charsmap is not None:
            buf, align, deleted = self._apply_charsmap(buf, align)
            if deleted:
                flags |= WS_DELETED_UNIT
        n = buf.shape[0]
        base = np.arange(n + 1, dtype=np.int64) if align is None else np.asarray(align, np.int64)
        out = np.empty(3 * n + 3, np.uint8)
        out_align = np.empty(3 * n + 4, np.int64)
        m = sentencepiece_whitespace(buf, base, np.int64(n), np.int64(flags), out, out_align)
        return out[:m], out_align[:m + 1]



__all__ = ["SentencePieceNormalizer", "sentencepiece_whitespace"]
