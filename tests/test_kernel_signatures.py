"""Every numba kernel in tokjit takes at most 16 parameters.

A numba call types and unboxes each argument, and a kernel that needs more is reading state that
belongs in a structure built once at load (see tokjit.kernels.structs)."""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
import textwrap

from numba.core.registry import CPUDispatcher

import tokjit

LIMIT = 16


def _dispatchers():
    found = {}
    for info in pkgutil.walk_packages(tokjit.__path__, "tokjit."):
        if info.name.endswith("__main__"):
            continue
        module = importlib.import_module(info.name)
        for name, value in vars(module).items():
            if isinstance(value, CPUDispatcher) and value.py_func.__module__ == info.name:
                found[f"{info.name}.{name}"] = value
    return found


def test_found_the_kernels():
    kernels = _dispatchers()
    assert len(kernels) > 100
    assert "tokjit.kernels.bpe.bpe_encode" in kernels


def test_no_kernel_takes_more_than_16_parameters():
    wide = {name: len(inspect.signature(d.py_func).parameters) for name, d in _dispatchers().items()}
    assert {name: n for name, n in wide.items() if n > LIMIT} == {}


def test_no_kernel_inlines_at_numba_ir_level():
    """Helpers are inlined by LLVM (``forceinline=True``), never by numba's IR pass
    (``inline="always"``): the IR pass re-types a callee at each call site, recursively, so nested
    helpers multiply. The o200k split scanner took 99 s to compile that way and 8 s with LLVM
    inlining, at the same speed; a cold first encode of o200k went from ~6 min to ~1 min."""
    ir_inlined = [name for name, d in _dispatchers().items() if d.targetoptions.get("inline", "never") != "never"]
    assert ir_inlined == []


def _calls():
    """(caller name, caller dispatcher, callee dispatcher) for every njit function called by name from
    another njit function in tokjit."""
    found = []
    for name, d in _dispatchers().items():
        tree = ast.parse(textwrap.dedent(inspect.getsource(d.py_func)))
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                callee = d.py_func.__globals__.get(node.func.id)
                if isinstance(callee, CPUDispatcher):
                    found.append((name, d, callee))
    return found


def _uses_borrow(d) -> bool:
    return "borrow(" in inspect.getsource(d.py_func)


def test_every_called_kernel_states_its_reference_counting():
    """A numba function that does not set ``_nrt`` inherits it from whichever caller compiles it
    first, and that one compiled version then serves every caller (and the on-disk cache). A helper
    returning arrays it borrowed from a structure, compiled without counting, handed to a counting
    caller that released them, freed live vocabulary arrays (heap corruption, depending on which
    family a process encoded first). Every function called from another states ``_nrt``."""
    unstated = sorted({f"{c.py_func.__module__}.{c.py_func.__name__}" for _, _, c in _calls()
                       if "_nrt" not in c.targetoptions})
    assert len(_calls()) > 100
    assert unstated == []


def test_borrowed_fields_reach_only_uncounted_kernels():
    """A ``_nrt=False`` helper that reads structure fields with ``borrow`` returns borrowed
    references: a caller with reference counting would release them. Only uncounted kernels call it."""
    views = {c for _, _, c in _calls() if c.targetoptions.get("_nrt") is False and _uses_borrow(c)}
    assert {c.py_func.__name__ for c in views} >= {"trie_arrays", "vocab_tables", "scratch_tables"}
    counting = sorted({f"{name} -> {c.py_func.__name__}" for name, d, c in _calls()
                       if c in views and d.targetoptions.get("_nrt", True) is not False})
    assert counting == []
