"""Tests of tokjit's numba regex engine against the Python ``regex`` module (the oracle), and spot
checks against the engines the reference tokenizers use (tiktoken / HF tokenizers).

Spans are compared as byte offsets.  Oracle comparisons use ``unicode_table="regex"`` (the regex
module's Unicode version) and ``syntax="python"``.
"""
from __future__ import annotations

import json
import os
import time

import numpy as np
import pytest
import regex
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import SHARED, corpus_files
from tokjit.regex.compiler import UnsupportedPatternError, compile_pattern
from tokjit.regex.compiled import CompiledRegex

pytestmark = pytest.mark.skipif(not SHARED.is_dir(), reason=f"test data {SHARED} not found")

# ----------------------------------------------------------------------------- patterns

GPT2 = r"'(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s"
CL100K = r"'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s"
LLAMA3 = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
O200K = (r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
         r"|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
         r"|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+")
MAIN = {"gpt2": GPT2, "cl100k": CL100K, "llama3": LLAMA3, "o200k": O200K}

# llama.cpp pre-type regexes (src/llama-vocab.cpp); the project's table is the source when present.
_LLAMA_CPP_FALLBACK = [
    r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
    "[\r\n]", r"\s?[!-/:-~！-／：-～‘-‟　-。]+", r"\s+$", "[一-龥ࠀ-一가-퟿]+", r"\p{N}+",
    r"[\p{P}\$\+<=>\^~\|`]+", r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)",
    "[0-9][0-9][0-9]", r"\s?\p{L}+", r"\s?\p{P}+", r"\p{N}", r" ?[^(\s|.,!?…。，、।۔،)]+",
    r"\d{1,3}(?=(?:\d{3})*\b)", r"(?=(\d{3})+(?!\d))",
]
try:
    from tokjit.load import gguf_pretypes as _gp

    LLAMA_CPP = sorted({r for v in _gp._REGEXES.values() for r in v})
except Exception:  # pragma: no cover - table not available
    LLAMA_CPP = _LLAMA_CPP_FALLBACK
LLAMA_CPP_UNSUPPORTED = {r"\p{Han}+", r"\p{AFMoE_digits}"}  # llama.cpp hand-written splitters


def _encodings_patterns():
    d = json.loads((SHARED / "data" / "tiktoken" / "encodings.json").read_text())
    return sorted({v["pat_str"] for v in d.values() if v.get("pat_str")})


def _hf_patterns():
    out = set()
    for path in sorted((SHARED / "data" / "hf").glob("*/tokenizer.json")):
        stack = [json.loads(path.read_text(encoding="utf-8")).get("pre_tokenizer")]
        while stack:
            node = stack.pop()
            if isinstance(node, dict):
                if node.get("type") == "Split" and "Regex" in node.get("pattern", {}):
                    out.add(node["pattern"]["Regex"])
                stack.extend(node.values())
            elif isinstance(node, list):
                stack.extend(node)
    return sorted(out)


ALL_PATTERNS = sorted(set(MAIN.values()) | set(_encodings_patterns()) | set(_hf_patterns())
                      | (set(LLAMA_CPP) - LLAMA_CPP_UNSUPPORTED))

# ----------------------------------------------------------------------------- helpers


def byte_offsets(text: str) -> np.ndarray:
    cps = np.frombuffer(text.encode("utf-32-le"), np.uint32)
    lens = 1 + (cps >= 0x80).astype(np.int64) + (cps >= 0x800) + (cps >= 0x10000)
    off = np.zeros(len(cps) + 1, np.int64)
    np.cumsum(lens, out=off[1:])
    return off


def oracle_spans(pattern: str, text: str):
    spans = [m.span() for m in regex.finditer(pattern, text)]
    if not spans:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    off = byte_offsets(text)
    a = off[np.array(spans, np.int64)]
    return a[:, 0], a[:, 1]


_CACHE: dict = {}


def engine(pattern: str, **kw) -> CompiledRegex:
    key = (pattern, tuple(sorted(kw.items())))
    if key not in _CACHE:
        kw.setdefault("unicode_table", "regex")
        _CACHE[key] = CompiledRegex(pattern, **kw)
    return _CACHE[key]


