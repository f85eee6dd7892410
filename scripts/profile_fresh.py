"""Where a batch of text the tokenizer has never seen spends its time (a developer's tool, outside CI).

A tokjit thread keeps its piece cache for as long as it lives, so reading a corpus twice measures the
cache, not the kernels. Here every pass over the corpus runs on a new Python thread (a new cache) and
the median pass is reported, which is how the comparison's "text no library has seen" behaves and is
steady enough for A/B runs between two trees (``TREE=/path/to/other/checkout``)::

    python scripts/profile_fresh.py deepseek-v3 chinese --passes 5
    python scripts/profile_fresh.py llama3 japanese --perf      # under `perf record`, then a report

With ``--perf`` the script runs itself under ``perf record`` and then says how the samples split between
the JIT kernels. numba gives perf no symbols for its code, so the child writes
``/tmp/perf-<pid>.map`` (one line per compiled kernel and its call wrapper, from the dispatchers'
entry points) and a copy of each fused batch kernel's machine code; inlined helpers have no symbols
of their own, so the report also cuts that code at function prologues and counts samples per function
(the sizes help to tell them apart: the fused piece loop, ``_encode_segments``, ``bpe_core``, the
split steps). Timer-driven samples on VMs land a few instructions late; read shares, not addresses.
"""

from __future__ import annotations

