"""Per-thread buffers of the SentencePiece-BPE, WordPiece and Unigram fused paths.

Each of those families keeps, per Python thread, one :data:`tokjit.kernels.structs.SPANS` (the
text copied in by a single-text call, its one document span, the ids out, the added-token spans and
the token spans an inner kernel writes) next to its own buffer structure. The fields a family does
not use (the regex's) hold one shared placeholder element, so the structure keeps its fixed type.
"""

from __future__ import annotations

import numpy as np

from tokjit.kernels import call_result, pystr, structs

_UNUSED = np.zeros(1, np.int64)  # SPANS fields a family never reads (nothing writes them either)

_LAYOUT: list = []


def str_layout():
    """This interpreter's str layout for the packing kernels (learned and checked once), or None."""
    if not _LAYOUT:
        layout = pystr.str_layout()
        _LAYOUT.append(layout if pystr.fast_pack_ok(layout) else None)
    return _LAYOUT[0]


_ITEMS: list = []


def list_items_offset() -> int | None:
    """Where a list's item array pointer sits in this interpreter's list object (learned once), or
    None. Learned without the str packing check (``str_layout``), which compiles the packing
    kernels: a single-text call needs only this, and the lists made with it are checked
    themselves (``FusedPath._results_check``, ``pylist.lists_ok``)."""
    if not _ITEMS:
        layout = pystr.str_layout()
        _ITEMS.append(int(layout[pystr.L_ITEMS]) if layout is not None else None)
    return _ITEMS[0]


def result_io(owner) -> None:
    """Give a thread's buffers (``owner``) the kernels' ``io`` array with what a single-text call
    needs to read its text and make its result (:mod:`tokjit.kernels.call_result`)."""
    owner.io = call_result.result_io(list_items_offset())


def field(a, dtype) -> np.ndarray:
    """``a`` as a C-contiguous, writable array of ``dtype``: the one array type a struct field has
    (no copy when it already is one; a read-only table is copied once)."""
    a = np.ascontiguousarray(a, dtype=dtype)
    return a if a.flags.writeable else a.copy()


class ThreadSpans:
    """The SPANS arrays of one thread (kept as numpy so Python reads ``out`` through ``out_view``)."""

    def __init__(self, text_cap: int, out_cap: int, added_cap: int, tok_cap: int, piece_cap: int = 0):
        self.text = np.empty(text_cap, np.uint8)
        self.doc_starts = np.zeros(1, np.int64)
        self.doc_ends = np.zeros(1, np.int64)
        self.out = np.empty(out_cap, np.int32)
        self.out_view = memoryview(self.out)
        self.doc_out_end = np.zeros(1, np.int64)
        result_io(self)
        self.at_starts = np.empty(added_cap, np.int64)
        self.at_ends = np.empty(added_cap, np.int64)
        self.at_ids = np.empty(added_cap, np.int64)
        self.match_starts = self.match_ends = _UNUSED
        self.piece_starts = np.empty(piece_cap, np.int64) if piece_cap else _UNUSED
        self.piece_ends = np.empty(piece_cap, np.int64) if piece_cap else _UNUSED
        self.rx_stack = _UNUSED
        self.rx_params = np.zeros(3, np.int64)
        self.tok_starts = np.empty(tok_cap, np.int64)
        self.tok_ends = np.empty(tok_cap, np.int64)
        self.struct = structs.make_spans(self)


def utf8_bytes(text: str) -> bytes:
    """UTF-8 of ``text``; lone surrogates become U+FFFD as in ``tokenizer.text_to_utf8``."""
    try:
        return text.encode("utf-8")
    except (UnicodeEncodeError, AttributeError):
        from tokjit.text import text_to_utf8
        return text_to_utf8(text).tobytes()


def writable_docs(buf, doc_starts, doc_ends):
    """The batch kernels' one signature: a writable uint8 buffer (a read-only one, e.g. an Arrow value
    buffer, is copied) and int64 spans. The driver's own packed batches already are (checked first:
    ``np.require`` costs ~2 us a call)."""
    if not (_kernel_ready(buf, np.uint8) and buf.flags.writeable):
        buf = np.require(buf, np.uint8, ("C", "W"))
    if not _kernel_ready(doc_starts, np.int64):
        doc_starts = np.ascontiguousarray(doc_starts, np.int64)
    if not _kernel_ready(doc_ends, np.int64):
        doc_ends = np.ascontiguousarray(doc_ends, np.int64)
    return buf, doc_starts, doc_ends


def _kernel_ready(a, dtype) -> bool:
    return type(a) is np.ndarray and a.dtype == dtype and a.ndim == 1 and a.flags.c_contiguous
