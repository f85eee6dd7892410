"""The single-text call's ends in the kernel: its text, the GIL, and the Python object it returns.

A single-text call used to convert its str with ``str.encode`` (~35 ns and a bytes object), pass the
bytes to a numba ``nogil`` entry point, which released the GIL before the kernel and took it back
after (~40 ns), and then make the result in Python: ``out[:n].copy()`` for an array (~200 ns: a
view, then a copy) or ``tolist()``, or a second kernel call for a list of shared ints (~300 ns).
For a short text that was most of the call, with ~50 ns more to find the thread's buffers in a
``threading.local``. The single-text kernels instead take the str object itself and return the
caller's object (:data:`RAW`: numba passes such a value through as the object pointer,
unconverted), are compiled holding the GIL, and here, at their two ends, they

* find the calling thread's session in the tokenizer path's thread table by its ``PyThreadState``
  (:func:`thread_session`; the caller adds a missing row, NO_SESSION);
* read the text's UTF-8 with ``PyUnicode_AsUTF8AndSize`` (an ASCII str's own bytes; other str
  keep their UTF-8 once made, as they do for every library that reads them this way) or, for the
  bytes the caller makes of a str with lone surrogates, ``PyBytes_AsStringAndSize``;
* release the GIL only around the encoding of a text of :data:`RELEASE_GIL_BYTES` or more
  (``PyEval_SaveThread`` / ``PyEval_RestoreThread``), so concurrent calls from several Python
  threads still run in parallel where it pays; a shorter text's encoding costs less than a
  thread switch, and a call that keeps the GIL cannot wait for it after the kernel;
* build the result with the C API while they hold it: the ids as a new int32 array
  (``PyArray_New``, then one copy) or as a list of the shared ints of the path's int table (one
  ``Py_IncRef`` per id, :func:`tokjit.kernels.pylist.new_list`), returned as the call's value; any
  other outcome (a buffer to grow, the staged path, ...) returns its code as a Python int.

The C functions are called through addresses kept in the thread's ``io`` array (``IO_*`` slots);
the lists and arrays are checked once per tokenizer path against numpy and ``tolist()`` on a sample
text (``tokjit.fused.driver.FusedPath._results_check``: no kernel of its own to compile), and where
the check fails the caller asks for ``RESULT_COUNT`` (the count as an int) and builds the object
itself, as before.
"""

from __future__ import annotations

import ctypes

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

from tokjit.kernels.memops import call_void, data_address, load_at
from tokjit.kernels.pylist import new_list

# what a single-text kernel hands back besides the id count (its third argument)
RESULT_COUNT = 0  # the id count as an int: the ids stay in the thread's ``out`` buffer
RESULT_LIST = 1  # a list of ints
RESULT_ARRAY = 2  # a new int32 array
RESULT_KINDS = 3  # the bits of the result argument above; the flags below add to it
TEXT_IS_BYTES = 4  # added to the result kind: the text is the caller's bytes (of a str it could not read)
PARSE_SPECIAL = 8  # added: special-token text becomes the special token (the thread's second session)
SESSION_GIVEN = 16  # added: the first argument is the session's address, not the thread table's

# A tokenizer path's thread table (int64): which sessions each Python thread's single calls use,
# found by the kernel from the calling thread's PyThreadState, so the caller passes one constant
# address instead of looking up a threading.local (~50 ns). Rows: (thread state, session address
# without, with special-token parsing); kept by tokjit.fused.driver (FusedPath._register).
THREADS_COUNT = 0
THREADS_GET_STATE = 1  # PyThreadState_Get
THREADS_LONG_NEW = 2  # PyLong_FromLongLong (the NO_SESSION answer needs one before any session)
THREADS_FIRST = 3
THREAD_WORDS = 3
THREAD_ROWS = 64

# a Python object passed through as is: an argument is the caller's (borrowed) pointer, a returned
# value a new reference the caller owns
RAW = types.Object(object)

