"""The ``tokjit`` command line: encode, decode, count, inspect, convert and bench with any tokenizer file.

With no input file, commands read the sample text bundled with the package (``-`` reads stdin); with no
``-t``, they use the bundled ``o200k_base`` encoding, so ``tokjit count`` works offline on a fresh
install. ``decode`` is the exception to both: it needs ``-t`` (ids mean nothing without their
tokenizer) and reads ids from a file or piped stdin. Long inputs show a progress bar with throughput on stderr when it is a terminal (or with
``--progress``).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import sys
import time
from importlib import resources

# inputs at least this long get a progress bar on an interactive stderr
PROGRESS_MIN_BYTES = 4_000_000
# count reports MB/s only for inputs at least this long: shorter ones finish in about a millisecond,
# where timer resolution and call overhead decide the figure
THROUGHPUT_MIN_BYTES = 1_000_000
# --lines mode encodes this many bytes per batch between progress updates
BATCH_BYTES = 1_000_000


# ==================================================================================================
# Tokenizer and input
# ==================================================================================================

def _bundled_entry(name: str) -> dict:
    from tokjit.load.encodings import _catalog
    catalog = _catalog()
    if name not in catalog:
        from tokjit.errors import UnknownEncodingError
        raise UnknownEncodingError(f"unknown encoding {name!r}; bundled: {', '.join(sorted(catalog))}")
    return catalog[name]


def _load_options(args) -> dict:
    """pat_str / special_tokens for files that carry none (.tiktoken): explicit, or ``--like NAME``."""
    options = {}
    like = getattr(args, "like", None)
    if like:
        entry = _bundled_entry(like)
        options = {"pat_str": entry["pat_str"], "special_tokens": entry["special_tokens"]}
    if getattr(args, "pat_str", None):
        options["pat_str"] = args.pat_str
    return options


def _tokenizer(args, *, required: bool = False):
    import tokjit

    spec = args.tokenizer
    if spec is None:
        if required:
            from tokjit.errors import InputError
            raise InputError(f"{args.command} needs -t: the tokenizer that produced the ids (a file or a "
                             f"bundled encoding: {', '.join(tokjit.list_encoding_names())})")
        return tokjit.get_encoding("o200k_base")
    from tokjit.errors import InputError, TokenizerFileNotFoundError
    names = tokjit.list_encoding_names()
    if spec in names and not os.path.exists(spec):
        return tokjit.get_encoding(spec)
    options = _load_options(args)
    if "pat_str" not in options and _is_tiktoken_file(spec):
        stem = os.path.basename(spec).split(".")[0]
        hint = f" (its name suggests --like {stem})" if stem in names else ""
        raise InputError(f"{spec} is a .tiktoken rank file, which carries no split pattern or special tokens: "
                         f"pass --like NAME to borrow those of a bundled encoding ({', '.join(names)}){hint}, "
                         f"or --pat-str REGEX")
    try:
        return tokjit.load(spec, **options)
    except TokenizerFileNotFoundError as exc:
        import difflib
        close = difflib.get_close_matches(spec, names, n=1, cutoff=0.6)
        hint = f"; did you mean {close[0]}?" if close else ""
        raise TokenizerFileNotFoundError(f"{exc}; -t also takes a bundled encoding name "
                                         f"({', '.join(names)}){hint}") from None


def _is_tiktoken_file(path: str) -> bool:
    from tokjit.load import detect_format
    if not os.path.isfile(path):
        return False
    with open(path, "rb") as fh:
        head = fh.read(4096)
    try:
        return detect_format(head, path) == "tiktoken"
    except ValueError:
        return False


def _read_input(path: str | None) -> str:
    """Text of a file, stdin (``-``) or the bundled sample. Bytes that are not UTF-8 survive as lone
    surrogates, which the tokenizer encodes as U+FFFD (as tiktoken does)."""
    if path is None:
        return resources.files("tokjit").joinpath("data/sample.txt").read_text(encoding="utf-8")
    if path == "-":
        data = sys.stdin.buffer.read()
    else:
        with open(path, "rb") as fh:
            data = fh.read()
    return data.decode("utf-8", "surrogateescape")


def _texts(text: str, by_line: bool) -> list[str]:
    return text.splitlines(keepends=True) if by_line else [text]


def _utf8_len(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


# ==================================================================================================
# Progress bar (tqdm, so its usual TQDM_* environment settings apply)
# ==================================================================================================

def _progress(args, total_bytes: int, label: str = "encoding"):
    """A tqdm bar over bytes on stderr (MB, MB/s, ETA); on a terminal for inputs of
    PROGRESS_MIN_BYTES or more unless ``--progress`` / ``--no-progress`` says otherwise."""
    from tqdm import tqdm
    if getattr(args, "progress", None) is None:  # neither --progress nor --no-progress
        enabled = sys.stderr.isatty() and total_bytes >= PROGRESS_MIN_BYTES
    else:
        enabled = args.progress
    return tqdm(total=total_bytes, disable=not enabled, desc=label, unit="B", unit_scale=True,
                unit_divisor=1000, file=sys.stderr, mininterval=0.1)


def _encode_all(tok, texts: list[str], args, *, numpy: bool = False):
    """Encode ``texts`` in batches of about BATCH_BYTES, driving the progress bar.

    Returns a list of id lists, or (flat int32, int64 offsets) with ``numpy=True``."""
    import numpy as np

    sizes = [_utf8_len(t) for t in texts]
    progress = _progress(args, sum(sizes))
    kwargs = {"parse_special": args.parse_special, "num_threads": getattr(args, "threads", None),
              "add_special_tokens": getattr(args, "add_special_tokens", False)}
    lists, flats, counts = [], [], []
    i = 0
    try:
        while i < len(texts):
            j, acc = i, 0
            while j < len(texts) and (acc < BATCH_BYTES or j == i):
                acc += sizes[j]
                j += 1
            if numpy:
                flat, offsets = tok.encode_batch_numpy(texts[i:j], **kwargs)
                flats.append(flat)
                counts.append(np.diff(offsets))
            else:
                lists.extend(tok.encode_batch(texts[i:j], **kwargs))
            progress.update(acc)
            i = j
    finally:
        progress.close()
    if not numpy:
        return lists
    flat = np.concatenate(flats) if flats else np.zeros(0, np.int32)
    offsets = np.zeros(len(texts) + 1, np.int64)
    if counts:
        np.cumsum(np.concatenate(counts), out=offsets[1:])
    return flat.astype(np.int32, copy=False), offsets


# ==================================================================================================
# Commands
# ==================================================================================================

def cmd_count(args) -> int:
    tok = _tokenizer(args)
    text = _read_input(args.input)
    texts = _texts(text, args.lines)
    tok.encode("warm up")  # loads the compiled kernels; throughput below is warm
    n_bytes = _utf8_len(text)
    start = time.perf_counter()
    batch = _encode_all(tok, texts, args)
    elapsed = time.perf_counter() - start
    n_tokens = sum(len(ids) for ids in batch)
    timed = n_bytes >= THROUGHPUT_MIN_BYTES
    result = {"tokenizer": tok.name, "bytes": n_bytes, "tokens": n_tokens,
              "bytes_per_token": round(n_bytes / max(n_tokens, 1), 3),
              "seconds": round(elapsed, 4),
              "MB_per_s": round(n_bytes / 1e6 / max(elapsed, 1e-9), 2) if timed else None}
    if args.json:
        print(json.dumps(result))
    else:
        first = batch[0][:16] if batch else []
        print(f"{result['tokens']} tokens, {n_bytes} bytes ({result['bytes_per_token']} bytes/token) "
              f"with {tok.name}")
        print(f"first tokens: {first}")
        if timed:
            print(f"{result['MB_per_s']} MB/s ({elapsed * 1e3:.1f} ms)")
        else:
            print(f"no throughput figure: {n_bytes} bytes take too little time to measure (give an input of "
                  f"{THROUGHPUT_MIN_BYTES // 1_000_000} MB or more, or use tokjit bench)")
    return 0


def cmd_encode(args) -> int:
    tok = _tokenizer(args)
    texts = _texts(_read_input(args.input), args.lines)
    if args.npy:
        import numpy as np
        flat, offsets = _encode_all(tok, texts, args, numpy=True)
        np.save(args.npy, flat)
        offsets_path = None
        if args.lines:
            offsets_path = _offsets_path(args.npy)
            np.save(offsets_path, offsets)
        print(json.dumps({"ids": args.npy, "offsets": offsets_path, "sequences": len(texts),
                          "tokens": int(flat.shape[0])}), file=sys.stderr)
        return 0
    out = sys.stdout
    for ids in _encode_all(tok, texts, args):
        out.write(json.dumps(ids) if args.json else " ".join(map(str, ids)))
        out.write("\n")
    return 0


def _offsets_path(npy_path: str) -> str:
    stem = npy_path[:-4] if npy_path.endswith(".npy") else npy_path
    return stem + ".offsets.npy"


def _id_sequences(args):
    """Id sequences from ``.npy`` (with ``X.offsets.npy`` beside it: one sequence per row) or text
    lines (JSON lists or space-separated ids)."""
    path = args.input
    if path and path != "-" and path.endswith(".npy"):
        import numpy as np
        flat = np.load(path, allow_pickle=False)
        offsets_path = _offsets_path(path)
        if os.path.exists(offsets_path):
            offsets = np.load(offsets_path, allow_pickle=False)
            return [flat[offsets[i]:offsets[i + 1]] for i in range(offsets.shape[0] - 1)]
        return [flat]
    if not path or path == "-":
        if sys.stdin is None or sys.stdin.isatty():
            from tokjit.errors import InputError
            raise InputError("decode reads ids from a file (.npy, or lines of ids / JSON lists) or from stdin; "
                             "pass a file, or pipe ids in (tokjit encode ... | tokjit decode -t ...)")
        path = "-"
    raw = _read_input(path)
    seqs = []
    for n, line in enumerate(raw.splitlines(), 1):
        line = line.strip()
        if not line:
            continue
        try:
            seqs.append(json.loads(line) if line.startswith("[") else [int(x) for x in line.split()])
        except ValueError as exc:
            from tokjit.errors import InputError
            raise InputError(f"line {n}: expected a JSON list or space-separated integer ids") from exc
    return seqs


def cmd_decode(args) -> int:
    """Texts of the id sequences, back to back: the ids of ``encode`` (with or without ``--lines``)
    already hold every newline of the input, so ``encode | decode`` gives the input back."""
    if args.tokenizer is None:
        _tokenizer(args, required=True)  # raises: saying which tokenizer comes before reading any input
    sequences = _id_sequences(args)
    tok = _tokenizer(args)
    for ids in sequences:
        text = tok.decode(ids, skip_special_tokens=args.skip_special_tokens)
        if args.json:
            sys.stdout.write(json.dumps(text, ensure_ascii=False) + "\n")
        else:
            sys.stdout.write(text)
    return 0


def cmd_inspect(args) -> int:
    tok = _tokenizer(args)
    spec = tok.spec
    info = {
        "name": tok.name, "format": spec.source.get("format"), "model": spec.model.get("type"),
        "model_options": {k: v for k, v in spec.model.items() if k != "type"},
        "vocab_size": tok.vocab_size, "special_tokens": len(tok.special_tokens),
        "special_token_names": sorted(tok.special_tokens, key=tok.special_tokens.get)[:20],
        "added_tokens": len(spec.added_tokens),
        "normalizer": _component(spec.normalizer), "pre_tokenizer": _component(spec.pre_tokenizer),
        "post_processor": _component(spec.post_processor), "decoder": _component(spec.decoder),
        "bos_id": spec.bos_id, "eos_id": spec.eos_id, "unk_id": spec.unk_id,
        "has_chat_template": spec.chat_template is not None,
        "sha256": spec.source.get("sha256"),
    }
    print(json.dumps(info, indent=None if args.json else 2, default=str))
    return 0


def _component(cfg) -> str | None:
    """``Sequence[NFC, Replace]`` style summary of an HF component dict."""
    if not cfg:
        return None
    kind = cfg.get("type")
    children = cfg.get("normalizers") or cfg.get("pretokenizers") or cfg.get("decoders") or cfg.get("processors")
    if children:
        return f"{kind}[{', '.join(_component(c) or '?' for c in children)}]"
    return kind


def cmd_convert(args) -> int:
    """Parse a tokenizer file once and store the result in the on-disk cache (``tokjit.load.cache``), so
    later loads (and every Dask worker pointed at the same cache directory) skip parsing."""
    from tokjit.load import cache
    from tokjit.load import load_spec

    if args.cache_dir:
        os.environ["TOKJIT_CACHE_DIR"] = args.cache_dir
    directory = cache.cache_dir()
    if directory is None:
        from tokjit.errors import CacheError
        raise CacheError("the cache is disabled (TOKJIT_CACHE_DIR=off): pass --cache-dir DIR")
    path = args.tokenizer
    if path is None or not os.path.isfile(path):
        raise FileNotFoundError(f"convert needs a tokenizer file (-t PATH), got {path!r}")
    with open(path, "rb") as fh:
        data = fh.read()
    options = _load_options(args)
    # the key load_spec uses; checked below by reading the entry back
    key = cache.cache_key(hashlib.sha256(data).hexdigest(),
                          {"fmt": None, "pat_str": options.get("pat_str"),
                           "special_tokens": options.get("special_tokens"), "name": None, "n_vocab": None})
    parse_seconds = None
    if args.force or cache.read(key) is None:
        start = time.perf_counter()
        spec = load_spec(data, path=path, use_cache=False, **options)
        parse_seconds = time.perf_counter() - start
        spec.source.pop("path", None)
        if not cache.write(key, spec):
            raise OSError(f"cannot write the cache in {directory}")
    start = time.perf_counter()
    if cache.read(key) is None:
        from tokjit.errors import CacheError
        raise CacheError(f"cache entry {key} missing after writing it in {directory}")
    read_seconds = time.perf_counter() - start
    entry = os.path.join(directory, key + ".tokjit")
    result = {"tokenizer": path, "cache_file": entry, "cache_bytes": os.path.getsize(entry),
              "parse_seconds": None if parse_seconds is None else round(parse_seconds, 3),
              "cached_read_seconds": round(read_seconds, 3),
              "status": "written" if parse_seconds is not None else "already cached (use --force to rebuild)"}
    print(json.dumps(result, indent=None if args.json else 2))
    return 0


def _time_encoders(label_fn_pairs, repeat: int):
    """(label, first-call seconds, best warm seconds, token count) per encoder."""
    rows = []
    for label, fn in label_fn_pairs:
        start = time.perf_counter()
        n_tokens = fn()
        first = time.perf_counter() - start
        warm = []
        for _ in range(repeat):
            start = time.perf_counter()
            fn()
            warm.append(time.perf_counter() - start)
        rows.append((label, first, min(warm) if warm else first, statistics.median(warm) if warm else first,
                     n_tokens))
    return rows


def _reference_encoders(args, tok, texts, threads):
    """(encoders, notes): the reference library's encoders for the same tokenizer, and one line per
    reference that could not be timed (not installed, or none for this format)."""
    out, notes = [], []
    fmt = tok.spec.source.get("format")
    bundled = tok.spec.source.get("name") if str(tok.spec.source.get("path", "")).startswith("<bundled") else None

    def missing(module: str):
        notes.append(f"{module} is not installed (pip install {module}): not compared")

    if bundled:
        try:
            import tiktoken
        except ImportError:
            tiktoken = None
            missing("tiktoken")
        if tiktoken is not None:
            enc = _tiktoken_from_bundled(tiktoken, bundled)
            out.append(("tiktoken encode_ordinary", lambda: sum(len(enc.encode_ordinary(t)) for t in texts)))
            out.append((f"tiktoken batch ({threads} threads)",
                        lambda: sum(map(len, enc.encode_ordinary_batch(texts, num_threads=threads)))))
    elif fmt == "tokenizer.json":
        try:
            import tokenizers
        except ImportError:
            tokenizers = None
            missing("tokenizers")
        if tokenizers is not None:
            hf = tokenizers.Tokenizer.from_file(tok.spec.source["path"])
            hf.no_truncation()
            hf.no_padding()
            out.append(("HF tokenizers encode",
                        lambda: sum(len(hf.encode(t, add_special_tokens=False).ids) for t in texts)))
            out.append(("HF tokenizers encode_batch (all cores)",
                        lambda: sum(len(e.ids) for e in hf.encode_batch(texts, add_special_tokens=False))))
    elif fmt == "sentencepiece":
        try:
            import sentencepiece
        except ImportError:
            sentencepiece = None
            missing("sentencepiece")
        if sentencepiece is not None:
            sp = sentencepiece.SentencePieceProcessor(model_file=tok.spec.source["path"])
            out.append(("sentencepiece encode", lambda: sum(len(sp.encode(t)) for t in texts)))
            out.append((f"sentencepiece batch ({threads} threads)",
                        lambda: sum(map(len, sp.encode(texts, num_threads=threads)))))
    else:
        notes.append(f"no reference library is timed for {fmt} files here (llama.cpp defines GGUF ids; "
                     "tiktoken needs a bundled encoding name)")
    return out, notes


def _tiktoken_from_bundled(tiktoken, name):
    """A tiktoken Encoding from tokjit's bundled rank file (no download)."""
    import base64
    import gzip

    entry = _bundled_entry(name)
    raw = gzip.decompress(resources.files("tokjit").joinpath("data/encodings/" + entry["ranks_file"]).read_bytes())
    ranks = {}
    for line in raw.splitlines():
        if line.strip():
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
    return tiktoken.Encoding(name=f"{name}-bench", pat_str=entry["pat_str"], mergeable_ranks=ranks,
                             special_tokens=entry["special_tokens"],
                             explicit_n_vocab=entry.get("explicit_n_vocab"))


