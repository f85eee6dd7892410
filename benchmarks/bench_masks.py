"""Allowed-token mask speed: tokjit.constrain next to llguidance, same regexes, same states, same run.

    python benchmarks/bench_masks.py [--vocabs llama3,gemma3] [--strings 30] [--quick]

For each vocabulary: trie build time (token bytes + flat trie, best of 3), then for each regex both
libraries walk the same token sequences (the tokenizer's own ids for random valid strings); at every
step each computes the mask of the current state once, and the masks are compared. Times are
steady-state: a first untimed round lets llguidance build its lazy lexer states (tokjit's DFA is
built eagerly, at ``Regex(...)``); the timed rounds repeat the walks. tokjit is timed twice: the
trie walk alone (``cache=False``) and the default ``mask()``, which memoizes one mask per DFA
state (so after warm-up it is a copy). Both write a bool mask into a reused buffer; llguidance fills
its int32 bitmask (every timed call follows a consume, so its last-mask cache is not hit; it has
its own caches, e.g. precomputed token "slices" for string-like regexes).

Mask differences are classified: a token tokjit allows and llguidance does not is expected when it
is a byte-fallback token duplicating a normal token's bytes, a non-special added token (tokjit
treats its text as text, like HF decode), or when llguidance narrows a forced continuation to its
canonical token; anything else is counted as "other".

``\\d`` is ASCII in tokjit (Python's ASCII flag) and Unicode in llguidance, so llguidance gets
``[0-9]`` for it: the languages are then identical.
"""

from __future__ import annotations

import argparse
import os
import random
import re
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import tokjit  # noqa: E402
from tokjit.constrain import Regex, TokenTrie, token_bytes  # noqa: E402

SHARED = Path(os.environ.get("TOKJIT_TEST_DATA", REPO.parent / "shared")).resolve()
EOS_NAMES = {"llama3": "<|end_of_text|>", "gemma3": "<eos>", "mistral-7b": "</s>", "gpt4o": "<|endoftext|>"}


def _digits(rng, n):
    return "".join(rng.choice("0123456789") for _ in range(n))


def _json_string(rng):
    words = ["hello", " world", " the", " quick", " brown", "fox", "\\n", "\\\"", "é", "中文", "😀", ",", ".",
             " 42", "{", "}", ":", "ü", " data", " value"]
    return '"' + "".join(rng.choice(words) for _ in range(rng.randint(3, 25))) + '"'


def _email(rng):
    lower = "abcdefghijklmnopqrstuvwxyz"
    name = rng.choice(["john.smith", "jane", "a.b.c", "support", "noreply", "x" * 5, "info2024"])
    return f"{name}@{rng.choice(['example', 'mail', 'gmail', 'tokjit'])}.{rng.choice(['com', 'org', 'io', 'de'])}" \
        if rng.random() < 0.7 else "".join(rng.choice(lower) for _ in range(8)) + "@abc.xyz"


REGEXES = [
    ("integer", r"-?\d+", lambda rng: rng.choice(["", "-"]) + _digits(rng, rng.randint(1, 12))),
    ("iso-date", r"\d{4}-\d{2}-\d{2}", lambda rng: f"{_digits(rng, 4)}-{_digits(rng, 2)}-{_digits(rng, 2)}"),
    ("json-string", r'"([^"\\]|\\.)*"', _json_string),
    ("enum", r"(red|green|blue|yellow|magenta|cyan)", lambda rng: rng.choice(
        ["red", "green", "blue", "yellow", "magenta", "cyan"])),
    ("email", r"[a-z0-9.]+@[a-z]+\.[a-z]{2,3}", _email),
]


def _for_llguidance(pattern: str) -> str:
    return pattern.replace(r"\d", "[0-9]")


def _pct(values, q):
    return float(np.percentile(np.asarray(values), q)) * 1e6


