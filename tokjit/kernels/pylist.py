"""Python lists of ids, built by a kernel from a table of shared ints.

``encode_batch`` returns one list of ints per text (and ``encode`` one, through
:mod:`tokjit.kernels.call_result`, which calls :func:`new_list`).
From Python, ``memoryview.tolist()`` creates a new int object per id: ~35 ns per id once the outputs
are kept (a dataset being built), as the allocator keeps taking fresh memory; 100 KB of English
lines is 23K ids, ~0.8 ms, as long as encoding them. This kernel creates each list with
``PyList_New`` and fills it with ints from a table holding one int per id (an object array,
:meth:`tokjit.fused.driver.FusedPath.int_table`), each taken with ``Py_IncRef``, then puts it into
the caller's outer list with ``PyList_SetItem``: no int is created.

Every list made here is left untracked by the cycle collector (``PyObject_GC_UnTrack``), as CPython
leaves a tuple or dict that holds only atoms: a list of ints can be part of no cycle, and tracked,
each one is traversed item by item by every collection it lives through. Each ~700 lists made start
a young collection, which traversed those lists' ids (~170 us for 700 lists of 43 ids, measured);
and where the lists are kept (a dataset being built) every older collection traversed them again.
English lines, o200k, 1000 lines a batch, the last 16 batches kept: the list building took 1118 us a
batch on average (the collections included), 289 untracked. What changes: a list stays untracked
whatever is put into it later, so a reference cycle a caller builds through an id list (an object
appended to it that refers back to it) is never collected; nothing held by it is ever freed early.

The C functions are called through their addresses (``ctypes``) passed in an array, and the list's
item array is found at the offset :mod:`tokjit.kernels.pystr` learned and checked. The kernel holds
the GIL (it is not ``nogil``), as any code calling the C API must. :func:`lists_ok` checks it against
``tolist()`` before use; where it does not hold, ``encode_batch`` and ``encode`` keep ``tolist()``.
"""

from __future__ import annotations

import ctypes
import gc
import sys

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic

from tokjit.kernels.memops import call_void, load_at, prefetch_address, store_i64_at

# API array: addresses of the C functions the kernel calls, and the list item offset
API_LIST_NEW = 0
API_SET_ITEM = 1
API_INCREF = 2
API_ITEMS = 3
API_UNTRACK = 4
API_FIELDS = 5

_I64 = ir.IntType(64)
_I32 = ir.IntType(32)
_I8P = ir.IntType(8).as_pointer()


@intrinsic
def _call_new(typingctx, fn, n):
    """``PyList_New(n)`` through its address ``fn``; the new list's address (0 on failure)."""
    if not isinstance(fn, types.Integer) or not isinstance(n, types.Integer):
        return None

    def codegen(context, builder, sig, args):
        fnty = ir.FunctionType(_I8P, [_I64])
        result = builder.call(builder.inttoptr(args[0], fnty.as_pointer()), [args[1]])
        return builder.ptrtoint(result, _I64)

    return types.int64(fn, n), codegen


@intrinsic
def _call_set_item(typingctx, fn, lst, i, item):
    """``PyList_SetItem(lst, i, item)`` (steals ``item``) through its address ``fn``; 0 or -1."""
    if not all(isinstance(a, types.Integer) for a in (fn, lst, i, item)):
        return None

    def codegen(context, builder, sig, args):
        fnty = ir.FunctionType(_I32, [_I8P, _I64, _I8P])
        result = builder.call(builder.inttoptr(args[0], fnty.as_pointer()),
                              [builder.inttoptr(args[1], _I8P), args[2], builder.inttoptr(args[3], _I8P)])
        return builder.sext(result, _I64)

    return types.int64(fn, lst, i, item), codegen


AHEAD = 16  # ids between a shared int's prefetch and its reference count (its slot: twice as many)


