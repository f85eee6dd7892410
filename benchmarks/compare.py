"""Every tokenizer library at its best, side by side: throughput per tokenizer x corpus, and latency.

    python -m benchmarks.compare [--quick] [--tokenizers o200k_base llama3 ...]
                                 [--corpora english code ...] [--json out.json]

For each tokenizer x corpus cell, every library that can load the tokenizer (tokjit; the reference:
tiktoken, HF ``tokenizers`` or sentencepiece; the peers gigatoken and fastokens, and HF where a
tokenizer.json of a tiktoken encoding exists) is timed in each mode its API offers:

* ``loop``: ``[encode(t) for t in lines]`` with the library's fastest single-text call that
  returns a list of ids (gigatoken's ``encode`` returns a numpy array: its loop calls
  ``encode(t).tolist()``, as a caller who wants lists would),
* ``loop/np``: the same loop over the single-text call that returns a numpy array, where the
  library has one (tokjit and tiktoken ``encode_to_numpy``, gigatoken ``encode``), so no library
  is timed building a list its peer does not build,
* ``batch/1``, ``batch/N``: its list-of-lists batch API on 1 thread and on all N cores,
* ``flat/1``, ``flat/N``: its flat bulk API (one id buffer plus offsets), where it has one, on 1
  thread and on all N cores. fastokens' batch calls take no thread count (its pools are sized once
  per process): its ``batch/1`` and ``flat/1`` run in a child process pinned to one thread, which
  times each call itself (:mod:`benchmarks._child`; moving texts and ids is never timed).

Each repetition times every (library, mode) on a new slice of the corpus that no library has seen
(one untimed warm-up slice first), engines interleaved within the repetition (tokjit, reference,
peers, then the next repetition), so a cache of whole inputs or long pieces cannot turn later
repetitions into lookups; every run gets new str objects of its texts (CPython caches a str's UTF-8
once a library asks for it, PyO3's ``to_str`` does, and the next library would read it free);
medians are reported as MB/s of UTF-8 input. Before each timed run the young generations of the
cycle collector are collected (``gc.collect(1)``, untimed; the child process does the same): the
outputs of the runs before are kept for the id check, and without it the collections that a run's
own allocations started also traversed its predecessors' lists (fastokens' loop read 19 MB/s
instead of 42). After each repetition, outside the timed region, every output is compared with the
reference's per-call ids of the same lines: a mode that differs is shown with ``!`` and its number
of differing lines, and is never counted as "best". A library that is not
installed or cannot load the tokenizer is printed with the reason. ``*`` marks a 1-thread mode whose
process CPU time exceeded 1.3x its wall time (the library used more threads than asked). On a shared
machine a long call is preempted more often than a short one, so besides wall-clock MB/s the summary
gives the 1-thread ratio by CPU time too.

Then per tokenizer: median latency of one call (microseconds) on "Hi", on ~60-character English
sentences and on 5 KB English documents (pools of distinct texts, each timed once per library; ids
checked against the reference after timing), once for the list-returning single-text call
(``loop``) and once for the numpy-returning one (``loop/np``, libraries that have one). Ratios are
tokjit / best other exact library (above 1: tokjit faster), list call against list calls and
array call against array calls; the closing summary lists every place tokjit is behind. Reads
``../shared`` (or ``$TOKJIT_TEST_DATA``).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import statistics
import sys
import time

from benchmarks._child import SelfTimed
from benchmarks._engines import (
    ALL_THREADS, CORPORA, DEFAULT_TOKENIZERS, LATENCY_SIZES, LIBRARIES, TOKENIZERS, Engine,
    Unavailable, ids_of_batch, ids_of_one, load_engines, sample_parts,
)

ONE_THREAD_CPU_LIMIT = 1.3

# the per-call modes, each the Engine's single-text call it loops over: a list of ids, a numpy array
SINGLE_CALLS = {"loop": "encode", "loop/np": "encode_np"}
LATENCY_TITLES = {"loop": "single-text call returning a list",
                  "loop/np": "single-text call returning a numpy array"}


def single_call(engine: Engine, mode: str):
    """The engine's single-text call of per-call ``mode``, or None when the library has none."""
    return getattr(engine, SINGLE_CALLS[mode])


