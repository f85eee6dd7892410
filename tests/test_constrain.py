"""Constrained decoding: token trie, regex -> DFA compiler and allowed-token masks.

The masks are checked against a brute-force oracle that knows nothing of the trie or the DFA: token t
is allowed after bytes P iff P + bytes(t) is a prefix of some full match, decided by the ``regex``
module's partial full-match (ASCII flag: ``\\d`` is [0-9]) on the decoded text. When P + bytes(t) ends
inside a UTF-8 character, the oracle tries one code point from every interval of possible completions
that the pattern cannot tell apart (the intervals are cut at every character written in the pattern),
so it stays exact for byte tokens. Tokens are grouped by first byte: a byte that cannot continue P rules
out its whole group (prefix closure of the definition), which keeps a 200k vocabulary per state fast.
"""

from __future__ import annotations

import codecs
import random

import numpy as np
import pytest
import regex

import tokjit
from tokjit.constrain import (ByteDFA, Regex, RegexError, RegexTooLargeError, TokenTrie,
                              UnsupportedRegexError, compile_regex, token_bytes, utf8_sequences)
from tokjit.constrain.kernels import dfa_token_mask
from tokjit.constrain.trie import _anchor_id, token_bytes_by_anchor
from tokjit.errors import InputError

# ------------------------------------------------------------------------------------------------
# Oracle
# ------------------------------------------------------------------------------------------------


def _completion_ranges(tail: bytes) -> list[tuple[int, int]]:
    """Code point ranges whose UTF-8 encoding starts with the incomplete sequence ``tail``."""
    lead = tail[0]
    if lead >> 5 == 0b110:
        n = 2
    elif lead >> 4 == 0b1110:
        n = 3
    elif lead >> 3 == 0b11110:
        n = 4
    else:
        return []
    if len(tail) >= n or any(b >> 6 != 0b10 for b in tail[1:]):
        return []

    def value(seq):
        v = seq[0] & (0x7F >> n)
        for b in seq[1:]:
            v = (v << 6) | (b & 0x3F)
        return v

    pad = n - len(tail)
    lo = max(value(tail + b"\x80" * pad), {2: 0x80, 3: 0x800, 4: 0x10000}[n])
    hi = min(value(tail + b"\xbf" * pad), 0x10FFFF)
    out = []
    for a, b in ((lo, min(hi, 0xD7FF)), (max(lo, 0xE000), hi)):
        if a <= b:
            out.append((a, b))
    return out


class PrefixOracle:
    """Is ``data`` a prefix of the UTF-8 encoding of some full match of ``pattern``?"""

    def __init__(self, pattern: str):
        self.compiled = regex.compile(pattern, flags=regex.ASCII)
        cuts = {0, 0x80, 0x800, 0x10000, 0xE000}
        for ch in pattern:
            cuts.add(ord(ch))
            cuts.add(ord(ch) + 1)
        self.cuts = sorted(cuts)

    def text_viable(self, text: str) -> bool:
        return self.compiled.fullmatch(text, partial=True) is not None

    def viable(self, data: bytes) -> bool:
        dec = codecs.getincrementaldecoder("utf-8")()
        try:
            text = dec.decode(data, final=False)
        except UnicodeDecodeError:
            return False
        tail = dec.getstate()[0]
        if not tail:
            return self.text_viable(text)
        for lo, hi in _completion_ranges(tail):
            for c in [lo] + [c for c in self.cuts if lo < c <= hi]:
                if self.text_viable(text + chr(c)):
                    return True
        return False

    def accepts(self, data: bytes) -> bool:
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            return False
        return self.compiled.fullmatch(text) is not None

    def mask(self, prefix: bytes, tbytes: list[bytes], groups: dict[int, list[int]], eos_ids) -> np.ndarray:
        out = np.zeros(len(tbytes), np.bool_)
        for first, ids in groups.items():
            if not self.viable(prefix + bytes([first])):
                continue
            for t in ids:
                out[t] = self.viable(prefix + tbytes[t])
        done = self.accepts(prefix)
        for e in eos_ids:
            out[e] = done
        return out