KERNEL_FAILED = -17  # the encoding raised (an index out of bounds under NUMBA_BOUNDSCHECK=1): a bug
NO_SESSION = -19  # the calling thread has no row in the thread table: the caller adds it
NOT_TEXT = -18  # the text is neither a str with UTF-8 (lone surrogates) nor bytes: the caller converts it
NOT_BUILT = -16  # the ids are in ``out`` (``io[0]`` of them) but no object was made: the caller makes it

# A text this long has its encoding run without the GIL (~10 us of work and more; the release and
# retake cost ~40 ns). Shorter texts keep it.
RELEASE_GIL_BYTES = 1024

# io slots (after the kernels' own io[0..3]): the C functions, offsets and scratch a call needs
IO_SAVE_THREAD = 4
IO_RESTORE_THREAD = 5
IO_ERR_CLEAR = 6
IO_TEXT_UTF8 = 7  # PyUnicode_AsUTF8AndSize
IO_TEXT_BYTES = 8  # PyBytes_AsStringAndSize
IO_LONG_NEW = 9  # PyLong_FromLongLong
IO_TEXT_AT = 10  # scratch: the address of the text's UTF-8
IO_TEXT_LEN = 11  # scratch: its length
IO_MAKES = 12  # 1: the list and array makers below are filled in; 0: counts only
IO_LIST_NEW = 13
IO_INCREF = 14
IO_LIST_ITEMS = 15  # offset of a list's item array pointer
IO_TABLE = 16  # the address of the int table's object pointers (0: not attached yet)
IO_TABLE_LEN = 17
IO_ARRAY_NEW = 18
IO_ARRAY_TYPE = 19
IO_ARRAY_DATA = 20  # offset of an array's data pointer
IO_DIMS = 21  # scratch: the one dimension PyArray_New reads
IO_UNTRACK = 22  # PyObject_GC_UnTrack: id lists are left untracked (kernels.pylist says why)
IO_SIZE = 23

NPY_INT32 = 5  # numpy's type number of int32 (fixed by its C API)

_I32 = ir.IntType(32)
_I64 = ir.IntType(64)
_I8P = ir.IntType(8).as_pointer()


@intrinsic
def _call_pointer_0(typingctx, fn):
    """A ``void *f(void)`` through its address (``PyEval_SaveThread``, ``PyThreadState_Get``)."""
    if not isinstance(fn, types.Integer):
        return None

    def codegen(context, builder, sig, args):
        result = builder.call(builder.inttoptr(args[0], ir.FunctionType(_I8P, []).as_pointer()), [])
        return builder.ptrtoint(result, _I64)

    return types.int64(fn), codegen


@intrinsic
def _call_void(typingctx, fn):
    """A ``void f(void)`` through its address (``PyErr_Clear``)."""
    if not isinstance(fn, types.Integer):
        return None

    def codegen(context, builder, sig, args):
        builder.call(builder.inttoptr(args[0], ir.FunctionType(ir.VoidType(), []).as_pointer()), [])
        return context.get_dummy_value()

    return types.void(fn), codegen


@intrinsic
def _object_address(typingctx, obj):
    """The address of a :data:`RAW` object."""
    if obj != RAW:
        return None

    def codegen(context, builder, sig, args):
        return builder.ptrtoint(args[0], _I64)

    return types.int64(obj), codegen


@intrinsic
def _as_object(typingctx, address):
    """The object at ``address`` as a :data:`RAW` value (a reference the caller passes on)."""
    if not isinstance(address, types.Integer):
        return None

    def codegen(context, builder, sig, args):
        return builder.inttoptr(args[0], context.get_value_type(RAW))

    return RAW(address), codegen


@intrinsic
def _call_pointer_2(typingctx, fn, a, b):
    """A ``void *f(void *, void *)`` through its address (``PyUnicode_AsUTF8AndSize``); 0 on failure."""
    if not all(isinstance(x, types.Integer) for x in (fn, a, b)):
        return None

    def codegen(context, builder, sig, args):
        fnty = ir.FunctionType(_I8P, [_I8P, _I8P])
        result = builder.call(builder.inttoptr(args[0], fnty.as_pointer()),
                              [builder.inttoptr(args[1], _I8P), builder.inttoptr(args[2], _I8P)])
        return builder.ptrtoint(result, _I64)

    return types.int64(fn, a, b), codegen