def modes_of(engine: Engine) -> list[tuple[str, int]]:
    out = [(mode, 1) for mode in SINGLE_CALLS if single_call(engine, mode) is not None]
    for mode in ("batch", "flat"):
        calls = engine.batch if mode == "batch" else engine.flat
        threads = set(calls) | {int(label.split("/")[1]) for label in engine.child_modes
                                if label.startswith(mode + "/")}
        out += [(mode, n) for n in sorted(threads)]
    return out


def all_modes() -> list[str]:
    threads = sorted({1, ALL_THREADS})
    return list(SINGLE_CALLS) + [f"batch/{n}" for n in threads] + [f"flat/{n}" for n in threads]


def label_of(mode: str, threads: int) -> str:
    """A mode's label: ``loop``, ``loop/np`` (per-call modes, one thread), ``batch/1``, ``flat/N``, ..."""
    return mode if mode in SINGLE_CALLS else f"{mode}/{threads}"


def runner(engine: Engine, mode: str, threads: int, texts: list[str]):
    if mode in SINGLE_CALLS:
        encode = single_call(engine, mode)
        return lambda: [encode(t) for t in texts]
    child = engine.child_modes.get(label_of(mode, threads))
    fn = child or (engine.batch if mode == "batch" else engine.flat)[threads]
    return lambda: fn(texts)


def fresh_strs(texts: list[str]) -> list[str]:
    """Equal texts as new str objects (no cached UTF-8 in them)."""
    return [t.encode("utf-8", "surrogatepass").decode("utf-8", "surrogatepass") for t in texts]


def as_id_lists(mode: str, out) -> list[list[int]]:
    return [ids_of_one(x) for x in out] if mode in SINGLE_CALLS else ids_of_batch(out)


def differing(got: list[list[int]], want: list[list[int]]) -> int:
    if len(got) != len(want):
        return max(len(got), len(want))
    return sum(a != b for a, b in zip(got, want))


def mode_labels(engines: dict[str, Engine | str]) -> list[str]:
    """Every mode label any library runs ("loop", "batch/1", ...), in a fixed order."""
    labels: list[str] = []
    for engine in engines.values():
        if isinstance(engine, Engine):
            for mode, threads in modes_of(engine):
                label = label_of(mode, threads)
                if label not in labels:
                    labels.append(label)
    return labels


def cell_parts(engines: dict[str, Engine | str], corpus: str, n_bytes: int, parts: int) -> list[dict]:
    """``parts`` repetitions, each a disjoint ~``n_bytes`` sample of ``corpus`` per mode label."""
    labels = mode_labels(engines)
    flat = sample_parts(corpus, n_bytes, parts * len(labels))
    return [dict(zip(labels, flat[r * len(labels):(r + 1) * len(labels)])) for r in range(parts)]