@njit(cache=True, forceinline=True, _nrt=False)
def new_list(list_new, incref, untrack, items_at, ids, start, end, table, table_len):
    """A new list (its address), untracked by the cycle collector, of the shared ints of
    ``ids[start:end]``, or 0 when an id has no int in the table (checked first: nothing is made) or
    the list cannot be made. ``list_new``, ``incref``, ``untrack``: the addresses of ``PyList_New``,
    ``Py_IncRef``, ``PyObject_GC_UnTrack``. The shared ints are spread over megabytes: the slot of
    the id 32 on and the int of the id 16 on (its slot asked for 16 ids ago) are requested ahead, so
    the reference counts do not wait; ahead means in ``ids``, whose next lists' ids follow this
    one's."""
    for j in range(start, end):
        if ids[j] < 0 or ids[j] >= table_len:
            return 0
    lst = _call_new(list_new, end - start)
    if lst == 0:
        return 0
    call_void(untrack, lst)
    items = load_at(lst + items_at, np.int64)
    n_ids = ids.shape[0]  # past this list's end too: the next list's ids follow (short lists)
    for j in range(start, end):
        ahead = j + 2 * AHEAD
        if ahead < n_ids and 0 <= ids[ahead] < table_len:
            prefetch_address(table + 8 * np.int64(ids[ahead]))
        ahead = j + AHEAD
        if ahead < n_ids and 0 <= ids[ahead] < table_len:
            prefetch_address(load_at(table + 8 * np.int64(ids[ahead]), np.int64))
        obj = load_at(table + 8 * np.int64(ids[j]), np.int64)
        call_void(incref, obj)
        store_i64_at(items + 8 * (j - start), obj)
    return lst


@njit(cache=True)
def build_lists(api, outer, n_lists, ids, offsets, table, table_len):
    """Put into the list at ``outer`` (``n_lists`` items, each None) the list of text ``k``'s ids,
    ``ids[offsets[k]:offsets[k + 1]]``, as the ints at ``table`` (the addresses of ``table_len`` int
    objects, one per id). Returns 0, or -1 when an id has no int in the table or a list cannot be
    made (the lists made so far stay in ``outer``; the caller drops it). O(ids)."""
    if offsets.shape[0] < n_lists + 1:
        return -1
    for k in range(n_lists):
        start, end = offsets[k], offsets[k + 1]
        if start < 0 or end > ids.shape[0] or end < start:
            return -1
        lst = new_list(api[API_LIST_NEW], api[API_INCREF], api[API_UNTRACK], api[API_ITEMS], ids, start, end,
                       table, table_len)
        if lst == 0 or _call_set_item(api[API_SET_ITEM], outer, k, lst) != 0:
            return -1
    return 0


def api_addresses(items_offset: int) -> np.ndarray:
    """The function addresses and the item offset :func:`build_lists` takes."""
    api = np.zeros(API_FIELDS, np.int64)
    papi = ctypes.pythonapi
    for slot, name in ((API_LIST_NEW, "PyList_New"), (API_SET_ITEM, "PyList_SetItem"),
                       (API_INCREF, "Py_IncRef"), (API_UNTRACK, "PyObject_GC_UnTrack")):
        api[slot] = ctypes.cast(getattr(papi, name), ctypes.c_void_p).value
    api[API_ITEMS] = items_offset
    return api


def lists_ok(api: np.ndarray) -> bool:
    """Whether :func:`build_lists` gives ``tolist()``'s lists, holding the table's ints with their
    references counted (checked on a sample before first use)."""
    try:
        table = np.empty(300, object)
        table[:] = [int(x) for x in range(1000, 1300)]  # ints of their own: their counts are ours to read
        ids = np.array([5, 7, 5, 299, 0, 1, 2, 3], np.int32)
        offsets = np.array([0, 3, 3, 8], np.int64)
        before = sys.getrefcount(table[5])
        outer = [None] * 3
        if build_lists(api, id(outer), 3, ids, offsets, table.ctypes.data, table.shape[0]) != 0:
            return False
        if sys.getrefcount(table[5]) != before + 2 or outer[0][0] is not table[5]:
            return False
        if outer != [[1005, 1007, 1005], [], [1299, 1000, 1001, 1002, 1003]] or \
                any(type(x) is not list or gc.is_tracked(x) for x in outer):
            return False
        del outer
        if sys.getrefcount(table[5]) != before:
            return False
        bad = [None]
        if build_lists(api, id(bad), 1, np.array([300], np.int32), np.array([0, 1], np.int64),
                       table.ctypes.data, table.shape[0]) != -1 or bad != [None]:
            return False
        return True
    except Exception:  # noqa: BLE001 - any surprise means: keep tolist()
        return False
