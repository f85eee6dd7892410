"""The numba structures a kernel call takes: one read-only pipeline per tokenizer, one scratch per thread.

A numba call types and unboxes every argument: 65 arrays cost ~5.5 us per call, so the fused
kernels take a few ``StructRef`` objects instead (one pointer to unbox each). Field types are fixed
here, not inferred from whatever arrays a loader produced, so every tokenizer of a family compiles to
the same kernel signature; a builder coerces its arrays to these dtypes (no copy when they already
match) and the constructor refuses anything else at typing time.

Constructors are ``@njit(cache=True)`` functions written out per structure: numba's generic
``StructRefProxy`` constructor is compiled anew in every process, ~0.4 s of start-up each.

Kernels read a structure's fields once into locals at their top and pass those to the inner
kernels, so the hot loops see plain arrays. Entry kernels read them with :func:`borrow` and are
compiled without reference counting: ``struct.field`` costs an atomic increment and decrement per
array, ~0.7 us for the ~50 arrays of a byte-level BPE call.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.core.pythonapi import NativeValue
from numba.experimental import structref
from numba.extending import box, intrinsic, unbox

_I64 = types.int64[::1]
_I32 = types.int32[::1]
_U8 = types.uint8[::1]
_U64 = types.uint64[::1]
_BOOL = types.bool_[::1]


# numba's NRT_MemInfo begins {refct, dtor, dtor_info, data, ...}; the payload pointer is member 3
_I8P = ir.IntType(8).as_pointer()
_MEMINFO_HEAD = ir.LiteralStructType([ir.IntType(64), _I8P, _I8P, _I8P]).as_pointer()
_MEMINFO_DATA = 3


@intrinsic
def borrow(typingctx, struct, attr):
    """``struct.<attr>`` (a string literal); in a kernel compiled with ``_nrt=False``, without touching
    reference counts (numba's own attribute access needs them). The value is borrowed: valid while the
    caller holds the structure, which every kernel call does (the structures are built once and kept
    by Python). In a counting kernel it is counted like ``struct.field``."""
    if not isinstance(struct, types.StructRef) or not isinstance(attr, types.StringLiteral):
        return None
    name = attr.literal_value
    if name not in struct.field_dict:
        return None

    def codegen(context, builder, sig, args):
        meminfo = cgutils.create_struct_proxy(sig.args[0])(context, builder, value=args[0]).meminfo
        zero = ir.Constant(ir.IntType(32), 0)
        slot = builder.gep(builder.bitcast(meminfo, _MEMINFO_HEAD), [zero, ir.Constant(ir.IntType(32), _MEMINFO_DATA)])
        payload_type = sig.args[0].get_data_type()
        llvm_type = context.data_model_manager[payload_type].get_value_type()
        payload = builder.bitcast(builder.load(slot), llvm_type.as_pointer())
        value = getattr(cgutils.create_struct_proxy(payload_type)(context, builder, ref=payload), name)
        if context.enable_nrt:  # a counting kernel owns what it reads, as with ``struct.field``
            context.nrt.incref(builder, sig.return_type, value)
        return value

    return struct.field_dict[name](struct, attr), codegen


@intrinsic
def _meminfo_address(typingctx, struct):
    """The address of ``struct``'s NRT meminfo, as an int64."""
    if not isinstance(struct, types.StructRef):
        return None

    def codegen(context, builder, sig, args):
        meminfo = cgutils.create_struct_proxy(sig.args[0])(context, builder, value=args[0]).meminfo
        return builder.ptrtoint(meminfo, ir.IntType(64))

    return types.int64(struct), codegen


struct_address = _meminfo_address  # in a kernel: what struct_at takes back


@njit(cache=True)
def _address(struct):
    return _meminfo_address(struct)


def addresses(structures) -> tuple[int, ...]:
    """The address of each structure, for :func:`struct_at` in a kernel. A single-text call passes its
    session as this int instead of the structure: numba unboxes a ``StructRef`` argument through
    Python attribute reads and an atomic acquire/release (~0.11 us per call), an int in a few ns.
    The caller keeps the structures alive for as long as it passes their addresses."""
    return tuple(_address(s) for s in structures)


@intrinsic
def struct_at(typingctx, address, struct_type):
    """The structure of type ``struct_type`` (a ``StructRef`` type, as a global) at ``address`` (from
    :func:`addresses`), borrowed: in a kernel compiled with ``_nrt=False`` no reference is taken, as
    with :func:`borrow`; a counting kernel takes one, which it releases when the value dies."""
    if not isinstance(address, types.Integer) or not isinstance(struct_type, types.TypeRef) \
            or not isinstance(struct_type.instance_type, types.StructRef):
        return None
    instance = struct_type.instance_type

    def codegen(context, builder, sig, args):
        proxy = cgutils.create_struct_proxy(instance)(context, builder)
        proxy.meminfo = builder.inttoptr(args[0], proxy._get_ptr_by_name("meminfo").type.pointee)
        value = proxy._getvalue()
        if context.enable_nrt:
            context.nrt.incref(builder, instance, value)
        return value

    return instance(address, struct_type), codegen


def _declare(name: str, fields: list[tuple[str, types.Type]], module: str = __name__):
    """A StructRef type class, its boxed proxy class, and the concrete type with ``fields``. The caller
    binds them in ``module`` as ``<name>Type`` and ``<name>``."""
    # classes made here must say which module holds them: numba pickles struct types into its
    # cache by reference, and a class it cannot find again would be pickled by value and come back
    # as a stranger without a data model
    type_class = type(name + "Type", (types.StructRef,), {"__module__": module})
    structref.register(type_class)
    proxy = type(name, (structref.StructRefProxy,),
                 {"__module__": module, "__doc__": f"Boxed {name} (opaque from Python)."})
    _define_boxing(type_class, proxy)
    structref.define_attributes(type_class)
    return type_class, proxy, type_class(fields)


_MEMINFO_POINTER = types.MemInfoPointer(types.voidptr)


def _define_boxing(type_class, proxy) -> None:
    """numba's StructRef boxing, except that a kernel compiled with ``_nrt=False`` gives back the
    reference its argument took. Unboxing a structure always acquires its meminfo, and numba's call
    wrapper releases it only in a counting kernel: every call of an uncounted entry kernel with a
    structure left one reference behind, and the structure with every array it holds (a thread's
    session and buffers, tens of MB) outlived its tokenizer."""
    make_proxy = proxy._numba_box_

    @box(type_class)
    def box_struct(typ, val, c):
        meminfo = cgutils.create_struct_proxy(typ)(c.context, c.builder, value=val).meminfo
        boxed_meminfo = c.box(_MEMINFO_POINTER, meminfo)
        make = c.pyapi.unserialize(c.pyapi.serialize_object(make_proxy))
        typ_object = c.pyapi.unserialize(c.pyapi.serialize_object(typ))
        result = c.pyapi.call_function_objargs(make, [typ_object, boxed_meminfo])
        for obj in (make, typ_object, boxed_meminfo):
            c.pyapi.decref(obj)
        return result

    @unbox(type_class)
    def unbox_struct(typ, obj, c):
        meminfo_object = c.pyapi.object_getattr_string(obj, "_meminfo")
        meminfo = c.unbox(_MEMINFO_POINTER, meminfo_object).value  # acquired
        c.pyapi.decref(meminfo_object)
        struct = cgutils.create_struct_proxy(typ)(c.context, c.builder)
        struct.meminfo = meminfo
        cleanup = None
        if not c.context.enable_nrt:
            def cleanup():
                release = cgutils.get_or_insert_function(
                    c.builder.module, ir.FunctionType(ir.VoidType(), [_I8P]), "NRT_MemInfo_release")
                c.builder.call(release, [c.builder.bitcast(meminfo, _I8P)])
        return NativeValue(struct._getvalue(), cleanup=cleanup)


# -------------------------------------------------------------------------------------------------
# added-token trie (tokjit.pipeline.added_tokens.AddedTokenMatcher)

TrieType, Trie, TRIE = _declare("Trie", [
    ("first_byte", _BOOL), ("child_start", _I64), ("child_count", _I64), ("edge_byte", _U8),
    ("edge_target", _I64), ("node_token", _I64),
])


@njit(cache=True)
def _new_trie(fields):
    """A TRIE from the tuple of its fields in declaration order (one parameter: a constructor
    with one per field would pass numba's 16-parameter budget)."""
    s = structref.new(TRIE)
    s.first_byte = fields[0]
    s.child_start = fields[1]
    s.child_count = fields[2]
    s.edge_byte = fields[3]
    s.edge_target = fields[4]
    s.node_token = fields[5]
    return s


def make_trie(matcher) -> Trie:
    m = matcher
    return _new_trie((_arr(m.first_byte, np.bool_), _arr(m.child_start, np.int64), _arr(m.child_count, np.int64),
                      _arr(m.edge_byte, np.uint8), _arr(m.edge_target, np.int64), _arr(m.node_token, np.int64)))


# the rules an added-token set adds to the trie's leftmost-longest matches
# (tokjit.kernels.added_tokens.ruled_token_matches): ``mode`` (RULES_*), then per token id its
# flags (lstrip 1, rstrip 2, single_word 4), its length in bytes and llama.cpp's visiting rank
AddedRulesType, AddedRules, ADDED_RULES = _declare("AddedRules", [
    ("mode", types.int64), ("flags", _U8), ("token_len", _I64), ("priority", _I64),
])


@njit(cache=True)
def _new_added_rules(fields):
    s = structref.new(ADDED_RULES)
    s.mode = fields[0]
    s.flags = fields[1]
    s.token_len = fields[2]
    s.priority = fields[3]
    return s


# ADDED_RULES modes and per-token flags (tokjit.kernels.added_tokens.ruled_token_matches)
RULES_NONE, RULES_HF, RULES_LLAMACPP = 0, 1, 2
RULE_LSTRIP, RULE_RSTRIP, RULE_SINGLE_WORD = 1, 2, 4


def _rule_arrays(matcher):
    """(flags, length in bytes, llama.cpp's visiting rank), each indexed by token id, of a ruled set."""
    if matcher.longest_first:
        return matcher.token_flags, matcher.token_len, matcher.token_priority
    zeros = np.zeros(matcher.token_flags.shape[0], np.int64)
    return matcher.token_flags, zeros, zeros


def make_added_rules(matcher) -> AddedRules:
    """The ADDED_RULES of an :class:`~tokjit.pipeline.added_tokens.AddedTokenMatcher`: none (plain
    leftmost-longest), HF's lstrip / rstrip / single_word, or llama.cpp's longest-first partition."""
    m = matcher
    mode = RULES_LLAMACPP if m.longest_first else RULES_HF if m.has_flags else RULES_NONE
    flags, token_len, priority = _rule_arrays(m) if mode != RULES_NONE else \
        (np.zeros(1, np.uint8), np.zeros(1, np.int64), np.zeros(1, np.int64))
    return _new_added_rules((np.int64(mode), _arr(flags, np.uint8), _arr(token_len, np.int64),
                             _arr(priority, np.int64)))


# -------------------------------------------------------------------------------------------------
# compiled split regex (tokjit.regex.compiler.Program) and the split behaviour

# columns of a REGEX's ``steps`` row (make_regex; tokjit.kernels.regex_vm.split_in_steps reads them):
# [start, end) of the split's program in prog, rep_info, the class arrays (cls_ascii, cls_mask, cls_neg),
# cls_ranges and cls_roff; then its VM word (Program.vm_word), behaviour and invert; then how its matches
# are found without the VM: a pattern that is a run of one class (STEP_RUN..., the form
# tokjit.regex.class_runs gives; regex_vm.class_run_matches), or a recognized pattern's scanner
# (STEP_SHAPE, its flags and digits; the structure's roles)
STEP_PROG, STEP_REP, STEP_CLASSES, STEP_RANGES, STEP_ROFF = 0, 2, 4, 6, 8
STEP_VM_WORD, STEP_BEHAVIOR, STEP_INVERT = 10, 11, 12
# STEP_RUN .. STEP_RUN + 7: min (0 = no run), max, class, prefix class, to the end, ASCII ranges, and where
# the class's and the prefix class's BMP bitmaps start in run_bits (-1: none)
STEP_RUN = 13
STEP_SHAPE, STEP_SHAPE_FLAGS, STEP_MAX_DIGITS = 21, 22, 23
# a class run that takes later splits into its own pass (tokjit.regex.class_runs.stream_plan): the split
# whose class it finds too (-1: none), the split that runs on the gaps between its runs and on runs
# not kept whole (-1: none), 1 on a split an earlier one runs this way, the ASCII ranges of the
# classes together, and per class (its own, the joined one's) which characters the inline split
# keeps whole: KEPT_ALL, KEPT_NONE or where their BMP bitmap starts in run_bits
STEP_JOINED, STEP_INLINE, STEP_SKIP, STEP_STREAM_RANGES, STEP_KEPT = 24, 25, 26, 27, 28
STEP_FIELDS = 30
BMP_WORDS = 1024  # a class's flags for U+0000..U+FFFF, 64 to a word
KEPT_ALL, KEPT_NONE = -1, -2  # a class's kept characters (STEP_KEPT): every one, none

RegexType, Regex, REGEX = _declare("Regex", [
    ("prog", types.int32[:, ::1]), ("rep_info", types.int32[:, ::1]), ("cls_ascii", types.uint8[:, ::1]),
    ("cls_mask", types.uint64[::1]), ("cls_neg", _U8), ("cls_roff", _I32), ("cls_ranges", _I32),
    ("gc", _U8), ("vm_word", types.int64), ("behavior", types.int64), ("invert", types.boolean),
    # a recognized pattern's scanner (tokjit.kernels.split_known): shape (0 = the VM), flags, digits, roles
    ("shape", types.int64), ("shape_flags", types.int64), ("max_digits", types.int64), ("roles", _U8),
    # one row per split of a sequence (tokjit.kernels.regex_vm.split_in_steps), STEP_* columns; the BMP
    # bitmaps of the class runs' classes
    ("steps", types.int64[:, ::1]), ("run_bits", _U64),
])


@njit(cache=True)
def _new_regex(fields):
    """A REGEX from the tuple of its fields in declaration order (one parameter: a constructor
    with one per field would pass numba's 16-parameter budget)."""
    s = structref.new(REGEX)
    s.prog = fields[0]
    s.rep_info = fields[1]
    s.cls_ascii = fields[2]
    s.cls_mask = fields[3]
    s.cls_neg = fields[4]
    s.cls_roff = fields[5]
    s.cls_ranges = fields[6]
    s.gc = fields[7]
    s.vm_word = fields[8]
    s.behavior = fields[9]
    s.invert = fields[10]
    s.shape = fields[11]
    s.shape_flags = fields[12]
    s.max_digits = fields[13]
    s.roles = fields[14]
    s.steps = fields[15]
    s.run_bits = fields[16]
    return s


def make_regex(program, behavior: int, invert: bool, known=None, more=(), known_steps=None, runs=None,
               streams=None) -> Regex:
    """``known``: ``(shape, flags, max_digits, roles)`` of the pattern's scanner (``tokjit.regex.known``),
    or ``None`` for the VM. ``more``: ``(program, behavior, invert)`` of the splits that follow, in
    order (a sequence of splits): each program's arrays follow the one before it, and ``steps`` says
    where each starts and ends. ``known_steps``: each split's ``known`` (or ``None``) in a sequence;
    their roles tables must be one (they depend on the syntax and Unicode table only). ``runs``: each
    split's ``(form, bitmaps)`` from ``tokjit.regex.class_runs.class_run`` (or ``None``: the VM).
    ``streams``: each split's ``(joined, inline, skipped, ranges, kept, joined_kept)`` from
    ``tokjit.regex.class_runs.stream_plan``, a kept bitmap appended to ``run_bits`` (``None``: each
    split on its own)."""
    splits = [(program, behavior, invert)] + list(more)
    if any(q.gc is not program.gc and not np.array_equal(q.gc, program.gc) for q, _, _ in splits):
        raise ValueError("the split patterns were compiled against different Unicode tables")
    steps = np.zeros((len(splits), STEP_FIELDS), np.int64)
    bitmaps = []
    at = np.zeros(5, np.int64)  # prog rows, rep rows, classes, range ints, range offsets so far
    for k, (q, beh, inv) in enumerate(splits):
        sizes = (q.prog.shape[0], q.rep_info.shape[0], q.cls_mask.shape[0], q.cls_ranges.shape[0],
                 q.cls_roff.shape[0])
        for j, n in enumerate(sizes):
            steps[k, 2 * j], steps[k, 2 * j + 1] = at[j], at[j] + n
            at[j] += n
        steps[k, STEP_VM_WORD], steps[k, STEP_BEHAVIOR], steps[k, STEP_INVERT] = q.vm_word, beh, bool(inv)
        steps[k, STEP_RUN + 3] = steps[k, STEP_RUN + 6] = steps[k, STEP_RUN + 7] = -1
        steps[k, STEP_JOINED:STEP_KEPT + 2] = (-1, -1, 0, -1, KEPT_NONE, KEPT_NONE)
        if streams is not None:
            steps[k, STEP_JOINED:STEP_KEPT] = streams[k][:4]
            for j, kept in enumerate(streams[k][4:]):
                if isinstance(kept, np.ndarray):
                    steps[k, STEP_KEPT + j] = len(bitmaps) * BMP_WORDS
                    bitmaps.append(kept)
                else:
                    steps[k, STEP_KEPT + j] = kept
        run = runs[k] if runs is not None else None
        if run is not None and run[0][0] > 0:
            form, class_bitmaps = run
            steps[k, STEP_RUN:STEP_RUN + 6] = form
            for j, bits in enumerate(class_bitmaps):  # the run's class, then its prefix class
                steps[k, STEP_RUN + 6 + j] = len(bitmaps) * BMP_WORDS
                bitmaps.append(bits)
    shape, flags, max_digits, roles = known if known is not None else (0, 0, 0, np.zeros(1, np.uint8))
    for k, step_known in enumerate(known_steps or ()):
        if step_known is not None and steps[k, STEP_RUN] == 0:
            steps[k, STEP_SHAPE], steps[k, STEP_SHAPE_FLAGS], steps[k, STEP_MAX_DIGITS] = step_known[:3]
            if known is None and roles.shape[0] == 1:
                roles = step_known[3]
            elif roles is not step_known[3] and not np.array_equal(roles, step_known[3]):
                raise ValueError("the split patterns' scanners read different roles tables")

    def joined(name, dtype):
        return _arr(np.concatenate([getattr(q, name) for q, _, _ in splits]), dtype)

    regex = _new_regex((joined("prog", np.int32), joined("rep_info", np.int32), joined("cls_ascii", np.uint8),
                        joined("cls_mask", np.uint64), joined("cls_neg", np.uint8), joined("cls_roff", np.int32),
                        joined("cls_ranges", np.int32), _arr(program.gc, np.uint8), np.int64(program.vm_word),
                        np.int64(behavior), bool(invert), np.int64(shape), np.int64(flags), np.int64(max_digits),
                        _arr(roles, np.uint8), steps,
                        _arr(np.concatenate(bitmaps) if bitmaps else np.zeros(1, np.uint64), np.uint64)))
    regex.step_table = steps  # how each split runs, for Python readers (the structure is opaque there)
    return regex


# -------------------------------------------------------------------------------------------------
# BPE vocabulary (tokjit.models.bpe.BPEModel)

BPEVocabType, BPEVocab, BPE_VOCAB = _declare("BPEVocab", [
    ("blob", _U8), ("offsets", _I64), ("table", _I32), ("byte_ids", _I32), ("merge_rank", _I64),
    ("pair_slots", _I64), ("flags", types.int64), ("unk_id", types.int64), ("max_len", types.int64),
    ("token_flags", _U8), ("unsafe_prev", _I64), ("atom_ids", _I32), ("edge_bits", _U64), ("pair_bits", _U64),
    ("unreachable_bits", _U64), ("pair_rows", _I64), ("char_ids", _I32), ("merge_long_fn", types.int64),
    ("cut_bits", _U64), ("merge_bits", _U64), ("affix_keys", _I64), ("affix_ids", _I32),
])


@njit(cache=True)
def _new_bpe_vocab(fields):
    """A BPE_VOCAB from the tuple of its fields in declaration order (one parameter: a constructor
    with one per field would pass numba's 16-parameter budget)."""
    s = structref.new(BPE_VOCAB)
    s.blob = fields[0]
    s.offsets = fields[1]
    s.table = fields[2]
    s.byte_ids = fields[3]
    s.merge_rank = fields[4]
    s.pair_slots = fields[5]
    s.flags = fields[6]
    s.unk_id = fields[7]
    s.max_len = fields[8]
    s.token_flags = fields[9]
    s.unsafe_prev = fields[10]
    s.atom_ids = fields[11]
    s.edge_bits = fields[12]
    s.pair_bits = fields[13]
    s.unreachable_bits = fields[14]
    s.pair_rows = fields[15]
    s.char_ids = fields[16]
    s.merge_long_fn = fields[17]
    s.cut_bits = fields[18]
    s.merge_bits = fields[19]
    s.affix_keys = fields[20]
    s.affix_ids = fields[21]
    return s


def make_bpe_vocab(model, merge_long_fn: int) -> BPEVocab:
    """A BPE_VOCAB of a :class:`tokjit.models.bpe.BPEModel`, with the address of the long-piece merge
    (:func:`tokjit.kernels.bpe.merge_long_address`)."""
    m, v = model, model.vocab
    return _new_bpe_vocab((_arr(v.blob, np.uint8), _arr(v.offsets, np.int64), _arr(v.table, np.int32),
                           _arr(m.byte_ids, np.int32), _arr(m.merge_rank, np.int64), _arr(m.pairs.slots, np.int64),
                           np.int64(m.flags), np.int64(m.unk_id), np.int64(m.max_len),
                           _arr(m.token_flags, np.uint8), _arr(m.unsafe_prev, np.int64),
                           _arr(m.atom_ids, np.int32), _arr(m.edge_bits, np.uint64), _arr(m.pair_bits, np.uint64),
                           _arr(m.unreachable_bits, np.uint64), _arr(m.pairs.rows, np.int64),
                           _arr(m.char_ids, np.int32), np.int64(merge_long_fn), _arr(m.cut_bits, np.uint64),
                           _arr(m.pairs.merge_bits, np.uint64), _arr(m.affix_keys, np.int64),
                           _arr(m.affix_ids, np.int32)))


# -------------------------------------------------------------------------------------------------
# per-thread piece -> ids cache (tokjit.kernels.piece_cache)

PieceCacheType, PieceCache, PIECE_CACHE = _declare("PieceCache", [
    ("rows", types.int64[:, ::1]), ("byte_pool", _U8), ("id_pool", _I32), ("fill", _I64), ("pairs", _I64),
    ("admit", _U64),
])


@njit(cache=True)
def _new_piece_cache(fields):
    s = structref.new(PIECE_CACHE)
    s.rows = fields[0]
    s.byte_pool = fields[1]
    s.id_pool = fields[2]
    s.fill = fields[3]
    s.pairs = fields[4]
    s.admit = fields[5]
    return s


def make_piece_cache(slots: int | None = None, seed: tuple[np.ndarray, np.ndarray] | None = None) -> PieceCache:
    """An empty cache sized by :mod:`tokjit.kernels.piece_cache` (``slots`` rows, a power of two; a tiny one
    for scratch that never caches pieces), or a copy of ``seed`` (rows and fill of a cache holding only
    inline entries, :func:`~tokjit.kernels.piece_cache.seed_cache`), with an empty pair cache
    (``tokjit.kernels.bpe``); a thread keeps it when its buffers grow. One cache serves one vocabulary:
    both remember that vocabulary's answers."""
    return piece_cache_arrays(slots, seed)[0]


def piece_cache_arrays(slots: int | None = None, seed: tuple[np.ndarray, np.ndarray] | None = None,
                       arrays: tuple | None = None) -> tuple[PieceCache, tuple]:
    """:func:`make_piece_cache` and its arrays (rows, byte pool, id pool, fill, pair cache, admission
    bits: :func:`~tokjit.kernels.piece_cache.met_before`), from which
    :func:`copy_piece_cache` copies it; with ``arrays``, a cache over those arrays (the caller's own)."""
    from tokjit.kernels import piece_cache as pc
    if arrays is None:
        rows = pc.SLOTS if slots is None else slots
        small = slots is not None
        table, fill = (pc.line_aligned_rows(seed[0].shape[0], seed[0]), seed[1].copy()) if seed is not None else \
            (pc.line_aligned_rows(rows), np.zeros(3, np.int64))
        arrays = (table, np.zeros(1 if small else pc.POOL_BYTES, np.uint8),
                  np.zeros(1 if small else pc.POOL_IDS, np.int32), fill,
                  np.full(2 * pc.PAIR_CACHE_SLOTS, -1, np.int64),
                  np.zeros(1 if small else 2 * pc.ADMIT_WORDS + 1, np.uint64))
    return _new_piece_cache(arrays), arrays


def copy_piece_cache(arrays: tuple) -> tuple:
    """A copy of a cache's arrays (:func:`piece_cache_arrays`), taken while no kernel writes them:
    a thread that starts from it knows the pieces its source has met."""
    from tokjit.kernels import piece_cache as pc
    return (pc.line_aligned_rows(arrays[0].shape[0], arrays[0]),) + tuple(a.copy() for a in arrays[1:])


# -------------------------------------------------------------------------------------------------
# per-thread BPE scratch: merge workspace + piece and pair caches

BPEScratchType, BPEScratch, BPE_SCRATCH = _declare("BPEScratch", [
    ("start", _I64), ("end", _I64), ("id", _I32), ("rank", _I64), ("links", _I32),
    ("heap", _I64), ("stack", _I64), ("rev_left", _I32), ("touched", _I64), ("rank_heads", _I32),
    ("rank_bits", _U64), ("cache", PIECE_CACHE),
])


@njit(cache=True)
def _new_bpe_scratch(arrays, cache):
    """A BPE_SCRATCH from the tuple of its array fields in declaration order and its piece cache (a
    tuple of arrays alone is typed by numba's dispatcher in C; with a structure in it, the whole
    tuple went through Python's typeof, ~120 us, paid each time a thread's buffers grow)."""
    s = structref.new(BPE_SCRATCH)
    s.start = arrays[0]
    s.end = arrays[1]
    s.id = arrays[2]
    s.rank = arrays[3]
    s.links = arrays[4]
    s.heap = arrays[5]
    s.stack = arrays[6]
    s.rev_left = arrays[7]
    s.touched = arrays[8]
    s.rank_heads = arrays[9]
    s.rank_bits = arrays[10]
    s.cache = cache
    return s


def make_bpe_scratch(workspace, model, touched, cache: PieceCache) -> BPEScratch:
    """From a :class:`tokjit.models.bpe.Workspace` (its per-id ``rev_left`` and per-rank buckets sized
    for the :class:`tokjit.models.bpe.BPEModel` ``model``), ``touched`` and a piece cache."""
    w = workspace
    heads, bits = w.rank_buckets(model.n_ranks)
    return _new_bpe_scratch((w.start, w.end, w.id, w.rank, w.links, w.heap, w.stack,
                             w.rev_left(model.token_flags.shape[0]), touched, heads, bits), cache)


# -------------------------------------------------------------------------------------------------
# per-thread buffers every fused driver shares: the text, spans of added tokens and pieces, the ids

SpansType, Spans, SPANS = _declare("Spans", [
    ("text", _U8), ("doc_starts", _I64), ("doc_ends", _I64), ("out", _I32), ("doc_out_end", _I64),
    ("io", _I64),
    ("at_starts", _I64), ("at_ends", _I64), ("at_ids", _I64),
    ("match_starts", _I64), ("match_ends", _I64), ("piece_starts", _I64), ("piece_ends", _I64),
    ("rx_stack", _I64), ("rx_params", _I64), ("tok_starts", _I64), ("tok_ends", _I64),
])


@njit(cache=True)
def _new_spans(fields):
    """A SPANS from the tuple of its fields in declaration order (one parameter: a constructor
    with one per field would pass numba's 16-parameter budget)."""
    s = structref.new(SPANS)
    s.text = fields[0]
    s.doc_starts = fields[1]
    s.doc_ends = fields[2]
    s.out = fields[3]
    s.doc_out_end = fields[4]
    s.io = fields[5]
    s.at_starts = fields[6]
    s.at_ends = fields[7]
    s.at_ids = fields[8]
    s.match_starts = fields[9]
    s.match_ends = fields[10]
    s.piece_starts = fields[11]
    s.piece_ends = fields[12]
    s.rx_stack = fields[13]
    s.rx_params = fields[14]
    s.tok_starts = fields[15]
    s.tok_ends = fields[16]
    return s


def make_spans(b) -> Spans:
    """From an object holding the arrays under the field names (see ``tokjit.fused.bpe._BPEThread``)."""
    return _new_spans((b.text, b.doc_starts, b.doc_ends, b.out, b.doc_out_end, b.io, b.at_starts, b.at_ends,
                       b.at_ids, b.match_starts, b.match_ends, b.piece_starts, b.piece_ends, b.rx_stack,
                       b.rx_params, b.tok_starts, b.tok_ends))


def _arr(a, dtype) -> np.ndarray:
    return np.ascontiguousarray(a, dtype=dtype)


# -------------------------------------------------------------------------------------------------
# byte-level BPE pipeline: added tokens -> split regex -> BPE (one per tokenizer and parse_special)

BPEPipeType, BPEPipe, BPE_PIPE = _declare("BPEPipe", [
    ("trie", TRIE), ("rules", ADDED_RULES), ("regex", REGEX), ("vocab", BPE_VOCAB),
])


@njit(cache=True)
def _new_bpe_pipe(fields):
    """A BPE_PIPE from the tuple of its fields in declaration order (one parameter: a constructor
    with one per field would pass numba's 16-parameter budget)."""
    s = structref.new(BPE_PIPE)
    s.trie = fields[0]
    s.rules = fields[1]
    s.regex = fields[2]
    s.vocab = fields[3]
    return s


# one thread's view of one pipeline: what a single-text call unboxes (one structure, ~0.1 us)
BPESessionType, BPESession, BPE_SESSION = _declare("BPESession", [
    ("pipe", BPE_PIPE), ("spans", SPANS), ("bpe", BPE_SCRATCH),
])


@njit(cache=True)
def _new_bpe_session(pipe, spans, bpe):
    """A BPE_SESSION from its fields (each structure its own argument: numba types a tuple holding
    structures in Python, twice as slow)."""
    s = structref.new(BPE_SESSION)
    s.pipe = pipe
    s.spans = spans
    s.bpe = bpe
    return s


def make_bpe_pipe(matcher, regex, vocab) -> BPEPipe:
    """The pipeline of one added-token set (trie and rules), split regex and vocabulary."""
    return _new_bpe_pipe((make_trie(matcher), make_added_rules(matcher), regex, vocab))


def make_bpe_session(pipe, spans, bpe) -> BPESession:
    return _new_bpe_session(pipe, spans, bpe)
