"""Per-token cost of streaming decode and stop-sequence handling, next to HF's DecodeStream.

    python benchmarks/bench_serving.py [--tokens 20000] [--families llama3,gpt4o,...]

Ids: HF encodings of the shared corpus (English, code, CJK, emoji lines), stepped one at a time.
Reports microseconds per token, best of 3 runs, all in the same process.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

import tokjit  # noqa: E402
from tokjit.serving import StopSequenceDecoder  # noqa: E402

SHARED = Path(os.environ.get("TOKJIT_TEST_DATA", ROOT.parent / "shared"))


def corpus_ids(ref, n_tokens):
    from conftest import corpus_files
    files = corpus_files()
    texts = []
    for name in ("english", "code", "chinese", "japanese", "emoji", "russian", "arabic"):
        texts.extend(t[:2000] for t in files.get(name, [])[:300])
    ids = []
    for t in texts:
        ids.extend(ref.encode(t, add_special_tokens=False).ids)
        if len(ids) >= n_tokens:
            break
    return ids[:n_tokens]


def best_of(fn, repeat=3):
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokens", type=int, default=20000)
    ap.add_argument("--families", default="llama3,gpt4o,gemma3,mistral-7b,bert-minilm,t5,pegasus")
    args = ap.parse_args()
    import tokenizers
    from tokenizers.decoders import DecodeStream as HFDecodeStream

    print(f"{'tokenizer':<12} {'HF DecodeStream':>16} {'tokjit stream':>14} {'tokjit stop':>12}  (us/token)")
    for name in args.families.split(","):
        path = SHARED / "data" / "hf" / name / "tokenizer.json"
        try:
            tok = tokjit.load(path)
        except tokjit.UnsupportedComponentError as exc:
            print(f"{name:<12} skipped: {exc}")
            continue
        ref = tokenizers.Tokenizer.from_file(str(path))
        ref.no_truncation()
        ids = corpus_ids(ref, args.tokens)

        def hf():
            s = HFDecodeStream(skip_special_tokens=False)
            for i in ids:
                s.step(ref, i)

        def ours():
            s = tok.decode_stream()
            for i in ids:
                s.step(i)

        def stop():
            d = StopSequenceDecoder(tok, stop_strings=["</answer>", "\n\nUser:"], stop_token_ids=[-1])
            for i in ids:
                d.step(i)

        ours()  # warm caches (per-id byte table)
        n = len(ids)
        t_hf, t_ours, t_stop = (best_of(f) / n * 1e6 for f in (hf, ours, stop))
        print(f"{name:<12} {t_hf:16.2f} {t_ours:14.2f} {t_stop:12.2f}   ({n} tokens)")


if __name__ == "__main__":
    main()
