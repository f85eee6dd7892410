"""numba keys a cached kernel by its own file only, so a kernel whose callee's file changed would keep
stale machine code: ``tokjit._cache_guard`` drops the package's cached kernels when any of its source
files changed. Checked on a package made here, with a real numba cache: a function compiled with
``cache=True`` writes its index, an unchanged tree keeps it, a touched callee file drops it."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

from tokjit._cache_guard import STAMP_NAME, drop_stale_kernels


def _package(tmp_path):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "callee.py").write_text(textwrap.dedent("""
        from numba import njit
        @njit(cache=True)
        def f(x):
            return x + 1
    """))
    (pkg / "caller.py").write_text(textwrap.dedent("""
        from numba import njit
        from pkg.callee import f
        @njit(cache=True)
        def g(x):
            return f(x) * 2
    """))
    return pkg


def _compile(tmp_path, env):
    code = "from pkg.caller import g; assert g(1) == 4"
    subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, check=True)


def _cached(pkg):
    return sorted(p for p in os.listdir(pkg / "__pycache__") if p.endswith((".nbi", ".nbc")))


def test_stale_kernels_are_dropped(tmp_path, monkeypatch):
    monkeypatch.delenv("NUMBA_CACHE_DIR", raising=False)
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    pkg = _package(tmp_path)
    assert drop_stale_kernels(pkg)  # no stamp yet
    _compile(tmp_path, env)
    before = _cached(pkg)
    assert any(p.startswith("caller.g") for p in before) and (pkg / "__pycache__" / STAMP_NAME).exists()
    assert not drop_stale_kernels(pkg) and _cached(pkg) == before  # nothing changed: the cache stays
    st = os.stat(pkg / "callee.py")
    os.utime(pkg / "callee.py", ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    assert drop_stale_kernels(pkg) and _cached(pkg) == []  # the caller's cache went with the callee's


def test_user_cache_dir(tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(cache))
    env = dict(os.environ, NUMBA_CACHE_DIR=str(cache))
    pkg = _package(tmp_path)
    drop_stale_kernels(pkg)
    _compile(tmp_path, env)
    files = lambda: sorted(p.name for p in cache.rglob("*.nb[ic]"))  # noqa: E731
    assert files()
    assert not drop_stale_kernels(pkg) and files()
    (pkg / "callee.py").write_text((pkg / "callee.py").read_text() + "\n# changed\n")
    assert drop_stale_kernels(pkg) and not files()