def assert_same(pattern: str, text: str):
    s, e = engine(pattern).find_spans(text.encode("utf-8"))
    rs, re_ = oracle_spans(pattern, text)
    if len(s) != len(rs) or not (np.array_equal(s, rs) and np.array_equal(e, re_)):
        b = text.encode("utf-8")
        ours = [b[i:j].decode() for i, j in zip(s.tolist(), e.tolist())]
        ref = regex.findall(pattern, text) if not regex.compile(pattern).groups else \
            [m.group() for m in regex.finditer(pattern, text)]
        for k, (x, y) in enumerate(zip(ours, ref)):
            if x != y:
                raise AssertionError(f"pattern {pattern!r} text {text[:200]!r}: first diff at piece {k}: "
                                     f"ours {ours[k:k + 3]!r} ref {ref[k:k + 3]!r}")
        raise AssertionError(f"pattern {pattern!r} text {text[:200]!r}: {len(ours)} vs {len(ref)} pieces")


def assert_same_big(pattern: str, texts: list[str]):
    """Compare on many texts at once: whole joined text (fast) and, on mismatch, per text."""
    joined = "\n".join(texts)
    s, e = engine(pattern).find_spans(joined.encode("utf-8"))
    rs, re_ = oracle_spans(pattern, joined)
    if len(s) == len(rs) and np.array_equal(s, rs) and np.array_equal(e, re_):
        return
    for t in texts:
        assert_same(pattern, t)
    raise AssertionError(f"{pattern!r}: joined text differs but no single text does")


# ----------------------------------------------------------------------------- corpus parity

def _sample(step_other: int, budget_chars: int):
    files = corpus_files()
    out = {}
    for name, items in files.items():
        if name == "edge_cases":
            continue
        chosen, n = [], 0
        for t in items[::step_other]:
            if n > budget_chars:
                break
            chosen.append(t)
            n += len(t)
        out[name] = chosen
    return out


def _oracle_concurrent(pattern, text):
    spans = [m.span() for m in regex.finditer(pattern, text, concurrent=True)]
    off = byte_offsets(text)
    a = off[np.array(spans, np.int64).reshape(-1, 2)]
    return a[:, 0], a[:, 1]


def test_main_patterns_full_corpora():
    """The main patterns on the whole corpora (every file, byte-exact code documents, every edge
    case line): o200k and cl100k always, gpt2/llama3 on every 4th text (all with
    TOKJIT_FULL_CORPUS=1).  The oracle runs with the GIL released on one thread per core."""
    from concurrent.futures import ThreadPoolExecutor

    files = corpus_files()
    full_all = os.environ.get("TOKJIT_FULL_CORPUS", "") not in ("", "0")
    jobs = []
    for name, pat in MAIN.items():
        # o200k and cl100k always see every text; gpt2/llama3 every 4th unless TOKJIT_FULL_CORPUS=1
        step = 1 if full_all or name in ("o200k", "cl100k") else 4
        for fname, items in files.items():
            if fname != "edge_cases":
                jobs.append((pat, fname, "\n".join(items[::step])))

    def run(job):
        pat, fname, text = job
        s, e = engine(pat).find_spans(text.encode("utf-8"))
        rs, re_ = _oracle_concurrent(pat, text)
        return pat, fname, len(s) == len(rs) and np.array_equal(s, rs) and np.array_equal(e, re_)

    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as ex:
        results = list(ex.map(run, sorted(jobs, key=lambda j: -len(j[2]))))
    bad = [(fname, pat) for pat, fname, ok in results if not ok]
    for fname, pat in bad[:1]:  # localize the first mismatch
        items = files[fname]
        for k in range(0, len(items), 500):
            assert_same_big(pat, items[k:k + 500])
    assert not bad, bad
    for pat in MAIN.values():
        for t in files["edge_cases"]:
            assert_same(pat, t)


@pytest.mark.parametrize("pattern", ALL_PATTERNS)
def test_all_patterns_sampled_corpora(pattern):
    """Every known tokenizer regex on a sample of each corpus file plus all edge cases."""
    for fname, items in _sample(step_other=11, budget_chars=25_000).items():
        assert_same_big(pattern, items)
    for t in corpus_files()["edge_cases"]:
        assert_same(pattern, t)


# ----------------------------------------------------------------------------- small constructs

