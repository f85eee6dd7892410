"""A one-line notice on stderr when numba starts compiling a tokjit kernel.

numba compiles a kernel the first time it is called with new types and caches the machine code
beside the sources; without a word, that first call looks like a hang (9-17 s per family). The
notice fires on numba's own "numba:compile" event, so a kernel loaded from the cache says nothing.
``TOKJIT_QUIET_COMPILE=1`` silences it.
"""

from __future__ import annotations

import os
import sys
import threading

from numba.core import event

_lock = threading.Lock()
_said = False
_installed = False


class _Notice(event.Listener):
    def on_start(self, ev):
        global _said
        if _said:
            return
        dispatcher = (ev.data or {}).get("dispatcher")
        module = getattr(getattr(dispatcher, "py_func", None), "__module__", "") or ""
        if not module.startswith("tokjit"):
            return
        with _lock:
            if _said:
                return
            _said = True
        if os.environ.get("TOKJIT_QUIET_COMPILE") != "1":
            name = dispatcher.py_func.__qualname__
            print(f"tokjit: compiling numba kernels ({module}.{name}); once per install, cached afterwards "
                  f"(`tokjit precompile` compiles every family ahead)", file=sys.stderr, flush=True)

    def on_end(self, ev):
        pass


def install() -> None:
    """Listen for numba compilations (idempotent)."""
    global _installed
    with _lock:
        if not _installed:
            event.register("numba:compile", _Notice())
            _installed = True