def cmd_bench(args) -> int:
    load_start = time.perf_counter()
    tok = _tokenizer(args)
    load_seconds = time.perf_counter() - load_start
    text = _read_input(args.input)
    texts = _texts(text, args.lines)
    n_bytes = _utf8_len(text)
    threads = args.threads or min(os.cpu_count() or 1, 8)
    encoders = [("tokjit encode", lambda: sum(len(tok.encode(t)) for t in texts)),
                (f"tokjit encode_batch ({threads} threads)",
                 lambda: sum(map(len, tok.encode_batch(texts, num_threads=threads))))]
    notes = []
    if args.compare:
        references, notes = _reference_encoders(args, tok, texts, threads)
        encoders += references
    rows = _time_encoders(encoders, args.repeat)
    result = {"tokenizer": tok.name, "bytes": n_bytes, "documents": len(texts),
              "load_seconds": round(load_seconds, 3), "not_compared": notes, "results": [
                  {"engine": label, "first_call_seconds": round(first, 4), "warm_seconds": round(best, 4),
                   "warm_median_seconds": round(med, 4), "MB_per_s": round(n_bytes / 1e6 / max(best, 1e-9), 2),
                   "tokens": n_tok}
                  for label, first, best, med, n_tok in rows]}
    if args.json:
        print(json.dumps(result))
        return 0
    print(f"{tok.name}: {n_bytes / 1e6:.2f} MB in {len(texts)} document(s); load {load_seconds:.2f} s")
    print(f"{'engine':<42} {'MB/s (warm)':>11} {'first call':>11} {'tokens':>10}")
    for r in result["results"]:
        print(f"{r['engine']:<42} {r['MB_per_s']:>11.2f} {r['first_call_seconds']:>10.3f}s {r['tokens']:>10}")
    for note in notes:
        print(f"note: {note}")
    print("first call = the first run in this process (numba loads compiled kernels from its cache, or "
          "compiles them); MB/s = best of the warm runs")
    counts = {r["tokens"] for r in result["results"]}
    if len(counts) > 1:
        print("note: token counts differ between engines (see the tokens column)")
    return 0


