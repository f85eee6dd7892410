"""Exactness on tokenizers nobody showed us (a developer's tool, outside CI): random pipelines built and
trained by the reference libraries themselves, then loaded by tokjit and compared id for id.

    python scripts/fuzz_pipelines.py hf 0 200        # HF tokenizers trained by HF's trainers
    python scripts/fuzz_pipelines.py hf-real 0 300   # shipped tokenizer.json models, components swapped
    python scripts/fuzz_pipelines.py spm 0 150       # sentencepiece models from its trainer (--kind char)

``hf``: a BPE (byte-level or not, affixes, byte fallback, fuse_unk, ignore_merges), Unigram, WordPiece
or WordLevel model trained on part of the shared corpora under a random normalizer, pre-tokenizer,
post-processor and added tokens of every flag. ``hf-real``: the models in ``../shared/data/hf`` with
their normalizer and/or pre-tokenizer replaced. ``spm``: Unigram / BPE / CHAR models with random
trainer and normalizer options. Each is compared on corpus lines, the edge cases and random mixtures
of awkward characters. A seed names its pipeline's choices, but the trainers are not deterministic (HF's
runs threads), so the tokenizer file of every failing seed is kept and its path printed. Run each seed
range in a fresh process of an unchanging checkout: a process that outlives an edit may write stale
kernels into numba's cache. Prints one line per failing seed; exits non-zero if any. A seed whose
training the reference refuses is skipped; each seed's number goes to stderr first, so a run that a
trainer crashed can go on from the seed after the last one named.
"""

from __future__ import annotations

import argparse
import io
import json
import random
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

AWKWARD = list("abcXYZ019 .,'!?-_\t\n") + [
    "é", "ß", "İ", "ﬁ", "Å", "\u0301", "中", "文", "ア", "한", "ي", "👍", "\u00a0", "\u3000", "²", "¼", "①",
    "Ⅻ", "Ⓐ", "\u200d", "\ufeff", "<s>", "</s>", "[MASK]", "<|x|>", "<sep>", "  ", "\r\n", "▁", "ｶ", "㍿"]
SPLIT_PATTERNS = [
    r"\p{N}{1,3}", r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+", r"[\p{L}]+",
    r"\s+", r" ", r"[一-龥]+", r"\d", r"[A-Z][a-z]*", r"\w+|[^\w\s]+", r"\b\w", r"[^\w\s]+",
    r"(?i:'s|'t)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"]
BEHAVIORS = ["isolated", "removed", "merged_with_previous", "merged_with_next", "contiguous"]
SPECIALS = ["<unk>", "<s>", "</s>", "[MASK]"]


def awkward_text(rng: random.Random) -> str:
    return "".join(rng.choice(AWKWARD) for _ in range(rng.randint(0, 30)))


def sample_texts(rng: random.Random, corpus: list[str], edge: list[str]) -> list[str]:
    return corpus[1::7][:150] + edge + [awkward_text(rng) for _ in range(250)]


def random_normalizer(rng: random.Random):
    from tokenizers import Regex
    from tokenizers import normalizers as n
    steps = [lambda: n.NFC(), lambda: n.NFD(), lambda: n.NFKC(), lambda: n.NFKD(), lambda: n.Lowercase(),
             lambda: n.StripAccents(), lambda: n.Strip(left=rng.random() < .5, right=rng.random() < .5),
             lambda: n.Replace(rng.choice([" ", "a", Regex(r"\s+"), Regex(r"\d")]), rng.choice(["▁", "", "  ", "x"])),
             lambda: n.Prepend("▁"), lambda: n.Nmt(),
             lambda: n.BertNormalizer(clean_text=rng.random() < .5, handle_chinese_chars=rng.random() < .5,
                                      strip_accents=rng.choice([None, True, False]), lowercase=rng.random() < .5)]
    chosen = [rng.choice(steps)() for _ in range(rng.choice([0, 0, 1, 1, 2, 3]))]
    if not chosen:
        return None
    return chosen[0] if len(chosen) == 1 and rng.random() < .5 else n.Sequence(chosen)


def random_pre_tokenizer(rng: random.Random, byte_level: bool):
    from tokenizers import Regex
    from tokenizers import pre_tokenizers as p
    steps = [lambda: p.Whitespace(), lambda: p.WhitespaceSplit(), lambda: p.BertPreTokenizer(),
             lambda: p.Punctuation(rng.choice(BEHAVIORS)), lambda: p.Digits(individual_digits=rng.random() < .5),
             lambda: p.CharDelimiterSplit(rng.choice([" ", "-", "a"])), lambda: p.UnicodeScripts(),
             lambda: p.Metaspace(prepend_scheme=rng.choice(["always", "never", "first"]), split=rng.random() < .5),
             lambda: p.Split(Regex(rng.choice(SPLIT_PATTERNS)), rng.choice(BEHAVIORS), invert=rng.random() < .2)]
    chosen = [rng.choice(steps)() for _ in range(rng.choice([0, 1, 1, 2]))]
    if byte_level:
        chosen.append(p.ByteLevel(add_prefix_space=rng.random() < .5, use_regex=rng.random() < .6))
    if not chosen:
        return None
    return chosen[0] if len(chosen) == 1 and rng.random() < .5 else p.Sequence(chosen)