import argparse
import collections
import ctypes
import gc
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(os.environ.get("TREE", Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(ROOT))

BATCH_LINES = 128  # one batch call: the comparison's Japanese part is 128 lines


def corpus_lines(name: str, limit: int) -> list[str]:
    from benchmarks._engines import CORPORA, CORPUS
    path = CORPUS / CORPORA.get(name, f"multilingual/{name}.txt")
    return [line for line in path.read_text(encoding="utf-8").split("\n") if line][:limit]


def load(name: str):
    from benchmarks import _engines as E
    spec = E.TOKENIZERS[name]
    return E.load_tokjit(spec), spec.parse_special


def fresh_passes(tok, parse_special: bool, lines: list[str], passes: int) -> list[float]:
    """MB/s of each pass over ``lines`` in batches of BATCH_LINES, each pass on a new thread."""
    batches = [lines[i:i + BATCH_LINES] for i in range(0, len(lines), BATCH_LINES)]
    n_bytes = sum(len(line.encode()) for line in lines)
    rates = []

    def one_pass():
        tok.encode_batch_numpy(["warm-up"], num_threads=1, parse_special=parse_special)  # the thread's buffers
        spent = 0.0
        for batch in batches:
            t0 = time.perf_counter()
            tok.encode_batch_numpy(batch, num_threads=1, parse_special=parse_special)
            spent += time.perf_counter() - t0
        rates.append(n_bytes / 1e6 / spent)

    for _ in range(passes):
        worker = threading.Thread(target=one_pass)
        worker.start()
        worker.join()
    return rates


def write_perf_map(out_dir: Path) -> None:
    """``/tmp/perf-<pid>.map`` for every compiled kernel, and the machine code of the fused batch
    kernels (``encode_docs_*``) with everything linked after it, up to the next known symbol."""
    entries = {}
    for obj in gc.get_objects():
        try:
            if type(obj).__name__ != "CPUDispatcher":
                continue
            name = obj.py_func.__module__.rsplit(".", 1)[-1] + "." + obj.py_func.__qualname__
            overloads = list(obj.overloads.values())
        except ReferenceError:
            continue
        for cres in overloads:
            lib = cres.library
            for symbol, label in ((cres.fndesc.llvm_func_name, name),
                                  (cres.fndesc.llvm_cpython_wrapper_name, "wrapper:" + name)):
                try:
                    address = lib.get_pointer_to_function(symbol)
                except Exception:  # noqa: BLE001 - a kernel compiled without a wrapper
                    continue
                if address:
                    entries[address] = label
    ordered = sorted(entries.items())
    dumps = []
    with open(f"/tmp/perf-{os.getpid()}.map", "w") as f:
        for k, (address, label) in enumerate(ordered):
            size = min(ordered[k + 1][0] - address if k + 1 < len(ordered) else 1 << 16, 1 << 22)
            f.write(f"{address:x} {size:x} {label}\n")
            if "encode_docs" in label:
                path = out_dir / f"code_{address:x}.bin"
                path.write_bytes(ctypes.string_at(address, min(size, _mapped_after(address))))
                dumps.append({"label": label, "address": address, "path": str(path)})
    (out_dir / "code.json").write_text(json.dumps(dumps))


def _mapped_after(address: int) -> int:
    """Bytes from ``address`` to the end of its mapping (reading past it would crash the process)."""
    with open("/proc/self/maps") as maps:
        for line in maps:
            low, high = (int(x, 16) for x in line.split()[0].split("-"))
            if low <= address < high:
                return high - address
    return 0


def report(data: Path, out_dir: Path) -> None:
    samples = collections.Counter()
    symbols = collections.Counter()
    script = subprocess.run(["perf", "script", "-i", str(data), "-F", "ip,sym"], capture_output=True, text=True)
    for line in script.stdout.splitlines():
        parts = line.split()
        if parts:
            samples[int(parts[0], 16)] += 1
            symbols[" ".join(parts[1:])[:48] or "?"] += 1
    total = sum(samples.values()) or 1
    print(f"{total} samples; by symbol:")
    for name, n in symbols.most_common(12):
        print(f"  {100 * n / total:5.1f}%  {name}")
    for dump in json.loads((out_dir / "code.json").read_text()):
        base = dump["address"]
        size = os.path.getsize(dump["path"])
        listing = subprocess.run(["objdump", "-D", "-b", "binary", "-m", "i386:x86-64", f"--adjust-vma={base:#x}",
                                  dump["path"]], capture_output=True, text=True).stdout
        code = [(int(m.group(1), 16), m.group(2)) for m in
                re.finditer(r"^\s*([0-9a-f]+):\s+(?:[0-9a-f]{2} )+\s*(.*)$", listing, re.M)]
        starts = [base] + [a for (a, ins), (_, nxt) in zip(code, code[1:])
                           if ins.startswith("push   %rbp") and nxt.startswith("push   %r15") and a > base]
        starts.append(base + size)
        rows = []
        for a, b in zip(starts, starts[1:]):
            n = sum(v for ip, v in samples.items() if a <= ip < b)
            if n >= total * 0.005:
                rows.append(f"  {100 * n / total:5.1f}%  function at +{a - base:#x}, {b - a} bytes")
        if rows:
            print(f"{dump['label']} and the code linked after it, by function:")
            print("\n".join(rows))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("tokenizer", help="a name in benchmarks._engines.TOKENIZERS (o200k_base, llama3, ...)")
    parser.add_argument("corpus", help="english, code, or a file of ../shared/corpus/multilingual (chinese, ...)")
    parser.add_argument("--passes", type=int, default=None, help="passes over the corpus (5; 150 with --perf, so "
                        "that the passes outweigh loading the tokenizer in the profile)")
    parser.add_argument("--lines", type=int, default=12000, help="corpus lines a pass reads")
    parser.add_argument("--perf", action="store_true", help="record with perf and report shares per kernel")
    parser.add_argument("--map", action="store_true", help=argparse.SUPPRESS)  # the child of --perf
    parser.add_argument("--out", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.passes is None:
        args.passes = 150 if args.perf else 5
    if args.perf:
        out_dir = Path(tempfile.mkdtemp(prefix="tokjit-profile-"))
        data = out_dir / "perf.data"
        child = [sys.executable, __file__, args.tokenizer, args.corpus, "--passes", str(args.passes),
                 "--lines", str(args.lines), "--map", "--out", str(out_dir)]
        code = subprocess.run(["perf", "record", "-F", "4000", "-o", str(data), "--"] + child).returncode
        if code == 0:
            report(data, out_dir)
        return code
    tok, parse_special = load(args.tokenizer)
    rates = fresh_passes(tok, parse_special, corpus_lines(args.corpus, args.lines), args.passes)
    print(f"{args.tokenizer} {args.corpus}, text never seen (a new thread a pass): median "
          f"{statistics.median(rates):.1f} MB/s [{' '.join(f'{r:.1f}' for r in rates)}]")
    if args.map:
        write_perf_map(Path(args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
