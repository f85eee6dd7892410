"""asv: loading, start-up in a fresh process (numba cache warm and cold) and compiled-vocab memory."""

from __future__ import annotations

import os

from ._common import FAMILIES, FAMILY_NAMES, load, source_path, warm

_STARTUP = """
import tokjit
tok = {loader}
tok.encode("Hello world, a first sentence.")
"""


def _loader_expr(family: str) -> str:
    where = FAMILIES[family]
    if where.startswith("bundled:"):
        return f"tokjit.get_encoding({where.split(':', 1)[1]!r})"
    return f"tokjit.load({source_path(family)!r})"


class Load:
    """``tokjit.load`` in a warm process: from the spec cache, and parsing the file (cache off)."""

    params = [FAMILY_NAMES]
    param_names = ["family"]
    timeout = 300

    def setup(self, family):
        warm(load(family, fresh=True))  # fills the spec cache and the numba cache

    def time_load_cached(self, family):
        load(family, fresh=True)

    def time_load_uncached(self, family):
        old = os.environ.get("TOKJIT_CACHE_DIR")
        os.environ["TOKJIT_CACHE_DIR"] = "off"
        try:
            load(family, fresh=True)
        finally:
            if old is None:
                del os.environ["TOKJIT_CACHE_DIR"]
            else:
                os.environ["TOKJIT_CACHE_DIR"] = old

    def track_compiled_vocab_bytes(self, family):
        """Bytes of the numpy arrays a loaded tokenizer holds (its compiled form)."""
        return compiled_nbytes(load(family, fresh=True))

    track_compiled_vocab_bytes.unit = "bytes"


def compiled_nbytes(tok) -> int:
    import numpy as np

    seen: set[int] = set()
    total = 0

    def walk(obj, depth):
        nonlocal total
        if depth > 6 or id(obj) in seen:
            return
        seen.add(id(obj))
        if isinstance(obj, np.ndarray):
            base = obj if obj.base is None else obj.base
            if isinstance(base, np.ndarray) and id(base) not in seen:
                seen.add(id(base))
                total += base.nbytes
            elif base is obj:
                total += obj.nbytes
            return
        if isinstance(obj, (list, tuple)):
            if obj and isinstance(obj[0], (int, float, str, bytes)):
                return
            for x in obj:
                walk(x, depth + 1)
            return
        if isinstance(obj, dict):
            for x in obj.values():
                walk(x, depth + 1)
            return
        attrs = getattr(obj, "__dict__", None)
        if attrs is None and hasattr(obj, "__slots__"):
            attrs = {k: getattr(obj, k, None) for k in obj.__slots__}
        if attrs:
            for name, x in attrs.items():
                if name not in ("spec", "tok", "_local"):
                    walk(x, depth + 1)

    walk(tok, 0)
    return total


class StartUp:
    """Fresh interpreter: import tokjit + load + first encode. ``warm``: numba's on-disk cache and
    the spec cache already filled (by ``setup``); ``cold``: both pointed at empty directories, so
    every kernel the first encode needs is compiled."""

    params = (FAMILY_NAMES, ["warm", "cold"])
    param_names = ["family", "cache"]
    timeout = 600
    number = 1
    repeat = 1

    def setup(self, family, cache):
        warm(load(family))
        if cache == "cold" and family not in ("o200k", "t5") and os.environ.get("TOKJIT_BENCH_COLD_ALL") != "1":
            # a cold start compiles for tens of seconds; one byte-level BPE and one Unigram tokenizer
            # represent the families in quick CI runs (TOKJIT_BENCH_COLD_ALL=1 runs all)
            raise NotImplementedError("cold start measured for o200k and t5 only")

    def timeraw_import_load_encode(self, family, cache):
        stmt = _STARTUP.format(loader=_loader_expr(family))
        if cache == "warm":
            return stmt
        setup = ("import atexit, os, shutil, tempfile\n"
                 "for var in ('NUMBA_CACHE_DIR', 'TOKJIT_CACHE_DIR'):\n"
                 "    os.environ[var] = tempfile.mkdtemp(prefix='tokjit-asv-cold-')\n"
                 "    atexit.register(shutil.rmtree, os.environ[var], True)\n")
        return stmt, setup