@intrinsic
def _call_int_3(typingctx, fn, a, b, c):
    """An ``int f(void *, void *, void *)`` through its address (``PyBytes_AsStringAndSize``)."""
    if not all(isinstance(x, types.Integer) for x in (fn, a, b, c)):
        return None

    def codegen(context, builder, sig, args):
        fnty = ir.FunctionType(_I32, [_I8P, _I8P, _I8P])
        result = builder.call(builder.inttoptr(args[0], fnty.as_pointer()),
                              [builder.inttoptr(x, _I8P) for x in args[1:]])
        return builder.sext(result, _I64)

    return types.int64(fn, a, b, c), codegen


@intrinsic
def _call_long(typingctx, fn, value):
    """``PyLong_FromLongLong(value)`` through its address: a new int (0 on failure, its error set)."""
    if not isinstance(fn, types.Integer) or not isinstance(value, types.Integer):
        return None

    def codegen(context, builder, sig, args):
        fnty = ir.FunctionType(_I8P, [_I64])
        return builder.ptrtoint(builder.call(builder.inttoptr(args[0], fnty.as_pointer()), [args[1]]), _I64)

    return types.int64(fn, value), codegen


@intrinsic
def _call_array_new(typingctx, fn, array_type, dims):
    """``PyArray_New(array_type, 1, dims, NPY_INT32, NULL, NULL, 0, 0, NULL)`` through its address: a
    new C-contiguous int32 vector of ``*dims`` elements (its address, 0 on failure)."""
    if not all(isinstance(a, types.Integer) for a in (fn, array_type, dims)):
        return None

    def codegen(context, builder, sig, args):
        fnty = ir.FunctionType(_I8P, [_I8P, _I32, _I8P, _I32, _I8P, _I8P, _I32, _I32, _I8P])
        null = ir.Constant(_I8P, None)
        result = builder.call(builder.inttoptr(args[0], fnty.as_pointer()),
                              [builder.inttoptr(args[1], _I8P), ir.Constant(_I32, 1), builder.inttoptr(args[2], _I8P),
                               ir.Constant(_I32, NPY_INT32), null, null, ir.Constant(_I32, 0),
                               ir.Constant(_I32, 0), null])
        return builder.ptrtoint(result, _I64)

    return types.int64(fn, array_type, dims), codegen


@intrinsic
def _copy_to_address(typingctx, address, src, n):
    """The first ``n`` elements of the int32 array ``src`` to ``address`` (the caller checked ``n``)."""
    if not (isinstance(address, types.Integer) and isinstance(src, types.Array) and src.dtype == types.int32
            and isinstance(n, types.Integer)):
        return None

    def codegen(context, builder, sig, args):
        ary = context.make_array(sig.args[1])(context, builder, args[1])
        dst = builder.inttoptr(args[0], ary.data.type)
        cgutils.raw_memcpy(builder, dst, ary.data, args[2], 4)
        return context.get_dummy_value()

    return types.void(address, src, n), codegen


@njit(cache=True, forceinline=True, _nrt=False)
def release_gil(io, n_bytes):
    """Release the GIL when a text of ``n_bytes`` is worth it (a thread state to give to
    :func:`retake_gil`, else 0). The kernel holds the GIL when it starts (compiled without ``nogil``)."""
    if n_bytes < RELEASE_GIL_BYTES:
        return 0
    return _call_pointer_0(io[IO_SAVE_THREAD])


@njit(cache=True, forceinline=True, _nrt=False)
def retake_gil(io, state):
    """Take the GIL back after :func:`release_gil` (nothing when it was kept)."""
    if state != 0:
        call_void(io[IO_RESTORE_THREAD], state)


