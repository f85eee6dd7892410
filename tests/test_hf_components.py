"""Component coverage beyond the shipped files: the real cl100k tokenizer.json with its normalizer and
pre-tokenizer swapped for other HF component configurations, each compared with HF ``tokenizers``
loading the very same JSON. Tokenizers nobody has shown us combine these components; support is
judged by component type."""

from __future__ import annotations

import json

import pytest

import tokjit
from conftest import SHARED, corpus_lines, shared_path

tokenizers = pytest.importorskip("tokenizers")

BYTE_LEVEL = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}
BYTE_LEVEL_REGEX = dict(BYTE_LEVEL, use_regex=True)


def seq(*steps):
    return {"type": "Sequence", "pretokenizers": list(steps)}


PRE_TOKENIZERS = {
    "digits-individual": seq({"type": "Digits", "individual_digits": True}, BYTE_LEVEL_REGEX),
    "digits-runs": seq({"type": "Digits", "individual_digits": False}, dict(BYTE_LEVEL_REGEX, add_prefix_space=True)),
    "punct-isolated-then-next": seq({"type": "Punctuation", "behavior": "Isolated"},
                                    {"type": "Punctuation", "behavior": "MergedWithNext"}, BYTE_LEVEL),
    "punct-previous": seq({"type": "Punctuation", "behavior": "MergedWithPrevious"}, BYTE_LEVEL),
    "punct-contiguous": seq({"type": "Punctuation", "behavior": "Contiguous"}, BYTE_LEVEL),
    "char-delimiter": seq({"type": "CharDelimiterSplit", "delimiter": "e"}, BYTE_LEVEL_REGEX),
    "split-merged-with-next": seq({"type": "Split", "pattern": {"Regex": r"\s+"}, "behavior": "MergedWithNext",
                                   "invert": False}, BYTE_LEVEL),
    "split-removed": seq({"type": "Split", "pattern": {"Regex": "[aeiou]"}, "behavior": "Removed",
                          "invert": False}, BYTE_LEVEL),
    "split-string-contiguous-inverted": seq({"type": "Split", "pattern": {"String": "a"},
                                             "behavior": "Contiguous", "invert": True}, BYTE_LEVEL),
    "gpt2-byte-level": dict(BYTE_LEVEL_REGEX, add_prefix_space=True),
    "unicode-scripts": seq({"type": "UnicodeScripts"}, BYTE_LEVEL),
    "split-empty-string": seq({"type": "Split", "pattern": {"String": ""}, "behavior": "Isolated",
                               "invert": False}, BYTE_LEVEL),
    "split-empty-string-merged": seq({"type": "Split", "pattern": {"String": ""}, "behavior": "MergedWithNext",
                                      "invert": False}, BYTE_LEVEL),
    "fixed-length": seq({"type": "FixedLength", "length": 3}, BYTE_LEVEL),
    "split-then-fixed-length": seq({"type": "Split", "pattern": {"Regex": r"\s+"}, "behavior": "Removed",
                                    "invert": False}, {"type": "FixedLength", "length": 4}, BYTE_LEVEL),
    "unicode-scripts-then-regex": seq({"type": "UnicodeScripts"}, BYTE_LEVEL_REGEX),
    "deepseek-style-sequence": seq(
        {"type": "Split", "pattern": {"Regex": r"\p{N}{1,3}"}, "behavior": "Isolated", "invert": False},
        {"type": "Split", "pattern": {"Regex": r"[一-龥\u3040-ゟ゠-ヿ]+"}, "behavior": "Isolated", "invert": False},
        {"type": "Split", "pattern": {"Regex": r"[^\r\n\p{L}\p{N}]?\p{L}+| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"},
         "behavior": "Isolated", "invert": False},
        BYTE_LEVEL),
}

NORMALIZERS = {
    "nfc": {"type": "NFC"},
    "nfkc": {"type": "NFKC"},
    "nfd-strip-lower": {"type": "Sequence", "normalizers": [{"type": "NFD"}, {"type": "StripAccents"},
                                                             {"type": "Lowercase"}]},
    "nfkd": {"type": "NFKD"},
    "strip": {"type": "Strip", "strip_left": True, "strip_right": True},
    "replace-regex": {"type": "Replace", "pattern": {"Regex": r"\s+"}, "content": " "},
    "replace-string": {"type": "Replace", "pattern": {"String": "the"}, "content": "THE"},
    "prepend": {"type": "Prepend", "prepend": "> "},
    "nmt": {"type": "Nmt"},
    "nmt-nfkc": {"type": "Sequence", "normalizers": [{"type": "Nmt"}, {"type": "NFKC"}]},
}