def bench_vocab(name: str, n_strings: int, rounds: int, rows: list):
    import llguidance
    import llguidance.numpy as lnp

    path = SHARED / "data" / "hf" / name / "tokenizer.json"
    try:
        tok = tokjit.load(str(path))
    except tokjit.UnsupportedComponentError as exc:
        print(f"[{name}] skipped: not loadable ({exc})")
        return
    eos = tok.token_to_id(EOS_NAMES.get(name, "")) if name in EOS_NAMES else tok.eos_token_id
    eos_ids = [] if eos is None else [eos]

    t_bytes, t_trie = [], []
    for _ in range(3):
        t0 = time.perf_counter()
        tb = token_bytes(tok)
        t1 = time.perf_counter()
        trie = TokenTrie(tb, tok.vocab_size)
        t2 = time.perf_counter()
        t_bytes.append(t1 - t0)
        t_trie.append(t2 - t1)
    t0 = time.perf_counter()
    ll_tok = llguidance.LLTokenizer(path.read_text(encoding="utf-8"), eos_token=eos)
    t_ll = time.perf_counter() - t0
    print(f"[{name}] vocab {tok.vocab_size}: token bytes {min(t_bytes) * 1e3:.0f} ms, trie build "
          f"{min(t_trie) * 1e3:.0f} ms ({trie.n_nodes} nodes, {trie.nodes.nbytes / 1e6:.1f} MB); "
          f"llguidance tokenizer build {t_ll * 1e3:.0f} ms")
    rows.append(("trie", name, tok.vocab_size, min(t_bytes), min(t_trie), trie.n_nodes, t_ll))

    n = tok.vocab_size
    buf = np.zeros(n + 1, np.bool_)
    added_text = {t.id for t in tok.spec.added_tokens if not t.special}
    added_seen: set[int] = set()
    byte_piece = re.compile(r"<0x[0-9A-Fa-f]{2}>")
    is_byte_piece = [bool(byte_piece.fullmatch(tok.id_to_token(t))) for t in range(n)]
    first_of_bytes: dict[bytes, int] = {}
    for t, b in enumerate(trie.token_bytes):
        if b and not is_byte_piece[t]:
            first_of_bytes.setdefault(b, t)

    def classify(t):
        if t in added_text:
            added_seen.add(t)
            return "added-token"
        if is_byte_piece[t] and trie.token_bytes[t] in first_of_bytes:
            return "byte-dup"
        return "other"

    def forced(mine, ll):
        # llguidance allows a subset of tokjit's set (a forced continuation narrowed to its token)
        return not (ll & ~mine).any()

    bitmask = lnp.allocate_token_bitmask(1, ll_tok.vocab_size)
    for label, pattern, gen in REGEXES:
        c = Regex(tok, pattern, eos_ids=eos_ids, trie=trie)
        grammar = llguidance.LLMatcher.grammar_from_regex(_for_llguidance(pattern))
        matcher = llguidance.LLMatcher(ll_tok, grammar)
        rng = random.Random(label)
        walks = []
        for _ in range(n_strings):
            text = gen(rng)
            ids = tok.encode(text)
            if b"".join(c.trie.token_bytes[i] for i in ids) != text.encode():
                ids = trie.greedy_tokenize(text.encode())
            walks.append(ids)
        added_seen.clear()
        ours, cached, theirs = [], [], []
        agree = total = 0
        kinds: dict[str, int] = {}
        first_other = None
        for rnd in range(rounds + 1):
            for ids in walks:
                matcher.reset()
                state = c.initial_state
                for k in range(len(ids) + 1):
                    t0 = time.perf_counter()
                    c.mask(state, out=buf, cache=False)
                    t1 = time.perf_counter()
                    mine = c.mask(state, out=buf)
                    t2 = time.perf_counter()
                    lnp.fill_next_token_bitmask(matcher, bitmask)
                    t3 = time.perf_counter()
                    if rnd > 0:
                        ours.append(t1 - t0)
                        cached.append(t2 - t1)
                        theirs.append(t3 - t2)
                    if rnd == 1:
                        ll = np.unpackbits(bitmask.view(np.uint8), bitorder="little")[:n].astype(bool)
                        same = np.array_equal(ll, mine)
                        agree += same
                        total += 1
                        if not same:
                            for t in np.flatnonzero(ll != mine).tolist():
                                kind = classify(t)
                                if kind == "other" and (ll[t] or not forced(mine, ll)):
                                    if first_other is None:
                                        first_other = (t, c.trie.token_bytes[t], bool(mine[t]))
                                elif kind == "other":
                                    kind = "forced"
                                kinds[kind] = kinds.get(kind, 0) + 1
                    if k == len(ids):
                        break
                    state = c.advance(state, ids[k])
                    if not matcher.consume_token(ids[k]):
                        raise RuntimeError(f"llguidance rejected token {ids[k]} in {label}: {matcher.get_error()}")
        rows.append(("mask", name, label, _pct(ours, 50), _pct(ours, 99), _pct(cached, 50), _pct(cached, 99),
                     _pct(theirs, 50), _pct(theirs, 99), agree, total, len(ours), kinds))
        if added_seen:
            kinds_of = sorted({re.sub(r"\d+", "N", tok.id_to_token(t)) for t in added_seen})
            print(f"[{name}] {label}: {len(added_seen)} non-special added tokens only tokjit allows: {kinds_of[:8]}")
        if first_other:
            print(f"[{name}] {label}: unexplained mask difference, e.g. (id, bytes, tokjit allows) {first_other}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--vocabs", default="llama3,gemma3")
    ap.add_argument("--strings", type=int, default=30, help="random valid strings per regex")
    ap.add_argument("--rounds", type=int, default=3, help="timed rounds over the walks")
    args = ap.parse_args(argv)
    rows: list = []
    for name in args.vocabs.split(","):
        bench_vocab(name.strip(), args.strings, args.rounds, rows)

    print()
    print("Trie build (best of 3)")
    print(f"{'vocab':<12}{'tokens':>9}{'nodes':>10}{'token bytes ms':>16}{'trie ms':>10}{'llguidance tok ms':>19}")
    for r in rows:
        if r[0] == "trie":
            _, name, n, tb, tt, nodes, tl = r
            print(f"{name:<12}{n:>9}{nodes:>10}{tb * 1e3:>16.0f}{tt * 1e3:>10.0f}{tl * 1e3:>19.0f}")
    print()
    print("Mask time per step, microseconds (steady state): tokjit trie walk, tokjit cached, llguidance")
    print(f"{'vocab':<12}{'regex':<13}{'walk p50':>9}{'p99':>8}{'cache p50':>10}{'p99':>7}"
          f"{'llg p50':>9}{'p99':>8}{'same':>9}{'n':>6}  differing tokens by kind")
    for r in rows:
        if r[0] == "mask":
            _, name, label, p50, p99, c50, c99, l50, l99, agree, total, count, kinds = r
            kinds_text = ", ".join(f"{k} {v}" for k, v in sorted(kinds.items())) or "-"
            print(f"{name:<12}{label:<13}{p50:>9.1f}{p99:>8.1f}{c50:>10.1f}{c99:>7.1f}{l50:>9.1f}{l99:>8.1f}"
                  f"{f'{agree}/{total}':>9}{count:>6}  {kinds_text}")


if __name__ == "__main__":
    main()
