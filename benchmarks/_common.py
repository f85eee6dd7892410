"""Shared helpers of the asv suite (``bench_*.py``): which tokenizers, which text, warm-up.

Inputs are small on purpose (tens of KB) so ``asv run --quick`` finishes in CI within a few
minutes; ``TOKJIT_BENCH_SCALE`` (default 1) multiplies the sizes for local, steadier runs.
"""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("TOKJIT_TEST_DATA", ROOT.parent / "shared"))
DATA = SHARED / "data"
CORPUS = SHARED / "corpus"
SCALE = max(0.05, float(os.environ.get("TOKJIT_BENCH_SCALE", "1")))

# one tokenizer per family: byte-level BPE (tiktoken-style and tokenizer.json), SentencePiece BPE,
# Unigram, WordPiece
FAMILIES = {
    "o200k": "bundled:o200k_base",
    "llama3": "hf/llama3/tokenizer.json",
    "llama2-spm": "spm/llama2/tokenizer.model",
    "t5": "hf/t5/tokenizer.json",
    "bert": "hf/bert-minilm/tokenizer.json",
    # a sequence of splits (DeepSeek-V3's, on Llama 3's vocabulary: benchmarks._engines.build_deepseek_v3)
    "deepseek-v3": "build:deepseek-v3",
}
FAMILY_NAMES = list(FAMILIES)

CORPORA = {
    "english": "english.txt",
    "code": "code.txt",
    "chinese": "multilingual/chinese.txt",
    "russian": "multilingual/russian.txt",
    "japanese": "multilingual/japanese.txt",
    "arabic": "multilingual/arabic.txt",
}


def source_path(family: str) -> str | None:
    """File a family loads from (None for bundled encodings)."""
    where = FAMILIES[family]
    if where.startswith("build:"):
        return str(_built(where))
    return None if where.startswith("bundled:") else str(DATA / where)


def _built(where: str) -> Path:
    """The tokenizer.json a ``build:`` family writes from the shared data (NotImplementedError: asv
    skips it, when that data is missing)."""
    from ._engines import BUILT
    try:
        return BUILT[where]()
    except FileNotFoundError as exc:
        raise NotImplementedError(f"shared data not found: {exc}") from exc


_LOADED: dict = {}


def load(family: str, *, fresh: bool = False):
    """The family's tokenizer, or NotImplementedError (asv: skipped) when the data or a component
    is missing on this checkout. Reuses a tokenizer :func:`preload` made unless ``fresh``."""
    import tokjit

    if not fresh and family in _LOADED:
        return _LOADED[family]
    where = FAMILIES[family]
    if where.startswith("bundled:"):
        return tokjit.get_encoding(where.split(":", 1)[1])
    path = _built(where) if where.startswith("build:") else DATA / where
    if not path.exists():
        raise NotImplementedError(f"shared data not found: {path} (set TOKJIT_TEST_DATA)")
    # UnsupportedComponentError is a NotImplementedError: a family not built yet is skipped
    return tokjit.load(path)


def text(corpus: str, n_bytes: int) -> str:
    """About ``n_bytes`` (scaled) of a corpus, cut at a line end."""
    path = CORPUS / CORPORA[corpus]
    if not path.exists():
        raise NotImplementedError(f"corpus not found: {path}")
    n = int(n_bytes * SCALE)
    with open(path, "rb") as fh:
        data = fh.read(n + 4096)
    cut = data.rfind(b"\n", 0, n + 1)
    return data[:cut + 1 if cut > 0 else n].decode("utf-8", "ignore")


def lines(corpus: str, n_bytes: int) -> list[str]:
    return text(corpus, n_bytes).splitlines(keepends=True)


def warm(tok) -> None:
    """Compile (or load from numba's cache) every kernel the timed calls use."""
    sample = "Hello, world! 123 \u00e9t\u00e9 \u65e5\u672c\u8a9e  \n\tcode();"
    ids = tok.encode(sample)
    tok.encode_batch([sample, sample], num_threads=2)
    tok.decode(ids)


def preload() -> None:
    """Load and warm every family once in this process. With ``asv run --launch-method forkserver``
    the benchmark suite is imported once and each benchmark runs in a fork, so setting
    ``TOKJIT_BENCH_PRELOAD=1`` makes the many small benchmarks of a quick CI run cheap to start;
    the timings themselves do not change (setup warms the kernels either way)."""
    for family in FAMILIES:
        try:
            tok = load(family, fresh=True)
        except NotImplementedError:
            continue
        warm(tok)
        _LOADED[family] = tok


if os.environ.get("TOKJIT_BENCH_PRELOAD") == "1":
    preload()