@pytest.fixture(scope="module")
def base_doc():
    return json.loads(shared_path("data", "hf", "gpt35turbo", "tokenizer.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def texts():
    # a deterministic sample of every corpus (every 100th text) plus all edge cases
    return corpus_lines(step=100)


def compare(tmp_path, doc, texts):
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    ref = tokenizers.Tokenizer.from_file(str(path))
    ours = tokjit.load(path)
    expected = [e.ids for e in ref.encode_batch(texts, add_special_tokens=False)]
    got = ours.encode_batch(texts, parse_special=True)
    bad = [(t, a, b) for t, a, b in zip(texts, got, expected) if a != b]
    assert not bad, f"{len(bad)} of {len(texts)} differ; first: {bad[0][0][:80]!r} {bad[0][1][:12]} vs {bad[0][2][:12]}"


@pytest.mark.skipif(not SHARED.is_dir(), reason="shared data missing")
@pytest.mark.parametrize("name", sorted(PRE_TOKENIZERS))
def test_pre_tokenizer_variant_matches_hf(base_doc, texts, tmp_path, name):
    compare(tmp_path, dict(base_doc, pre_tokenizer=PRE_TOKENIZERS[name]), texts)


@pytest.mark.skipif(not SHARED.is_dir(), reason="shared data missing")
@pytest.mark.parametrize("name", sorted(NORMALIZERS))
def test_normalizer_variant_matches_hf(base_doc, texts, tmp_path, name):
    compare(tmp_path, dict(base_doc, normalizer=NORMALIZERS[name]), texts)


# Patterns whose reading differs between Oniguruma (HF's engine) and the `regex` module: dotless i
# under (?i) (no case folding in CaseFolding.txt), Ruby's (?m) (dot matches newline), \w and \b,
# and a Replace normalizer's regex (it ran on the `regex` module); each with the strings that told
# them apart
ONIG_READINGS = {
    "case-insensitive-set": ({"Regex": r"(?i:[a-z]+)|\s+|[^\sa-zA-Z]+"}, None,
                             ["y\u0131", "I\u0131 \u0130i", "\u212a \u017fs K\u0131S"]),
    "ruby-dot-all": ({"Regex": r"(?m:.{1,3})|\s"}, None, ["\n\n", "\r\n", "ab\ncd\n\nef"]),
    # Oniguruma's \w is Letter, Mark, Number and Connector_Punctuation (No in, Join_Control out)
    "word-boundaries": ({"Regex": r"\b\w+\b|\W+"}, None, [" \u00bd", "au\u00b3", "\u24b6b", "x\u00b2y"]),
    "word-runs": ({"Regex": r"(?i)\w{1,3}|."}, None, ["\u0938\u094b\u092e\u200c\u0935\u093e\u0930", "a\u200db"]),
    "replace-case-insensitive": (None, {"type": "Replace", "pattern": {"Regex": r"(?i)[a-z]"}, "content": "Q"},
                                 ["\u0130", "y\u0131", "Hello World \u00e9"]),
    # Ruby's syntax has \p only with braces: \pL is "p" then "L"
    "p-without-braces": ({"Regex": r"\pL+|\PN+|\s+|."}, None, ["pLL PNN", "33 ab", "pL", "PN 3"]),
}


@pytest.mark.skipif(not SHARED.is_dir(), reason="shared data missing")
@pytest.mark.parametrize("name", sorted(ONIG_READINGS))
def test_patterns_read_as_oniguruma_reads_them(base_doc, texts, tmp_path, name):
    split, normalizer, extra = ONIG_READINGS[name]
    doc = dict(base_doc)
    if split is not None:
        doc["pre_tokenizer"] = seq({"type": "Split", "pattern": split, "behavior": "Isolated", "invert": False},
                                   BYTE_LEVEL)
    if normalizer is not None:
        doc["normalizer"] = normalizer
    compare(tmp_path, doc, extra + texts)


# Patterns that can match the empty string: Oniguruma's iteration (as HF runs it) starts the next
# search a character after an empty match and drops an empty match where the last one ended (Python's
# `regex` tries a non-empty match at the same place instead); Contiguous parts gaps at an empty match
EMPTY_MATCH_PATTERNS = [r"a*|b", r"\p{L}{,3}|\p{N}{,2}|.|\n", r"x?", r"(?=a)|b", r"\b", r"\s*|x"]


@pytest.mark.skipif(not SHARED.is_dir(), reason="shared data missing")
@pytest.mark.parametrize("behavior", ["Isolated", "Removed", "MergedWithPrevious", "MergedWithNext", "Contiguous"])
def test_patterns_matching_empty_iterate_as_oniguruma(base_doc, tmp_path, behavior):
    import random
    rng = random.Random(5)
    alphabet = ["a", "b", "3", " ", "ab", "x", "\u00e9", "\u65e5", "\n", "  ", "33"]
    texts = ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 8))) for _ in range(150)]
    for pattern in EMPTY_MATCH_PATTERNS:
        for invert in (False, True):
            doc = dict(base_doc, pre_tokenizer=seq({"type": "Split", "pattern": {"Regex": pattern},
                                                    "behavior": behavior, "invert": invert}, BYTE_LEVEL))
            compare(tmp_path, doc, texts)