@njit(cache=True, forceinline=True, _nrt=False)
def thread_session(first, result):
    """The address of the calling thread's session for ``result``'s PARSE_SPECIAL: ``first`` itself
    with SESSION_GIVEN, else its row in the thread table at ``first`` (0 when it has none). Reads
    the table holding the GIL, as every change to it is made. O(threads)."""
    if result & SESSION_GIVEN:
        return first
    state = _call_pointer_0(load_at(first + 8 * THREADS_GET_STATE, np.int64))
    at = first + 8 * THREADS_FIRST
    for _ in range(load_at(first + 8 * THREADS_COUNT, np.int64)):
        if load_at(at, np.int64) == state:
            return load_at(at + 8 + 8 * ((result >> 3) & 1), np.int64)
        at += 8 * THREAD_WORDS
    return 0


@njit(cache=True, _nrt=False)
def no_session(first):
    """NO_SESSION as the call's value (a Python int), made with the function the thread table holds."""
    return _as_object(_call_long(load_at(first + 8 * THREADS_LONG_NEW, np.int64), NO_SESSION))


@njit(cache=True, _nrt=False)
def text_utf8(io, text, result):
    """The length of the UTF-8 of ``text``, a str (or with TEXT_IS_BYTES in ``result``, the bytes its
    caller made of one), its address left in ``io[IO_TEXT_AT]``; -1 (no Python error left set) for
    anything else, or a str with lone surrogates. The str's UTF-8 is its own bytes when it is ASCII,
    else made once and kept by it."""
    address = _object_address(text)
    at = data_address(io) + 8 * IO_TEXT_AT
    size = data_address(io) + 8 * IO_TEXT_LEN
    utf8 = _call_pointer_2(io[IO_TEXT_UTF8], address, size)
    if utf8 != 0:
        io[IO_TEXT_AT] = utf8
        return io[IO_TEXT_LEN]
    _call_void(io[IO_ERR_CLEAR])
    if result & TEXT_IS_BYTES and _call_int_3(io[IO_TEXT_BYTES], address, at, size) == 0:
        return io[IO_TEXT_LEN]
    _call_void(io[IO_ERR_CLEAR])
    return -1


@njit(cache=True, _nrt=False)
def code_object(io, code):
    """``code`` as the call's value: a Python int (0, with its MemoryError set, when none can be made)."""
    return _as_object(_call_long(io[IO_LONG_NEW], code))


@njit(cache=True, _nrt=False)
def deliver(io, out, n, result):
    """The single-text kernels' last step, holding the GIL: with ``n`` >= 0 ids in ``out`` and
    ``result`` RESULT_LIST or RESULT_ARRAY, that object; else ``n`` (a count, or a negative code from
    the encoding) as an int. NOT_BUILT (``io[0]`` = ``n``, nothing made, no Python error left set)
    when the object cannot be made: not checked out, no int table yet, an id past the table, no
    memory. O(n)."""
    result &= RESULT_KINDS
    if n < 0 or result == RESULT_COUNT:
        return code_object(io, n)
    io[0] = n
    if io[IO_MAKES] == 0 or n > out.shape[0]:
        return code_object(io, NOT_BUILT)
    if result == RESULT_ARRAY:
        io[IO_DIMS] = n
        obj = _call_array_new(io[IO_ARRAY_NEW], io[IO_ARRAY_TYPE], data_address(io) + 8 * IO_DIMS)
        if obj == 0:
            _call_void(io[IO_ERR_CLEAR])
            return code_object(io, NOT_BUILT)
        _copy_to_address(load_at(obj + io[IO_ARRAY_DATA], np.int64), out, n)
        return _as_object(obj)
    if io[IO_TABLE] == 0:
        return code_object(io, NOT_BUILT)
    obj = new_list(io[IO_LIST_NEW], io[IO_INCREF], io[IO_UNTRACK], io[IO_LIST_ITEMS], out, 0, n, io[IO_TABLE],
                   io[IO_TABLE_LEN])
    if obj == 0:  # an id past the table (nothing made), or no memory for the list
        _call_void(io[IO_ERR_CLEAR])
        return code_object(io, NOT_BUILT)
    return _as_object(obj)


def _c_function(name: str) -> int:
    return ctypes.cast(getattr(ctypes.pythonapi, name), ctypes.c_void_p).value


