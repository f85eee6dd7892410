"""The dependency list says what tokjit really imports: every third-party module imported at the top
of a core module is a declared dependency, and every declared dependency is imported by tokjit."""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

import pytest

tomllib = pytest.importorskip("tomllib")

ROOT = Path(__file__).resolve().parent.parent
# modules whose third-party imports belong to an extra (named in pyproject's optional-dependencies)
OPTIONAL_MODULES = {"arrow.py": "arrow", "dask.py": "dask", "serving/chat.py": "chat",
                    "serving/metrics.py": "metrics"}
IMPORT_NAME = {"prometheus-client": "prometheus_client"}


def _project():
    with open(ROOT / "pyproject.toml", "rb") as fh:
        return tomllib.load(fh)["project"]


def _names(requirements) -> set[str]:
    return {re.split(r"[<>=\[ ;]", r, maxsplit=1)[0] for r in requirements}


def _third_party_imports(path: Path, top_level_only: bool) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    nodes = tree.body if top_level_only else ast.walk(tree)
    found = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            found |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
    return {m for m in found if m not in sys.stdlib_module_names and m != "tokjit" and m != "__future__"}


def test_runtime_dependencies_are_what_tokjit_imports():
    project = _project()
    declared = {IMPORT_NAME.get(n, n) for n in _names(project["dependencies"])}
    extras = {k: {IMPORT_NAME.get(n, n) for n in _names(v)} for k, v in project["optional-dependencies"].items()}
    anywhere = set()
    for path in sorted((ROOT / "tokjit").rglob("*.py")):
        rel = path.relative_to(ROOT / "tokjit").as_posix()
        anywhere |= _third_party_imports(path, top_level_only=False)
        top = _third_party_imports(path, top_level_only=True)
        allowed = declared | extras.get(OPTIONAL_MODULES.get(rel, ""), set())
        assert top <= allowed, f"tokjit/{rel} imports {sorted(top - allowed)} at load time but they are not declared"
    assert declared <= anywhere, f"declared but never imported by tokjit: {sorted(declared - anywhere)}"
    assert "gguf" in extras["test"]  # the tests write GGUF files with it


def test_notebooks_extra_can_open_the_notebooks():
    extras = _project()["optional-dependencies"]
    assert {"notebook", "ipykernel", "matplotlib"} <= _names(extras["notebooks"])