CONSTRUCTS = [
    r"a|ab|abc", r"(?:ab|a)c", r"a*?b", r"a+?", r"a??b", r"a{2,3}", r"a{2,3}?", r"a{2,}+a", r"a{,2}",
    r"(?:ab){1,3}", r"(?:ab)+?b", r"(?>a+)b", r"(?>a|ab)c", r"a++a", r"a?+a", r"\s+(?!\S)",
    r"(?=\w)\w+", r"(?!a)\w", r"(?<=a)b", r"(?<!a)b", r"(?<=ab|cd)x", r"\bx", r"\Bx", r"\w+\b",
    r"^a", r"a$", r"\Aa", r"a\z", r"a\Z", r"\s+$", r"x*", r"(?:x|)", r"\d+", r"\D+", r"\W+",
    r"[^\s\p{L}\p{N}]+", r"\P{L}+", r"\pL+", r"\pN", r"\p{Letter}+", r"\p{LC}+", r"\p{Lu}\p{Ll}*",
    r"(?i)k+", r"(?i:'s|'t)", r"(?i)[a-z]+", r"(?i)[^k]", r"(?i)\p{Lu}", r"(?i)\P{Lu}", r"(?i)ß",
    r"(?i)σ+", r".+", r"(?s).+", r"(?m)^\w+$", r"[\x00-\x1f]+", r"\x41\u00e9\U0001F600", r"[\w-]+",
    r"[]a]", r"[a-]", r"\p{Zs}+", r"[\p{P}\p{S}]+", r"\p{M}+", r"\p{Cn}", r"\p{Co}|\p{Cf}",
    r"\d{1,3}(?=(?:\d{3})*\b)", r"(?=(\d{3})+(?!\d))", r"(?P<x>a)|(?<y>b)", r"a(?#comment)b",
    r"\s*[\r\n]+|\s+", r"[\t\n\v\f\r ]+", r"\S+", r"(?:'[sS]|'[tT])", r"a{0}b", r"(a|b)*c",
]

ALPHABET = list("aAbBcdkKsSxy_'.,/!?-1234567890 \t\n\r\x0b\x0c") + [
    "\x1c", "\x1f", "\x85", "\xa0", "\u1680", "\u2000", "\u200a", "\u2028", "\u2029", "\u202f",
    "\u205f", "\u3000", "\u200b", "\u200d", "\ufeff", "\u017f", "\u212a", "\u00df", "\u1e9e",
    "\u03c3", "\u03c2", "\u03a3", "\u0301", "\u0903", "\u20dd", "\u00e9", "\u01c5", "\u02b0", "\u4e2d",
    "\u0663", "\u00b2", "\u2167", "\U0001f600", "\U0001d400", "\u0378", "\ue000", "\u00ad",
]

EDGE_TEXTS = ["", "a", " ", "\n", "ab abc", "aab", "abcab\n", "  \n  x", "x\n", "x \n", "a\nb\n",
              "it's I'LL we'Re 'ſ 'K", "12345678 1234", "  ", "ǅungla ʰx", "a\u0301b", "😀😀 x",
              "K\u212ak", "\u0378\ue000", "ab\ncd\n\n", "'''", "é中", "ßSS", "σςΣ"]


@pytest.mark.parametrize("pattern", CONSTRUCTS)
def test_constructs_edge_texts(pattern):
    for t in EDGE_TEXTS:
        assert_same(pattern, t)
    assert_same(pattern, "".join(ALPHABET))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(ALPHABET), max_size=40).map("".join),
       st.sampled_from(CONSTRUCTS + list(MAIN.values())))
def test_hypothesis_alphabet(text, pattern):
    assert_same(pattern, text)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(st.characters(blacklist_categories=("Cs",)), max_size=30),
       st.sampled_from(list(MAIN.values()) + [r"\w+|\W", r"(?i)[a-zß]+|.", r"\b\S+\b|\s"]))
def test_hypothesis_any_unicode(text, pattern):
    assert_same(pattern, text)


# ----------------------------------------------------------------------------- unsupported

@pytest.mark.parametrize("pattern", [
    r"(a)\1", r"\p{Han}", r"\p{AFMoE_digits}", r"a(?i)b", r"(?x) a", r"(?<=a+)b", r"(?<=a|bc)d",
    r"[[:alpha:]]", r"[a&&b]", r"[a[b]]", r"(?:a*)*", r"(?:a?)+", r"(?:ab){5000}", r"\G", r"\K",
    r"(?(1)a|b)", r"(?|a)", r"a**", r"*a", r"(a", r"a)", r"[a", r"\p{Foo}", r"\p{L&}", r"\N{DIGIT ONE}", r"\h",
])
def test_unsupported(pattern):
    with pytest.raises(UnsupportedPatternError):
        compile_pattern(pattern)
    assert issubclass(UnsupportedPatternError, ValueError)


# ----------------------------------------------------------------------------- worst cases