@pytest.mark.skipif(not SHARED.is_dir(), reason="shared data missing")
@pytest.mark.parametrize("pattern", [r"\h+", r"[\p{L}&&[^a-z]]+", r"\X", "(?i:ss)|.", "(?i:[\u00df])|.", "(?i:\ufb01)"])
def test_split_pattern_beyond_the_engine_is_refused_not_guessed(base_doc, tmp_path, pattern):
    """HF loads these; the `regex` module reads the first ones differently from Oniguruma (\\h is a
    hex digit to Oniguruma, horizontal space to `regex`), and Oniguruma folds case to strings the VM
    cannot match ((?i:ss) matches "\u00df", (?i:[\u00df]) matches "ss"), so tokjit must refuse them
    rather than give other ids."""
    doc = dict(base_doc, pre_tokenizer=seq({"type": "Split", "pattern": {"Regex": pattern}, "behavior": "Isolated",
                                            "invert": False}, BYTE_LEVEL))
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    tokenizers.Tokenizer.from_file(str(path))  # the reference accepts the file
    with pytest.raises(tokjit.UnsupportedComponentError, match="regex engine does not support"):
        tokjit.load(path)


def compare_with_added_tokens(base_doc, tmp_path, extra, normalizer, parts, n_texts, seed):
    """Add ``extra`` tokens to the real cl100k JSON under ``normalizer`` and compare with HF on random
    mixtures of ``parts``. HF assigns added-token ids itself, so the file is written again with the
    ids it chose before both libraries load it."""
    import random

    doc = dict(base_doc, added_tokens=base_doc["added_tokens"] + extra, normalizer=normalizer)
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    ref = tokenizers.Tokenizer.from_file(str(path))
    for tok in extra:
        tok["id"] = ref.token_to_id(tok["content"])
    path.write_text(json.dumps(doc), encoding="utf-8")
    ref = tokenizers.Tokenizer.from_file(str(path))
    ours = tokjit.load(path)
    rng = random.Random(seed)
    texts = ["".join(rng.choice(parts) for _ in range(rng.randint(1, 12))) for _ in range(n_texts)]
    expected = [e.ids for e in ref.encode_batch(texts, add_special_tokens=False)]
    got = ours.encode_batch(texts, parse_special=True)
    bad = [(t, a, b) for t, a, b in zip(texts, got, expected) if a != b]
    assert not bad, f"{len(bad)} differ; first {bad[0]!r}"


