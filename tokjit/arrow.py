"""Encode Apache Arrow string columns straight from their buffers.

``encode_arrow(tok, array)`` reads the array's UTF-8 value buffer and offsets as numpy views and
hands the row spans to the tokenizer's bytes-level entry point: no Python ``str`` per row. The result
is a ``list<int32>`` array (``large_list<int32>`` when a chunk holds more than 2**31 - 1 ids) with
null rows kept null. Needs ``pyarrow`` (``pip install tokjit[arrow]``).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from tokjit.text import text_to_utf8


def _pyarrow():
    try:
        import pyarrow as pa
    except ImportError as exc:  # optional dependency
        raise ImportError("tokjit.arrow needs pyarrow: pip install 'tokjit[arrow]'") from exc
    return pa


@njit(cache=True, nogil=True)
def invalid_utf8_rows(buf, starts, ends, bad):
    """Mark rows of ``buf`` that are not well-formed UTF-8 (``bad[i] = True``); returns their count.

    One pass, O(bytes), with the rules of Python's strict decoder (RFC 3629: no overlong forms, no
    surrogates, nothing above U+10FFFF), so repaired rows match ``bytes.decode("utf-8", "replace")``.
    """
    n_bad = 0
    for r in range(starts.shape[0]):
        i = starts[r]
        end = ends[r]
        ok = True
        while i < end:
            b = buf[i]
            if b < 0x80:
                i += 1
                continue
            if 0xC2 <= b <= 0xDF:
                need = 1
                lo = 0x80
                hi = 0xBF
            elif 0xE0 <= b <= 0xEF:
                need = 2
                lo = 0xA0 if b == 0xE0 else 0x80
                hi = 0x9F if b == 0xED else 0xBF
            elif 0xF0 <= b <= 0xF4:
                need = 3
                lo = 0x90 if b == 0xF0 else 0x80
                hi = 0x8F if b == 0xF4 else 0xBF
            else:
                ok = False
                break
            if i + need >= end:  # truncated sequence
                ok = False
                break
            c = buf[i + 1]
            if c < lo or c > hi:
                ok = False
                break
            for k in range(2, need + 1):
                c = buf[i + k]
                if c < 0x80 or c > 0xBF:
                    ok = False
                    break
            if not ok:
                break
            i += need + 1
        if not ok:
            bad[r] = True
            n_bad += 1
    return n_bad


def _string_buffers(arr):
    """(value bytes, starts, ends, null mask) of one string array, as numpy (views where possible)."""
    pa = _pyarrow()
    if getattr(pa.types, "is_string_view", lambda t: False)(arr.type):
        arr = arr.cast(pa.large_string())
    if pa.types.is_string(arr.type):
        off_dtype = np.int32
    elif pa.types.is_large_string(arr.type):
        off_dtype = np.int64
    else:
        raise TypeError(f"expected a string or large_string array, got {arr.type}")
    n = len(arr)
    validity, off_buf, data_buf = arr.buffers()[:3]
    offsets = np.frombuffer(off_buf, off_dtype, count=n + 1, offset=arr.offset * off_dtype().itemsize) \
        if off_buf is not None else np.zeros(n + 1, off_dtype)
    data = np.frombuffer(data_buf, np.uint8) if data_buf is not None else np.zeros(0, np.uint8)
    starts = offsets[:-1].astype(np.int64)
    ends = offsets[1:].astype(np.int64)
    if n and (starts.min() < 0 or ends.max() > data.shape[0] or np.any(ends < starts)):
        raise ValueError("corrupt Arrow string array: offsets outside the value buffer")
    nulls = None
    if arr.null_count:
        nulls = arr.is_null().to_numpy(zero_copy_only=False)
        ends = np.where(nulls, starts, ends)
    return data, starts, ends, nulls


def _repair(data, starts, ends, bad):
    """Rows with invalid UTF-8 replaced as the ``str`` path would see them (U+FFFD per bad sequence)."""
    pieces, new_starts, new_ends, pos = [], [], [], 0
    for i, (s, e) in enumerate(zip(starts.tolist(), ends.tolist())):
        if bad[i]:
            row = text_to_utf8(data[s:e].tobytes().decode("utf-8", "replace"))
        else:
            row = data[s:e]
        pieces.append(row)
        new_starts.append(pos)
        pos += row.shape[0]
        new_ends.append(pos)
    buf = np.concatenate(pieces) if pieces else np.zeros(0, np.uint8)
    return buf, np.asarray(new_starts, np.int64), np.asarray(new_ends, np.int64)


def _encode_chunk(tok, arr, num_threads, parse_special):
    pa = _pyarrow()
    data, starts, ends, nulls = _string_buffers(arr)
    bad = np.zeros(starts.shape[0], np.bool_)
    if invalid_utf8_rows(data, starts, ends, bad):
        data, starts, ends = _repair(data, starts, ends, bad)
    flat, offsets = tok._encode_utf8_spans(data, starts, ends, parse_special=parse_special,
                                           num_threads=num_threads)
    values = pa.array(flat, pa.int32())
    mask = pa.array(nulls) if nulls is not None else None
    if offsets[-1] <= np.iinfo(np.int32).max:
        return pa.ListArray.from_arrays(pa.array(offsets.astype(np.int32)), values, mask=mask)
    return pa.LargeListArray.from_arrays(pa.array(offsets), values, mask=mask)


def encode_arrow(tok, array, *, num_threads: int | None = None, parse_special: bool = False):
    """Token ids of every row of a ``pyarrow`` string array (``string``, ``large_string`` or a
    ``ChunkedArray`` of either): a ``list<int32>`` array (chunked in, chunked out); nulls stay null.

    Equal to ``tok.encode_batch(array.to_pylist(), parse_special=...)`` row by row, without building
    the Python strings. Rows with invalid UTF-8 (Arrow forbids them, but buffers built by hand can hold
    them) are decoded with U+FFFD replacement first, as a Python ``str`` round trip would.
    """
    pa = _pyarrow()
    if isinstance(array, pa.ChunkedArray):
        chunks = [_encode_chunk(tok, c, num_threads, parse_special) for c in array.chunks]
        if any(isinstance(c, pa.LargeListArray) for c in chunks):
            chunks = [c.cast(pa.large_list(pa.int32())) for c in chunks]
            return pa.chunked_array(chunks, pa.large_list(pa.int32()))
        return pa.chunked_array(chunks, pa.list_(pa.int32()))
    if not isinstance(array, pa.Array):
        raise TypeError(f"expected a pyarrow Array or ChunkedArray, got {type(array).__name__}")
    return _encode_chunk(tok, array, num_threads, parse_special)


__all__ = ["encode_arrow"]