# ------------------------------------------------------------------------------------------------
# Tokenizers
# ------------------------------------------------------------------------------------------------

HF_FAMILIES = ["llama3", "gemma3", "t5", "bert-minilm"]


def _load_tokenizer(shared, name):
    if name == "o200k_base":
        return tokjit.get_encoding("o200k_base")
    return tokjit.load(str(shared / "data" / "hf" / name / "tokenizer.json"))


class Vocab:
    def __init__(self, tok):
        self.tok = tok
        self.tbytes = token_bytes(tok)
        self.trie = TokenTrie.for_tokenizer(tok)
        self.groups: dict[int, list[int]] = {}
        for t, b in enumerate(self.tbytes):
            if b:
                self.groups.setdefault(b[0], []).append(t)


_VOCABS: dict[str, Vocab] = {}


@pytest.fixture(scope="module", params=["llama3", "o200k_base", "gemma3", "t5", "bert-minilm"])
def vocab(request, shared) -> Vocab:
    name = request.param
    if name not in _VOCABS:
        _VOCABS[name] = Vocab(_load_tokenizer(shared, name))
    return _VOCABS[name]


# ------------------------------------------------------------------------------------------------
# Random valid strings per pattern (written independently of the compiler)
# ------------------------------------------------------------------------------------------------

def _digits(rng, n):
    return "".join(rng.choice("0123456789") for _ in range(n))


def _gen_int(rng):
    return rng.choice(["", "-"]) + _digits(rng, rng.randint(1, 14))


def _gen_date(rng):
    return f"{_digits(rng, 4)}-{_digits(rng, 2)}-{_digits(rng, 2)}"


def _gen_json_string(rng):
    parts = []
    for _ in range(rng.randint(0, 14)):
        parts.append(rng.choice(["hello", " world", "a", " ", "\\n", "\\\"", "\\\\", "\\u00e9", "é", "中文",
                                 "😀", "{", "}", ":", "'", "\t", "x" * rng.randint(1, 5), " the", "ü"]))
    return '"' + "".join(parts) + '"'


def _gen_enum(rng):
    return rng.choice(["red", "green", "blue"])


def _gen_email(rng):
    def word(chars, lo, hi):
        return "".join(rng.choice(chars) for _ in range(rng.randint(lo, hi)))
    lower = "abcdefghijklmnopqrstuvwxyz"
    return f"{word(lower + '0123456789.', 1, 12)}@{word(lower, 1, 8)}.{word(lower, 2, 3)}"


def _gen_accented(rng):
    return "".join(rng.choice("àéèêëïôöüÿ") for _ in range(rng.randint(1, 6))) + rng.choice(["", "!"])


CASES = [
    (r"-?\d+", _gen_int),
    (r"\d{4}-\d{2}-\d{2}", _gen_date),
    (r'"([^"\\]|\\.)*"', _gen_json_string),
    (r"(red|green|blue)", _gen_enum),
    (r"[a-z0-9.]+@[a-z]+\.[a-z]{2,3}", _gen_email),
    (r"[à-ÿ]+!?", _gen_accented),  # non-ASCII class: multi-byte ranges and byte tokens mid-character
]


def _boundaries(v: Vocab, data: bytes) -> list[int]:
    """Token-boundary offsets in ``data`` from the tokenizer (when its token bytes rebuild ``data``)
    and from longest-match tokenization."""
    cuts = {0}
    tokenizations = [v.tok.encode(data.decode("utf-8"))]
    try:
        tokenizations.append(v.trie.greedy_tokenize(data))
    except InputError:
        pass  # a vocabulary without some character (e.g. WordPiece after accent stripping)
    for ids in tokenizations:
        if b"".join(v.tbytes[i] for i in ids) != data:
            continue
        pos = 0
        for i in ids:
            pos += len(v.tbytes[i])
            cuts.add(pos)
    return sorted(cuts)


