"""The ``tokjit`` command line: encode, decode, count and inspect with any tokenizer file.

With no input file, commands read the sample text bundled with the package; with no ``-t``, they use
the bundled ``o200k_base`` encoding, so ``tokjit count`` works offline on a fresh install.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from importlib import resources


def _tokenizer(spec: str | None):
    import tokjit

    if spec is None:
        return tokjit.get_encoding("o200k_base")
    if spec in tokjit.list_encoding_names():
        return tokjit.get_encoding(spec)
    return tokjit.load(spec)


def _read_input(path: str | None) -> str:
    if path is None:
        return resources.files("tokjit").joinpath("data/sample.txt").read_text(encoding="utf-8")
    if path == "-":
        return sys.stdin.read()
    with open(path, encoding="utf-8", errors="surrogateescape", newline="") as fh:
        return fh.read()


def _texts(text: str, by_line: bool) -> list[str]:
    return text.splitlines(keepends=True) if by_line else [text]


def cmd_count(args) -> int:
    tok = _tokenizer(args.tokenizer)
    text = _read_input(args.input)
    texts = _texts(text, args.lines)
    tok.encode_batch(texts[:1])  # JIT / cache warm-up, reported separately
    n_bytes = len(text.encode("utf-8", "surrogatepass"))
    start = time.perf_counter()
    batch = tok.encode_batch(texts, parse_special=args.parse_special, num_threads=args.threads)
    elapsed = time.perf_counter() - start
    n_tokens = sum(len(ids) for ids in batch)
    result = {"tokenizer": tok.name, "bytes": n_bytes, "tokens": n_tokens,
              "bytes_per_token": round(n_bytes / max(n_tokens, 1), 3),
              "seconds": round(elapsed, 4), "MB_per_s": round(n_bytes / 1e6 / max(elapsed, 1e-9), 2)}
    if args.json:
        print(json.dumps(result))
    else:
        first = batch[0][:16] if batch else []
        print(f"{result['tokens']} tokens, {n_bytes} bytes ({result['bytes_per_token']} bytes/token) "
              f"with {tok.name}")
        print(f"first tokens: {first}")
        print(f"{result['MB_per_s']} MB/s ({elapsed * 1e3:.1f} ms)")
    return 0


def cmd_encode(args) -> int:
    tok = _tokenizer(args.tokenizer)
    text = _read_input(args.input)
    for chunk in _texts(text, args.lines):
        ids = tok.encode(chunk, parse_special=args.parse_special, add_special_tokens=args.add_special_tokens)
        print(json.dumps(ids) if args.json else " ".join(map(str, ids)))
    return 0


def cmd_decode(args) -> int:
    tok = _tokenizer(args.tokenizer)
    raw = _read_input(args.input) if args.input else sys.stdin.read()
    for line in raw.splitlines():
        line = line.strip()
        if not line:
            continue
        ids = json.loads(line) if line.startswith("[") else [int(x) for x in line.split()]
        sys.stdout.write(tok.decode(ids, skip_special_tokens=args.skip_special_tokens))
        sys.stdout.write("\n")
    return 0


def cmd_inspect(args) -> int:
    tok = _tokenizer(args.tokenizer)
    spec = tok.spec
    info = {
        "name": tok.name, "format": spec.source.get("format"), "model": spec.model.get("type"),
        "model_options": {k: v for k, v in spec.model.items() if k != "type"},
        "vocab_size": tok.vocab_size, "special_tokens": len(tok.special_tokens),
        "added_tokens": len(spec.added_tokens),
        "normalizer": (spec.normalizer or {}).get("type"), "pre_tokenizer": (spec.pre_tokenizer or {}).get("type"),
        "post_processor": (spec.post_processor or {}).get("type"), "decoder": (spec.decoder or {}).get("type"),
        "bos_id": spec.bos_id, "eos_id": spec.eos_id, "has_chat_template": spec.chat_template is not None,
        "sha256": spec.source.get("sha256"),
    }
    print(json.dumps(info, indent=None if args.json else 2, default=str))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tokjit", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)

    def common(p, with_input=True):
        p.add_argument("-t", "--tokenizer", help="tokenizer file or bundled encoding name (default o200k_base)")
        if with_input:
            p.add_argument("input", nargs="?", help="input file ('-' for stdin; default: bundled sample text)")
        p.add_argument("--json", action="store_true", help="machine-readable output")

    p = sub.add_parser("count", help="count tokens and report throughput")
    common(p)
    p.add_argument("--lines", action="store_true", help="encode each line as its own document")
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--parse-special", action="store_true", help="special-token text becomes special tokens")
    p.set_defaults(func=cmd_count)

    p = sub.add_parser("encode", help="print token ids")
    common(p)
    p.add_argument("--lines", action="store_true", help="one output line per input line")
    p.add_argument("--parse-special", action="store_true")
    p.add_argument("--add-special-tokens", action="store_true")
    p.set_defaults(func=cmd_encode)

    p = sub.add_parser("decode", help="ids (one sequence per line, JSON list or space separated) -> text")
    common(p)
    p.add_argument("--skip-special-tokens", action="store_true")
    p.set_defaults(func=cmd_decode)

    p = sub.add_parser("inspect", help="describe a tokenizer")
    common(p, with_input=False)
    p.set_defaults(func=cmd_inspect)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except BrokenPipeError:
        return 0
    except Exception as exc:  # a CLI reports errors as one line, not a traceback
        from .errors import TokjitError
        if isinstance(exc, (TokjitError, OSError)):
            print(f"tokjit: error: {exc}", file=sys.stderr)
            return 2
        raise


if __name__ == "__main__":
    sys.exit(main())