@pytest.mark.skipif(not SHARED.is_dir(), reason="shared data missing")
@pytest.mark.parametrize("flags", [
    # (content, lstrip, rstrip, single_word, normalized, special)
    [("the", False, False, False, False, False), (" the", False, False, False, True, False)],
    [("cat", False, False, False, True, False), ("at dog", False, False, False, False, True)],
    [("the ", False, False, False, True, False), ("<m>", True, False, False, False, True)],
    [(" x", False, False, False, False, False), ("yx", False, True, False, True, False)],
    [("<s>", False, False, False, True, True), ("<mask>", True, False, False, False, True)],  # RoBERTa's
])
def test_raw_added_tokens_match_before_normalized_ones_without_a_normalizer(base_doc, tmp_path, flags):
    """HF matches the added tokens not flagged "normalized" first and the others in what is left, also
    when there is no normalizer: where their matches may overlap, that order decides."""
    extra = [{"id": 0, "content": c, "lstrip": ls, "rstrip": rs, "single_word": sw, "normalized": nm,
              "special": sp} for c, ls, rs, sw, nm, sp in flags]
    parts = [c for c, *_ in flags] + ["the", " ", "  ", "x", "y", "cat", "at", " dog", "a", "\n", "<", "m>"]
    compare_with_added_tokens(base_doc, tmp_path, extra, None, parts, 1500, seed=11)


@pytest.mark.skipif(not SHARED.is_dir(), reason="shared data missing")
def test_added_token_flags_match_hf(base_doc, tmp_path):
    """lstrip / rstrip / single_word / normalized / special added tokens, under a Lowercase
    normalizer, on random mixtures of the tokens, Unicode whitespace and word characters."""
    flags = [("<mask>", True, False, False, False, True), ("<sep>", False, True, False, False, True),
             ("cat", False, False, True, False, False), ("dog", True, True, False, True, False),
             ("<|x|>", True, True, True, False, True)]
    extra = [{"id": 0, "content": c, "lstrip": ls, "rstrip": rs, "single_word": sw, "normalized": nm,
              "special": sp} for c, ls, rs, sw, nm, sp in flags]
    parts = ["<mask>", "<sep>", "cat", "dog", "DOG", "<|x|>", " ", "  ", "\u3000", "\t", "\n", "a", "concat",
             "cats", "é", "_", "1", ".", "x<|x|>y", "\u0301", "\u2003"]
    compare_with_added_tokens(base_doc, tmp_path, extra, {"type": "Lowercase"}, parts, 2000, seed=7)


@pytest.mark.skipif(not SHARED.is_dir(), reason="shared data missing")
@pytest.mark.parametrize("normalizer", [
    {"type": "Lowercase"},
    {"type": "Sequence", "normalizers": [{"type": "NFD"}, {"type": "StripAccents"}, {"type": "Lowercase"}]},
    {"type": "NFKC"},
])
def test_normalized_added_tokens_match_by_normalized_content(base_doc, tmp_path, normalizer):
    """HF matches a normalized=True added token by its content after normalization."""
    extra = [{"id": 0, "content": c, "single_word": False, "lstrip": False, "rstrip": False, "normalized": True,
              "special": sp} for c, sp in [("Café", False), ("ÉCOLE", True), ("naïve", False)]]
    parts = ["Café", "café", "CAFÉ", "école", "ÉCOLE", "naïve", "NAÏVE", "naive", " ", "x", "\u0301"]
    compare_with_added_tokens(base_doc, tmp_path, extra, normalizer, parts, 1500, seed=3)


@pytest.mark.skipif(not SHARED.is_dir(), reason="shared data missing")
@pytest.mark.parametrize("splitter", [{"type": "Digits", "individual_digits": True},
                                      {"type": "Punctuation", "behavior": "Isolated"}])