def random_added_tokens(rng: random.Random, tok) -> None:
    from tokenizers import AddedToken

    def flags():
        return dict(single_word=rng.random() < .5, lstrip=rng.random() < .5, rstrip=rng.random() < .5,
                    normalized=rng.random() < .5)
    if rng.random() < .3:
        tok.add_tokens([AddedToken(rng.choice(["hell", "hello world", " x", "ab", "é", "中文", "<t>", "the"]),
                                   special=rng.random() < .3, **flags()) for _ in range(rng.randint(1, 3))])
    if rng.random() < .5:
        tok.add_tokens([AddedToken("hello", **flags()), AddedToken(" the", normalized=rng.random() < .5)])
    if rng.random() < .5:
        tok.add_special_tokens([AddedToken("<|x|>", lstrip=rng.random() < .5, rstrip=rng.random() < .5)])


def random_post_processor(rng: random.Random, tok):
    from tokenizers import processors
    s, e = ("<s>", tok.token_to_id("<s>")), ("</s>", tok.token_to_id("</s>"))
    kind = rng.randrange(5)
    if kind == 1:
        return processors.TemplateProcessing(single="<s> $A </s>", pair="<s> $A </s> $B:1 </s>:1",
                                             special_tokens=[s, e])
    if kind == 2:
        return processors.BertProcessing(e, s)
    if kind == 3:
        return processors.RobertaProcessing(e, s, add_prefix_space=rng.random() < .5)
    if kind == 4:
        return processors.Sequence([processors.ByteLevel(trim_offsets=True),
                                    processors.TemplateProcessing(single="$A </s>", pair="$A </s> $B:1",
                                                                  special_tokens=[e])])
    return None


def trained_hf(rng: random.Random, corpus: list[str]):
    """A tokenizer trained by HF's trainer on random components (kind, tokenizer)."""
    import tokenizers
    from tokenizers import models, trainers
    from tokenizers import pre_tokenizers as p
    kind = rng.choice(["bpe", "bpe", "unigram", "wordpiece", "wordlevel"])
    byte_level = kind == "bpe" and rng.random() < .6
    if kind == "bpe":
        affixes = {}
        if not byte_level and rng.random() < .3:
            affixes["continuing_subword_prefix"] = "##"
        if not byte_level and rng.random() < .3:
            affixes["end_of_word_suffix"] = "</w>"
        model = models.BPE(unk_token=None if byte_level else "<unk>", fuse_unk=rng.random() < .3,
                           byte_fallback=not byte_level and rng.random() < .3, ignore_merges=rng.random() < .3,
                           **affixes)
        trainer = trainers.BpeTrainer(vocab_size=rng.choice([500, 2000, 6000]), special_tokens=SPECIALS,
                                      initial_alphabet=p.ByteLevel.alphabet() if byte_level else [],
                                      show_progress=False, **affixes)
    elif kind == "unigram":
        model = models.Unigram()
        trainer = trainers.UnigramTrainer(vocab_size=rng.choice([800, 3000]), special_tokens=SPECIALS,
                                          unk_token="<unk>", show_progress=False)
    elif kind == "wordpiece":
        model = models.WordPiece(unk_token="<unk>", max_input_chars_per_word=rng.choice([100, 8]))
        trainer = trainers.WordPieceTrainer(vocab_size=rng.choice([800, 3000]), special_tokens=SPECIALS,
                                            show_progress=False)
    else:
        model = models.WordLevel(unk_token="<unk>")
        trainer = trainers.WordLevelTrainer(vocab_size=3000, special_tokens=SPECIALS, show_progress=False)
    tok = tokenizers.Tokenizer(model)
    tok.normalizer = random_normalizer(rng)
    tok.pre_tokenizer = random_pre_tokenizer(rng, byte_level)
    if tok.pre_tokenizer is None and kind in ("wordpiece", "wordlevel"):
        tok.pre_tokenizer = p.Whitespace()
    tok.train_from_iterator(corpus[::3], trainer)
    tok.post_processor = random_post_processor(rng, tok)
    random_added_tokens(rng, tok)
    return kind, tok


def shipped_hf(rng: random.Random):
    """A shipped tokenizer.json with its normalizer and/or pre-tokenizer replaced (name, tokenizer)."""
    import tokenizers
    from conftest import SHARED
    paths = sorted((SHARED / "data" / "hf").glob("*/tokenizer.json"))
    path = rng.choice(paths)
    doc = json.loads(path.read_text(encoding="utf-8"))
    tok = tokenizers.Tokenizer.from_str(json.dumps(doc))
    byte_level = "ByteLevel" in json.dumps([doc.get("pre_tokenizer"), doc.get("decoder")])
    what = rng.randrange(3)
    if what != 1:
        tok.normalizer = random_normalizer(rng)
    if what != 0:
        tok.pre_tokenizer = random_pre_tokenizer(rng, byte_level)
    return path.parent.name, tok


