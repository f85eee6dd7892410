"""Machine operations numba does not expose: an unaligned 8-byte load, a cache prefetch, an array
read without the negative-index wraparound, and loads, stores, copies and prefetches at raw addresses.

* :func:`load_word` reads 8 bytes of a byte array as one little-endian word, where numba would
  read them one at a time (eight loads, shifts and a loop whose trip count varies with the piece,
  mispredicted at every piece). Only the piece cache uses it, and only to form keys it compares with
  keys formed the same way, so the byte order never reaches an id. :func:`load_two_words` gives a
  piece's first 16 bytes with computed masks, no branch on the piece's length.
* :func:`find_byte` looks for one byte value eight bytes a step (:func:`byte_hits` marks it in a
  word): a byte loop that stops at a byte every few bytes (a space, U+2581) mispredicts its exit at
  every stop, a word loop once per word.
* :func:`ascii_classes64` classifies 64 bytes at once (letters, spaces, digits, ... as bit masks):
  one vector load and a few compares, which LLVM lowers to the target's byte-mask instructions,
  where numba would test one byte at a time. The split scanner's block path
  (:mod:`tokjit.kernels.split_known`) derives piece starts from the masks.
* :func:`prefetch_row` asks the CPU to start fetching one row of a 2-D array (:func:`prefetch_at`
  one element of a 1-D array). A piece cache of 256K rows is 8 MB, more than a core's L2, so a
  lookup is often a wait of ~100 cycles or more; issued for a piece some pieces ahead while the current
  one is handled, it overlaps that wait.
* :func:`nonneg` marks an index as non-negative. numba wraps every signed index (``a[-1]``), a
  sign test plus the array's length kept in a register at each read; an unsigned index skips both.
  In the scanners' and the piece loop's byte reads this is ~10% of their time.

Neither the loads nor the prefetches are bounds-checked by ``NUMBA_BOUNDSCHECK``: the loads check their
own bounds (and fall back to byte loads near the end of the array; ``ascii_classes64``'s caller checks
that 64 bytes are there and classifies eight at a time otherwise), a prefetch of any address is
harmless.
"""

from __future__ import annotations

import sys

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.cpython.unsafe.numbers import trailing_zeros
from numba.extending import intrinsic

_I8 = ir.IntType(8)
_I32 = ir.IntType(32)
_I64 = ir.IntType(64)
# the one-load path yields byte i lowest only on little-endian machines; elsewhere bytes are loaded one by one
LITTLE_ENDIAN = sys.byteorder == "little"


@intrinsic
def _load_u64_at(typingctx, arr, index):
    """The 8 bytes ``arr[index:index + 8]`` of a C-contiguous uint8 array as one uint64 (native byte
    order, no alignment assumed). The caller guarantees ``index + 8 <= len(arr)``."""
    if not (isinstance(arr, types.Array) and arr.dtype == types.uint8 and arr.ndim == 1
            and isinstance(index, types.Integer)):
        return None

    def codegen(context, builder, sig, args):
        ary = context.make_array(sig.args[0])(context, builder, args[0])
        idx = context.cast(builder, args[1], sig.args[1], types.intp)
        byte_ptr = builder.gep(ary.data, [idx])
        word = builder.load(builder.bitcast(byte_ptr, _I64.as_pointer()), align=1)
        return word

    return types.uint64(arr, index), codegen


_V64 = ir.VectorType(_I8, 64)


def _splat(value: int) -> ir.Constant:
    return ir.Constant(_V64, [value] * 64)


def _lane_bits(builder, flags) -> ir.Value:
    """A <64 x i1> comparison as an i64, lane k at bit k (one byte-mask instruction where the
    target has one)."""
    return builder.bitcast(flags, _I64)


def _in_range(builder, v, lo: int, hi: int):
    """Lanes of ``v`` (unsigned bytes) in ``lo..hi``: one subtraction and one unsigned compare."""
    return builder.icmp_unsigned("<=", builder.sub(v, _splat(lo)), _splat(hi - lo))


