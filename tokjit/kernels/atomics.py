"""Atomic counters for kernels that share one batch between threads without the GIL.

A batch split over threads is a list of chunks; each thread's kernel claims the next chunk with
:func:`fetch_add` on a shared counter and reports a finished one on another, so the threads need no
Python (and no GIL) between chunks, and the caller waits for the last chunk with :func:`wait_for`
instead of being woken by the operating system. numba has no atomics; these are LLVM's
``atomicrmw`` / ``load atomic`` (sequentially consistent) on an element of an int64 array, and the
x86 ``pause`` hint in the wait loop. The wrappers check the index themselves (the intrinsics are
below ``NUMBA_BOUNDSCHECK``): an index outside the array does nothing.
"""

from __future__ import annotations

import platform

from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

# counters array layout: claims at CLAIMED, finished chunks at FINISHED, 64 bytes apart so a thread
# bumping one does not take the other's cache line away from the waiting thread
CLAIMED = 0
FINISHED = 8
N_CHUNKS = 15  # how many chunks there are (written before any thread starts, only read after)
COUNTERS = 16

_I64 = ir.IntType(64)
_X86 = platform.machine().lower() in ("x86_64", "amd64", "i386", "i686")


def _element_ptr(context, builder, sig, args):
    ary = context.make_array(sig.args[0])(context, builder, args[0])
    idx = context.cast(builder, args[1], sig.args[1], types.intp)
    return builder.gep(ary.data, [idx])


@intrinsic
def _fetch_add(typingctx, arr, index, value):
    if not (isinstance(arr, types.Array) and arr.dtype == types.int64 and arr.ndim == 1
            and isinstance(index, types.Integer) and isinstance(value, types.Integer)):
        return None

    def codegen(context, builder, sig, args):
        ptr = _element_ptr(context, builder, sig, args)
        val = context.cast(builder, args[2], sig.args[2], types.int64)
        return builder.atomic_rmw("add", ptr, val, "seq_cst")

    return types.int64(arr, index, value), codegen


@intrinsic
def _load_atomic(typingctx, arr, index):
    if not (isinstance(arr, types.Array) and arr.dtype == types.int64 and arr.ndim == 1
            and isinstance(index, types.Integer)):
        return None

    def codegen(context, builder, sig, args):
        ptr = _element_ptr(context, builder, sig, args)
        return builder.load_atomic(ptr, "seq_cst", 8)

    return types.int64(arr, index), codegen


@intrinsic
def _pause(typingctx):
    def codegen(context, builder, sig, args):
        if _X86:  # llvmlite has no inline-assembly parser: the SSE2 intrinsic that emits ``pause``
            fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ir.VoidType(), []),
                                                "llvm.x86.sse2.pause")
            builder.call(fn, [])
        return context.get_dummy_value()

    return types.void(), codegen


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def fetch_add(counters, i, value):
    """``counters[i] += value`` atomically; returns the value before. ``i`` < :data:`COUNTERS`."""
    if i < 0 or i >= counters.shape[0]:
        return -1
    return _fetch_add(counters, i, value)


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def wait_for(counters, i, target, max_spins):
    """Spin until ``counters[i] >= target`` (written by other threads), at most ``max_spins`` times;
    True when it got there. The bound lets the caller look at the other threads in Python now and
    then (one that raised will never finish its chunk)."""
    if i < 0 or i >= counters.shape[0]:
        return False
    for _ in range(max_spins):
        if _load_atomic(counters, i) >= target:
            return True
        _pause()
    return _load_atomic(counters, i) >= target