def compare_hf(name: str, ref, rng: random.Random, corpus, edge, keep: Path) -> str | None:
    import tokjit
    path = keep / "tokenizer.json"
    ref.save(str(path))
    ref = type(ref).from_file(str(path))
    ref.no_padding()
    ref.no_truncation()
    try:
        tok = tokjit.load(path)
    except tokjit.UnsupportedComponentError as exc:
        return f"{name}: refused ({exc})"
    texts = sample_texts(rng, corpus, edge)
    bad = []
    for special in (False, True):
        want = [e.ids for e in ref.encode_batch(texts, add_special_tokens=special)]
        got = [tok.encode(t, add_special_tokens=special, parse_special=True) for t in texts]
        bad += [(t, w, g) for t, w, g in zip(texts, want, got) if w != g]
    if not bad:
        return None
    t, w, g = bad[0]
    return f"{name}: {len(bad)} texts differ, file kept in {keep}; first {t[:80]!r}: {w[:12]} vs {g[:12]}"


def trained_spm(rng: random.Random, corpus: list[str], keep: Path, kind: str | None):
    import sentencepiece as spm
    kind = kind or rng.choice(["unigram", "bpe"])
    options = dict(model_type=kind, vocab_size=rng.choice([6000, 9000]), hard_vocab_limit=False, minloglevel=2,
                   character_coverage=rng.choice([0.9995, 0.98]),
                   normalization_rule_name=rng.choice(["nmt_nfkc", "nfkc", "nmt_nfkc_cf", "nfkc_cf", "identity"]),
                   add_dummy_prefix=rng.random() < .7, remove_extra_whitespaces=rng.random() < .7,
                   split_digits=rng.random() < .4, byte_fallback=rng.random() < .4,
                   split_by_unicode_script=rng.random() < .8, split_by_number=rng.random() < .8,
                   split_by_whitespace=rng.random() < .85, treat_whitespace_as_suffix=rng.random() < .15,
                   allow_whitespace_only_pieces=rng.random() < .3, max_sentencepiece_length=rng.choice([4, 16]))
    if rng.random() < .4:
        options["user_defined_symbols"] = ["<sep>", "[MASK]", "ab"][:rng.randint(1, 3)]
    if rng.random() < .3:
        options["control_symbols"] = ["<ctl>"]
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(corpus[::4][:3000]), model_writer=model, **options)
    path = keep / "spm.model"
    path.write_bytes(model.getvalue())
    return kind, path


def compare_spm(name: str, path: Path, rng: random.Random, corpus, edge) -> str | None:
    import sentencepiece as spm

    import tokjit
    ref = spm.SentencePieceProcessor(model_file=str(path))
    try:
        tok = tokjit.load(path)
    except tokjit.UnsupportedComponentError as exc:
        return f"{name}: refused ({exc})"
    texts = sample_texts(rng, corpus, edge)
    bad = [(t, w, g) for t, w, g in zip(texts, ref.encode(texts), tok.encode_batch(texts)) if w != g]
    if not bad:
        return None
    t, w, g = bad[0]
    return f"{name}: {len(bad)} texts differ, model kept in {path}; first {t[:80]!r}: {w[:12]} vs {g[:12]}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("family", choices=["hf", "hf-real", "spm"])
    ap.add_argument("first_seed", type=int)
    ap.add_argument("count", type=int)
    ap.add_argument("--kind", choices=["unigram", "bpe", "char"], help="spm: one model type only")
    args = ap.parse_args()
    from conftest import corpus_files, corpus_lines
    corpus = corpus_lines(step=30)
    edge = [t for t in corpus_files()["edge_cases"] if isinstance(t, str)][:200]
    failures = 0
    for seed in range(args.first_seed, args.first_seed + args.count):
        rng = random.Random(seed)
        keep = Path(tempfile.mkdtemp(prefix=f"tokjit-fuzz-{args.family}-{seed}-"))
        # on stderr before each seed: the reference's trainers sometimes crash the process (HF's
        # segfaulted on two seeds of 150), and the last line names the seed to start after
        print(f"seed {seed}", file=sys.stderr, flush=True)
        try:
            if args.family == "spm":
                kind, path = trained_spm(rng, corpus, keep, args.kind)
            else:
                name, ref = trained_hf(rng, corpus) if args.family == "hf" else shipped_hf(rng)
        except Exception as exc:  # noqa: BLE001 - e.g. HF: "The vocabulary is not large enough to contain all chars"
            print(f"seed {seed}: the reference's trainer failed ({type(exc).__name__}: {exc}); skipped", flush=True)
            continue
        if args.family == "spm":
            result = compare_spm(f"seed {seed} {kind}", path, rng, corpus, edge)
        else:
            result = compare_hf(f"seed {seed} {name}", ref, rng, corpus, edge, keep)
        if result is not None:
            failures += "refused" not in result
            print(result, flush=True)
    print(f"{args.family} seeds {args.first_seed}..{args.first_seed + args.count - 1}: {failures} differing")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