@pytest.mark.parametrize("pattern,gen", CASES, ids=[c[0] for c in CASES])
def test_mask_matches_oracle(vocab, pattern, gen):
    v = vocab
    tok = v.tok
    eos = [tok.eos_token_id] if tok.eos_token_id is not None else [0] if not v.tbytes[0] else []
    c = Regex(tok, pattern, eos_ids=eos)
    oracle = PrefixOracle(pattern)
    rng = random.Random(hash(pattern) & 0xFFFF)
    checked: dict[int, bytes] = {}
    for _ in range(6):
        text = gen(rng)
        assert oracle.accepts(text.encode()), text
        data = text.encode("utf-8")
        cuts = _boundaries(v, data)
        try:
            ids = v.trie.greedy_tokenize(data)
        except InputError:
            ids = None
        if ids is not None:
            # advancing token by token agrees with the byte DFA, and each token was allowed
            state = c.initial_state
            for t in ids:
                assert c.mask(state)[t]
                state = c.advance(state, t)
            assert c.is_accepting(state)
            for e in eos:
                assert c.mask(state)[e]
                assert c.advance(state, e) == state
        for cut in cuts:
            s = c.advance_bytes(c.initial_state, data[:cut])
            checked.setdefault(s, data[:cut])
    for s, prefix in checked.items():
        got = c.mask(s, cache=False)
        assert np.array_equal(c.mask(s), got)
        record_walk = np.zeros(len(got) + 1, np.bool_)
        dfa_token_mask(v.trie.nodes, c.transitions, np.int64(s), np.zeros(v.trie.max_depth + 1, np.int32),
                       v.trie.dup_ids, v.trie.dup_primary, record_walk)
        assert np.array_equal(record_walk[:-1] | np.isin(np.arange(len(got)), eos) & got, got)
        want = oracle.mask(prefix, v.tbytes, v.groups, eos)
        if not np.array_equal(got, want):
            diff = np.flatnonzero(got != want)[:10]
            pytest.fail(f"{pattern!r} after {prefix!r} (state {s}): mask differs for tokens "
                        f"{[(int(t), v.tbytes[t], bool(got[t])) for t in diff]}")
        assert c.is_accepting(s) == oracle.accepts(prefix)
        bits = c.mask_bits(s)
        assert np.array_equal(np.unpackbits(bits.view(np.uint8), bitorder="little")[: len(got)].astype(bool), got)


# ------------------------------------------------------------------------------------------------
# Token bytes and the trie
# ------------------------------------------------------------------------------------------------

def test_token_bytes_match_decoder(vocab):
    """token_bytes(tok)[t] is what decoding t after a plain word adds (tokjit's decoder chain)."""
    tok = vocab.tok
    anchor = _anchor_id(tok)
    anchor_bytes = tok.decode_bytes([anchor])
    rng = random.Random(7)
    ids = rng.sample(range(tok.vocab_size), min(3000, tok.vocab_size))
    types = np.asarray(tok.spec.token_types)
    for t in ids:
        b = vocab.tbytes[t]
        if not b or (t < len(types) and types[t] == tokjit.TokenType.BYTE):
            continue
        try:
            b.decode("utf-8")
        except UnicodeDecodeError:
            continue  # decoders may repair lone partial characters
        assert token_bytes_by_anchor(tok, t, anchor, anchor_bytes) == b, t