@intrinsic
def ascii_classes64(typingctx, arr, index):
    """(letters, upper letters, spaces, blanks, breaks, digits, slashes, apostrophes, hard stops) of the
    64 bytes ``arr[index:index + 64]`` of a C-contiguous uint8 array as nine uint64 masks, bit k for
    byte ``index + k``: ASCII letters, A-Z, 0x20, the other whitespace that is no line break (tab,
    0x0B, 0x0C), line breaks (0x0A, 0x0D), 0-9, '/', "'", and the bytes the block scanner always
    stops at (the other controls, DEL included, every byte >= 0x80). One vector load and compares, where the target
    has them, instead of eight word-at-a-time passes. The caller guarantees ``index + 64 <=
    len(arr)`` and a little-endian machine (lane k is bit k there)."""
    if not (isinstance(arr, types.Array) and arr.dtype == types.uint8 and arr.ndim == 1
            and isinstance(index, types.Integer)):
        return None
    result = types.UniTuple(types.uint64, 9)

    def codegen(context, builder, sig, args):
        ary = context.make_array(sig.args[0])(context, builder, args[0])
        idx = context.cast(builder, args[1], sig.args[1], types.intp)
        v = builder.load(builder.bitcast(builder.gep(ary.data, [idx]), _V64.as_pointer()), align=1)

        def equal(value):
            return builder.icmp_unsigned("==", v, _splat(value))

        letters = _in_range(builder, builder.or_(v, _splat(0x20)), 0x61, 0x7A)
        upper = _in_range(builder, v, 0x41, 0x5A)
        breaks = builder.or_(equal(0x0A), equal(0x0D))
        blanks = builder.or_(equal(0x09), _in_range(builder, v, 0x0B, 0x0C))
        controls = builder.or_(builder.and_(_in_range(builder, v, 0x00, 0x1F),
                                            builder.not_(_in_range(builder, v, 0x09, 0x0D))), equal(0x7F))
        hard = builder.or_(controls, builder.icmp_unsigned(">=", v, _splat(0x80)))
        masks = [_lane_bits(builder, m) for m in (letters, upper, equal(0x20), blanks, breaks,
                                                  _in_range(builder, v, 0x30, 0x39), equal(0x2F), equal(0x27), hard)]
        return context.make_tuple(builder, sig.return_type, masks)

    return result(arr, index), codegen


@intrinsic
def _prefetch(typingctx, arr, index):
    """Prefetch (for reading, keep in all cache levels) ``arr[index]`` of a C-contiguous array: an
    element of a 1-D array, the first element of a row of a 2-D one."""
    if not (isinstance(arr, types.Array) and arr.ndim in (1, 2) and isinstance(index, types.Integer)):
        return None

    def codegen(context, builder, sig, args):
        ary = context.make_array(sig.args[0])(context, builder, args[0])
        idx = context.cast(builder, args[1], sig.args[1], types.intp)
        if sig.args[0].ndim == 2:
            idx = builder.mul(idx, builder.extract_value(ary.shape, 1))
        _emit_prefetch(builder, builder.bitcast(builder.gep(ary.data, [idx]), _I8.as_pointer()))
        return context.get_dummy_value()

    return types.void(arr, index), codegen


def _emit_prefetch(builder, ptr):
    """``llvm.prefetch`` of the byte at ``ptr``: read (0), high temporal locality (3), data cache (1)."""
    fnty = ir.FunctionType(ir.VoidType(), [ptr.type, _I32, _I32, _I32])
    name = "llvm.prefetch.p0" if ptr.type.is_opaque else "llvm.prefetch.p0i8"
    fn = cgutils.get_or_insert_function(builder.module, fnty, name)
    builder.call(fn, [ptr, ir.Constant(_I32, 0), ir.Constant(_I32, 3), ir.Constant(_I32, 1)])


# Raw addresses: the kernels that read and write CPython's objects (kernels.pystr, kernels.pylist)
# get an object's address from Python (``id``) and the offsets of its fields from a layout checked
# before use; these are their loads, stores, copies and prefetches. Nothing checks such an address.

@intrinsic
def load_at(typingctx, address, dtype):
    """The ``dtype`` value (a numba number type, given as a global such as ``np.int64``) stored at
    ``address``, which need not be aligned."""
    if not isinstance(address, types.Integer) or not isinstance(dtype, types.NumberClass):
        return None
    elem = dtype.instance_type

    def codegen(context, builder, sig, args):
        return builder.load(builder.inttoptr(args[0], context.get_value_type(elem).as_pointer()), align=1)

    return elem(address, dtype), codegen


