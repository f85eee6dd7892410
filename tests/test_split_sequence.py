"""A sequence of regex splits (DeepSeek-V3's pre-tokenizer: three Splits, then a byte-level step that
only maps bytes) runs in the fused byte-level BPE kernel (``regex_vm.split_in_steps``), each pattern on
every piece of the split before it. Reference: HF ``tokenizers`` on the same tokenizer.json, built
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


def _tokenizer_json(tmp_path, splits) -> str:
    config = json.loads(shared_path("data", "hf", "llama3", "tokenizer.json").read_text(encoding="utf-8"))
    config["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": pattern}, "behavior": behavior, "invert": invert}
        for pattern, behavior, invert in splits] + [
        {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}]}
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(config), encoding="utf-8")
    return str(path)


@pytest.mark.skipif(not SHARED.is_dir(), reason="shared data not found")
@pytest.mark.parametrize("splits", [DEEPSEEK_V3, MIXED], ids=["deepseek-v3", "mixed"])
def test_split_sequence_matches_hf(tmp_path, splits):
    path = _tokenizer_json(tmp_path, splits)
    ref = tokenizers.Tokenizer.from_file(path)
    ref.no_truncation()
    ref.no_padding()
    tok = tokjit.load(path)
    assert type(tok._fused).__name__ == "FusedBPE"
    texts = corpus_lines(step=20)
    expected = [e.ids for e in ref.encode_batch(texts, add_special_tokens=False)]
    assert tok.encode_batch(texts, num_threads=2, parse_special=True) == expected
    flat, offsets = tok.encode_batch_numpy(texts, num_threads=1, parse_special=True)
    assert [flat[offsets[i]:offsets[i + 1]].tolist() for i in range(len(texts))] == expected
    assert [tok.encode(t, parse_special=True) for t in texts[::7]] == expected[::7]
