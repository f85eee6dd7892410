"""Write llama.cpp's own ids for special-token texts and corpus samples, as test fixtures.

Run once, outside CI, with llama-cpp-python 0.3.36 installed (it vendors llama.cpp 0c1e570; not a
tokjit dependency: ``CMAKE_ARGS="-DGGML_NATIVE=OFF -DLLAMA_CURL=OFF" pip install llama-cpp-python==0.3.36``)::

    python scripts/gen_llamacpp_special_vectors.py [--shared ../shared]

For every GGUF in ``<shared>/data/gguf`` and every vocabulary in ``tests/llamacpp_vocabs.BUILT_VOCABS``
it loads the vocabulary with llama.cpp (``vocab_only``), picks the tokens that llama.cpp itself
matches in text (CONTROL / USER_DEFINED / UNKNOWN attribute after loading) plus texts its load rules
look at, mixes them with words, whitespace and each other, and writes
``tests/data/llamacpp-0c1e570/<vocab>.special.{inp,out,noparse.out}`` and ``<vocab>.corpus.{refs,out}``
(format in ``tests/llamacpp_vocabs.py``). For every ``tokenizer.ggml.pre`` that llama.cpp knows it also
writes ``pre-<name>.corpus.{refs,out}``: the shared gpt-2 GGUF with that pre string, on llama.cpp's own
test strings and a few corpus texts. Texts are chosen with a fixed seed per vocabulary, so a rerun
writes the same files. Arguments restrict the run to some vocabularies (``qwen2 pre-kimi-k2``).
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))

import llamacpp_vocabs as lv  # noqa: E402

# llama_token_attr bits (llama.h)
ATTR_UNKNOWN, ATTR_CONTROL, ATTR_USER_DEFINED = 1 << 0, 1 << 3, 1 << 4

ISSUE_TEXT = "<s><s><unk><s>a<s>b<s>c<unk>d<unk></s>"
# texts llama.cpp's load rules, or common chat formats, give a meaning (tried whether or not the
# vocabulary has them: absent ones are plain text)
RULE_TEXTS = ("<s>", "</s>", "<unk>", "<pad>", "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|end|>",
              "<|eot_id|>", "<eos>", "<end_of_turn>", "<mask>", "[MASK]", "[CLS]", "[SEP]", "[PAD]", "<PAD>",
              "<PRE>", "▁<PRE>", "<|fim_prefix|>", "<fim_prefix>", "<fim-prefix>", "<|file_sep|>", "<EOT>",
              "<|return|>", "<|call|>", "<|channel|>", "<|message|>")
WORDS = ("Hello", " world", "a", "b", "x", " ", "  ", "\n", "\t", "é", "日本語", "123", "<", ">", "|", "</", "<|",
         "|>", "[", "]", "\u2581", "\r\n", " \n ")
# written here for the UGM vocabulary: whitespace runs, normalisation and scripts
OWN_TEXTS = ("", " ", "   ", "Hello world", "  Hello   world  ", "\tTab\tand\nnewline\n", "ﬁne ﬂour", "Ｆｕｌｌ ｗｉｄｔｈ",
             "e\u0301 é", "\u3000ideographic\u3000space", "ÀÉÎÕÜ àéîõü", "Straße", "Привет, мир!", "你好，世界",
             "こんにちは世界", "안녕하세요", "مرحبا بالعالم", "नमस्ते दुनिया", "🙂👍🏽 👨‍👩‍👧", "1234567890 3.14159",
             "don't won't I'm", "a\u200bb\u200cc\u200dd", "\u00a0non-breaking\u00a0space", "x" * 300) + tuple(
    "a" + "\n" * k + "b" for k in (1, 2, 3, 4, 5, 7, 12, 31, 32, 40)) + ("\n", "\n\n\n", " \n \n\n ") + (
    # characters the charsmap deletes (C0 controls, DEL), alone, between spaces and beside words
    "\x0b", "\x7f", "\x1c\x1d\x1e\x1f", " \x0b", "\x0b ", "  \x0b  ", "\x0b\u3000", "\u3000", "a\x0b", "\x0bb",
    " \x0b a")
TOKENS_PER_VOCAB = 14
MIXTURES = 32
CORPUS_PER_FILE = {"t5-ugm": 10, "t5-ugm-keep-spaces": 4, "t5-ugm-keep-spaces-no-prefix": 4}
CORPUS_PER_FILE_DEFAULT = 2
CORPUS_MAX_CHARS = 400
# pre-type fixtures (one per tokenizer.ggml.pre llama.cpp knows, on one vocabulary): llama.cpp's own
# test strings plus one short text per corpus file and a few edge cases
PRE_CORPUS_PER_FILE, PRE_EDGE_CASES, PRE_MAX_CHARS = 1, 6, 120


def llama_cpp_vocab(path: Path):
    """(Llama, texts of the tokens llama.cpp matches in text, texts of all tokens)."""
    import llama_cpp
    llm = llama_cpp.Llama(model_path=str(path), vocab_only=True, verbose=False)
    vocab = llm._model.vocab
    n = llama_cpp.llama_vocab_n_tokens(vocab)
    matched, every = [], set()
    for i in range(n):
        text = llama_cpp.llama_vocab_get_text(vocab, i).decode("utf-8", "replace")
        every.add(text)
        if llama_cpp.llama_vocab_get_attr(vocab, i) & (ATTR_CONTROL | ATTR_USER_DEFINED | ATTR_UNKNOWN):
            matched.append(text)
    return llm, matched, every


def special_texts(name: str, matched: list[str], every: set[str]) -> list[str]:
    rng = random.Random(f"special/{name}")
    # the tokens the load rules look at that this vocabulary has (whatever llama.cpp made of them),
    # then a sample of the other matched tokens
    chosen = [t for t in RULE_TEXTS if t in every] + [t for t in matched if "unused" in t][:2]
    rest = [t for t in matched if t not in chosen]
    chosen += rng.sample(rest, min(len(rest), max(TOKENS_PER_VOCAB - len(chosen), 4)))
    texts = [ISSUE_TEXT, ISSUE_TEXT.replace("><", "> <"), " " + ISSUE_TEXT + " "]
    texts += [r for r in RULE_TEXTS if r not in every]  # plain text in this vocabulary
    for t in chosen:
        texts += [t, " " + t + " ", "\n" + t + "\n", "a" + t + "b", "a  " + t + "  b", t + t, t[:-1],
                  t[: len(t) // 2] + t]
    pool = chosen + list(RULE_TEXTS) + list(WORDS)
    for _ in range(MIXTURES):
        texts.append("".join(rng.choice(pool) for _ in range(rng.randint(2, 9))))
    if name in lv.BUILT_VOCABS:
        texts += list(OWN_TEXTS)
    return list(dict.fromkeys(texts))


def corpus_refs(name: str) -> list[tuple[str, int]]:
    """Texts for ``<name>.corpus.out``; every pre-type vocabulary shares one list (``pre-types.corpus.refs``)."""
    texts = lv.ref_texts()
    rng = random.Random("corpus/pre-types" if name.startswith("pre-") else f"corpus/{name}")
    refs = []
    if name.startswith("pre-"):
        refs += [("llamacpp-inp", i) for i in range(len(texts["llamacpp-inp"]))]
    for corpus, items in texts.items():
        if corpus == "llamacpp-inp":
            continue
        if name.startswith("pre-"):
            k, longest = (PRE_EDGE_CASES if corpus == "edge_cases" else PRE_CORPUS_PER_FILE), PRE_MAX_CHARS
        else:
            k, longest = CORPUS_PER_FILE.get(name, CORPUS_PER_FILE_DEFAULT), CORPUS_MAX_CHARS
        short = [i for i, t in enumerate(items) if 0 < len(t) <= longest]
        refs += [(corpus, i) for i in sorted(rng.sample(short, min(k, len(short))))]
    return refs


def generate_one(shared: Path, name: str) -> None:
    import conftest
    conftest.SHARED = shared
    conftest.corpus_files.cache_clear()
    lv.FIXTURE_DIR.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        path = lv.gguf_path(shared, name, Path(tmp))
        llm, matched, every = llama_cpp_vocab(path)
        texts = [] if name.startswith("pre-") else special_texts(name, matched, every)
        if texts:
            lv.write_texts(lv.FIXTURE_DIR / f"{name}.special.inp", texts)
            lv.write_ids(lv.FIXTURE_DIR / f"{name}.special.out",
                         [llm.tokenize(t.encode("utf-8"), add_bos=False, special=True) for t in texts])
            lv.write_ids(lv.FIXTURE_DIR / f"{name}.special.noparse.out",
                         [llm.tokenize(t.encode("utf-8"), add_bos=False, special=False) for t in texts])
        if name.startswith("rules"):  # same vocabulary as gpt-2 outside its special tokens
            print(f"{name}: {len(matched)} matched tokens, {len(texts)} special texts")
            return
        refs = corpus_refs(name)
        corpus = lv.ref_texts()
        ids = [llm.tokenize(corpus[c][i].encode("utf-8"), add_bos=False, special=False) for c, i in refs]
        lv.refs_path(name).write_text("".join(f"{c} {i}\n" for c, i in refs))
        lv.write_ids(lv.FIXTURE_DIR / f"{name}.corpus.out", ids)
        print(f"{name}: {len(matched)} matched tokens, {len(texts)} special texts, {len(refs)} corpus texts")


def generate(shared: Path, only: set[str]) -> None:
    """Each vocabulary in a child process: llama.cpp aborts the process on some inputs (a GGML_ASSERT),
    and such a vocabulary is reported and left without fixtures."""
    import subprocess
    from tokjit.load.gguf_pretypes import known_pre_types
    names = sorted(p.name[len("ggml-vocab-"):-len(".gguf")] for p in (shared / "data" / "gguf").glob("ggml-vocab-*.gguf"))
    names += sorted(lv.BUILT_VOCABS) + [f"pre-{p}" for p in known_pre_types()]
    failed = []
    for name in names:
        if only and name not in only:
            continue
        r = subprocess.run([sys.executable, __file__, "--shared", str(shared), "--one", name],
                           capture_output=True, text=True)
        if r.returncode != 0:
            failed.append(name)
            for suffix in (".special.inp", ".special.out", ".special.noparse.out", ".corpus.out"):
                (lv.FIXTURE_DIR / f"{name}{suffix}").unlink(missing_ok=True)
            reason = [line for line in r.stderr.splitlines() if "GGML_ASSERT" in line or "Error" in line][-1:]
            print(f"{name}: llama.cpp failed ({r.returncode}) {' '.join(reason)}")
        else:
            print(r.stdout.strip())
    if failed:
        print(f"no fixtures for {', '.join(failed)}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shared", type=Path, default=ROOT.parent / "shared")
    ap.add_argument("vocabs", nargs="*", help="only these (qwen2, t5-ugm, pre-kimi-k2, ...)")
    ap.add_argument("--one", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        generate_one(args.shared.resolve(), args.one)
    else:
        generate(args.shared.resolve(), set(args.vocabs))


if __name__ == "__main__":
    main()
