"""The single-text call's ends in the kernel: the GIL, and the Python object the caller gets.

A numba ``nogil`` entry point releases the GIL before the kernel and takes it back after (~40 ns),
then the caller made the result in Python: ``out[:n].copy()`` for an array (~200 ns: a view, then a
copy) or ``tolist()``, or a second kernel call for a list of shared ints (~300 ns). For a short text
that is most of the call. The single-text kernels are therefore compiled holding the GIL, and
here, at their two ends, they

* release it only around the encoding of a text of :data:`RELEASE_GIL_BYTES` or more
  (``PyEval_SaveThread`` / ``PyEval_RestoreThread``), so concurrent calls from several Python
  threads still run in parallel where it pays; a shorter text's encoding costs less than a
  thread switch, and a call that keeps the GIL cannot wait for it after the kernel;
* build the result object with the C API while they hold it: the ids as a new int32 array
  (``PyArray_New``, then one copy) or as a list of the shared ints of the path's int table (one
  ``Py_IncRef`` per id, :func:`tokjit.kernels.pylist._new_list`), appended to the thread's slot list,
  which the caller pops.

The C functions are called through addresses kept in the thread's ``io`` array (``IO_*`` slots)
and checked once against numpy and ``tolist()`` (:func:`delivery_ok`); where the check fails the
caller asks for ``RESULT_COUNT`` and builds the object itself, as before.
"""

from __future__ import annotations

import ctypes

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

from tokjit.kernels.memops import data_address, load_at
from tokjit.kernels.pylist import _call_incref, _new_list

# what a single-text kernel hands back besides the id count (its third argument)
RESULT_COUNT = 0  # nothing: the ids stay in the thread's ``out`` buffer
RESULT_LIST = 1  # a list of ints, in the slot list
RESULT_ARRAY = 2  # a new int32 array, in the slot list

KERNEL_FAILED = -17  # the encoding raised (an index out of bounds under NUMBA_BOUNDSCHECK=1): a bug
NOT_BUILT = -16  # the ids are in ``out`` (``io[0]`` of them) but no object was made: the caller makes it

# A text this long has its encoding run without the GIL (~10 us of work and more; the release and
# retake cost ~40 ns). Shorter texts keep it.
RELEASE_GIL_BYTES = 1024

# io slots (after the kernels' own io[0..3]): the C functions, offsets and objects a result needs
IO_SAVE_THREAD = 4
IO_RESTORE_THREAD = 5
IO_LIST_NEW = 6
IO_INCREF = 7
IO_DECREF = 8
IO_LIST_ITEMS = 9  # offset of a list's item array pointer
IO_LIST_APPEND = 10
IO_ERR_CLEAR = 11
IO_ARRAY_NEW = 12
IO_ARRAY_TYPE = 13
IO_ARRAY_DATA = 14  # offset of an array's data pointer
IO_SLOT = 15  # the address of the thread's slot list (0: no result objects, RESULT_COUNT only)
IO_TABLE = 16  # the address of the int table's object pointers (0: not made yet)
IO_TABLE_LEN = 17
IO_DIMS = 18  # scratch: the one dimension PyArray_New reads
IO_SIZE = 19

NPY_INT32 = 5  # numpy's type number of int32 (fixed by its C API)

_I32 = ir.IntType(32)
_I64 = ir.IntType(64)
_I8P = ir.IntType(8).as_pointer()


@intrinsic
def _call_save_thread(typingctx, fn):
    """``PyEval_SaveThread()`` through its address: the thread state to restore."""
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
def _call_append(typingctx, fn, lst, item):
    """``PyList_Append(lst, item)`` (takes its own reference) through its address; 0 or -1."""
    if not all(isinstance(a, types.Integer) for a in (fn, lst, item)):
        return None

    def codegen(context, builder, sig, args):
        fnty = ir.FunctionType(_I32, [_I8P, _I8P])
        result = builder.call(builder.inttoptr(args[0], fnty.as_pointer()),
                              [builder.inttoptr(args[1], _I8P), builder.inttoptr(args[2], _I8P)])
        return builder.sext(result, _I64)

    return types.int64(fn, lst, item), codegen


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


@intrinsic
def _call_restore_thread(typingctx, fn, state):
    """``PyEval_RestoreThread(state)`` through its address."""
    if not isinstance(fn, types.Integer) or not isinstance(state, types.Integer):
        return None

    def codegen(context, builder, sig, args):
        fnty = ir.FunctionType(ir.VoidType(), [_I8P])
        builder.call(builder.inttoptr(args[0], fnty.as_pointer()), [builder.inttoptr(args[1], _I8P)])
        return context.get_dummy_value()

    return types.void(fn, state), codegen


@njit(cache=True, forceinline=True, _nrt=False)
def release_gil(io, n_bytes):
    """Release the GIL when a text of ``n_bytes`` is worth it (a thread state to give to
    :func:`retake_gil`, else 0). The kernel holds the GIL when it starts (compiled without ``nogil``)."""
    if n_bytes < RELEASE_GIL_BYTES:
        return 0
    return _call_save_thread(io[IO_SAVE_THREAD])


@njit(cache=True, forceinline=True, _nrt=False)
def retake_gil(io, state):
    """Take the GIL back after :func:`release_gil` (nothing when it was kept)."""
    if state != 0:
        _call_restore_thread(io[IO_RESTORE_THREAD], state)


