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

