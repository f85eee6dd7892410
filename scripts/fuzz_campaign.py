"""The long fuzz campaign (outside CI): the property tests with many examples, the corrupted-file
generator at a larger scale, and, if ``atheris`` is installed (``pip install -e ".[fuzz]"``), a
coverage-guided run over raw bytes -> every loader and over arbitrary text -> o200k/llama3.

    python scripts/fuzz_campaign.py                      # 2000 examples/property, corrupt scale 10
    python scripts/fuzz_campaign.py --examples 20000 --corrupt-scale 50 --atheris-seconds 3600

Everything runs with NUMBA_BOUNDSCHECK=1 so an out-of-bounds read is an IndexError, not a silent
wrong answer. Failures print the falsifying input; the run exits non-zero if anything failed.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def run(cmd, env):
    print("+", " ".join(cmd), flush=True)
    return subprocess.run(cmd, cwd=ROOT, env=env).returncode


ATHERIS_LOADERS = r'''
import sys, atheris
import tokjit  # numba kernels must stay uninstrumented: numba cannot compile atheris' hooks
from tokjit.api import load_bytes
import tokjit.load.gguf_file  # has a kernel
with atheris.instrument_imports(include=["tokjit.load.hf_json", "tokjit.load.hf_unigram",
                                         "tokjit.load.hf_wordpiece", "tokjit.load.tiktoken_file",
                                         "tokjit.load.sentencepiece_model", "tokjit.load.vocab_txt"]):
    import tokjit.load.hf_json, tokjit.load.hf_unigram, tokjit.load.hf_wordpiece  # noqa: E401
    import tokjit.load.tiktoken_file, tokjit.load.sentencepiece_model, tokjit.load.vocab_txt  # noqa: E401

def one(data: bytes):
    fdp = atheris.FuzzedDataProvider(data)
    fmt = fdp.ConsumeIntInRange(0, 4)
    body = fdp.ConsumeBytes(fdp.remaining_bytes())
    fmt = ("gguf", "tokenizer.json", "tiktoken", "sentencepiece", "vocab.txt")[fmt]
    try:
        tok = load_bytes(body, fmt=fmt, use_cache=False, pat_str=r"\w+| ?[^\s\w]+|\s+")
    except tokjit.TokjitError:
        return
    for text in ("Hello world <s> 日本 😀", "x" * 300):
        try:  # a typed error for a text (WordPiece without [UNK], as HF) is an answer
            ids = tok.encode(text, parse_special=True)
        except tokjit.TokjitError:
            continue
        tok.decode(ids)

atheris.Setup(sys.argv, one)
atheris.Fuzz()
'''

ATHERIS_TEXT = r'''
import sys, atheris
import tokjit
enc = tokjit.get_encoding("o200k_base")

def one(data: bytes):
    text = data.decode("utf-8", "replace")
    ids = enc.encode(text)
    assert enc.decode(ids) == text
    assert enc.encode_batch([text, text], num_threads=2) == [ids, ids]

atheris.Setup(sys.argv, one)
atheris.Fuzz()
'''


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--examples", type=int, default=2000, help="hypothesis examples per property")
    ap.add_argument("--corrupt-scale", type=float, default=10.0, help="multiplier on random corruptions")
    ap.add_argument("--atheris-seconds", type=int, default=600, help="per atheris target (0: skip)")
    ap.add_argument("--random", action="store_true", help="fresh random seeds instead of derandomized runs")
    ap.add_argument("--workdir", default=os.path.join(tempfile.gettempdir(), "tokjit-fuzz"),
                    help="atheris scripts and corpora (kept between runs)")
    args = ap.parse_args()

    env = dict(os.environ, NUMBA_BOUNDSCHECK="1", TOKJIT_FUZZ_EXAMPLES=str(args.examples),
               TOKJIT_CORRUPT_SCALE=str(args.corrupt_scale))
    if args.random:
        env["TOKJIT_FUZZ_RANDOM"] = "1"
    failed = 0
    failed |= run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_fuzz.py",
                   "tests/test_threads.py"], env) != 0
    failed |= run([sys.executable, "tests/test_corrupted_files.py"], env) != 0
    if args.atheris_seconds > 0:
        try:
            import atheris  # noqa: F401
        except ImportError:
            print("atheris not installed (pip install -e '.[fuzz]'): coverage-guided runs skipped")
        else:
            for name, source in (("loaders", ATHERIS_LOADERS), ("text", ATHERIS_TEXT)):
                env_run = dict(env, PYTHONPATH=str(ROOT))
                work = Path(args.workdir)
                script = work / f"atheris_{name}.py"
                work.mkdir(parents=True, exist_ok=True)
                script.write_text(source)
                corpus = work / f"atheris_{name}_corpus"
                corpus.mkdir(exist_ok=True)
                failed |= run([sys.executable, str(script), str(corpus),
                               f"-max_total_time={args.atheris_seconds}", "-rss_limit_mb=8192",
                               "-timeout=60"], env_run) != 0
    print("campaign", "FAILED" if failed else "passed")
    return int(failed)


if __name__ == "__main__":
    sys.exit(main())
