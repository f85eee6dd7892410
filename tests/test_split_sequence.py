"""A sequence of regex splits (DeepSeek-V3's pre-tokenizer: three Splits, then a byte-level step that
only maps bytes; or Digits, Punctuation and ByteLevel's own split, as StarCoder's and Falcon's) runs in
the fused byte-level BPE kernel (``regex_vm.split_in_steps``), each pattern on every piece of the split
before it. Reference: HF ``tokenizers`` on the same tokenizer.json, built
here from the Llama 3 file with another pre-tokenizer (no such file is in the shared data)."""

from __future__ import annotations

import json

import pytest

import tokjit
from conftest import SHARED, corpus_lines, shared_path

tokenizers = pytest.importorskip("tokenizers")

# DeepSeek-V3's splits (its tokenizer.json, and llama.cpp's deepseek-v3 pre type)
DEEPSEEK_V3 = [
    (r"\p{N}{1,3}", "Isolated", False),
    ("[一-龥぀-ゟ゠-ヿ]+", "Isolated", False),
    ("[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+|"
     " ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+", "Isolated", False),
]
# every behaviour and an inverted split, one after another
MIXED = [
    (r"\s+", "MergedWithNext", False),
    (r"\p{L}+", "Removed", True),
    (r"[aeiou]", "MergedWithPrevious", False),
    (r"\p{N}", "Contiguous", False),
    (r"[.,!?]", "Isolated", True),
]


_BYTE_LEVEL = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}
_BYTE_LEVEL_SPLIT = dict(_BYTE_LEVEL, use_regex=True)
# pre-tokenizers that are regex splits of a character class, in the sequences of released tokenizers
STARCODER = [{"type": "Digits", "individual_digits": True}, _BYTE_LEVEL_SPLIT]
FALCON = [{"type": "Punctuation", "behavior": "Contiguous"}, _BYTE_LEVEL_SPLIT,
          {"type": "Digits", "individual_digits": False},
          {"type": "Split", "pattern": {"Regex": "[0-9][0-9][0-9]"}, "behavior": "Isolated", "invert": False}]


def _tokenizer_json(tmp_path, splits) -> str:
    config = json.loads(shared_path("data", "hf", "llama3", "tokenizer.json").read_text(encoding="utf-8"))
    steps = splits if isinstance(splits[0], dict) else [
        {"type": "Split", "pattern": {"Regex": pattern}, "behavior": behavior, "invert": invert}
        for pattern, behavior, invert in splits] + [_BYTE_LEVEL]
    config["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": steps}
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(config), encoding="utf-8")
    return str(path)


@pytest.mark.skipif(not SHARED.is_dir(), reason="shared data not found")
@pytest.mark.parametrize("splits,fused", [(DEEPSEEK_V3, True), (MIXED, True), (STARCODER, True), (FALCON, False)],
                         ids=["deepseek-v3", "mixed", "starcoder", "falcon"])
def test_split_sequence_matches_hf(tmp_path, splits, fused):
    """Falcon's splits after its ByteLevel step read GPT-2's byte alphabet (its Digits split '¼', byte
    BC, off 'ー'): the staged pipeline runs them on that text (``pre_tokenizers.byte_level_view``)."""
    path = _tokenizer_json(tmp_path, splits)
    ref = tokenizers.Tokenizer.from_file(path)
    ref.no_truncation()
    ref.no_padding()
    tok = tokjit.load(path)
    assert (type(tok._fused).__name__ == "FusedBPE") if fused else tok._fused is None
    texts = corpus_lines(step=20)
    expected = [e.ids for e in ref.encode_batch(texts, add_special_tokens=False)]
    assert tok.encode_batch(texts, num_threads=2, parse_special=True) == expected
    flat, offsets = tok.encode_batch_numpy(texts, num_threads=1, parse_special=True)
    assert [flat[offsets[i]:offsets[i + 1]].tolist() for i in range(len(texts))] == expected
    assert [tok.encode(t, parse_special=True) for t in texts[::7]] == expected[::7]


@pytest.mark.skipif(not SHARED.is_dir(), reason="shared data not found")
def test_split_after_byte_level_reads_byte_alphabet(tmp_path):
    """Texts whose UTF-8 holds bytes that GPT-2's alphabet writes as digits (B2 '²', B3 '³', B9 '¹',
    BC '¼', BD '½', BE '¾') or punctuation, through Falcon's sequence: HF's ids."""
    path = _tokenizer_json(tmp_path, FALCON)
    ref = tokenizers.Tokenizer.from_file(path)
    tok = tokjit.load(path)
    texts = ["ー", "GetScriptType(\"ー\")", "½ ¼ ²", "価格は１２３４円", "Ω≈ç√∫˜µ≤≥÷",
             "année 2024, 12345678"]
    for text in texts:
        assert tok.encode(text, parse_special=True) == ref.encode(text, add_special_tokens=False).ids, text