def test_metaspace_first_after_a_normal_form_that_composes(tmp_path, splitter):
    """Metaspace "first" prefixes the piece whose original offset is 0: a character NFC composes from
    several keeps the offset of the first of them, not the text's start."""
    doc = json.loads(shared_path("data", "hf", "mistral-7b", "tokenizer.json").read_text(encoding="utf-8"))
    metaspace = {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first", "split": True}
    texts = ["3e\u0301", "3e\u0301x", ".e\u0301", "!e\u0301\u0301", "a.e\u0301 3o\u0308\u0301", "e\u0301.3",
             "\u1100\u1161.3\u1100\u1161", "x\u0323\u0307.y", "5\u0041\u030a6"]
    for form in ("NFC", "NFKC"):
        compare(tmp_path, dict(doc, normalizer={"type": form}, pre_tokenizer=seq(splitter, metaspace)),
                texts + corpus_lines(step=400))


@pytest.mark.skipif(not SHARED.is_dir(), reason="shared data missing")
def test_charsmap_removing_the_first_characters_aligns_as_hf(tmp_path):
    """HF's Precompiled normalizer loses the removal of a text's first characters (it notes a removal
    on the change before it), so later characters align that many characters early: offsets read so,
    and Metaspace "first" prefixes the piece that starts the text."""
    doc = json.loads(shared_path("data", "hf", "t5", "tokenizer.json").read_text(encoding="utf-8"))
    doc["padding"] = doc["truncation"] = None
    texts = ["\x1b3 ab", "\x1b\x1b3 ab cd", "x\x1b3 ab", "\x1b\u00e9 ab", "\x1b", "\x1b\u65e5\u672c x",
             "\x1b\u200b3 x", "\x1b ab", "\x1fa", "\x00abc def", "\x1b3.4"]
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    ref = tokenizers.Tokenizer.from_file(str(path))
    ours = tokjit.load(path)
    for text in texts:
        enc = ref.encode(text, add_special_tokens=False)
        assert ours.encode_with_offsets(text) == (enc.ids, enc.offsets), text
    metaspace = {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first", "split": True}
    for splitter in ({"type": "Digits", "individual_digits": True}, {"type": "Punctuation", "behavior": "Isolated"}):
        compare(tmp_path, dict(doc, pre_tokenizer=seq(splitter, metaspace)), texts + ["\x1b.a", "\x1b\x1b1 2"])


@pytest.mark.skipif(not SHARED.is_dir(), reason="shared data missing")
def test_added_token_ids_are_the_ones_hf_gives(base_doc, tmp_path):
    """HF gives an added token the model's id when the vocabulary holds its string, and a new one the
    vocabulary's size plus the new ones before it, whatever id the file says (a hand-edited file)."""
    def added(content, tid):
        return {"id": tid, "content": content, "single_word": False, "lstrip": False, "rstrip": False,
                "normalized": False, "special": True}
    size = len(base_doc["model"]["vocab"])
    extra = [added("Hello", size + 40), added("<|b|>", size + 30), added("<|a|>", 5), added(" world", 7),
             added("<|b|>", size + 31)]
    doc = dict(base_doc, added_tokens=base_doc["added_tokens"] + extra)
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    ref = tokenizers.Tokenizer.from_file(str(path))
    from tokjit.api import load_bytes
    with pytest.warns(UserWarning, match="HF gives"):
        ours = load_bytes(path.read_bytes(), path=path, use_cache=False)
    texts = ["Hello world<|a|><|b|>", "<|b|> world Hello", "x<|a|>y", "Hello, world!"]
    for text in texts:
        assert ours.encode(text, parse_special=True) == ref.encode(text, add_special_tokens=False).ids, text
    for content in ("Hello", "<|a|>", "<|b|>", " world"):
        assert ours.token_to_id(content) == ref.token_to_id(content), content


@pytest.mark.parametrize("name", ["bert-minilm", "t5", "gemma3"])
def test_no_decoder_joins_tokens_with_spaces_like_hf(tmp_path, name):
    """A tokenizer.json whose ``decoder`` is null: HF joins the token strings with single spaces."""
    doc = json.loads(shared_path("data", "hf", name, "tokenizer.json").read_text(encoding="utf-8"))
    doc["decoder"] = None
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    ref = tokenizers.Tokenizer.from_file(str(path))
    ours = tokjit.load(path)
    for text in corpus_lines(step=997)[:300]:
        ids = ref.encode(text).ids
        for skip in (False, True):
            assert ours.decode(ids, skip_special_tokens=skip) == ref.decode(ids, skip_special_tokens=skip), text


# every script change and what HF's table leaves without a script: spaces, marks (Inherited), digits
# and punctuation (Common), kana with Han, U+30FC, characters assigned after Unicode 9.0 (U+1F970)
SCRIPT_TEXTS = ["  leading spaces", "   ", "Hello世界 ひらがなカタカナー!", "x1y", "a\u0301b", "αβγ abc Жук",
                "日本語ーです。", "smile \U0001F970 ok", "\u0627\u0644\u0639 123 abc", "tab\tand\nnew line"]


def test_unicode_scripts_splits_every_code_point_as_hf():
    """The pre-tokenizer alone against HF's on every code point (beside letters of another script,
    a space, a digit and Han, which each script either joins or leaves) and on random mixes."""
    import random

    from tokjit.pipeline.pre_tokenizers import Pieces, UnicodeScripts
    from tokjit.text import text_to_utf8

    ref, ours = tokenizers.pre_tokenizers.UnicodeScripts(), UnicodeScripts({})

    def pieces(text):
        buf = text_to_utf8(text)
        got = ours(Pieces.whole(buf))
        return [buf[s:e].tobytes().decode() for s, e in zip(got.starts.tolist(), got.ends.tolist())]

    code_points = [c for c in range(0x110000) if not 0xD800 <= c < 0xE000]
    texts = [sep.join(map(chr, code_points[i:i + 4000])) for sep in ("", "a", " ", "\u65e5", "1")
             for i in range(0, len(code_points), 4000)]
    rng = random.Random(3)
    alphabet = [" ", "a", "B", "1", "\u3042", "\u30a2", "\u30fc", "\u65e5", "\u0301", "\u03b1", "\u0416", ".",
                "\U0001F970", "\n", "\t", "\u00a0", "\u0627"]
    texts += ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 10))) for _ in range(5000)]
    bad = [t for t in texts + SCRIPT_TEXTS if pieces(t) != [p for p, _ in ref.pre_tokenize_str(t)]]
    assert not bad, f"{len(bad)} texts split differently; first: {bad[0][:40]!r}"