@pytest.mark.parametrize("name", sorted(MAIN))
@pytest.mark.parametrize("piece", ["x", " ", "'", "7", "A", " \n", "\u4e2d", "a\u0301"])
def test_worst_case_linear(name, piece):
    r = engine(MAIN[name])
    small = (piece * (100_000 // len(piece.encode()))).encode() + b"a"
    big = (piece * (1_000_000 // len(piece.encode()))).encode() + b"a"

    def best(b):
        ts = []
        for _ in range(3):
            t = time.perf_counter()
            s, e = r.find_spans(b)
            ts.append(time.perf_counter() - t)
        assert e[-1] == len(b)
        return min(ts)

    best(small)
    t_small, t_big = best(small), best(big)
    # linear: 10x the input may take at most ~12x (20x allowed for noisy shared CI machines)
    assert t_big < max(20 * t_small, 0.1), (t_small, t_big)


def test_pathological_memo():
    """Quadratic/exponential backtracking cases finish via memoization, with identical spans."""
    for pattern, text in [(r"\s+$", " " * 2000 + "a"), (r"(?:a|a)*b", "a" * 1000),
                          (r"(?:\s*[\r\n]+)+x", " \n" * 500), (r"(\w+\s?)+$", "a a " * 200 + "!")]:
        assert_same(pattern, text)
        r = engine(pattern)
        big = (text[:-1] * 50 + text[-1]).encode()
        t = time.perf_counter()
        r.find_spans(big)
        assert time.perf_counter() - t < 5, pattern


# ----------------------------------------------------------------------------- references

WS_AND_FOLD = ["\x1c", "\x1d", "\x1e", "\x1f", "\x85", "\xa0", "\u1680", "\u2000", "\u2007", "\u200a",
               "\u200b", "\u2028", "\u2029", "\u202f", "\u205f", "\u3000", "\ufeff", "\u180e",
               "'\u017f", "'\u212a", "'S", "'T", "'LL", "\u0301", "a\u0301", "\u01c5x"]


def _ref_texts():
    texts = []
    for c in WS_AND_FOLD:
        texts += [f"a{c}b", f"{c}{c}x", f"x {c}", f"it{c}", f" {c}\n", c]
    return texts


def test_tiktoken_agrees():
    tiktoken = pytest.importorskip("tiktoken")
    from tiktoken.load import load_tiktoken_bpe

    ranks = load_tiktoken_bpe(str(SHARED / "data" / "tiktoken" / "o200k_base.tiktoken"))
    for pat in (O200K, CL100K):
        enc = tiktoken.Encoding(name="t", pat_str=pat, mergeable_ranks=ranks, special_tokens={})
        r = CompiledRegex(pat, syntax="rust", unicode_table="tokenizers")
        for t in _ref_texts() + corpus_files()["edge_cases"][:120]:
            b = t.encode()
            s, e = r.find_spans(b)
            ours = [tok for i, j in zip(s.tolist(), e.tolist()) for tok in enc._encode_single_piece(b[i:j])]
            assert ours == enc.encode_ordinary(t), (pat[:20], t)


def test_hf_tokenizers_agrees():
    tokenizers = pytest.importorskip("tokenizers")
    for model, pat in (("gpt4o", O200K), ("llama3", LLAMA3)):
        tok = tokenizers.Tokenizer.from_file(str(SHARED / "data" / "hf" / model / "tokenizer.json"))
        r = CompiledRegex(pat, syntax="onig", unicode_table="tokenizers")
        for t in _ref_texts() + corpus_files()["edge_cases"][:120]:
            ref = [off for _, off in tok.pre_tokenizer.pre_tokenize_str(t)]
            off = byte_offsets(t)
            s, e = r.find_spans(t.encode())
            c_s = np.searchsorted(off, s)
            c_e = np.searchsorted(off, e)
            assert list(zip(c_s.tolist(), c_e.tolist())) == ref, (model, t)


@pytest.mark.parametrize("pattern", [r"\w+", r"\W+", r"[\w]+", r"[^\w\s]+", r"[\W\d]+", r"\w+|[^\w\s]+",
                                     r"\b\w", r"\w\B", r"(?i)[^\w]+"])
def test_onig_word_classes_over_every_code_point(pattern):
    """Oniguruma's \w differs inside and outside a bracket: outside, ² ³ ¹ ¼ ½ ¾ are word characters
    (its Latin-1 table), inside they are not; both leave out ① and the Join_Control characters and
    take in Ⓐ. Matches of HF's Split (Oniguruma) against the engine's, over text holding every code
    point once, cut into blocks, each code point between two of its own kind and two of the other."""
    tokenizers = pytest.importorskip("tokenizers")
    split = tokenizers.pre_tokenizers.Split(tokenizers.Regex(pattern), "isolated")
    r = CompiledRegex(pattern, syntax="onig", unicode_table="tokenizers")
    # every code point up to the last assigned planes' end (0x32000), a sample past it
    cps = [c for c in range(1, 0x32000) if not 0xD800 <= c < 0xE000] + list(range(0x32000, 0x110000, 97))
    for k in range(0, len(cps), 4096):
        text = "".join(chr(c) + ("a" if c % 3 else " ") + chr(c) + "\u00bd-" for c in cps[k:k + 4096])
        ref = [off for _, off in split.pre_tokenize_str(text)]
        off = byte_offsets(text)
        s, e = r.find_spans(text.encode())
        spans = list(zip(np.searchsorted(off, s).tolist(), np.searchsorted(off, e).tolist()))
        # Isolated pieces: the matches and the gaps between them
        pieces, pos = [], 0
        for a, b in spans:
            if a > pos:
                pieces.append((pos, a))
            pieces.append((a, b))
            pos = b
        if pos < len(text):
            pieces.append((pos, len(text)))
        assert pieces == ref, (pattern, hex(cps[k]))


def test_unicode_tables_match_references():
    """tiktoken and HF tokenizers classify newly assigned code points like Unicode 16 ("tokenizers"
    table), not like the regex module's newer Unicode ("regex" table)."""
    from tokjit.regex import unicode_tables as ut

    new = ut.general_category_table("regex")
    old = ut.general_category_table("tokenizers")
    diff = np.flatnonzero(new != old)
    assert len(diff) > 0
    sample = "".join(chr(c) for c in diff[:: max(1, len(diff) // 50)])
    r_new = CompiledRegex(r"\p{L}|\p{N}|\p{M}|\p{S}|\p{P}", unicode_table="regex")
    r_old = CompiledRegex(r"\p{L}|\p{N}|\p{M}|\p{S}|\p{P}", unicode_table="tokenizers")
    tokenizers = pytest.importorskip("tokenizers")
    split = tokenizers.pre_tokenizers.Split(tokenizers.Regex(r"\p{L}|\p{N}|\p{M}|\p{S}|\p{P}"),
                                            behavior="removed", invert=True)
    hf = "".join(p for p, _ in split.pre_tokenize_str(sample))
    assert "".join(r_old.find_all(sample)) == hf
    assert "".join(r_new.find_all(sample)) != hf


def test_api_and_anchor_syntaxes():
    r = CompiledRegex(r"x$")
    assert r.pattern == r"x$"
    assert r.find_all("x\nx\n") == ["x"]
    assert CompiledRegex(r"x$", syntax="python").find_spans(b"x\nx\n")[0].tolist() == [2]
    assert CompiledRegex(r"x$", syntax="onig").find_spans(b"x\nx\n")[0].tolist() == [0, 2]
    assert CompiledRegex(r"x$", syntax="rust").find_spans(b"x\nx\n")[0].tolist() == []
    assert CompiledRegex(r"x\Z", syntax="rust").find_spans(b"x\nx\n")[0].tolist() == [2]
    assert CompiledRegex(r"^x", syntax="onig").find_spans(b"x\nx")[0].tolist() == [0, 2]
    s, e = CompiledRegex(r"\w+").find_spans(np.frombuffer("héllo wörld".encode(), np.uint8))
    assert s.dtype == np.int64 and s.tolist() == [0, 7] and e.tolist() == [6, 13]
    with pytest.raises(ValueError):
        CompiledRegex("a", unicode_table="nope")


@pytest.mark.parametrize("bad", [
    b"abc\xc3",  # 2-byte sequence cut after its lead byte
    b"abc\xe4\xb8",  # 3-byte sequence cut
    b"abc\xf0\x9f\x98",  # 4-byte sequence cut
    b"abc\x80",  # continuation byte with no lead
    b"\xff abc",  # never valid in UTF-8
    b"ab\xed\xa0\x80cd",  # an encoded surrogate
])
def test_find_spans_rejects_invalid_utf8(bad):
    """The VM decodes without checks, so a sequence cut at the end of the span would read past it:
    find_spans refuses such bytes with a typed error (Python's own UTF-8 decoder is the judge)."""
    from tokjit.errors import InputError
    with pytest.raises(UnicodeDecodeError):
        bad.decode("utf-8")
    r = CompiledRegex(O200K)
    for buf in (bad, bytearray(bad), np.frombuffer(bad, np.uint8)):
        with pytest.raises(InputError, match="invalid UTF-8"):
            r.find_spans(buf)
    valid = "aé😀 b".encode()  # a span may cut a sequence, even when the buffer is whole
    with pytest.raises(InputError, match="invalid UTF-8"):
        r.find_spans(valid, 0, 2)
    with pytest.raises(InputError, match="outside"):
        r.find_spans(valid, 0, len(valid) + 1)
    with pytest.raises(InputError, match="surrogate"):
        r.find_spans("a\ud800b")
    assert r.find_spans(valid, 0, 3)[1].tolist() == [3]
