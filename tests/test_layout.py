"""The package's layering: no import cycles (imports inside functions count), and kernels/ at the bottom.

A cycle hides which module a behaviour belongs to and made registration order matter (a component
registered as a side effect of some other import); kernels/ importing upward would put Python-level
pipeline code under the numba layer.
"""

from __future__ import annotations

import ast
import pathlib

import tokjit

PACKAGE = pathlib.Path(tokjit.__file__).parent


def _modules() -> dict[str, pathlib.Path]:
    mods = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        mods[name] = path
    return mods


def _import_graph() -> dict[str, set[str]]:
    """module -> the tokjit modules it imports anywhere in its source (``from pkg import sub`` counts as
    importing ``pkg.sub``, not ``pkg``)."""
    mods = _modules()
    graph: dict[str, set[str]] = {name: set() for name in mods}
    for name, path in mods.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text())):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")
                    parts = parts[:len(parts) - node.level + 1]
                    base = ".".join(parts + ([node.module] if node.module else []))
                subs = [f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in mods]
                targets = subs if len(subs) == len(node.names) else subs + [base]
            graph[name].update(t for t in targets if t in mods and t != name)
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_graph_sees_the_package():
    graph = _import_graph()
    assert len(graph) > 50
    assert "tokjit.kernels.bpe" in graph["tokjit.kernels.fused"]


def test_no_import_cycles():
    assert _cycles(_import_graph()) == []


def test_cycle_finder_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_kernels_import_only_kernels():
    graph = _import_graph()
    upward = {name: sorted(t for t in targets if not t.startswith("tokjit.kernels"))
              for name, targets in graph.items() if name.startswith("tokjit.kernels")}
    assert {name: t for name, t in upward.items() if t} == {}