@pytest.mark.skipif(not SHARED.is_dir(), reason="shared data missing")
@pytest.mark.parametrize("name", ["bert-minilm", "t5", "gemma3", "llama3"])
def test_unicode_scripts_before_each_family_matches_hf(tmp_path, name):
    """UnicodeScripts first in the pre-tokenizer of a WordPiece, Unigram, SentencePiece-style BPE and
    byte-level BPE tokenizer: ids and offsets as HF's."""
    doc = json.loads(shared_path("data", "hf", name, "tokenizer.json").read_text(encoding="utf-8"))
    rest = [doc["pre_tokenizer"]] if doc.get("pre_tokenizer") else []
    doc["pre_tokenizer"] = seq({"type": "UnicodeScripts"}, *rest)
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    ref = tokenizers.Tokenizer.from_file(str(path))
    ref.no_padding()
    ref.no_truncation()
    ours = tokjit.load(path)
    texts = SCRIPT_TEXTS + corpus_lines(step=300)
    expected = ref.encode_batch(texts, add_special_tokens=False)
    assert ours.encode_batch(texts, parse_special=True) == [e.ids for e in expected]
    for text, e in zip(texts[:60], expected):
        assert ours.encode_with_offsets(text, parse_special=True)[1] == e.offsets, text


BYTE_LEVEL_NORMALIZED = {
    "alone": ({"type": "ByteLevel"}, None),
    "after-nfc-then-split": ({"type": "Sequence", "normalizers": [{"type": "NFC"}, {"type": "ByteLevel"}]},
                             {"type": "Split", "pattern": {"Regex": r"\s+|\d"}, "behavior": "Isolated", "invert": False}),
    "then-string-split": ({"type": "ByteLevel"}, {"type": "Split", "pattern": {"String": "\u0120"},
                                                   "behavior": "MergedWithNext", "invert": False}),
    "then-digits": ({"type": "ByteLevel"}, {"type": "Digits", "individual_digits": True}),
}


@pytest.mark.skipif(not SHARED.is_dir(), reason="shared data missing")
@pytest.mark.parametrize("name", sorted(BYTE_LEVEL_NORMALIZED))
def test_byte_level_normalizer_matches_hf(base_doc, texts, tmp_path, name):
    """A ByteLevel normalizer: the pre-tokenizer's steps see the mapped characters (a space is
    U+0120, not whitespace); ids, offsets and decodes as HF's."""
    normalizer, pre = BYTE_LEVEL_NORMALIZED[name]
    doc = dict(base_doc, normalizer=normalizer, pre_tokenizer=pre)
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    ref = tokenizers.Tokenizer.from_file(str(path))
    ours = tokjit.load(path)
    sample = texts[::3] + ["<|endoftext|> hi", "  a  b\n\n", "h\u00e9llo \u65e5\u672c 12", "\t\x00x", ""]
    expected = ref.encode_batch(sample, add_special_tokens=False)
    assert ours.encode_batch(sample, parse_special=True) == [e.ids for e in expected]
    for text, e in zip(sample[::5] + sample[-5:], expected[::5] + expected[-5:]):
        assert ours.encode_with_offsets(text, parse_special=True)[1] == e.offsets, text
        for skip in (False, True):
            assert ours.decode(e.ids, skip_special_tokens=skip) == ref.decode(e.ids, skip_special_tokens=skip), text


