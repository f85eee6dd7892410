"""A fused path's ``encode`` / ``encode_to_numpy`` as a built-in function (:mod:`tokjit.kernels.call_object`).

:func:`builtin_encode` wraps the path's Python function (the general one, which answers every call)
in a ``METH_FASTCALL | METH_KEYWORDS`` built-in whose C body is the cfunc ``encode_call``. The
built-in starts unarmed, handing every call to the Python function; that function arms it
(:func:`arm`) once its first call has found the kernel's entry and checked the objects the kernel
makes, so a tokenizer loads without compiling anything. Where a CPython layout the body reads does
not hold (checked here once), or the interpreter lacks a C function it calls, the Python function
itself is the tokenizer's ``encode``.
"""

from __future__ import annotations

import ctypes
import sys

import numpy as np

from tokjit.kernels import call_object as k
from tokjit.kernels import pystr
from tokjit.kernels.call_result import _c_function

METH_KEYWORDS = 0x0002
METH_FASTCALL = 0x0080


class CallState(np.ndarray):
    """The built-in's ``__self__``: the int64 slots :func:`~tokjit.kernels.call_object.encode_call`
    reads, and (as attributes) the objects whose addresses they hold."""


class _MethodDef(ctypes.Structure):
    _fields_ = [("ml_name", ctypes.c_char_p), ("ml_meth", ctypes.c_void_p), ("ml_flags", ctypes.c_int),
                ("ml_doc", ctypes.c_char_p)]


def _word(address: int) -> int:
    return ctypes.c_int64.from_address(address).value


def _layouts_hold() -> bool:
    """Whether the object layouts ``encode_call`` reads are this interpreter's and numpy's."""
    probe = np.zeros(1, np.int64).view(CallState)
    keywords = ("parse_special",)
    return (_word(id(probe) + k.ARRAY_DATA_OFFSET) == probe.ctypes.data
            and _word(id(probe) + k.OBJECT_TYPE_OFFSET) == id(CallState)
            and _word(id(keywords) + k.TUPLE_SIZE_OFFSET) == 1
            and _word(id(keywords) + k.TUPLE_ITEMS_OFFSET) == id(keywords[0]))


_READY: list = []


def _ready() -> bool:
    if not _READY:
        functions = ("PyCFunction_NewEx", "PyObject_Vectorcall", "Py_DecRef")
        _READY.append(all(hasattr(ctypes.pythonapi, n) for n in functions) and _layouts_hold())
    return _READY[0]


_new_function = ctypes.pythonapi.PyCFunction_NewEx
_new_function.restype = ctypes.py_object
_new_function.argtypes = [ctypes.c_void_p, ctypes.py_object, ctypes.py_object]


def builtin_encode(general, name: str, doc: str | None, gate: np.ndarray, ascii_only: bool = False):
    """(the built-in, its state) over ``general`` (the Python ``encode(text, *, add_special_tokens,
    parse_special)``); (``general``, None) where the interpreter does not allow one. ``gate`` (int64,
    kept alive by the caller's module) sends every call to ``general`` while nonzero; with
    ``ascii_only`` (a tokenizer whose kernel needs text in a Unicode normal form: ASCII is in every
    form), every text but an ASCII str too, until :func:`arm_quick_check` lets it take a str that
    passes the form's quick check."""
    layout = pystr.str_layout() if ascii_only else None
    if not _ready() or (ascii_only and layout is None):
        return general, None
    encode_call = k.encode_call()
    state = np.zeros(k.CALL_WORDS, np.int64).view(CallState)
    keyword = sys.intern("parse_special")  # the callers' keyword names are interned: compared by address
    state[k.CALL_GENERAL] = id(general)
    state[k.CALL_VECTORCALL] = _c_function("PyObject_Vectorcall")
    state[k.CALL_DECREF] = _c_function("Py_DecRef")
    state[k.CALL_INT_TYPE] = id(int)
    state[k.CALL_GATE] = gate.ctypes.data
    state[k.CALL_KEYWORD] = id(keyword)
    state[k.CALL_TRUE] = id(True)
    state[k.CALL_FALSE] = id(False)
    if ascii_only:
        state[k.CALL_ASCII_ONLY] = 1
        state[k.CALL_STR_TYPE] = id(str)
        state[k.CALL_STR_STATE] = layout[pystr.L_STATE]
        state[k.CALL_STR_ASCII_BIT] = layout[pystr.L_ASCII_BIT]
        state[k.CALL_STR_COMPACT_BIT] = layout[pystr.L_COMPACT_BIT]
        state[k.CALL_STR_KIND_SHIFT] = layout[pystr.L_KIND_SHIFT]
        state[k.CALL_STR_LENGTH] = layout[pystr.L_LENGTH]
        state[k.CALL_STR_DATA] = layout[pystr.L_DATA]
    text_signature = f"{name}($self, text, *, add_special_tokens=False, parse_special=False)\n--\n\n"
    state.name = name.encode()
    state.doc = (text_signature + (doc or "")).encode()
    state.method = _MethodDef(state.name, encode_call.address, METH_FASTCALL | METH_KEYWORDS, state.doc)
    state.keep = (general, gate, keyword, encode_call)
    return _new_function(ctypes.addressof(state.method), state, None), state


def arm_quick_check(state: CallState, table: np.ndarray, yes_bits: np.ndarray) -> None:
    """Let an ``ascii_only`` built-in take a str that passes the quick check over ``table`` and
    ``yes_bits`` (:mod:`tokjit.kernels.normal_form`), kept alive by the state. The table is written
    last: a call that reads it finds the yes bits."""
    state.quick_check = (table, yes_bits)
    state[k.CALL_QC_YES] = yes_bits.ctypes.data
    state[k.CALL_QC_TABLE] = table.ctypes.data


def arm(state: CallState, kernel_address: int, first: int, kind: int) -> None:
    """Let the built-in call the kernel at ``kernel_address`` itself: ``first`` and ``kind`` are its
    first and last arguments. The address is written last: a call that reads it finds the rest."""
    state[k.CALL_FIRST] = first
    state[k.CALL_KIND] = kind
    state[k.CALL_KERNEL] = kernel_address
