"""The notebooks in ``notebooks/`` run clean, top to bottom, in a fresh ``python3`` kernel (nbclient),
and the viewer they use (``Tokenizer.explain`` / ``tokjit.viz``) marks and escapes tokens correctly."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

import tokjit

NOTEBOOKS = sorted((Path(__file__).resolve().parent.parent / "notebooks").glob("[0-9][0-9]_*.ipynb"))
CELL_TIMEOUT = 180  # seconds per cell; each notebook takes well under a minute on a warm cache
NOTEBOOK_BUDGET = 120  # seconds per notebook, generous for a loaded 2-core CI machine


def test_there_are_six_numbered_notebooks():
    assert [p.name[:2] for p in NOTEBOOKS] == ["01", "02", "03", "04", "05", "06"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_runs_clean(path, shared):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    nb = nbformat.read(path, as_version=4)
    assert all(not c.get("outputs") for c in nb.cells if c.cell_type == "code"), \
        "notebooks are committed with outputs stripped (CI executes them)"
    os.environ.setdefault("TOKJIT_TEST_DATA", str(shared))  # the kernel inherits it
    client = nbclient.NotebookClient(nb, timeout=CELL_TIMEOUT, kernel_name="python3",
                                     resources={"metadata": {"path": str(path.parent)}})
    start = time.perf_counter()
    client.execute()
    elapsed = time.perf_counter() - start
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    assert not errors
    images = sum("image/png" in o.get("data", {}) for c in nb.cells if c.cell_type == "code" for o in c.outputs)
    if path.name[:2] in ("02", "04", "05", "06"):
        assert images >= 1, "this notebook is about a picture"
    assert elapsed < NOTEBOOK_BUDGET, f"{path.name} took {elapsed:.0f}s"


def test_viewer_marks_and_escapes():
    enc = tokjit.get_encoding("o200k_base")
    ex = enc.explain('<script>alert("x")</script> 🤖 <|endoftext|>', parse_special=True)
    html = ex._repr_html_()
    assert "<script>" not in html and "&lt;script" in html
    assert ex.ids == enc.encode('<script>alert("x")</script> 🤖 <|endoftext|>', parse_special=True)
    assert ex.kinds[-1] == "special" and "font-weight:bold" in html
    assert "\\xf0\\x9f\\xa4" in html  # the emoji split inside a character is shown as hex
    rebuilt = b"".join(ex.token_bytes(i) for i in range(len(ex)))
    assert rebuilt == ex.text_bytes  # byte-level BPE spans tile the text exactly
    title_quote = enc.explain('"onmouseover="x')._repr_html_()
    assert 'onmouseover="x' not in title_quote


def test_viewer_byte_fallback_and_added_tokens(shared):
    tok = tokjit.load(shared / "data/spm/llama2/tokenizer.model")
    ex = tok.explain("a 🤖", add_special_tokens=True)
    assert ex.ids == tok.encode("a 🤖", add_special_tokens=True)
    assert ex.kinds.count("byte") == 4 and ex.starts[0] == -1  # BOS has no span in the text
    assert ex._repr_html_().count("dashed") == 4