# ==================================================================================================
# Parser
# ==================================================================================================

def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tokjit", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)

    def common(p, with_input=True, input_help="input file ('-' for stdin; default: bundled sample text)",
               tokenizer_default="default o200k_base"):
        p.add_argument("-t", "--tokenizer",
                       help="tokenizer file (tokenizer.json, .model, .tiktoken, .gguf, vocab.txt) or bundled "
                            f"encoding name ({tokenizer_default})")
        p.add_argument("--like", metavar="NAME",
                       help="for .tiktoken files: use the split pattern and special tokens of bundled NAME")
        p.add_argument("--pat-str", help="for .tiktoken files: the pre-tokenizer regex")
        if with_input:
            p.add_argument("input", nargs="?", help=input_help)
        p.add_argument("--json", action="store_true", help="machine-readable output")

    def progress(p):
        p.add_argument("--progress", dest="progress", action="store_true", default=None,
                       help="show a progress bar on stderr (default: on a terminal for inputs >= 4 MB)")
        p.add_argument("--no-progress", dest="progress", action="store_false")

    p = sub.add_parser("count", help="count tokens and report throughput")
    common(p)
    p.add_argument("--lines", action="store_true", help="encode each line as its own document")
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--parse-special", action="store_true", help="special-token text becomes special tokens")
    progress(p)
    p.set_defaults(func=cmd_count)

    p = sub.add_parser("encode", help="print token ids (space separated, --json lists, or --npy file)")
    common(p)
    p.add_argument("--lines", action="store_true", help="one output sequence per input line")
    p.add_argument("--parse-special", action="store_true")
    p.add_argument("--add-special-tokens", action="store_true")
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--npy", metavar="OUT.npy",
                   help="write int32 ids to OUT.npy (with --lines also int64 offsets to OUT.offsets.npy)")
    progress(p)
    p.set_defaults(func=cmd_encode)

    p = sub.add_parser("decode", help="ids -> text (lines of JSON lists / space-separated ids, or a .npy)",
                       description="Decode id sequences and write their texts back to back (encode | decode "
                                   "reproduces the input); --json writes one JSON string per sequence.")
    common(p, input_help="ids file: .npy (with X.offsets.npy beside it: one sequence per row) or lines of "
                         "JSON lists / space-separated ids; '-' or nothing reads piped stdin",
           tokenizer_default="required: the tokenizer that produced the ids")
    p.add_argument("--skip-special-tokens", action="store_true")
    p.set_defaults(func=cmd_decode)

    p = sub.add_parser("inspect", help="describe a tokenizer (family, sizes, special tokens, components)")
    common(p, with_input=False)
    p.set_defaults(func=cmd_inspect)

    p = sub.add_parser("convert", help="parse a tokenizer file into the on-disk compiled cache")
    common(p, with_input=False)
    p.add_argument("--cache-dir", help="cache directory to write (default: TOKJIT_CACHE_DIR or ~/.cache/tokjit)")
    p.add_argument("--force", action="store_true", help="re-parse even if already cached")
    p.set_defaults(func=cmd_convert)

    p = sub.add_parser("bench", help="encoding throughput in MB/s, optionally next to tiktoken / HF tokenizers")
    common(p)
    p.add_argument("--lines", action="store_true", help="each line is a document")
    p.add_argument("--threads", type=int, default=None, help="threads for the batch runs (default: cores, max 8)")
    p.add_argument("--repeat", type=int, default=3, help="warm runs per engine (best is reported)")
    p.add_argument("--compare", action="store_true", help="also time tiktoken / HF tokenizers if installed")
    p.set_defaults(func=cmd_bench)

    p = sub.add_parser("precompile", help="compile the numba kernels of every family now (once per install)")
    p.add_argument("--family", action="append", metavar="NAME",
                   help="only this family (repeatable); default: all")
    p.add_argument("--processes", type=int, default=None, help="worker processes (default: one per core)")
    p.set_defaults(func=cmd_precompile)
    return parser


def cmd_precompile(args) -> int:
    import time
    from tokjit.precompile import FAMILIES, precompile
    if args.family and any(f not in FAMILIES for f in args.family):
        print(f"tokjit: error: unknown family; known: {', '.join(FAMILIES)}", file=sys.stderr)
        return 2
    t0 = time.perf_counter()
    precompile(args.family, processes=args.processes, log=lambda line: print(line, flush=True))
    print(f"compiled in {time.perf_counter() - t0:.1f} s; numba's cache now holds every kernel")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except BrokenPipeError:
        return 0
    except KeyboardInterrupt:
        print("tokjit: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # a CLI reports errors as one line, not a traceback
        from tokjit.errors import TokjitError
        if isinstance(exc, (TokjitError, OSError, KeyError)):
            print(f"tokjit: error: {exc}", file=sys.stderr)
            return 2
        raise


if __name__ == "__main__":
    sys.exit(main())