def measure_cell(engines: dict[str, Engine | str], parts: list[dict[str, list[str]]]) -> dict:
    """Time every (library, mode) on ``parts[1:]``, one part per repetition, engines interleaved
    within each repetition; ``parts[0]`` warms every mode up untimed (compilation, thread pools,
    workspaces). A part holds one text sample per mode label: every library runs a mode on the same
    text, and no mode runs on text another mode has just put into a library's caches (a per-call
    loop first and a batch second on the same lines would time the batch on warm piece caches).
    Every output, warm-up and timed, is compared with the reference's per-call ids of the same
    text after the repetition, outside the timed region."""
    results: dict[str, dict] = {}
    jobs = []   # (library, label, engine, mode, threads)
    for library, engine in engines.items():
        if not isinstance(engine, Engine):
            results[library] = {"status": engine}
            continue
        results[library] = {"status": "ok", "role": engine.role, "note": engine.note, "modes": {}}
        for mode, threads in modes_of(engine):
            label = label_of(mode, threads)
            results[library]["modes"][label] = {"exact": True, "differing_lines": 0, "threads": threads,
                                                "mb_s_runs": [], "cpu_runs": [], "cores_runs": []}
            jobs.append((library, label, engine, mode, threads))
    ref_library = next(lib for lib, e in engines.items() if isinstance(e, Engine) and e.role == "reference")
    reference = engines[ref_library]
    for rep, by_label in enumerate(parts):
        outputs = {}
        for library, label, engine, mode, threads in jobs:
            cell = results[library]["modes"][label]
            if "error" in cell:
                continue
            # new str objects for every run: a library reading a str's UTF-8 through CPython's cache
            # of it (PyO3's to_str) fills that cache, and the next library would read it for free
            texts = fresh_strs(by_label[label])
            n_bytes = sum(len(t.encode("utf-8")) for t in texts)
            run = runner(engine, mode, threads, texts)
            # The young objects of the runs before (other libraries' outputs, kept for the id check)
            # go to the oldest generation first: a library's run pays for the collections of its
            # own objects only, not for traversing its predecessors' lists
            gc.collect(1)
            cpu0, wall0 = time.process_time(), time.perf_counter()
            try:
                out = run()
            except Exception as exc:  # noqa: BLE001 - a library failing on this text is reported
                cell["error"] = f"{type(exc).__name__}: {exc}"[:120]
                continue
            wall = time.perf_counter() - wall0
            cpu = time.process_time() - cpu0
            if isinstance(out, SelfTimed):  # ran in a child process, which timed the call alone
                out, wall, cpu = out.value, out.wall, out.cpu
            outputs[library, label] = (mode, out)
            if rep > 0:
                cell["mb_s_runs"].append(n_bytes / 1e6 / wall)
                cell["cpu_runs"].append(n_bytes / 1e6 / max(cpu, 1e-9))
                cell["cores_runs"].append(cpu / wall)
        wants = {label: [ids_of_one(reference.encode(t)) for t in texts] for label, texts in by_label.items()}
        for (library, label), (mode, out) in outputs.items():
            diff = differing(as_id_lists(mode, out), wants[label])
            cell = results[library]["modes"][label]
            cell["differing_lines"] += diff
            cell["exact"] = cell["exact"] and diff == 0
        del outputs, wants
    for library, label, *_ in jobs:
        cell = results[library]["modes"][label]
        runs = cell.pop("mb_s_runs"), cell.pop("cpu_runs"), cell.pop("cores_runs")
        if "error" in cell or not runs[0]:
            cell.pop("exact", None)
            cell.setdefault("error", "no timed run")
            continue
        cell["mb_s"], cell["mb_s_cpu"], cell["cores"] = (statistics.median(r) for r in runs)
    return results


def best(results: dict, library_filter, mode_filter=lambda label: True, key: str = "mb_s"):
    """(MB/s, library, mode) of the fastest exact measurement that passes the filters, or None."""
    found = None
    for library, res in results.items():
        if not library_filter(library):
            continue
        for label, cell in res.get("modes", {}).items():
            if cell.get("exact") and mode_filter(label):
                if found is None or cell[key] > found[0]:
                    found = (cell[key], library, label)
    return found


def one_thread(label: str) -> bool:
    return label in SINGLE_CALLS or label.endswith("/1")