def test_only_regex_splits_after_byte_level(tmp_path):
    """A step after ByteLevel that is no regex split (it would read GPT-2's byte alphabet) is refused
    at load with a clear error, not run on the input's text."""
    config = json.loads(shared_path("data", "hf", "llama3", "tokenizer.json").read_text(encoding="utf-8"))
    config["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
        _BYTE_LEVEL_SPLIT, {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always"}]}
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(config), encoding="utf-8")
    with pytest.raises(tokjit.errors.UnsupportedComponentError, match="after a ByteLevel step"):
        tokjit.load(str(path))



# patterns that are a run of one class (regex.class_runs.class_run_form), and near misses that must keep the VM
CLASS_RUNS = [r"\p{N}{1,3}", "[一-龥぀-ゟ゠-ヿ]+", r"\p{N}", r"[0-9]{2,3}", r"\s++", r"[^\s\p{L}]+",
              r"(?i:[a-c])+", r"\p{P}{2,}", r"(?:\p{N})+",
              # llama.cpp's deepseek-llm steps: an optional prefix, a run to the subject's end
              r"\s?\p{L}+", r"[\t\n ]?[A-Za-z]+", r"\s?[!-/]{1,2}", r"[\p{L}\s]?\p{L}+", r"\s+(?![\s\S])", r"\s+\z",
              r"[0-9][0-9][0-9]"]
NOT_CLASS_RUNS = [r"\p{N}*", r"[0-9]+?", r"\p{N}+x", r"a|\p{N}+", r"\p{N}+$", r"\s?+\p{L}+", r"\s?\p{L}{2,}",
                  r"\s+(?!\S)", r"\s??\p{L}+", r"[0-9][0-9][a-z]"]


@pytest.mark.parametrize("pattern", CLASS_RUNS)
def test_class_run_matches_the_vm(pattern):
    """A split that is a run of one class is found by ``class_run_matches``, not the VM: the same
    matches as the VM on the corpora and generated strings."""
    import random

    import numpy as np

    from tokjit.kernels.regex_vm import class_run_matches
    from tokjit.kernels.structs import BMP_WORDS
    from tokjit.regex.class_runs import bmp_bits, class_run_form
    from tokjit.regex.compiled import CompiledRegex

    vm = CompiledRegex(pattern, syntax="onig")
    q = vm.program
    form = class_run_form(q)
    assert form[0] >= 1
    # the class's BMP bitmap first, the prefix class's after it (as make_regex lays them out)
    bits = np.concatenate([bmp_bits(q, k) for k in (form[2], form[3]) if k >= 0])
    form = np.array([*form, 0, BMP_WORDS if form[3] >= 0 else -1], np.int64)
    rng = random.Random(5)
    alphabet = list("0123456789abcABC .,;!?-\t\n") + ["中", "文", "ア", "ぁ", "١", "²", "Ⅻ", "\u3000", "é", "\u0301",
                                                   "👍"]
    texts = corpus_lines(step=25) + ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 30)))
                                     for _ in range(2000)]
    for text in texts:
        buf = np.frombuffer(bytearray(text.encode("utf-8")), np.uint8)
        out_s, out_e = np.empty(buf.shape[0] + 1, np.int64), np.empty(buf.shape[0] + 1, np.int64)
        n = class_run_matches(buf, 0, buf.shape[0], form, bits, q.cls_ascii, q.cls_mask, q.cls_neg, q.cls_roff,
                              q.cls_ranges, q.gc, out_s, out_e)
        starts, ends = vm.find_spans(buf)
        assert (out_s[:n].tolist(), out_e[:n].tolist()) == (starts.tolist(), ends.tolist()), repr(text)


@pytest.mark.parametrize("pattern", NOT_CLASS_RUNS)
def test_other_patterns_are_no_class_runs(pattern):
    from tokjit.regex.class_runs import class_run_form
    from tokjit.regex.compiled import CompiledRegex
    assert class_run_form(CompiledRegex(pattern, syntax="onig").program)[0] == 0


@pytest.mark.skipif(not SHARED.is_dir(), reason="shared data not found")
def test_deepseek_v3_steps_skip_the_vm(tmp_path):
    """DeepSeek-V3's digit and CJK splits run as class runs and its word split through its scanner
    (``split_known.SHAPE_DEEPSEEK``): a refactor that sent them back to the VM (~3x slower) fails here."""
    from tokjit.kernels import split_known as sk
    from tokjit.kernels.structs import STEP_RUN, STEP_SHAPE
    tok = tokjit.load(_tokenizer_json(tmp_path, DEEPSEEK_V3))
    steps = tok._fused.regex.step_table
    assert steps[:, STEP_RUN].tolist() == [1, 1, 0] and steps[:2, STEP_RUN + 1].tolist() == [3, -1]
    assert min(steps[:2, STEP_RUN + 6].tolist()) >= 0  # their BMP bitmaps
    assert steps[2, STEP_SHAPE] == sk.SHAPE_DEEPSEEK


