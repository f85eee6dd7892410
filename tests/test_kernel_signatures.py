"""Every numba kernel in tokjit takes at most 16 parameters.

A numba call types and unboxes each argument, and a kernel that needs more is reading state that
belongs in a structure built once at load (see tokjit.kernels.structs)."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

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
