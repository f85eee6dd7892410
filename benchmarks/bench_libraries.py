"""asv: tokjit next to its reference and the peers (gigatoken, fastokens), each at its best.

Per-call latency of each library's fastest single-text call returning a list, and of its call
returning a numpy array where it has one, at three sizes (2 characters, one sentence, a 5 KB
document), and its batch APIs (list-of-lists and flat buffer, each on 1 and all threads) on
English lines. Inputs come from pools of distinct texts, as in compare.py. Before
anything is timed, the library's ids on held-out texts of the same pool are compared with the
reference's: tokjit differing fails the benchmark; a peer differing, not installed or unable to
load the tokenizer is skipped with the reason on stderr, so CI never fails because of a peer. ``IdsExact.track_differing_lines`` records how many lines each peer gets wrong.
"""

from __future__ import annotations

import itertools
import os
import sys

from . import _common
from ._engines import (
    ALL_THREADS, LATENCY_SIZES, TOKENIZERS, Unavailable, ids_of_batch, ids_of_one, load_engine,
    sample_parts, tokjit_engine,
)

# one tokenizer per reference library and family (the same files as ``_common.FAMILIES``)
ASV_TOKENIZERS = {"o200k": "o200k_base", "llama3": "llama3", "llama2-spm": "llama2-spm",
                  "bert": "bert", "deepseek-v3": "deepseek-v3"}
LIBRARY_ROLES = ["tokjit", "reference", "gigatoken", "fastokens"]
BATCH_APIS = sorted({"batch/1", f"batch/{ALL_THREADS}", "flat/1", f"flat/{ALL_THREADS}"})

_ENGINES: dict = {}


def _library(family: str, role: str) -> str:
    return TOKENIZERS[ASV_TOKENIZERS[family]].reference if role == "reference" else role


def engine(family: str, role: str):
    """The (cached) engine, or NotImplementedError (asv: skipped) with the reason on stderr."""
    key = (family, role)
    if key not in _ENGINES:
        name = ASV_TOKENIZERS[family]
        try:
            if role == "tokjit":
                _ENGINES[key] = tokjit_engine(_common.load(family), TOKENIZERS[name])
            else:
                _ENGINES[key] = load_engine(name, _library(family, role))
        except Unavailable as exc:
            _ENGINES[key] = f"{_library(family, role)} for {name}: {exc}"
    found = _ENGINES[key]
    if isinstance(found, str):
        print(found, file=sys.stderr)
        raise NotImplementedError(found)
    return found


def english_parts() -> list[list[str]]:
    return sample_parts("english", int(64_000 * _common.SCALE), 5)


def _check(family: str, role: str, got, want) -> None:
    if got == want:
        return
    message = f"{_library(family, role)} ids differ from {_library(family, 'reference')} ({family})"
    if role == "tokjit":
        raise AssertionError(message)
    print(message, file=sys.stderr)
    raise NotImplementedError(message)


class PerCall:
    """Time of one call of the library's fastest single-text encode returning a list of ids
    (``Engine.encode``). Sentences and 5 KB documents cycle through a pool of distinct texts (as in
    compare.py), so a cache of whole inputs answers only once asv has gone round the whole pool."""

    params = (list(ASV_TOKENIZERS), LIBRARY_ROLES, list(LATENCY_SIZES))
    param_names = ["tokenizer", "library", "size"]
    pool_size = 2000
    call = "encode"

    def setup(self, family, role, size):
        self.engine = engine(family, role)
        self.encode = getattr(self.engine, self.call)
        if self.encode is None:
            raise NotImplementedError(f"{self.engine.library} has no single-text call returning a numpy array")
        pool = LATENCY_SIZES[size](self.pool_size)
        # ids checked on the last texts of the pool; timing starts from its first
        checked = pool[-3:]
        ref = engine(family, "reference")
        _check(family, role, [ids_of_one(self.encode(t)) for t in checked],
               [ids_of_one(ref.encode(t)) for t in checked])
        self.texts = itertools.cycle(pool)

    def time_encode(self, family, role, size):
        self.encode(next(self.texts))


class PerCallNumpy(PerCall):
    """:class:`PerCall` with the single-text call returning a numpy array (``Engine.encode_np``: tokjit
    and tiktoken ``encode_to_numpy``, gigatoken ``encode``); libraries without one are skipped."""

    call = "encode_np"


class Batch:
    """About 64 KB of English lines per call (scaled by TOKJIT_BENCH_SCALE) through each batch API,
    cycling through four disjoint samples so repeated calls are not answered from whole-input
    caches; ids are checked on a fifth sample."""

    params = (list(ASV_TOKENIZERS), LIBRARY_ROLES, BATCH_APIS)
    param_names = ["tokenizer", "library", "api"]
    timeout = 120

    def setup(self, family, role, api):
        e = engine(family, role)
        kind, threads = api.split("/")
        calls = e.batch if kind == "batch" else e.flat
        if int(threads) not in calls:
            raise NotImplementedError(f"{e.library} has no {api} API")
        self.call = calls[int(threads)]
        checked, *timed = english_parts()
        ref = engine(family, "reference")
        _check(family, role, ids_of_batch(self.call(checked)), [ids_of_one(ref.encode(t)) for t in checked])
        self.parts = itertools.cycle(timed)

    def time_batch(self, family, role, api):
        self.call(next(self.parts))


class IdsExact:
    """Lines of the Batch text whose per-call ids differ from the reference's (0 = exact)."""

    params = (list(ASV_TOKENIZERS), ["gigatoken", "fastokens"])
    param_names = ["tokenizer", "library"]
    unit = "lines"

    def setup(self, family, role):
        self.engine = engine(family, role)
        self.ref = engine(family, "reference")
        self.lines = english_parts()[0]

    def track_differing_lines(self, family, role):
        return sum(ids_of_one(self.engine.encode(t)) != ids_of_one(self.ref.encode(t))
                   for t in self.lines)


def preload() -> None:
    """With ``TOKJIT_BENCH_PRELOAD=1`` (CI: forkserver launch), load tokjit and the references once
    in the server process so each forked benchmark starts with them. Peers are loaded in the forks
    only: gigatoken and fastokens run batches on a rayon pool, and a pool created before a fork has
    no threads in the child (a parallel batch there would wait forever)."""
    for family in ASV_TOKENIZERS:
        for role in ("tokjit", "reference"):
            try:
                engine(family, role)
            except NotImplementedError:
                pass


if os.environ.get("TOKJIT_BENCH_PRELOAD") == "1":
    preload()