def test_token_bytes_match_hf(shared):
    """Independent check of the mid-sequence rule against HF tokenizers' decode."""
    from tokenizers import Tokenizer as HFTokenizer
    from tokenizers import decoders

    for name in HF_FAMILIES:
        path = shared / "data" / "hf" / name / "tokenizer.json"
        if name not in _VOCABS:
            _VOCABS[name] = Vocab(tokjit.load(str(path)))
        tok = _VOCABS[name].tok
        hf = HFTokenizer.from_file(str(path))
        if hf.decoder is not None and "WordPiece" in repr(hf.decoder):
            hf.decoder = decoders.WordPiece(prefix="##", cleanup=False)  # neighbour rules are not per token
        tb = _VOCABS[name].tbytes
        anchor = _anchor_id(tok)
        base = hf.decode([anchor], skip_special_tokens=False)
        rng = random.Random(3)
        for t in rng.sample(range(tok.vocab_size), 2000):
            if not tb[t]:
                continue
            try:
                want_text = tb[t].decode("utf-8")
            except UnicodeDecodeError:
                continue
            got = hf.decode([anchor, t], skip_special_tokens=False)
            assert got.startswith(base) and got[len(base):] == want_text, (name, t, got, want_text)


def test_trie_helpers_match_brute_force(vocab):
    v = vocab
    trie = v.trie
    assert trie.nodes["subtree_size"][0] == trie.n_nodes
    with_bytes = [t for t, b in enumerate(v.tbytes) if b]
    for prefix in [b"", b" ", b" th", b"1", b"{\"", b"\xe4", b"\xc3", b"zzzzqq", b"\n\n"]:
        want = [t for t in with_bytes if v.tbytes[t].startswith(prefix)]
        assert trie.tokens_with_prefix(prefix).tolist() == want, prefix
    by_bytes = {}
    for t in with_bytes:
        by_bytes.setdefault(v.tbytes[t], t)
    longest = max(len(b) for b in by_bytes)
    for text in ["Hello, world! 2024-01-02", "naïve café 中文 😀", "    def f(x):\n\treturn x"]:
        data = text.encode()
        try:
            got = trie.greedy_tokenize(data)
        except InputError:
            got = None
        want, pos = [], 0
        while pos < len(data):
            for ln in range(min(longest, len(data) - pos), 0, -1):
                t = by_bytes.get(data[pos:pos + ln])
                if t is not None:
                    break
            else:
                want = None
                break
            want.append(t)
            pos += ln
        if want is None:
            assert got is None
        else:
            assert [v.tbytes[t] for t in got] == [v.tbytes[t] for t in want]


def test_trie_duplicates_and_validation():
    tokens = [b"ab", b"a", b"", b"ab", b"b", b"abc", b"a", b"\xff"]
    trie = TokenTrie(tokens)
    assert trie.n_nodes == 1 + 5  # a, ab, abc, b, \xff
    assert trie.tokens_with_prefix(b"a").tolist() == [0, 1, 3, 5, 6]
    assert trie.tokens_with_prefix(b"ab").tolist() == [0, 3, 5]
    assert trie.tokens_with_prefix(b"x").tolist() == []
    assert trie.greedy_tokenize(b"abcab\xffa") in ([5, 0, 7, 1], [5, 3, 7, 1], [5, 0, 7, 6], [5, 3, 7, 6])
    with pytest.raises(InputError):
        trie.greedy_tokenize(b"ac")

    class FakeTok:
        vocab_size = len(tokens)
        eos_token_id = 2
    dfa = compile_regex(r"ab*")
    c = ByteDFA(FakeTok(), dfa.transitions, dfa.accepting, trie=trie)
    m = c.mask(c.initial_state)
    assert np.flatnonzero(m).tolist() == [0, 1, 3, 5 - 5 + 6]  # "ab", "a", "ab" (dup), "a" (dup)
    s = c.advance(c.initial_state, 1)
    assert c.is_accepting(s)
    assert np.flatnonzero(c.mask(s)).tolist() == [2, 4]  # EOS, "b"
    with pytest.raises(InputError):
        c.advance(s, 5)  # "abc"
    with pytest.raises(InputError):
        c.advance(c.initial_state, 2)  # EOS before a match

    # the general record walk (used when a field does not fit the packed layout) agrees
    wide = ByteDFA(FakeTok(), dfa.transitions, dfa.accepting, trie=trie, mask_cache_bytes=0)
    for state in range(wide.n_states):
        packed = wide.mask(state).copy()
        saved, trie.packed = trie.packed, None
        try:
            assert np.array_equal(wide.mask(state), packed)
        finally:
            trie.packed = saved

    broken = trie.nodes.copy()
    broken["subtree_size"][2] += 5
    trie2 = TokenTrie(tokens)
    trie2.nodes = broken
    with pytest.raises(tokjit.TokjitError):
        trie2.validate()


