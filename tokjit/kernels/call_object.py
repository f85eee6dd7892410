"""A tokenizer's ``encode`` as a built-in function: the caller's loop reaches the kernel in one C call.

A Python function around the single-text kernel costs ~100 ns a call on this VM's CPython 3.11 (its
keyword-only defaults alone ~40 ns: a call to such a function fills them from a dict), and numba's
entry point ~50 ns more (an argument tuple, unpacked, two ints unboxed): half of ``encode("Hi")``.
:func:`_encode_call` (compiled by :func:`encode_call`) is the body of a ``METH_FASTCALL |
METH_KEYWORDS`` built-in instead (``tokjit.fused.call_object`` makes it): CPython hands it the
caller's argument array as is, and it calls the kernel's C entry (numba's cfunc wrapper of the
compiled kernel, so nothing is compiled again) with the text and the result kind. Every call it does
not answer itself -- other arguments, other keywords, metrics on, a code from the kernel (a thread
without a row, buffers to grow, a text that is not a str...), for a tokenizer whose kernel needs its
text in a Unicode normal form a text the quick check does not pass (run here on the str's own code
points, :func:`_str_in_form`; ASCII passes without it) -- goes whole to the Python function, which
answers every call as before.

Its state is an int64 array (the built-in's ``__self__``), read through the array object's data
pointer; the slots below. Pointers are passed as int64 (the same registers in the C ABIs numba
targets).
"""

from __future__ import annotations

import functools

import numpy as np
from llvmlite import ir
from numba import cfunc, njit, types
from numba.extending import intrinsic

from tokjit.kernels.call_result import PARSE_SPECIAL
from tokjit.kernels.memops import call_void, load_at
from tokjit.kernels.normal_form import NOT_YES

CALL_KERNEL = 0  # the single-text kernel's C entry (0: not known yet, every call goes to CALL_GENERAL)
CALL_FIRST = 1  # the kernel's first argument (the path's thread table)
CALL_KIND = 2  # its result argument (RESULT_LIST or RESULT_ARRAY)
CALL_GENERAL = 3  # the Python function answering every other call
CALL_VECTORCALL = 4  # PyObject_Vectorcall
CALL_DECREF = 5  # Py_DecRef
CALL_INT_TYPE = 6  # &PyLong_Type: the kernel's codes are ints
CALL_GATE = 7  # the address of an int64 that, nonzero, sends every call to CALL_GENERAL (metrics on)
CALL_KEYWORD = 8  # the interned str "parse_special"
CALL_TRUE = 9  # Py_True
CALL_FALSE = 10  # Py_False
CALL_ASCII_ONLY = 11  # 1: the kernel takes only ASCII str (the tokenizer has a normal form, which ASCII is in)
CALL_STR_TYPE = 12  # &PyUnicode_Type
CALL_STR_STATE = 13  # offset of a str's state bits (tokjit.kernels.pystr's layout)
CALL_STR_ASCII_BIT = 14  # the position of "ascii" among them
# a tokenizer with a normal form: the quick check run on a str that is not ASCII (0: not run)
CALL_QC_TABLE = 15  # address of the quick-check table (uint8 a code point, tokjit.kernels.normal_form)
CALL_QC_YES = 16  # address of its yes bits (a bit per BMP code point)
CALL_STR_COMPACT_BIT = 17  # the position of "compact" among a str's state bits
CALL_STR_KIND_SHIFT = 18  # the position of its kind (bytes a code point)
CALL_STR_LENGTH = 19  # offset of its length in code points
CALL_STR_DATA = 20  # offset of a compact str's code points
CALL_WORDS = 21

# CPython's object layouts the call reads (checked by tokjit.fused.call_object before it is used)
OBJECT_TYPE_OFFSET = 8  # ob_type, after ob_refcnt
ARRAY_DATA_OFFSET = 16  # a numpy array's data pointer, after the object header
TUPLE_SIZE_OFFSET = 16  # ob_size
TUPLE_ITEMS_OFFSET = 24  # ob_item[0]

_I64 = ir.IntType(64)


@intrinsic
def _call_i64(typingctx, fn, a, b, c, d):
    """``int64 f(int64, int64, int64, int64)`` through its address (``PyObject_Vectorcall``: its
    pointers and size passed as int64)."""
    if not all(isinstance(x, types.Integer) for x in (fn, a, b, c, d)):
        return None

    def codegen(context, builder, sig, args):
        fnty = ir.FunctionType(_I64, [_I64] * 4)
        return builder.call(builder.inttoptr(args[0], fnty.as_pointer()), list(args[1:]))

    return types.int64(fn, a, b, c, d), codegen


@intrinsic
def _call_i64_3(typingctx, fn, a, b, c):
    """``int64 f(int64, int64, int64)`` through its address (the kernel's C entry)."""
    if not all(isinstance(x, types.Integer) for x in (fn, a, b, c)):
        return None

    def codegen(context, builder, sig, args):
        fnty = ir.FunctionType(_I64, [_I64] * 3)
        return builder.call(builder.inttoptr(args[0], fnty.as_pointer()), list(args[1:]))

    return types.int64(fn, a, b, c), codegen