@pytest.mark.skipif(not SHARED.is_dir(), reason="shared data missing")
@pytest.mark.parametrize("change", ["before-another-normalizer", "with-byte-level-pre-tokenizer",
                                    "normalized-added-token-with-space", "unigram-model"])
def test_byte_level_normalizer_beyond_support_is_refused(base_doc, tmp_path, change):
    """Where a ByteLevel normalizer is not the mapping tokjit's byte-level BPE runs, loading raises
    UnsupportedComponentError (HF loads each of these files)."""
    doc = dict(base_doc, normalizer={"type": "ByteLevel"})
    if change == "before-another-normalizer":
        doc["normalizer"] = {"type": "Sequence", "normalizers": [{"type": "ByteLevel"}, {"type": "Lowercase"}]}
    elif change == "normalized-added-token-with-space":
        doc["added_tokens"] = doc["added_tokens"] + [{"id": 100300, "content": "my token", "single_word": False,
                                                      "lstrip": False, "rstrip": False, "normalized": True,
                                                      "special": False}]
    elif change == "unigram-model":
        doc = json.loads(shared_path("data", "hf", "t5", "tokenizer.json").read_text(encoding="utf-8"))
        doc["normalizer"] = {"type": "ByteLevel"}
    if change != "with-byte-level-pre-tokenizer":
        doc["pre_tokenizer"] = None
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    tokenizers.Tokenizer.from_file(str(path))  # HF loads it
    with pytest.raises(tokjit.errors.UnsupportedComponentError):
        tokjit.load(path)


@pytest.mark.skipif(not SHARED.is_dir(), reason="shared data missing")
@pytest.mark.parametrize("config", [{"pad_token": "<pad>", "word_delimiter_token": "|", "cleanup": True},
                                    {"pad_token": "[PAD]", "word_delimiter_token": "|", "cleanup": True},
                                    {"pad_token": "[PAD]", "word_delimiter_token": "the", "cleanup": False},
                                    {"pad_token": "", "word_delimiter_token": "", "cleanup": True}])
def test_ctc_decoder_matches_hf(tmp_path, config):
    """HF's CTC decoder on bert-minilm's vocabulary: random id runs with repeats, pads and delimiters."""
    import random

    doc = json.loads(shared_path("data", "hf", "bert-minilm", "tokenizer.json").read_text(encoding="utf-8"))
    doc["decoder"] = dict(config, type="CTC")
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    ref = tokenizers.Tokenizer.from_file(str(path))
    ours = tokjit.load(path)
    rng = random.Random(7)
    common = [ref.token_to_id(t) for t in ("[PAD]", "|", "the", ".", "'", "s", "a", "##s", "don", "n", "?")]
    assert None not in common
    for _ in range(400):
        ids = []
        for _ in range(rng.randint(0, 12)):
            ids += [rng.choice(common) if rng.random() < 0.6 else rng.randrange(ref.get_vocab_size())] * rng.randint(1, 3)
        for skip in (False, True):
            assert ours.decode(ids, skip_special_tokens=skip) == ref.decode(ids, skip_special_tokens=skip), ids
    del doc["decoder"]["cleanup"]  # HF has no default for it and refuses the file
    path.write_text(json.dumps(doc), encoding="utf-8")
    with pytest.raises(Exception):
        tokenizers.Tokenizer.from_file(str(path))
    with pytest.raises(tokjit.errors.ModelFileError):
        tokjit.load(path)