@intrinsic
def store_i64_at(typingctx, address, value):
    """Store ``value`` as 8 bytes (an int64) at ``address``, which need not be aligned."""
    if not isinstance(address, types.Integer) or not isinstance(value, types.Integer):
        return None

    def codegen(context, builder, sig, args):
        val = context.cast(builder, args[1], sig.args[1], types.int64)
        builder.store(val, builder.inttoptr(args[0], _I64.as_pointer()), align=1)
        return context.get_dummy_value()

    return types.void(address, value), codegen


@intrinsic
def call_void(typingctx, function, pointer):
    """``void function(void *pointer)`` through the function's address (``Py_IncRef``, ``Py_DecRef``,
    ``PyEval_RestoreThread``)."""
    if not isinstance(function, types.Integer) or not isinstance(pointer, types.Integer):
        return None

    def codegen(context, builder, sig, args):
        fnty = ir.FunctionType(ir.VoidType(), [_I8.as_pointer()])
        builder.call(builder.inttoptr(args[0], fnty.as_pointer()), [builder.inttoptr(args[1], _I8.as_pointer())])
        return context.get_dummy_value()

    return types.void(function, pointer), codegen


@intrinsic
def prefetch_address(typingctx, address):
    """Ask the CPU to start loading the cache line at ``address`` (no effect on results)."""
    if not isinstance(address, types.Integer):
        return None

    def codegen(context, builder, sig, args):
        _emit_prefetch(builder, builder.inttoptr(args[0], _I8.as_pointer()))
        return context.get_dummy_value()

    return types.void(address), codegen


@intrinsic
def copy_from_address(typingctx, out, at, address, n):
    """``out[at:at + n]`` = the ``n`` bytes at ``address`` (a uint8 array; the caller checked the bounds)."""
    if not (isinstance(out, types.Array) and out.dtype == types.uint8 and isinstance(at, types.Integer)
            and isinstance(address, types.Integer) and isinstance(n, types.Integer)):
        return None

    def codegen(context, builder, sig, args):
        ary = context.make_array(sig.args[0])(context, builder, args[0])
        dst = builder.gep(ary.data, [args[1]])
        cgutils.raw_memcpy(builder, dst, builder.inttoptr(args[2], dst.type), args[3], 1)
        return context.get_dummy_value()

    return types.void(out, at, address, n), codegen


@intrinsic
def data_address(typingctx, arr):
    """The address of ``arr``'s first element, as an int64."""
    if not isinstance(arr, types.Array):
        return None

    def codegen(context, builder, sig, args):
        return builder.ptrtoint(context.make_array(sig.args[0])(context, builder, args[0]).data, ir.IntType(64))

    return types.int64(arr), codegen


@intrinsic
def bytes_at(typingctx, address, n):
    """The ``n`` bytes at ``address`` as a uint8 array that owns nothing (the caller keeps the memory
    alive); ``numba.carray`` does the same but is not available without reference counting."""
    if not isinstance(address, types.Integer) or not isinstance(n, types.Integer):
        return None
    array_type = types.Array(types.uint8, 1, "C")

    def codegen(context, builder, sig, args):
        from numba.np.arrayobj import populate_array
        ary = context.make_array(array_type)(context, builder)
        one = context.get_constant(types.intp, 1)
        populate_array(ary, data=builder.inttoptr(args[0], _I8.as_pointer()),
                       shape=cgutils.pack_array(builder, [args[1]]), strides=cgutils.pack_array(builder, [one]),
                       itemsize=one, meminfo=None)
        return ary._getvalue()

    return array_type(address, n), codegen