def ratios(results: dict) -> dict:
    """tokjit / best other exact library: per mode, at one thread (any 1-thread mode) and at best
    (any mode), by wall time; and at one thread by CPU time, which other jobs on a shared machine
    disturb less (a long call is preempted more often than a short one, so under load wall time
    penalises the slower library)."""
    out = {}
    labels = {label for res in results.values() for label in res.get("modes", {})}
    groups = {label: (lambda lb, label=label: lb == label, "mb_s") for label in sorted(labels)}
    groups["1 thread"] = (one_thread, "mb_s")
    groups["1 thread, CPU time"] = (one_thread, "mb_s_cpu")
    groups["best"] = (lambda lb: True, "mb_s")
    reference = next((lib for lib, res in results.items() if res.get("role") == "reference"), None)
    groups["vs reference: loop"] = (lambda lb: lb == "loop", "mb_s", reference)
    groups["vs reference: loop/np"] = (lambda lb: lb == "loop/np", "mb_s", reference)
    groups["vs reference: 1 thread"] = (one_thread, "mb_s", reference)
    for name, (mode_filter, key, *against) in groups.items():
        ours = best(results, lambda lib: lib == "tokjit", mode_filter, key)
        other = best(results, (lambda lib: lib == against[0]) if against else (lambda lib: lib != "tokjit"),
                     mode_filter, key)
        if ours and other:
            out[name] = {"ratio": ours[0] / other[0], "tokjit": ours[0], "tokjit_mode": ours[2],
                         "other": other[0], "other_library": other[1], "other_mode": other[2]}
    return out


def fmt_cell(cell: dict | None) -> str:
    if cell is None:
        return "-"
    if "error" in cell:
        return "error"
    text = f"{cell['mb_s']:.2f}"
    if not cell["exact"]:
        text += f"!({cell['differing_lines']})"
    if cell["threads"] == 1 and cell["cores"] > ONE_THREAD_CPU_LIMIT:
        text += "*"
    return text


def print_cell(name: str, corpus: str, n_bytes: int, n_lines: int, results: dict, rat: dict):
    labels = all_modes()
    print(f"\n== {name} x {corpus}: {n_bytes / 1e3:.0f} KB and {n_lines} lines per repetition; MB/s ==")
    print(f"{'library':<22}" + "".join(f"{lb:>14}" for lb in labels))
    for library, res in results.items():
        role = " (ref)" if res.get("role") == "reference" else ""
        if res["status"] != "ok":
            print(f"{library + role:<22}  {res['status']}")
            continue
        print(f"{library + role:<22}" + "".join(f"{fmt_cell(res['modes'].get(lb)):>14}" for lb in labels))
        for label, cell in res["modes"].items():
            if "error" in cell:
                print(f"{'':<22}  {label}: {cell['error']}")
    line = f"{'tokjit / best other':<22}"
    for lb in labels:
        r = rat.get(lb)
        line += f"{(format(r['ratio'], '.2f') + 'x') if r else '-':>14}"
    print(line)
    for group in ("1 thread", "1 thread, CPU time", "best"):
        r = rat.get(group)
        if r:
            print(f"  {group}: tokjit {r['tokjit']:.2f} ({r['tokjit_mode']}) vs {r['other_library']} "
                  f"{r['other']:.2f} ({r['other_mode']}) -> {r['ratio']:.2f}x")


