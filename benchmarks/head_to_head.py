"""One mode, libraries alternating part by part: the one-thread flat batch of tokjit and its peers.

    python -m benchmarks.head_to_head [--tokenizer o200k_base] [--corpus english] [--parts 40]

``compare.py`` runs every library's every mode within a repetition in a fixed order (tokjit's six
modes back to back, then the reference's, then the peers'). This script times one mode only, the
one-thread flat batch, on the same sample parts as the comparison: each part once per library, in an
order that alternates from part to part, fastokens in the comparison's one-thread child process
(:mod:`benchmarks._child`), the others in this process with one thread. Before each timed run a
library runs its previous part again, untimed, as the child process does for fastokens: without it
the child's library started every call on warm CPU caches and the others on caches the other
libraries had just filled (on 2026-11-28 that read tokjit / fastokens 0.46-0.92x on o200k English,
against 0.79-0.84x warmed both sides, and 0.90-1.02x in the comparison's flat/1 cells). It prints
each library's median MB/s and the median of tokjit's per-part ratio to each peer; every output is
checked against the reference's per-call ids.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time

from benchmarks._engines import CORPORA, TOKENIZERS, Unavailable, ids_of_one, load_engine, sample_parts
from benchmarks.compare import as_id_lists, differing, fresh_strs

LIBRARIES = ("tokjit", "gigatoken", "fastokens")


def flat_one_thread(engine):
    """``(run, warms_itself)``: the library's one-thread flat batch call, ``texts -> (ids, wall
    seconds)``, and whether it runs its previous texts again before timing (the comparison's child
    process does); None where the library has no such call."""
    child = engine.child_modes.get("flat/1")
    if child is not None:
        def run_child(texts):
            out = child(texts)
            return out.value, out.wall
        return run_child, True
    call = engine.flat.get(1)
    if call is None:
        return None

    def run(texts):
        gc.collect(1)
        start = time.perf_counter()
        out = call(texts)
        return out, time.perf_counter() - start
    return run, False


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tokenizer", default="o200k_base", choices=sorted(TOKENIZERS))
    parser.add_argument("--corpus", default="english", choices=sorted(CORPORA))
    parser.add_argument("--parts", type=int, default=40)
    parser.add_argument("--bytes", type=int, default=100_000, help="bytes of text a part")
    parser.add_argument("--libraries", nargs="+", default=list(LIBRARIES), choices=LIBRARIES)
    args = parser.parse_args(argv)
    spec = TOKENIZERS[args.tokenizer]
    reference = load_engine(args.tokenizer, spec.reference)
    runs, self_warming = {}, set()
    for library in args.libraries:
        try:
            engine = load_engine(args.tokenizer, library)
        except Unavailable as exc:
            print(f"{library}: {exc}")
            continue
        found = flat_one_thread(engine)
        if found is not None:
            runs[library], warms_itself = found
            if warms_itself:
                self_warming.add(library)
    parts = sample_parts(args.corpus, args.bytes, args.parts + 1)
    for run in runs.values():
        run(fresh_strs(parts[0]))  # untimed: first calls, tables in memory
    mb_s = {library: [] for library in runs}
    wrong = {library: 0 for library in runs}
    order = list(runs)
    # the reference's ids first, all of them: run between two timed calls, the reference would
    # evict the tables of the library timed next from the CPU caches (as any other library does)
    wants = [[ids_of_one(reference.encode(t)) for t in part] for part in parts[1:]]
    for i, (part, want) in enumerate(zip(parts[1:], wants)):
        n_bytes = sum(len(t.encode("utf-8")) for t in part)
        for library in order if i % 2 == 0 else order[::-1]:
            if library not in self_warming:
                runs[library](fresh_strs(parts[i]))  # untimed, as the child process does
            out, wall = runs[library](fresh_strs(part))
            mb_s[library].append(n_bytes / 1e6 / wall)
            wrong[library] += differing(as_id_lists("flat", out), want)
    print(f"{args.tokenizer} x {args.corpus}: {len(parts) - 1} parts of ~{args.bytes // 1000} KB, flat batch on one "
          "thread, libraries alternating, each warmed on its previous part; MB/s (median)")
    for library, values in mb_s.items():
        mark = f"  !({wrong[library]} lines differ)" if wrong[library] else ""
        print(f"  {library:<12} {statistics.median(values):8.2f}{mark}")
    if "tokjit" in mb_s:
        for library, values in mb_s.items():
            if library != "tokjit":
                ratio = statistics.median(a / b for a, b in zip(mb_s["tokjit"], values))
                print(f"  tokjit / {library}: {ratio:.2f}x (median of the per-part ratios)")
    return 1 if any(wrong.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