ENCODE_CALL_SIGNATURE = types.int64(types.int64, types.int64, types.int64, types.int64)


@functools.cache
def encode_call():
    """The compiled :func:`_encode_call` (numba's cache holds it; compiled at the first tokenizer
    load of an install, ~0.1 s), compiled when first asked for so that importing tokjit does not
    start numba's compiler."""
    return cfunc(ENCODE_CALL_SIGNATURE, cache=True)(_encode_call)


def _encode_call(state, args, nargs, kwnames):
    """``encode(text)`` / ``encode(text, parse_special=b)`` as a ``METH_FASTCALL | METH_KEYWORDS``
    built-in bound to ``state`` (the array object): the kernel's list or array, or whatever the
    general function answers. O(1) besides the kernel."""
    at = load_at(state + ARRAY_DATA_OFFSET, np.int64)
    kernel = load_at(at + 8 * CALL_KERNEL, np.int64)
    if kernel != 0 and load_at(load_at(at + 8 * CALL_GATE, np.int64), np.int64) == 0:
        kind = load_at(at + 8 * CALL_KIND, np.int64)
        plain = nargs == 1 and kwnames == 0
        if not plain and nargs == 1 and kwnames != 0 and load_at(kwnames + TUPLE_SIZE_OFFSET, np.int64) == 1 \
                and load_at(kwnames + TUPLE_ITEMS_OFFSET, np.int64) == load_at(at + 8 * CALL_KEYWORD, np.int64):
            flag = load_at(args + 8, np.int64)
            if flag == load_at(at + 8 * CALL_TRUE, np.int64):
                kind |= PARSE_SPECIAL
                plain = True
            elif flag == load_at(at + 8 * CALL_FALSE, np.int64):
                plain = True
        text = load_at(args, np.int64) if plain else 0  # args may be NULL with no arguments
        if plain and load_at(at + 8 * CALL_ASCII_ONLY, np.int64) != 0:
            plain = load_at(text + OBJECT_TYPE_OFFSET, np.int64) == load_at(at + 8 * CALL_STR_TYPE, np.int64)
            if plain:
                bits = np.int64(load_at(text + load_at(at + 8 * CALL_STR_STATE, np.int64), np.uint8))
                if (bits >> load_at(at + 8 * CALL_STR_ASCII_BIT, np.int64)) & 1 == 0:
                    plain = load_at(at + 8 * CALL_QC_TABLE, np.int64) != 0 and _str_in_form(text, bits, at)
        if plain:
            out = _call_i64_3(kernel, load_at(at + 8 * CALL_FIRST, np.int64), text, kind)
            if out == 0 or load_at(out + OBJECT_TYPE_OFFSET, np.int64) != load_at(at + 8 * CALL_INT_TYPE, np.int64):
                return out
            call_void(load_at(at + 8 * CALL_DECREF, np.int64), out)
    return _call_i64(load_at(at + 8 * CALL_VECTORCALL, np.int64), load_at(at + 8 * CALL_GENERAL, np.int64), args,
                     nargs, kwnames)


@njit(cache=True, nogil=True, _nrt=False)
def _str_in_form(text, bits, at):
    """Whether the quick check passes the compact str ``text`` (state bits ``bits``) for the normal
    form whose tables the state at ``at`` holds: every code point quick-check Yes and the nonzero
    combining classes never decreasing (tokjit.kernels.normal_form, there on UTF-8; here on the code
    points, one, two or four bytes each). A text that passes is in the form. O(code points)."""
    if (bits >> load_at(at + 8 * CALL_STR_COMPACT_BIT, np.int64)) & 1 == 0:
        return False
    kind = (bits >> load_at(at + 8 * CALL_STR_KIND_SHIFT, np.int64)) & 7
    n = load_at(text + load_at(at + 8 * CALL_STR_LENGTH, np.int64), np.int64)
    data = text + load_at(at + 8 * CALL_STR_DATA, np.int64)
    table = load_at(at + 8 * CALL_QC_TABLE, np.int64)
    yes = load_at(at + 8 * CALL_QC_YES, np.int64)
    last = np.int64(0)
    for i in range(n):
        if kind == 1:
            cp = np.int64(load_at(data + i, np.uint8))
        elif kind == 2:
            cp = np.int64(load_at(data + 2 * i, np.uint16))
        else:
            cp = np.int64(load_at(data + 4 * i, np.uint32))
        if cp < 0x10000 and (load_at(yes + 8 * (cp >> 6), np.uint64) >> np.uint64(cp & 63)) & np.uint64(1) != 0:
            last = 0
            continue
        if cp >= 0x110000:
            return False
        v = np.int64(load_at(table + cp, np.uint8))
        if v == NOT_YES or (v != 0 and last > v):
            return False
        last = v
    return True