def _numpy_api() -> int:
    """The address of numpy's C API table (``_ARRAY_API``, as a C extension imports it)."""
    try:
        from numpy._core import _multiarray_umath as umath
    except ImportError:  # numpy 1.x
        from numpy.core import _multiarray_umath as umath
    get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
    get_pointer.restype = ctypes.c_void_p
    get_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
    return get_pointer(umath._ARRAY_API, None)


# numpy's C API table: PyArray_Type is entry 2, PyArray_New entry 93 (stable across numpy 1.x and 2.x)
_NPY_ARRAY_TYPE = 2
_NPY_ARRAY_NEW = 93
_ARRAY_DATA_OFFSET = 2 * ctypes.sizeof(ctypes.c_void_p)  # PyObject header, then the data pointer


def result_io(list_items_offset: int | None) -> np.ndarray:
    """A thread's ``io`` array with the C functions a single-text kernel calls (no int table yet:
    :func:`attach`). The list and array makers only with ``list_items_offset`` (the interpreter's
    list layout, learned); the caller checks what they make before asking for them
    (``FusedPath._results_check``). The addresses are learned once; each thread gets a copy."""
    template = _IO_TEMPLATES.get(list_items_offset)
    if template is None:
        template = _IO_TEMPLATES[list_items_offset] = _functions(list_items_offset)
    return template.copy()


_IO_TEMPLATES: dict = {}


def _functions(list_items_offset: int | None) -> np.ndarray:
    io = np.zeros(IO_SIZE, np.int64)
    for slot, name in ((IO_SAVE_THREAD, "PyEval_SaveThread"), (IO_RESTORE_THREAD, "PyEval_RestoreThread"),
                       (IO_ERR_CLEAR, "PyErr_Clear"), (IO_TEXT_UTF8, "PyUnicode_AsUTF8AndSize"),
                       (IO_TEXT_BYTES, "PyBytes_AsStringAndSize"), (IO_LONG_NEW, "PyLong_FromLongLong")):
        io[slot] = _c_function(name)
    if list_items_offset is None:
        return io
    io[IO_MAKES] = 1
    io[IO_LIST_NEW] = _c_function("PyList_New")
    io[IO_INCREF] = _c_function("Py_IncRef")
    io[IO_UNTRACK] = _c_function("PyObject_GC_UnTrack")
    io[IO_LIST_ITEMS] = list_items_offset
    table = (ctypes.c_void_p * (_NPY_ARRAY_NEW + 1)).from_address(_numpy_api())
    io[IO_ARRAY_NEW] = table[_NPY_ARRAY_NEW]
    io[IO_ARRAY_TYPE] = table[_NPY_ARRAY_TYPE]
    io[IO_ARRAY_DATA] = _ARRAY_DATA_OFFSET
    return io


def thread_table() -> np.ndarray:
    """An empty thread table (:data:`THREADS_COUNT` ...)."""
    table = np.zeros(THREADS_FIRST + THREAD_WORDS * THREAD_ROWS, np.int64)
    table[THREADS_GET_STATE] = _c_function("PyThreadState_Get")
    table[THREADS_LONG_NEW] = _c_function("PyLong_FromLongLong")
    return table


_get_state = ctypes.pythonapi.PyThreadState_Get
_get_state.restype = ctypes.c_void_p
_get_state.argtypes = []


def current_thread_state() -> int:
    """The calling thread's PyThreadState address (what :func:`thread_session` compares)."""
    return _get_state()


def attach(io: np.ndarray, table: np.ndarray) -> None:
    """Point ``io`` at the int table lists share (kept alive by the caller)."""
    io[IO_TABLE] = table.ctypes.data
    io[IO_TABLE_LEN] = table.shape[0]


def entry_point(dispatcher, sig):
    """The compiled entry point of ``dispatcher`` for the types ``sig`` (loaded from numba's cache,
    or compiled now): the call without numba's dispatch, which cannot type a RAW argument."""
    overload = dispatcher.overloads.get(sig)
    if overload is None:
        dispatcher.compile(sig)
        overload = dispatcher.overloads[sig]
    return overload.entry_point