def measure_latency(engines: dict[str, Engine | str], repeats: int, pool_size: int, mode: str = "loop") -> dict:
    """Median microseconds per call of each library's single-text call of per-call ``mode`` (the
    list-returning call, or with "loop/np" the array-returning one of the libraries that have it),
    per size. Calls are timed in groups (engines interleaved group by group); each group walks on
    through a pool of distinct texts, so a text is seen at most once per library, and the ids of
    every pool text are compared with the reference's list call after all timing. Each mode has
    its own pool (the list call the first half of twice as many texts, "loop/np" the second), so
    the mode timed second does not meet texts whose pieces the first just put in a cache."""
    reference = next(e for e in engines.values() if isinstance(e, Engine) and e.role == "reference")
    live = {lib: e for lib, e in engines.items() if isinstance(e, Engine) and single_call(e, mode) is not None}
    groups = max(5, 3 * repeats)
    out: dict[str, dict] = {}
    for size, make_pool in LATENCY_SIZES.items():
        pools = make_pool(2 * pool_size)
        half = len(pools) // 2
        pool = (pools[half:] if mode == "loop/np" else pools[:half]) if half else pools
        plans = []
        for library, engine in live.items():
            encode = single_call(engine, mode)
            try:
                encode("Warm up: 123 \u00e9t\u00e9.")
                start = time.perf_counter()
                encode(pool[-1])
                one = max(time.perf_counter() - start, 1e-7)
            except Exception as exc:  # noqa: BLE001
                out.setdefault(library, {})[size] = {"error": f"{type(exc).__name__}: {exc}"[:120]}
                continue
            # ~5 ms per group; never more calls than the pool holds distinct texts
            calls = int(min(5000, max(1, 0.005 / one)))
            if len(pool) > 1:
                calls = min(calls, max(1, (len(pool) - 1) // groups))
            plans.append((library, encode, calls))
        samples: dict[str, list[float]] = {lib: [] for lib, *_ in plans}
        for g in range(groups):
            for library, encode, calls in plans:
                texts = fresh_strs([pool[(g * calls + i) % len(pool)] for i in range(calls)])
                start = time.perf_counter()
                for t in texts:
                    encode(t)
                samples[library].append((time.perf_counter() - start) / calls * 1e6)
        want = [ids_of_one(reference.encode(t)) for t in pool]
        for library, encode, _calls in plans:
            exact = [ids_of_one(encode(t)) for t in pool] == want
            out.setdefault(library, {})[size] = {"us": statistics.median(samples[library]),
                                                 "exact": exact, "distinct_texts": len(pool)}
    return out


def print_latency(name: str, engines: dict, latency: dict, mode: str = "loop") -> dict:
    sizes = list(LATENCY_SIZES)
    print(f"\n== {name}: latency of one call, median us ({mode}: {LATENCY_TITLES[mode]}) ==")
    print(f"{'library':<22}" + "".join(f"{s:>12}" for s in sizes))
    for library, engine in engines.items():
        if not isinstance(engine, Engine):
            if mode == "loop":
                print(f"{library:<22}  {engine}")
            continue
        if single_call(engine, mode) is None:
            continue
        row = latency.get(library, {})
        cells = []
        for s in sizes:
            c = row.get(s)
            if c is None or "error" in c:
                cells.append("error" if c else "-")
            else:
                cells.append(f"{c['us']:.2f}" + ("" if c["exact"] else "!"))
        print(f"{library:<22}" + "".join(f"{c:>12}" for c in cells))
    rat = {}
    for s in sizes:
        ours = latency.get("tokjit", {}).get(s)
        others = [(v[s]["us"], lib) for lib, v in latency.items()
                  if lib != "tokjit" and s in v and v[s].get("exact")]
        if ours and ours.get("exact") and others:
            us, lib = min(others)
            rat[s] = {"ratio": us / ours["us"], "other_library": lib, "other_us": us, "tokjit_us": ours["us"]}
    print(f"{'speed-up vs fastest':<22}" + "".join(
        f"{(format(rat[s]['ratio'], '.2f') + 'x') if s in rat else '-':>12}" for s in sizes))
    return rat


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small sample per cell, few repetitions")
    ap.add_argument("--tokenizers", nargs="+", default=DEFAULT_TOKENIZERS, choices=list(TOKENIZERS))
    ap.add_argument("--corpora", nargs="+", default=list(CORPORA), choices=list(CORPORA))
    ap.add_argument("--libraries", nargs="+", default=LIBRARIES, choices=LIBRARIES,
                    help="libraries to run (the reference is always run: it defines the ids)")
    ap.add_argument("--bytes", type=int, default=None, help="bytes of new text per repetition")
    ap.add_argument("--repeats", type=int, default=None)
    ap.add_argument("--no-latency", action="store_true")
    ap.add_argument("--json", metavar="PATH", help="write every measurement as JSON")
    args = ap.parse_args(argv)
    n_bytes = args.bytes or (40_000 if args.quick else 100_000)
    repeats = args.repeats or (3 if args.quick else 5)
    # HF: one thread unless a batch/N mode asks (its wrapper switches this per call)
    saved_parallelism = os.environ.get("TOKENIZERS_PARALLELISM")
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    try:
        return _run(args, n_bytes, repeats)
    finally:
        if saved_parallelism is None:
            os.environ.pop("TOKENIZERS_PARALLELISM", None)
        else:
            os.environ["TOKENIZERS_PARALLELISM"] = saved_parallelism


def _run(args, n_bytes: int, repeats: int) -> int:
    load0 = os.getloadavg()
    started = time.time()
    print(f"# {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; machine: {platform.machine()} "
          f"{platform.processor() or ''} cores={os.cpu_count()} python={platform.python_version()}; "
          f"load average at start {load0[0]:.1f}")
    print(f"# per cell: {repeats} timed repetitions of ~{n_bytes / 1e3:.0f} KB, each on text not seen before "
          f"(plus one untimed warm-up), medians; N = {ALL_THREADS} threads")
    print("# "
          "'!(k)' = not exact: ids differ from the reference on k lines (speed shown, never counted "
          "as best); "
          f"'*' = a 1-thread mode used > {ONE_THREAD_CPU_LIMIT} cores of CPU time")
    report = {"machine": {"cores": os.cpu_count(), "python": platform.python_version(),
                          "processor": platform.processor(), "load_start": load0},
              "bytes_per_repetition": n_bytes, "repeats": repeats, "cells": [], "latency": {}}
    libraries = args.libraries
    for name in args.tokenizers:
        spec = TOKENIZERS[name]
        wanted = list(dict.fromkeys(["tokjit", spec.reference, *libraries]))
        engines = load_engines(name, wanted)
        if not isinstance(engines.get(spec.reference), Engine):
            print(f"\n== {name}: skipped, reference {spec.reference}: {engines.get(spec.reference)}")
            continue
        order = sorted(engines, key=lambda lib: (lib != "tokjit", lib != spec.reference))
        engines = {lib: engines[lib] for lib in order}
        notes = [f"{lib}: {e.note}" for lib, e in engines.items() if isinstance(e, Engine) and e.note]
        if notes:
            print(f"\n# {name}: " + "; ".join(notes))
        for corpus in args.corpora:
            try:
                parts = cell_parts(engines, corpus, n_bytes, repeats + 1)
            except Unavailable as exc:
                print(f"\n== {name} x {corpus}: skipped, {exc}")
                continue
            size = sum(len(t.encode("utf-8")) for t in parts[1]["loop"])
            results = measure_cell(engines, parts)
            rat = ratios(results)
            print_cell(name, corpus, size, len(parts[1]["loop"]), results, rat)
            report["cells"].append({"tokenizer": name, "corpus": corpus, "bytes_per_repetition": size,
                                    "lines_per_repetition": len(parts[1]["loop"]), "libraries": results,
                                    "ratios": rat})
            sys.stdout.flush()
        if not args.no_latency:
            report["latency"][name] = {}
            for mode in SINGLE_CALLS:
                latency = measure_latency(engines, repeats, 300 if args.quick else 1500, mode)
                rat = print_latency(name, engines, latency, mode)
                report["latency"][name][mode] = {"libraries": latency, "ratios": rat}
        sys.stdout.flush()
    print_summary(report)
    load1 = os.getloadavg()
    report["machine"]["load_end"] = load1
    report["seconds"] = time.time() - started
    print(f"\n# done in {report['seconds']:.0f} s; load average at end {load1[0]:.1f}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(report, fh, indent=1)
    return 0


SUMMARY_GROUPS = ("1 thread", "1 thread, CPU time", "best")


def print_summary(report: dict) -> None:
    cells = report["cells"]
    if not cells:
        return
    print("\n== summary: MB/s at each side's best exact mode; ratio = tokjit / best other ==")
    print("   (1 thread: loop, loop/np, batch/1 or flat/1, wall time; cpu: the same by CPU time; any: every mode)")
    header = (f"{'tokenizer':<12} {'corpus':<9}{'tokjit 1-thr':>13} {'best other, 1 thread':>30}"
              f"{'ratio':>7}{'cpu':>7}{'tokjit any':>12} {'best other, any mode':>30}{'ratio':>7}")
    print(header)
    print("-" * len(header))
    behind = []

    def part(r, cpu=None):
        if not r:
            return f"{'-':>13} {'-':>30}{'-':>7}" + (f"{'-':>7}" if cpu is not None else "")
        other = f"{r['other_library']} {r['other_mode']} {r['other']:.2f}"
        text = f"{r['tokjit']:>13.2f} {other:>30}{r['ratio']:>6.2f}x"
        if cpu is not None:
            text += f"{cpu['ratio']:>6.2f}x" if cpu else f"{'-':>7}"
        return text

    for c in cells:
        rat = c["ratios"]
        print(f"{c['tokenizer']:<12} {c['corpus']:<9}{part(rat.get('1 thread'), rat.get('1 thread, CPU time') or {})}"
              f"{part(rat.get('best'))[1:]}")
        for group in SUMMARY_GROUPS:
            r = rat.get(group)
            if r and r["ratio"] < 1:
                behind.append(f"{c['tokenizer']} x {c['corpus']} [{group}]: tokjit {r['tokjit']:.2f} "
                              f"({r['tokjit_mode']}) < {r['other_library']} {r['other']:.2f} "
                              f"({r['other_mode']}), {r['ratio']:.2f}x")
    for name, by_mode in report["latency"].items():
        for mode, lat in by_mode.items():
            for size, r in lat["ratios"].items():
                if r["ratio"] < 1:
                    behind.append(f"{name} latency {size} [{mode}]: tokjit {r['tokjit_us']:.2f} us > "
                                  f"{r['other_library']} {r['other_us']:.2f} us ({r['ratio']:.2f}x)")
    labels = all_modes() + ["vs reference: loop", "vs reference: loop/np", "vs reference: 1 thread"]
    print("\n== tokjit / best other exact library, per mode (wall time); last three columns: tokjit / "
          "the reference alone, per-call loop (list, numpy array) and best 1-thread mode ==")
    short = {"vs reference: loop": "ref:loop", "vs reference: loop/np": "ref:np",
             "vs reference: 1 thread": "ref:1-thr"}
    print(f"{'tokenizer':<12} {'corpus':<9}" + "".join(f"{short.get(lb, lb):>10}" for lb in labels))
    for c in cells:
        rat = c["ratios"]
        print(f"{c['tokenizer']:<12} {c['corpus']:<9}" + "".join(
            f"{(format(rat[lb]['ratio'], '.2f') + 'x') if lb in rat else '-':>10}" for lb in labels))
    not_exact = [f"{c['tokenizer']} x {c['corpus']}: {lib} {mode} differs on {m['differing_lines']} lines"
                 for c in cells for lib, res in c["libraries"].items()
                 for mode, m in res.get("modes", {}).items() if m.get("exact") is False]
    not_exact += [f"{name} latency {size} [{mode}]: {lib} differs"
                  for name, by_mode in report["latency"].items()
                  for mode, lat in by_mode.items()
                  for lib, sizes in lat["libraries"].items()
                  for size, m in sizes.items() if m.get("exact") is False]
    print(f"\n== where tokjit is behind ({len(behind)}) ==")
    for line in behind:
        print("  " + line)
    print(f"\n== not exact ({len(not_exact)}) ==")
    for line in not_exact:
        print("  " + line)


if __name__ == "__main__":
    sys.exit(main())