@pytest.mark.skipif(not SHARED.is_dir(), reason="shared data missing")
@pytest.mark.parametrize("kind", ["Unigram", "WordPiece", "WordLevel"])
def test_byte_level_alphabet_outside_bpe_matches_hf(tmp_path, kind):
    """A non-BPE model trained behind a ByteLevel pre-tokenizer (its vocabulary spelled in GPT-2's
    byte alphabet): HF's ids, offsets and decodes (the vocabulary read as bytes; a word's length,
    Unigram's lattice steps and unknown pieces by bytes, HF's mapped characters). A ByteLevel decoder
    without the pre-tokenizer is refused with UnsupportedComponentError (before, each gave other
    ids than HF's)."""
    from tokenizers import decoders, models, pre_tokenizers, trainers

    alphabet = pre_tokenizers.ByteLevel.alphabet()
    model, trainer = {
        "Unigram": (models.Unigram(), trainers.UnigramTrainer(vocab_size=600, unk_token="<unk>", show_progress=False,
                                                              special_tokens=["<unk>"], initial_alphabet=alphabet)),
        "WordPiece": (models.WordPiece(unk_token="[UNK]"),
                      trainers.WordPieceTrainer(vocab_size=600, show_progress=False, special_tokens=["[UNK]"],
                                                initial_alphabet=alphabet)),
        "WordLevel": (models.WordLevel(unk_token="[UNK]"),
                      trainers.WordLevelTrainer(vocab_size=600, show_progress=False, special_tokens=["[UNK]"])),
    }[kind]
    ref = tokenizers.Tokenizer(model)
    ref.pre_tokenizer = pre_tokenizers.ByteLevel()
    ref.decoder = decoders.ByteLevel()
    ref.train_from_iterator(corpus_lines(step=50), trainer)
    path = tmp_path / "tokenizer.json"
    ref.save(str(path))
    # the file is the reference: HF reads scores back a step off from the trainer's (see serde_json_float)
    ref = tokenizers.Tokenizer.from_file(str(path))
    ours = tokjit.load(path)
    texts = corpus_lines(step=101) + ["", " ", "h\u00e9llo \u65e5\u672c", "\u2500" * 40 + " x", "\U0001F642 ok"]
    expected = ref.encode_batch(texts, add_special_tokens=False)
    assert ours.encode_batch(texts, parse_special=True) == [e.ids for e in expected]
    for text, e in zip(texts[::9] + texts[-5:], expected[::9] + expected[-5:]):
        assert ours.encode_with_offsets(text, parse_special=True)[1] == e.offsets, text
        assert ours.decode(e.ids) == ref.decode(e.ids, skip_special_tokens=False), text
    doc = json.loads(path.read_text(encoding="utf-8"))
    doc["pre_tokenizer"] = {"type": "Whitespace"}
    path.write_text(json.dumps(doc), encoding="utf-8")
    tokenizers.Tokenizer.from_file(str(path))
    with pytest.raises(tokjit.errors.UnsupportedComponentError):
        tokjit.load(path)


@pytest.mark.skipif(not SHARED.is_dir(), reason="shared data missing")
@pytest.mark.parametrize("fuse_unk", [True, False])
def test_byte_fallback_with_missing_byte_tokens_matches_hf(tmp_path, fuse_unk):
    """HF's byte fallback when some <0xXX> tokens are missing (a vocabulary trained with byte_fallback on
    but without the byte tokens, or with some removed): a character goes to bytes only when all of its
    bytes have a token, else it is one unknown token, which HF adds only before the next known symbol,
    after the byte-fallback characters between. mistral-7b's tokenizer.json with the tokens of the
    4-byte lead bytes and of 0xCA renamed (ids kept), on text where such characters meet."""
    doc = json.loads(shared_path("data", "hf", "mistral-7b", "tokenizer.json").read_text(encoding="utf-8"))
    vocab = doc["model"]["vocab"]
    for b in (0xCA, 0xF0, 0xF1, 0xF2, 0xF3, 0xF4):
        vocab[f"<removed-{b:02X}>"] = vocab.pop(f"<0x{b:02X}>")
    doc["model"]["fuse_unk"] = fuse_unk
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    ref = tokenizers.Tokenizer.from_file(str(path))
    tok = tokjit.load(path)
    import random
    rng = random.Random(5)
    # U+02AC..U+02AF and U+1D400-ish letters: not tokens; their bytes' tokens present (2-byte, lead 0xCB) or
    # missing (lead 0xCA, 0xF0)
    parts = ["\u02ac", "\u02af", "\u02ea", "\U0001d400", "😀", "🦙", "x", " ", "ab", "中", "\u0301", "\U00100000"]
    texts = ["".join(rng.choice(parts) for _ in range(rng.randint(1, 12))) for _ in range(1500)]
    texts += [t for t in corpus_lines(step=40) if any(ord(c) > 0xFFFF for c in t)]
    expected = [e.ids for e in ref.encode_batch(texts, add_special_tokens=False)]
    assert [tok.encode(t) for t in texts] == expected
    assert tok.encode_batch(texts, num_threads=2) == expected
