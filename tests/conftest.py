"""Shared test fixtures: where the reference data lives and how to read the public corpora.

The data folder is found through one setting, ``TOKJIT_TEST_DATA`` (default ``../shared`` beside the
repository root). Tests that need it are skipped, with the reason printed, only when it is missing;
``.ci/run`` refuses to run without it so CI never passes on skipped parity tests.
"""

from __future__ import annotations

import functools
import glob
import json
import os
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("TOKJIT_TEST_DATA", REPO_ROOT.parent / "shared")).resolve()


def shared_path(*parts: str) -> Path:
    return SHARED.joinpath(*parts)


def o200k_reference():
    """tiktoken's o200k_base, from the shared data (no download)."""
    tiktoken = pytest.importorskip("tiktoken")
    import tiktoken.load

    entry = json.loads(shared_path("data", "tiktoken", "encodings.json").read_text())["o200k_base"]
    ranks = tiktoken.load.load_tiktoken_bpe(
        str(shared_path("data", "tiktoken", entry["mergeable_ranks_file"].split()[0])))
    return tiktoken.Encoding(name="o200k_base", pat_str=entry["pat_str"], mergeable_ranks=ranks,
                             special_tokens=entry["special_tokens"])


@pytest.fixture(scope="session")
def shared() -> Path:
    if not SHARED.is_dir():
        pytest.skip(f"test data folder {SHARED} not found (set TOKJIT_TEST_DATA)")
    return SHARED


def _code_documents(text: str) -> list[str]:
    docs, cur = [], []
    for line in text.splitlines(keepends=True):
        if line.startswith("<<<<<FILE ") and cur:
            docs.append("".join(cur))
            cur = []
        cur.append(line)
    if cur:
        docs.append("".join(cur))
    return docs


@functools.lru_cache(maxsize=None)
def corpus_files() -> dict[str, list[str]]:
    """Corpus name -> list of texts (lines; code.txt split into whole files, byte-exact)."""
    base = SHARED / "corpus"
    out: dict[str, list[str]] = {}
    out["english"] = (base / "english.txt").read_text(encoding="utf-8").splitlines()
    with open(base / "code.txt", encoding="utf-8", newline="") as fh:
        out["code"] = _code_documents(fh.read())
    for path in sorted(glob.glob(str(base / "multilingual" / "*.txt"))):
        out[Path(path).stem] = Path(path).read_text(encoding="utf-8").splitlines()
    with open(base / "edge_cases.jsonl", encoding="utf-8") as fh:
        out["edge_cases"] = [json.loads(line) for line in fh if line.strip()]
    return out


def corpus_lines(limit_per_file: int | None = None, step: int = 1) -> list[str]:
    """Every text of the public corpora (or every ``step``-th, at most ``limit_per_file`` per file);
    edge cases are always included in full."""
    texts: list[str] = []
    for name, items in corpus_files().items():
        if name == "edge_cases":
            texts.extend(items)
            continue
        chosen = items[::step]
        if limit_per_file is not None:
            chosen = chosen[:limit_per_file]
        texts.extend(chosen)
    return texts


def gguf_vectors(path: Path) -> list[tuple[str, list[int]]]:
    """llama.cpp test vectors: (text, expected ids) pairs from ``<model>.gguf.inp/.out``."""
    inp = Path(str(path) + ".inp").read_text(encoding="utf-8")
    out = Path(str(path) + ".out").read_text(encoding="utf-8")
    sep = "\n__ggml_vocab_test__\n"
    texts = inp.split(sep)
    if inp.endswith(sep):
        texts.pop()
    lines = out.split("\n")
    if out.endswith("\n"):
        lines.pop()
    if len(texts) != len(lines):
        raise ValueError(f"{path}: {len(texts)} inputs but {len(lines)} outputs")
    return [(t, [int(x) for x in line.split()]) for t, line in zip(texts, lines)]