_GPT2 = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
# sequences a class run takes into one pass (regex.class_runs.stream_plan), with the plan expected:
# (joined, inline, skipped) per split and each class's kept characters (-1 all, -2 none, 0 a bitmap)
STREAMED = {
    # joined runs, then a class run that keeps digits whole and some letters ("hello" goes through it)
    "runs-then-overlapping-run": ([(r"[0-9]{1,2}", "Isolated", False), (r"[a-z]+", "Isolated", False),
                                   (r"[a-f\s]+", "Isolated", False), (r"[.,]", "Isolated", True)],
                                  [(1, 2, 0), (-1, -1, 1), (-1, -1, 1), (-1, -1, 0)], [-1, 0]),
    # three disjoint runs: two joined, the third kept apart from both
    "three-runs": ([(r"\p{N}+", "Isolated", False), (r"[a-z]{1,3}", "Isolated", False),
                    (r"[A-Z]+", "Isolated", False)], [(1, 2, 0), (-1, -1, 1), (-1, -1, 1)], [-1, -1]),
    # a run then GPT-2's words: a letter run is one of its matches whole
    "run-then-words": ([(r"[A-Za-z]+", "Isolated", False), (_GPT2, "Isolated", False)],
                       [(-1, 1, 0), (-1, -1, 1)], [-1, -2]),
    # StarCoder: single digits, each one piece whatever the byte-level split would make of it
    "starcoder": (STARCODER, [(-1, 1, 0), (-1, -1, 1)], [-1, -2]),
    # DeepSeek-V3: its word split keeps digits (no match) and the CJK class but for its seven
    # punctuation and symbol characters (・ ゠ ゛ ゜ ...): a run with one goes through the split
    "deepseek-v3": (DEEPSEEK_V3, [(1, 2, 0), (-1, -1, 1), (-1, -1, 1)], [-1, 0]),
}


@pytest.mark.skipif(not SHARED.is_dir(), reason="shared data not found")
@pytest.mark.parametrize("name", list(STREAMED))
def test_streamed_splits_match_hf(tmp_path, name):
    """Splits a class run takes into its own pass: the plan is the one expected (a change that lost it
    fails here) and the ids are HF's, on the corpora and on strings of the characters the plan turns on
    (the CJK class's punctuation, runs past a class's max, digits against letters)."""
    import random

    from tokjit.kernels.structs import STEP_JOINED, STEP_KEPT
    splits, plan, kept = STREAMED[name]
    path = _tokenizer_json(tmp_path, splits)
    tok = tokjit.load(path)
    steps = tok._fused.regex.step_table
    assert [tuple(row) for row in steps[:, STEP_JOINED:STEP_JOINED + 3].tolist()] == plan
    assert [min(x, 0) for x in steps[0, STEP_KEPT:STEP_KEPT + 2].tolist()] == kept
    ref = tokenizers.Tokenizer.from_file(path)
    ref.no_truncation()
    ref.no_padding()
    rng = random.Random(11)
    alphabet = list("0123456789abcefghzABCZ .,!\t\n") + ["中", "文", "ア", "ぁ", "・", "゠", "゛", "ー", "一", "龥",
                                                        "𠀀", "١", "²", "é", "\u0301", "👍", "\u3000", "、"]
    texts = corpus_lines(step=20) + ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40)))
                                     for _ in range(3000)]
    # plain ASCII without a digit: no run anywhere, the whole text is one gap for the inline split
    # (regex_vm.ascii_gap_pieces in the fused piece loop for a plan like DeepSeek-V3's, else
    # _runs_then_split's shortcut), most short English texts
    texts += ["".join(rng.choice("abcefghzABCZ .,!'\t\n") for _ in range(rng.randint(1, 30))) for _ in range(500)]
    expected = [e.ids for e in ref.encode_batch(texts, add_special_tokens=False)]
    assert tok.encode_batch(texts, num_threads=1, parse_special=True) == expected
    assert [tok.encode(t, parse_special=True) for t in texts[-600:]] == expected[-600:]


@pytest.mark.skipif(not SHARED.is_dir(), reason="shared data not found")
def test_empty_normalizer_sequence_keeps_the_fused_path(tmp_path):
    """DeepSeek-V3's tokenizer.json has a normalizer that is a Sequence of no steps: it changes
    nothing, so the tokenizer runs fused (it ran staged, ~20x slower), with HF's ids, BOS included."""
    path = _tokenizer_json(tmp_path, DEEPSEEK_V3)
    config = json.loads(open(path, encoding="utf-8").read())
    config["normalizer"] = {"type": "Sequence", "normalizers": [{"type": "Sequence", "normalizers": []}]}
    config["post_processor"] = {"type": "TemplateProcessing", "single": [
        {"SpecialToken": {"id": "<|begin_of_text|>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
        "pair": [{"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}],
        "special_tokens": {"<|begin_of_text|>": {"id": "<|begin_of_text|>", "ids": [128000],
                                                 "tokens": ["<|begin_of_text|>"]}}}
    with open(path, "w", encoding="utf-8") as f:
        json.dump(config, f)
    ref = tokenizers.Tokenizer.from_file(path)
    tok = tokjit.load(path)
    assert tok.normalizer is None and type(tok._fused).__name__ == "FusedBPE"
    texts = corpus_lines(step=40)
    expected = [e.ids for e in ref.encode_batch(texts)]
    assert tok.encode_batch(texts, add_special_tokens=True, parse_special=True) == expected
