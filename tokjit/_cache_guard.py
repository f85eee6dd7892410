"""Drop numba's cached kernels when any source file of the package changed since they were compiled.

numba keys a cached function by its own source file only: a kernel whose file did not change keeps
the machine code it linked of the kernels it calls, even after their files changed. A developer who
edits a callee, or pulls a commit that does, then runs stale code, which may read a structure whose
fields moved and give wrong ids without an error (seen twice on 2026-11-29: a structure gained a field,
the single-text entry point, whose signature takes addresses, kept the old layout). An installed
package never meets this (an upgrade rewrites every file and the stamps all change), so the check is
cheap: one ``stat`` per source file at import (~100 files, well under a millisecond), compared with a
stamp kept beside the cache; on a mismatch every cached kernel of the package is deleted and numba
compiles again (``tokjit precompile`` does it ahead, with the usual notice otherwise).
"""

from __future__ import annotations

import glob
import hashlib
import os

STAMP_NAME = "tokjit-sources.stamp"


def _sources(root: str) -> list[str]:
    found = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        found.extend(os.path.join(dirpath, f) for f in sorted(filenames) if f.endswith(".py"))
    return found


def _stamp(root: str, files: list[str]) -> str:
    h = hashlib.sha1()
    for path in files:
        st = os.stat(path)
        h.update(f"{os.path.relpath(path, root)}:{st.st_size}:{st.st_mtime_ns}\n".encode())
    return h.hexdigest()


def _cache_dir(source_dir: str) -> str:
    """Where numba keeps the cache of the functions defined in ``source_dir`` (its locators' rule:
    NUMBA_CACHE_DIR, a subdirectory per source directory, else ``__pycache__`` beside the source)."""
    user_dir = os.environ.get("NUMBA_CACHE_DIR")
    if not user_dir:
        return os.path.join(source_dir, "__pycache__")
    from numba.core.caching import _CacheLocator
    return os.path.join(user_dir, _CacheLocator.get_suitable_cache_subpath(os.path.join(source_dir, "x.py")))


def drop_stale_kernels(root: str | None = None) -> bool:
    """Delete the cached kernels under package ``root`` (default: tokjit) when its sources' stamp
    changed; returns whether it did. Any OSError (a read-only install) leaves the cache alone."""
    root = os.path.dirname(os.path.abspath(__file__)) if root is None else os.path.abspath(root)
    try:
        files = _sources(root)
        stamp = _stamp(root, files)
        stamp_path = os.path.join(_cache_dir(root), STAMP_NAME)
        try:
            with open(stamp_path, encoding="ascii") as f:
                if f.read() == stamp:
                    return False
        except FileNotFoundError:
            pass
        for source_dir in sorted({os.path.dirname(p) for p in files}):
            cache = _cache_dir(source_dir)
            for path in glob.glob(os.path.join(cache, "*.nbi")) + glob.glob(os.path.join(cache, "*.nbc")):
                os.remove(path)
        os.makedirs(os.path.dirname(stamp_path), exist_ok=True)
        tmp = f"{stamp_path}.{os.getpid()}"
        with open(tmp, "w", encoding="ascii") as f:
            f.write(stamp)
        os.replace(tmp, stamp_path)
        return True
    except OSError:
        return False
