"""Every library the benchmarks compare, loaded for one tokenizer and called at its best.

Shared by ``benchmarks/compare.py`` (one printed comparison) and the asv suite
(``benchmarks/bench_libraries.py``). Each library is an :class:`Engine` with

* ``encode``: its fastest single-text call returning a list of ids (what a per-call loop uses); a
  library whose single-text call returns an array (gigatoken) is called as a caller who wants a list
  writes it, with ``.tolist()``,
* ``encode_np``: its single-text call returning a numpy array, where it has one (tokjit and tiktoken
  ``encode_to_numpy``, gigatoken ``encode``),
* ``batch``: its list-of-lists batch API, keyed by thread count (``1`` and ``ALL_THREADS``),
* ``flat``: its flat bulk API (one buffer of ids plus offsets), where it has one, keyed by thread
  count like ``batch`` (fastokens' takes no thread count: all cores only).

A library that is not importable is reported as "not installed"; one that cannot load a tokenizer
(unsupported model or normalizer) as "cannot load: <its error>". Neither is fatal. Which library
defines the right ids is the tokenizer's *reference* (tiktoken, HF ``tokenizers``, sentencepiece);
every other library's ids are checked against it by the callers.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("TOKJIT_TEST_DATA", ROOT.parent / "shared"))
DATA = SHARED / "data"
CORPUS = SHARED / "corpus"

ALL_THREADS = os.cpu_count() or 1

LIBRARIES = ["tokjit", "tiktoken", "HF-tokenizers", "sentencepiece", "gigatoken", "fastokens"]

# Qwen2's split pattern: like Llama 3's but one digit per piece.
QWEN2_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
               r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
# DeepSeek-V3's pre-tokenizer (its tokenizer.json): three Isolated splits in sequence, then a byte-level
# step that only maps bytes
DEEPSEEK_V3_SPLITS = (r"\p{N}{1,3}", "[一-龥぀-ゟ゠-ヿ]+",
                      "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+|"
                      " ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+")


@dataclass(frozen=True)
class TokenizerSpec:
    """Where one benchmarked tokenizer comes from. ``kind`` is its format: "tiktoken" (bundled
    encoding + shared rank file), "hf" (tokenizer.json) or "spm" (SentencePiece .model)."""

    kind: str
    source: str                   # encoding name, or a path relative to DATA (or a builder key)
    hf_equivalent: str | None = None   # a tokenizer.json with the same ids, for HF as a peer

    @property
    def reference(self) -> str:
        return {"tiktoken": "tiktoken", "hf": "HF-tokenizers", "spm": "sentencepiece"}[self.kind]

    @property
    def parse_special(self) -> bool:
        # HF always splits added tokens out of the text; tiktoken's encode_ordinary and
        # sentencepiece never do.
        return self.kind == "hf"


TOKENIZERS: dict[str, TokenizerSpec] = {
    "o200k_base": TokenizerSpec("tiktoken", "o200k_base", "hf/gpt4o/tokenizer.json"),
    "cl100k_base": TokenizerSpec("tiktoken", "cl100k_base", "hf/gpt35turbo/tokenizer.json"),
    "llama3": TokenizerSpec("hf", "hf/llama3/tokenizer.json"),
    "qwen-nfc": TokenizerSpec("hf", "build:qwen-nfc"),
    "deepseek-v3": TokenizerSpec("hf", "build:deepseek-v3"),
    "gemma3": TokenizerSpec("hf", "hf/gemma3/tokenizer.json"),
    "llama2-spm": TokenizerSpec("spm", "spm/llama2/tokenizer.model"),
    "t5-spm": TokenizerSpec("spm", "hf/t5/spiece.model"),
    "bert": TokenizerSpec("hf", "hf/bert-minilm/tokenizer.json"),
    # not in the default comparison (t5-spm covers Unigram); selectable with --tokenizers
    "t5": TokenizerSpec("hf", "hf/t5/tokenizer.json"),
}
DEFAULT_TOKENIZERS = [n for n in TOKENIZERS if n != "t5"]

CORPORA = {
    "english": "english.txt",
    "code": "code.txt",
    "chinese": "multilingual/chinese.txt",
    "russian": "multilingual/russian.txt",
    "japanese": "multilingual/japanese.txt",
    "arabic": "multilingual/arabic.txt",
}


class Unavailable(Exception):
    """A library cannot take part in a cell; the message is what the report prints."""


@dataclass
class Engine:
    library: str
    role: str                                   # "tokjit", "reference" or "peer"
    encode: Callable[[str], object]             # one text -> list of ids
    batch: dict[int, Callable[[list[str]], object]] = field(default_factory=dict)
    flat: dict[int, Callable[[list[str]], object]] = field(default_factory=dict)
    note: str = ""                              # API limits worth printing (e.g. no thread control)
    encode_np: Callable[[str], object] | None = None   # one text -> numpy array, where the library has it
    # batch modes run in a child process ("flat/1": texts -> benchmarks._child.SelfTimed), for a
    # library whose thread count is fixed per process; only compare.py runs them
    child_modes: dict[str, Callable[[list[str]], object]] = field(default_factory=dict)


# --------------------------------------------------------------------------------------------
# Tokenizer files
# --------------------------------------------------------------------------------------------

def _tiktoken_entry(name: str) -> dict:
    return json.loads((DATA / "tiktoken" / "encodings.json").read_text())[name]


def tiktoken_rank_file(name: str) -> Path:
    return DATA / "tiktoken" / _tiktoken_entry(name)["mergeable_ranks_file"].split()[0]


def build_qwen_nfc() -> Path:
    """A Qwen-style byte-level BPE tokenizer.json: Llama 3's vocabulary and merges with an NFC
    normalizer and Qwen2's single-digit split pattern. There is no Qwen file in the shared data;
    HF ``tokenizers`` loads this one, so the reference ids exist."""
    doc = json.loads((DATA / "hf/llama3/tokenizer.json").read_text(encoding="utf-8"))
    doc["normalizer"] = {"type": "NFC"}
    for pre in doc["pre_tokenizer"]["pretokenizers"]:
        if pre["type"] == "Split":
            pre["pattern"] = {"Regex": QWEN2_SPLIT}
    return _written("qwen-nfc", doc)


def build_deepseek_v3() -> Path:
    """A DeepSeek-V3-style tokenizer.json: Llama 3's vocabulary and merges after DeepSeek-V3's
    sequence of splits (no DeepSeek file is in the shared data; HF ``tokenizers`` loads this one)."""
    doc = json.loads((DATA / "hf/llama3/tokenizer.json").read_text(encoding="utf-8"))
    splits = [{"type": "Split", "pattern": {"Regex": p}, "behavior": "Isolated", "invert": False}
              for p in DEEPSEEK_V3_SPLITS]
    doc["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": splits + [
        {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}]}
    return _written("deepseek-v3", doc)


def _written(name: str, doc: dict) -> Path:
    """``doc`` as a tokenizer.json, written once per content under the temp directory, so tokjit's
    parse cache (keyed by the file hash) is reused across runs."""
    text = json.dumps(doc, ensure_ascii=False)
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]
    path = Path(tempfile.gettempdir()) / "tokjit-bench" / f"{name}-{digest}" / "tokenizer.json"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(path)
    return path


BUILT = {"build:qwen-nfc": build_qwen_nfc, "build:deepseek-v3": build_deepseek_v3}


def tokenizer_path(spec: TokenizerSpec) -> Path:
    if spec.kind == "tiktoken":
        return tiktoken_rank_file(spec.source)
    if spec.source in BUILT:
        return BUILT[spec.source]()
    path = DATA / spec.source
    if not path.exists():
        raise Unavailable(f"shared data not found: {path} (set TOKJIT_TEST_DATA)")
    return path


# --------------------------------------------------------------------------------------------
# One loader per library
# --------------------------------------------------------------------------------------------

def _import(module: str):
    try:
        return __import__(module)
    except ImportError as exc:
        raise Unavailable(f"not installed ({exc})") from None


def load_tokjit(spec: TokenizerSpec):
    """The tokjit tokenizer of ``spec``, loaded as its users load it."""
    import tokjit
    return tokjit.get_encoding(spec.source) if spec.kind == "tiktoken" else tokjit.load(tokenizer_path(spec))


def _tokjit(spec: TokenizerSpec) -> Engine:
    return tokjit_engine(load_tokjit(spec), spec)


def tokjit_engine(tok, spec: TokenizerSpec) -> Engine:
    """An Engine over an already loaded tokjit tokenizer (the asv suite reuses preloaded ones)."""
    ps = spec.parse_special
    # the single-text calls as a user makes them: the bound method itself or, when special-token
    # text must be parsed, what is closest to writing the keyword in the loop (~7 ns a call): a
    # lambda (a frame, ~26 ns); functools.partial merges its keywords into a new dict on every
    # call (~125 ns)
    encode, to_numpy = tok.encode, tok.encode_to_numpy
    return Engine(
        "tokjit", "tokjit",
        encode=(lambda t: encode(t, parse_special=True)) if ps else encode,
        encode_np=(lambda t: to_numpy(t, parse_special=True)) if ps else to_numpy,
        batch={n: (lambda ts, n=n: tok.encode_batch(ts, num_threads=n, parse_special=ps))
               for n in sorted({1, ALL_THREADS})},
        flat={n: (lambda ts, n=n: tok.encode_batch_numpy(ts, num_threads=n, parse_special=ps))
              for n in sorted({1, ALL_THREADS})},
    )


def _tiktoken(spec: TokenizerSpec) -> Engine:
    if spec.kind != "tiktoken":
        raise Unavailable("loads .tiktoken encodings only")
    tiktoken = _import("tiktoken")
    import tiktoken.load
    entry = _tiktoken_entry(spec.source)
    ranks = tiktoken.load.load_tiktoken_bpe(str(tiktoken_rank_file(spec.source)))
    enc = tiktoken.Encoding(name=spec.source, pat_str=entry["pat_str"], mergeable_ranks=ranks,
                            special_tokens=entry["special_tokens"])
    return Engine(
        "tiktoken", _role(spec, "tiktoken"),
        encode=enc.encode_ordinary,
        # encode_ordinary's ids as an array: no special-token text is refused or matched
        encode_np=lambda t: enc.encode_to_numpy(t, disallowed_special=()),
        batch={n: (lambda ts, n=n: enc.encode_ordinary_batch(ts, num_threads=n))
               for n in sorted({1, ALL_THREADS})},
    )


def _hf(spec: TokenizerSpec) -> Engine:
    if spec.kind == "spm":
        raise Unavailable("loads tokenizer.json only (no .model loader)")
    _import("tokenizers")
    from tokenizers import Tokenizer
    path = DATA / spec.hf_equivalent if spec.kind == "tiktoken" else tokenizer_path(spec)
    if spec.kind == "tiktoken" and (spec.hf_equivalent is None or not path.exists()):
        raise Unavailable("no tokenizer.json of this encoding in the shared data")
    tok = Tokenizer.from_file(str(path))
    tok.no_truncation()
    tok.no_padding()
    batch_call = getattr(tok, "encode_batch_fast", None) or tok.encode_batch

    def batch(texts, threads):
        # HF reads TOKENIZERS_PARALLELISM on every batch call: "false" keeps it on the calling
        # thread, "true" spreads it over rayon's pool (all cores).
        os.environ["TOKENIZERS_PARALLELISM"] = "true" if threads > 1 else "false"
        try:
            return [e.ids for e in batch_call(texts, add_special_tokens=False)]
        finally:
            os.environ["TOKENIZERS_PARALLELISM"] = "false"

    return Engine(
        "HF-tokenizers", _role(spec, "HF-tokenizers"),
        encode=lambda t: tok.encode(t, add_special_tokens=False).ids,
        batch={n: (lambda ts, n=n: batch(ts, n)) for n in sorted({1, ALL_THREADS})},
        note=f"batch = {batch_call.__name__}",
    )


def _sentencepiece(spec: TokenizerSpec) -> Engine:
    if spec.kind != "spm":
        raise Unavailable("loads .model files only")
    spm = _import("sentencepiece")
    sp = spm.SentencePieceProcessor(model_file=str(tokenizer_path(spec)))
    return Engine(
        "sentencepiece", "reference",
        encode=sp.EncodeAsIds,
        batch={n: (lambda ts, n=n: sp.encode(ts, num_threads=n)) for n in sorted({1, ALL_THREADS})},
    )


def _gigatoken(spec: TokenizerSpec) -> Engine:
    gt = _import("gigatoken")
    try:
        if spec.kind == "tiktoken":
            # gigatoken takes the split scheme and special tokens of OpenAI's published encodings
            # from the rank file's name, which the shared file keeps.
            g = gt.Tokenizer.from_tiktoken(str(tiktoken_rank_file(spec.source)))
        elif spec.kind == "spm":
            g = gt.Tokenizer.from_sentencepiece(str(tokenizer_path(spec)))
        else:
            g = gt.Tokenizer.from_json(tokenizer_path(spec).read_text(encoding="utf-8"))
    except Exception as exc:  # noqa: BLE001 - any load failure is what the report shows
        raise Unavailable(f"cannot load: {_one_line(exc)}") from None
    # parallel=True/False explicitly: gigatoken's default turns parallelism off in forked
    # processes (asv's benchmark processes are forks). Its encode returns a numpy array: the
    # list-returning call is that array's tolist(), what a caller who wants a list writes.
    return Engine(
        "gigatoken", "peer",
        encode=lambda t: g.encode(t).tolist(),
        encode_np=g.encode,
        batch={1: lambda ts: g.encode_batch_list(ts, parallel=False),
               ALL_THREADS: lambda ts: g.encode_batch_list(ts, parallel=True)},
        flat={1: lambda ts: g.encode_batch(ts, parallel=False),
              ALL_THREADS: lambda ts: g.encode_batch(ts, parallel=True)},
    )


def _fastokens(spec: TokenizerSpec) -> Engine:
    if spec.kind == "spm":
        raise Unavailable("loads tokenizer.json and .tiktoken only (no .model loader)")
    ft = _import("fastokens")
    try:
        if spec.kind == "tiktoken":
            entry = _tiktoken_entry(spec.source)
            f = ft.Tokenizer.from_tiktoken(str(tiktoken_rank_file(spec.source)),
                                           pattern=entry["pat_str"],
                                           special_tokens=entry["special_tokens"])
        else:
            f = ft.Tokenizer.from_file(str(tokenizer_path(spec)))
            f.no_truncation()
            f.no_padding()
    except Exception as exc:  # noqa: BLE001
        raise Unavailable(f"cannot load: {_one_line(exc)}") from None
    ordinary = spec.kind == "tiktoken"   # tiktoken semantics: special-token text is plain text
    encode = (lambda t: f.encode_ordinary(t).ids) if ordinary else (lambda t: f.encode(t).ids)
    return Engine(
        "fastokens", "peer",
        encode=encode,
        batch={ALL_THREADS: lambda ts: [e.ids for e in f.encode_batch(ts, split_special_tokens=ordinary)]},
        flat={ALL_THREADS: lambda ts: f.encode_batch_flat(ts, split_special_tokens=ordinary)},
        note="batch APIs take no thread count (pools sized once per process from "
             "FASTOKENS_BPE_THREADS / RAYON_NUM_THREADS, default all cores)",
    )


_LOADERS = {"tokjit": _tokjit, "tiktoken": _tiktoken, "HF-tokenizers": _hf,
            "sentencepiece": _sentencepiece, "gigatoken": _gigatoken, "fastokens": _fastokens}


def _role(spec: TokenizerSpec, library: str) -> str:
    return "reference" if spec.reference == library else "peer"


def _one_line(exc: BaseException) -> str:
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {first}"[:160]


def load_engine(name: str, library: str) -> Engine:
    """One library's engine for tokenizer ``name``, or :class:`Unavailable`. A library that takes no
    thread count (fastokens) gets its one-thread batch modes from a child process pinned to one
    thread (:mod:`benchmarks._child`)."""
    from benchmarks._child import ONE_THREAD_ENV, ChildModes

    engine = _LOADERS[library](TOKENIZERS[name])
    if library in ONE_THREAD_ENV and ALL_THREADS > 1:
        child = ChildModes(library, name)
        engine.child_modes = {f"{mode}/1": child.call(mode) for mode in ("batch", "flat")}
        engine.note += "; its batch/1 and flat/1 run in a child process pinned to one thread, timed there"
    return engine


def load_engines(name: str, libraries: list[str] | None = None) -> dict[str, Engine | str]:
    """Every library for tokenizer ``name``: an Engine, or the reason it is missing (a string).
    Libraries that never apply to the tokenizer's format (tiktoken for a .model) are left out;
    the reference, tokjit and the peers always appear."""
    spec = TOKENIZERS[name]
    out: dict[str, Engine | str] = {}
    for library in libraries or LIBRARIES:
        if library in ("tiktoken", "sentencepiece") and library != spec.reference:
            continue
        if library == "HF-tokenizers" and spec.kind == "spm":
            continue
        try:
            out[library] = load_engine(name, library)
        except Unavailable as exc:
            out[library] = str(exc)
    return out


# --------------------------------------------------------------------------------------------
# Outputs as plain lists, for the id check (never inside a timed region)
# --------------------------------------------------------------------------------------------

def ids_of_one(out) -> list[int]:
    return out.tolist() if hasattr(out, "tolist") else list(out)


def ids_of_batch(out) -> list[list[int]]:
    """list[list[int]] from any batch/flat result: lists, (flat, offsets) numpy pairs, fastokens'
    (uint32 bytes, uint64 bytes) pair, or an awkward array."""
    import numpy as np

    if isinstance(out, tuple) and len(out) == 2:
        flat, offsets = out
        if isinstance(flat, (bytes, bytearray, memoryview)):
            flat = np.frombuffer(flat, np.dtype("<u4"))
            offsets = np.frombuffer(offsets, np.dtype("<u8"))
        flat = np.asarray(flat).tolist()
        offsets = np.asarray(offsets).tolist()
        return [flat[a:b] for a, b in zip(offsets[:-1], offsets[1:])]
    if hasattr(out, "tolist") and not isinstance(out, list):
        return [list(x) for x in out.tolist()]
    return [ids_of_one(x) for x in out]


def _spread_lines(corpus: str, n_bytes: int, blocks: int = 8) -> list[str]:
    """About ``n_bytes`` of a corpus as lines (line ends kept), taken as ``blocks`` runs of
    consecutive lines spread evenly through the file, so one section (a licence header, one
    language of a mixed file) does not stand for the whole corpus."""
    path = CORPUS / CORPORA[corpus]
    if not path.exists():
        raise Unavailable(f"corpus not found: {path}")
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    per_block = max(1, n_bytes // blocks)
    out: list[str] = []
    step = max(1, len(lines) // blocks)
    for b in range(blocks):
        i, got = b * step, 0
        while i < len(lines) and got < per_block:
            out.append(lines[i])
            got += len(lines[i].encode("utf-8"))
            i += 1
    return out


def sample_parts(corpus: str, n_bytes: int, parts: int) -> list[list[str]]:
    """``parts`` disjoint samples of about ``n_bytes`` each (fewer bytes when the corpus is too
    small), dealt line by line so every part has the same mix of the corpus. Timing each repetition
    on text no library has seen yet keeps caches of whole inputs or long pieces from turning the
    later repetitions into lookups; caches of common words still warm up, as they do in real use."""
    size = (CORPUS / CORPORA[corpus]).stat().st_size if (CORPUS / CORPORA[corpus]).exists() else 0
    per_part = min(n_bytes, int(size * 0.9) // parts) if size else n_bytes
    lines = _spread_lines(corpus, per_part * parts)
    return [lines[i::parts] for i in range(parts)]


def sample_lines(corpus: str, n_bytes: int) -> list[str]:
    return _spread_lines(corpus, n_bytes)


def document(corpus: str, n_bytes: int, skip: int = 0) -> str:
    """~``n_bytes`` of a corpus from byte ``skip`` on, cut at line ends (one document)."""
    with open(CORPUS / CORPORA[corpus], "rb") as fh:
        fh.seek(skip)
        data = fh.read(n_bytes + 4096)
    if skip:
        data = data[data.find(b"\n") + 1:]
    cut = data.rfind(b"\n", 0, n_bytes + 1)
    return data[: cut + 1 if cut > 0 else n_bytes].decode("utf-8", "ignore")


def sentences(count: int, width: int = 60) -> list[str]:
    """``count`` distinct English sentences of about ``width`` characters, cut at spaces."""
    out, seen = [], set()
    for line in (CORPUS / CORPORA["english"]).read_text(encoding="utf-8").splitlines():
        words, cur = line.split(" "), ""
        for w in words:
            cur = f"{cur} {w}" if cur else w
            if len(cur) >= width:
                if cur not in seen and len(cur) <= width + 20:
                    seen.add(cur)
                    out.append(cur)
                    if len(out) == count:
                        return out
                cur = ""
    return out


def documents(count: int, n_bytes: int = 5000) -> list[str]:
    """``count`` distinct English documents of about ``n_bytes`` each, spread through the file."""
    size = (CORPUS / CORPORA["english"]).stat().st_size
    step = max(n_bytes + 4096, (size - n_bytes - 8192) // count)
    return [document("english", n_bytes, skip=i * step) for i in range(count)
            if i * step + n_bytes + 8192 < size]


# Per-call latency texts: the 2-character call repeats one string (its cost is the call floor);
# sentences and 5 KB documents come from pools of distinct texts, so no library answers from a
# cache of whole inputs.
LATENCY_SIZES = {"2 chars": lambda n: ["Hi"], "sentence": lambda n: sentences(n),
                 "5 KB": lambda n: documents(max(1, n // 10))}