# ------------------------------------------------------------------------------------------------
# Regex compiler
# ------------------------------------------------------------------------------------------------

def _dfa_fullmatch(dfa, data: bytes) -> bool:
    s = 0
    for b in data:
        s = int(dfa.transitions[s, b])
        if s < 0:
            return False
    return bool(dfa.accepting[s])


COMPILER_PATTERNS = [
    r"a{2,4}b?", r"(ab|cd)*e+", r"[^a-c\d]{1,3}", r"\w+\s\W", r"x{3}|y{2,}", r"(?:a|b)(?P<n>c|d){,2}",
    r"[\]\-a]+", r"\.\*\x41\u00e9", r"é+|中{2}", r"[^\n]*", r"[ä-ü😀-😂]{2}", r"^(true|false|null)$",
    r"a|", r"(a*)*b", r"[-+]?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?", r"\S\D",
]


@pytest.mark.parametrize("pattern", COMPILER_PATTERNS)
def test_compiler_agrees_with_regex_module(pattern):
    dfa = compile_regex(pattern)
    ref = regex.compile(pattern, flags=regex.ASCII)
    oracle = PrefixOracle(pattern)
    alphabet = list("abcdexyz019.-+eE \n\t]\\*A") + ["é", "ä", "ü", "中", "😀", "😁", "😃", "\u0100"]
    rng = random.Random(1)
    samples = {"", "abc"} | {"".join(rng.choice(alphabet) for _ in range(rng.randint(0, 7))) for _ in range(3000)}
    for text in samples:
        assert _dfa_fullmatch(dfa, text.encode()) == (ref.fullmatch(text) is not None), (pattern, text)
        data = text.encode()
        for cut in range(len(data) + 1):  # liveness == viable prefix, also mid-character
            s, alive = 0, True
            for b in data[:cut]:
                s = int(dfa.transitions[s, b])
                if s < 0:
                    alive = False
                    break
            assert alive == oracle.viable(data[:cut]), (pattern, data[:cut])


def test_utf8_sequences_cover_exactly():
    for lo, hi in [(0, 0x10FFFF), (0x7F, 0x800), (0xD000, 0xE100), (0x1F600, 0x1F64F), (0xE9, 0xE9)]:
        seqs = utf8_sequences(lo, hi)
        want = {chr(c).encode() for c in range(lo, hi + 1) if not 0xD800 <= c <= 0xDFFF}
        count = 0
        for seq in seqs:
            n = 1
            for a, b in seq:
                n *= b - a + 1
            count += n
        assert count == len(want)
        sample = random.Random(0).sample(sorted(want), min(2000, len(want)))
        for enc in sample:
            assert any(len(seq) == len(enc) and all(a <= x <= b for x, (a, b) in zip(enc, seq))
                       for seq in seqs)


def test_compiler_errors():
    for pattern in [r"(?=a)b", r"a\b", r"(a)\1", r"\p{L}", r"a*+", r"(?i)a", r"a^b", r"a$b"]:
        with pytest.raises(UnsupportedRegexError):
            compile_regex(pattern)
    for pattern in [r"(a", r"a)", r"[a-", r"*a", r"a{3,2}", "a\\"]:
        with pytest.raises(RegexError):
            compile_regex(pattern)
    with pytest.raises(RegexTooLargeError):
        compile_regex(r"(a|b)*a(a|b){12}", max_states=1000)
    with pytest.raises(RegexError):
        compile_regex(r"[^\x00-\U0010FFFF]")