@njit(cache=True, _nrt=False)
def deliver(io, out, n, result):
    """The single-text kernels' last step, holding the GIL: ``n`` (ids in ``out``) or a negative code
    from the encoding is returned as is when ``result`` is RESULT_COUNT or ``n`` < 0; else the ids
    become the object ``result`` names, appended to the slot list at ``io[IO_SLOT]``, and ``n`` is
    returned, or NOT_BUILT (``io[0]`` = ``n``, nothing appended, no Python error left set) when it
    cannot be made: no slot, no int table yet, an id past the table, out of memory. O(n)."""
    if n < 0 or result == RESULT_COUNT:
        return n
    io[0] = n
    slot = io[IO_SLOT]
    if slot == 0 or n > out.shape[0]:
        return NOT_BUILT
    if result == RESULT_ARRAY:
        io[IO_DIMS] = n
        obj = _call_array_new(io[IO_ARRAY_NEW], io[IO_ARRAY_TYPE], data_address(io) + 8 * IO_DIMS)
        if obj == 0:
            _call_void(io[IO_ERR_CLEAR])
            return NOT_BUILT
        _copy_to_address(load_at(obj + io[IO_ARRAY_DATA], np.int64), out, n)
    else:
        if io[IO_TABLE] == 0:
            return NOT_BUILT
        obj = _new_list(io[IO_LIST_NEW], io[IO_INCREF], io[IO_LIST_ITEMS], out, 0, n, io[IO_TABLE],
                        io[IO_TABLE_LEN])
        if obj == 0:  # an id past the table (nothing made), or no memory for the list
            _call_void(io[IO_ERR_CLEAR])
            return NOT_BUILT
    appended = _call_append(io[IO_LIST_APPEND], slot, obj)
    _call_incref(io[IO_DECREF], obj)  # the slot holds it now (or, when the append failed, nothing does)
    if appended != 0:
        _call_void(io[IO_ERR_CLEAR])
        return NOT_BUILT
    return n


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
    """A thread's ``io`` array with the C functions a result needs (no slot or int table yet: the
    caller's ``attach``). With ``list_items_offset`` None (the interpreter's list layout did not
    check out) the kernels are only ever asked for RESULT_COUNT."""
    io = np.zeros(IO_SIZE, np.int64)
    io[IO_SAVE_THREAD] = _c_function("PyEval_SaveThread")
    io[IO_RESTORE_THREAD] = _c_function("PyEval_RestoreThread")
    if list_items_offset is None:
        return io
    io[IO_LIST_NEW] = _c_function("PyList_New")
    io[IO_INCREF] = _c_function("Py_IncRef")
    io[IO_DECREF] = _c_function("Py_DecRef")
    io[IO_LIST_ITEMS] = list_items_offset
    io[IO_LIST_APPEND] = _c_function("PyList_Append")
    io[IO_ERR_CLEAR] = _c_function("PyErr_Clear")
    table = (ctypes.c_void_p * (_NPY_ARRAY_NEW + 1)).from_address(_numpy_api())
    io[IO_ARRAY_NEW] = table[_NPY_ARRAY_NEW]
    io[IO_ARRAY_TYPE] = table[_NPY_ARRAY_TYPE]
    io[IO_ARRAY_DATA] = _ARRAY_DATA_OFFSET
    return io


def attach(io: np.ndarray, slot: list, table: np.ndarray | None) -> None:
    """Point ``io`` at the thread's slot list and the int table (both kept alive by the caller)."""
    io[IO_SLOT] = id(slot)
    if table is not None:
        io[IO_TABLE] = table.ctypes.data
        io[IO_TABLE_LEN] = table.shape[0]


@njit(cache=True, _nrt=False)
def _deliver_sample(io, out, n, result):
    return deliver(io, out, n, result)


def delivery_ok(list_items_offset: int | None) -> bool:
    """Whether :func:`deliver` makes the array numpy makes and the list ``tolist()`` makes, with the
    table's reference counts right, on this interpreter and numpy (checked once before use)."""
    if list_items_offset is None:
        return False
    try:
        import sys
        io = result_io(list_items_offset)
        table = np.empty(300, object)
        table[:] = [int(x) for x in range(1000, 1300)]  # ints of their own: their counts are ours to read
        slot: list = []
        attach(io, slot, table)
        ids = np.array([5, 7, 5, 299, 0, 1, 2, 3], np.int32)
        before = sys.getrefcount(table[5])
        if _deliver_sample(io, ids, 8, RESULT_ARRAY) != 8 or _deliver_sample(io, ids, 3, RESULT_LIST) != 3:
            return False
        if len(slot) != 2 or sys.getrefcount(table[5]) != before + 2:
            return False
        made_list, made_array = slot.pop(), slot.pop()
        if type(made_list) is not list or made_list != [1005, 1007, 1005] or made_list[0] is not table[5]:
            return False
        if type(made_array) is not np.ndarray or made_array.dtype != np.int32 or made_array.shape != (8,) \
                or not made_array.flags.c_contiguous or not made_array.flags.writeable \
                or made_array.flags.owndata is False or made_array.tolist() != ids.tolist():
            return False
        del made_list
        if sys.getrefcount(table[5]) != before:
            return False
        bad = np.array([300], np.int32)
        if _deliver_sample(io, bad, 1, RESULT_LIST) != NOT_BUILT or slot:
            return False
        empty = _deliver_sample(io, ids, 0, RESULT_ARRAY)
        return empty == 0 and slot.pop().shape == (0,)
    except Exception:  # noqa: BLE001 - any surprise means: the caller builds its results
        return False
