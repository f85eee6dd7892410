"""Side-by-side throughput: tokjit next to tiktoken, HF tokenizers and sentencepiece, in one run.

    python -m benchmarks.compare [--quick] [--threads 1 2] [--tokenizers o200k_base llama3 ...]

For every tokenizer x corpus it prints MB/s (median of repeats) of each library that can load that
tokenizer, checks that the ids agree (a cell whose ids differ is marked and does not count), and the
ratio tokjit / reference. Reads ``../shared`` (or ``$TOKJIT_TEST_DATA``).
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")  # HF: single thread unless we ask for more

ROOT = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("TOKJIT_TEST_DATA", ROOT.parent / "shared"))
DATA = SHARED / "data"


def corpora(quick: bool) -> dict[str, list[str]]:
    limit = 400_000 if quick else 2_000_000  # bytes per corpus
    out = {}
    base = SHARED / "corpus"
    for name, path in [("english", base / "english.txt"), ("code", base / "code.txt"),
                       ("chinese", base / "multilingual" / "chinese.txt"),
                       ("russian", base / "multilingual" / "russian.txt")]:
        text = path.read_text(encoding="utf-8")[:limit]
        out[name] = text.splitlines(keepends=True)
    return out


def tiktoken_ref(name):
    import tiktoken
    import tiktoken.load
    entry = json.loads((DATA / "tiktoken" / "encodings.json").read_text())[name]
    ranks = tiktoken.load.load_tiktoken_bpe(str(DATA / "tiktoken" / entry["mergeable_ranks_file"].split()[0]))
    enc = tiktoken.Encoding(name=name, pat_str=entry["pat_str"], mergeable_ranks=ranks,
                            special_tokens=entry["special_tokens"])
    return lambda texts, threads: enc.encode_ordinary_batch(texts, num_threads=threads)


def hf_ref(path):
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(str(path))
    tok.no_truncation()
    tok.no_padding()

    def run(texts, threads):
        if threads == 1:
            return [e.ids for e in (tok.encode(t, add_special_tokens=False) for t in texts)]
        return [e.ids for e in tok.encode_batch(texts, add_special_tokens=False)]
    return run


def spm_ref(path):
    import sentencepiece as spm
    sp = spm.SentencePieceProcessor(model_file=str(path))
    return lambda texts, threads: sp.encode(texts, num_threads=threads)


TOKENIZERS = {
    # name: (tokjit loader, reference name, reference factory, tokjit parse_special)
    "o200k_base": (lambda: __import__("tokjit").get_encoding("o200k_base"), "tiktoken",
                   lambda: tiktoken_ref("o200k_base"), False),
    "cl100k_base": (lambda: __import__("tokjit").get_encoding("cl100k_base"), "tiktoken",
                    lambda: tiktoken_ref("cl100k_base"), False),
    "llama3": (lambda: __import__("tokjit").load(DATA / "hf/llama3/tokenizer.json"), "HF",
               lambda: hf_ref(DATA / "hf/llama3/tokenizer.json"), True),
    "gemma3": (lambda: __import__("tokjit").load(DATA / "hf/gemma3/tokenizer.json"), "HF",
               lambda: hf_ref(DATA / "hf/gemma3/tokenizer.json"), True),
    "t5": (lambda: __import__("tokjit").load(DATA / "hf/t5/tokenizer.json"), "HF",
           lambda: hf_ref(DATA / "hf/t5/tokenizer.json"), True),
    "bert": (lambda: __import__("tokjit").load(DATA / "hf/bert-minilm/tokenizer.json"), "HF",
             lambda: hf_ref(DATA / "hf/bert-minilm/tokenizer.json"), True),
    "llama2-spm": (lambda: __import__("tokjit").load(DATA / "spm/llama2/tokenizer.model"), "sentencepiece",
                   lambda: spm_ref(DATA / "spm/llama2/tokenizer.model"), False),
    "t5-spm": (lambda: __import__("tokjit").load(DATA / "hf/t5/spiece.model"), "sentencepiece",
               lambda: spm_ref(DATA / "hf/t5/spiece.model"), False),
}


def timed(fn, repeats: int) -> tuple[float, object]:
    times, result = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), result


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="smaller corpora, fewer repeats")
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--tokenizers", nargs="+", default=list(TOKENIZERS))
    ap.add_argument("--repeats", type=int, default=None)
    args = ap.parse_args(argv)
    repeats = args.repeats or (3 if args.quick else 5)
    texts_by_corpus = corpora(args.quick)
    print(f"# machine: {platform.machine()} {platform.processor() or ''} cores={os.cpu_count()} "
          f"python={platform.python_version()}")
    print(f"# medians of {repeats} runs; MB/s of UTF-8 input; 'ids!' = ids differ from the reference")
    header = f"{'tokenizer':<12} {'corpus':<8} {'thr':>3} {'tokjit':>9} {'reference':>22} {'ratio':>7}"
    print(header)
    print("-" * len(header))
    for name in args.tokenizers:
        load_ours, ref_name, load_ref, parse_special = TOKENIZERS[name]
        try:
            ours = load_ours()
            ref = load_ref()
        except Exception as exc:  # noqa: BLE001 - a tokenizer we cannot load is reported, not fatal
            print(f"{name:<12} skipped: {type(exc).__name__}: {exc}")
            continue
        for corpus, texts in texts_by_corpus.items():
            n_bytes = sum(len(t.encode("utf-8")) for t in texts)
            for threads in args.threads:
                ours.encode_batch(texts[:50], num_threads=threads, parse_special=parse_special)  # warm
                t_ours, ids_ours = timed(lambda: ours.encode_batch(texts, num_threads=threads,
                                                                   parse_special=parse_special), repeats)
                t_ref, ids_ref = timed(lambda: ref(texts, threads), repeats)
                same = ids_ours == [list(x) for x in ids_ref]
                mbs_ours = n_bytes / 1e6 / t_ours
                mbs_ref = n_bytes / 1e6 / t_ref
                ratio = f"{mbs_ours / mbs_ref:6.2f}x" if same else "   n/a"
                print(f"{name:<12} {corpus:<8} {threads:>3} {mbs_ours:>8.2f}{'' if same else '!'} "
                      f"{ref_name + ' ' + format(mbs_ref, '.2f'):>22} {ratio:>7}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