@intrinsic
def call_at(typingctx, function, arguments):
    """Call the native function at ``function`` (an int64 address) taking the int64s of the tuple
    ``arguments`` and returning an int64: a kernel compiled apart (``numba.cfunc``) called without
    its code being linked into, and compiled again with, every caller."""
    if not isinstance(function, types.Integer) or not isinstance(arguments, types.UniTuple) \
            or arguments.dtype != types.int64:
        return None
    n = arguments.count

    def codegen(context, builder, sig, args):
        fnty = ir.FunctionType(ir.IntType(64), [ir.IntType(64)] * n)
        values = [builder.extract_value(args[1], i) for i in range(n)]
        return builder.call(builder.inttoptr(args[0], fnty.as_pointer()), values)

    return types.int64(function, arguments), codegen


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def load_word(buf, i, n):
    """The ``n`` (0..8) bytes ``buf[i:i + n]`` as a uint64, byte ``i`` lowest, higher bytes zero.
    One unaligned load when 8 bytes are readable from ``i``, byte loads otherwise."""
    if n <= 0:
        return np.uint64(0)
    if LITTLE_ENDIAN and i + 8 <= buf.shape[0]:
        w = _load_u64_at(buf, i)
        if n < 8:
            w &= (np.uint64(1) << np.uint64(8 * n)) - np.uint64(1)
        return w
    w = np.uint64(0)
    for k in range(n):
        w |= np.uint64(buf[i + k]) << np.uint64(8 * k)
    return w


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def prefetch_at(arr, i):
    """Hint that ``arr[i]`` (1-D, C-contiguous) will be read soon; no effect on results."""
    _prefetch(arr, i)


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def prefetch_row(arr, row):
    """Hint that ``arr[row]`` (2-D, C-contiguous) will be read soon; no effect on results."""
    _prefetch(arr, row)


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def nonneg(i):
    """Index ``i`` (known to be >= 0) as unsigned, so ``a[nonneg(i)]`` has no wraparound code.
    ``NUMBA_BOUNDSCHECK`` still checks it (a negative ``i`` becomes a huge index and fails)."""
    return np.uint64(i)


_ALL_ONES = np.uint64(0xFFFFFFFFFFFFFFFF)


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def low_bytes_mask(n):
    """A mask of the low ``min(max(n, 0), 8)`` bytes of a word, computed without a branch (the shift
    is split in two, so that a whole word, 64 bits, is no undefined shift)."""
    bits = np.uint64(8 * min(max(n, 0), 8))
    half = bits >> np.uint64(1)
    return ~((_ALL_ONES << half) << (bits - half))


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def load_two_words(buf, i, n):
    """``buf[i:i + n]`` (n >= 0) as two uint64, byte ``i`` lowest, bytes from ``n`` on zero: the first
    16 bytes of a piece. Two loads and two masks when 16 bytes are readable from ``i`` (no branch on
    ``n``, which changes from piece to piece), :func:`load_word` otherwise."""
    if LITTLE_ENDIAN and i + 16 <= buf.shape[0]:
        return (_load_u64_at(buf, i) & low_bytes_mask(n),
                _load_u64_at(buf, i + 8) & low_bytes_mask(n - 8))
    return load_word(buf, i, min(n, 8)), load_word(buf, i + 8, min(n - 8, 8))


BYTE_ONES = np.uint64(0x0101010101010101)  # times a byte value: that byte in every lane of a word
HIGH_BITS = np.uint64(0x8080808080808080)
LOW7_BITS = np.uint64(0x7F7F7F7F7F7F7F7F)


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def bytes_in(w7, lo, hi):
    """0x80 in each byte of ``w7`` (bytes < 0x80) that lies in ``lo..hi`` (0 <= lo, hi <= 0x7F), 0 in
    the others. No byte sum reaches 0x100, so bytes do not disturb their neighbours."""
    above = w7 + BYTE_ONES * np.uint64(0x80 - lo)
    not_below = w7 + BYTE_ONES * np.uint64(0x7F - hi)
    return above & ~not_below & HIGH_BITS


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def byte_hits(w, repeated):
    """0x80 in the lowest byte of ``w`` equal to the byte ``repeated`` holds in every lane, when one
    is; bytes above it may be marked too (a borrow), which callers never read; 0 when none is."""
    x = w ^ repeated
    return (x - BYTE_ONES) & ~x & HIGH_BITS


@njit(cache=True, nogil=True, forceinline=True, _nrt=False)
def find_byte(buf, i, e, byte):
    """The first index in ``[i, e)`` where ``buf`` holds ``byte``, else ``e`` (``e`` <= len(buf)).
    Eight bytes a step: O(e - i) with one branch per word."""
    repeated = BYTE_ONES * np.uint64(byte)
    while i + 8 <= e:
        hits = byte_hits(load_word(buf, i, 8), repeated)
        if hits != 0:
            return i + np.int64(trailing_zeros(hits) >> 3)
        i += 8
    while i < e:
        if buf[i] == byte:
            return i
        i += 1
    return max(i, e)
