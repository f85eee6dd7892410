"""Checking token ids given by callers.

An id is what ``operator.index`` accepts: a Python int (bools included), a numpy integer, anything
with ``__index__``. Floats, strings, ``None`` and numpy bools are refused with
:class:`~tokjit.errors.TokenIdTypeError`, never truncated: HF ``tokenizers`` and tiktoken raise
``TypeError`` for exactly these.
"""

from __future__ import annotations

from array import array
from operator import index

import numpy as np

from tokjit.errors import InputError, TokenIdTypeError


def _refuse(value) -> TokenIdTypeError:
    return TokenIdTypeError(f"token ids must be integers, got {type(value).__name__} {value!r}")


def as_token_id(value) -> int:
    """``value`` as an int id (range not checked), or :class:`TokenIdTypeError`."""
    if type(value) is int:
        return value
    try:
        return index(value)
    except TypeError:
        raise _refuse(value) from None


def id_array(ids) -> np.ndarray:
    """The ids as a flat int64 array (range not checked).

    A list of ints converts through ``array('q', ...)``: the same C loop as ``np.asarray`` for ints,
    but one that refuses floats instead of truncating them. A numpy array must have an integer dtype
    (an object array is checked element by element).
    """
    if isinstance(ids, np.ndarray):
        kind = ids.dtype.kind
        if kind == "i" or kind == "u":
            if kind == "u" and ids.dtype.itemsize == 8 and ids.size and ids.max() > np.iinfo(np.int64).max:
                raise InputError(f"token id {int(ids.max())} is outside the vocabulary")
            return ids.astype(np.int64, copy=False).reshape(-1)
        if kind != "O":
            raise TokenIdTypeError(f"token ids must be integers, got an array of {ids.dtype}")
        ids = ids.reshape(-1).tolist()
    elif not isinstance(ids, (list, tuple)):
        if isinstance(ids, str):  # HF and tiktoken refuse it; its characters are no ids
            raise TokenIdTypeError(f"token ids must be a sequence of integers, got {type(ids).__name__}")
        ids = list(ids)  # a generator is read once: keep it to find the bad element
    try:
        packed = array("q", ids)
    except TypeError:
        for value in ids:
            as_token_id(value)
        raise  # every element is an index after all: not a type problem of ours
    except OverflowError:
        big = next(v for v in ids if not -(1 << 63) <= index(v) < (1 << 63))
        raise InputError(f"token id {index(big)} is outside the vocabulary") from None
    return np.frombuffer(packed, np.int64)
