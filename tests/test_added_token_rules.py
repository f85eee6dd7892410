"""Added tokens with rules on the fused byte-level BPE path, against the references.

HF's lstrip / rstrip widen a token over Unicode whitespace (single_word documents go to the staged
pipeline); llama.cpp's partition visits the tokens longest first, each claiming its occurrences and,
with lstrip / rstrip, the ASCII whitespace beside them. The fused kernel applies both itself
(``kernels.added_tokens.ruled_token_matches``); these tests hold its ids to HF ``tokenizers`` and to
the staged pipeline, which the llama.cpp vectors hold to llama.cpp.
"""

from __future__ import annotations

import json
import random

import numpy as np
import pytest

from conftest import corpus_lines, shared_path

import tokjit

# Unicode White_Space in every UTF-8 length, characters next to it that are not, malformed-looking
# neighbours (a lone continuation-range character is valid text: U+0080)
_SPACES = [" ", "  ", "\t", "\n", "\r\n", "\x0b", "\x0c", "\x85", "\xa0", "\u1680", "\u2000", "\u200a",
           "\u2028", "\u2029", "\u202f", "\u205f", "\u3000", " \u3000 ", "\u200b", "\x80", "\u180e", "\ufeff", ""]


def _texts_around(tokens, n, seed):
    """Texts where the tokens meet whitespace, each other, words and the text's ends."""
    rng = random.Random(seed)
    words = [w for line in corpus_lines(step=200)[:400] for w in line.split()[:6]] or ["word"]
    out = []
    for _ in range(n):
        parts = []
        for _ in range(rng.randint(1, 6)):
            parts.append(rng.choice(_SPACES))
            parts.append(rng.choice(tokens) if rng.random() < 0.6 else rng.choice(words))
            parts.append(rng.choice(_SPACES))
        out.append("".join(parts))
    return out


def _flagged(tmp_path, name, rules):
    """A shared tokenizer.json with ``rules`` ({content: flags}) on its added tokens, as file and HF
    tokenizer."""
    hf = pytest.importorskip("tokenizers")
    data = json.loads(shared_path("data", "hf", name, "tokenizer.json").read_text(encoding="utf-8"))
    for entry in data["added_tokens"]:
        for flag in rules.get(entry["content"], ()):
            entry[flag] = True
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    ref = hf.Tokenizer.from_file(str(path))
    ref.no_truncation()  # some exports carry their exporter's (T5: 32 tokens)
    ref.no_padding()
    return path, ref, list(rules)


def _assert_hf_rules(tmp_path, name, rules, fused, seed):
    """``name``'s tokenizer.json with ``rules`` runs the ``fused`` path and gives HF's ids on texts made
    to meet the rules and on corpus lines: single calls, list and numpy batches (HF always splits added
    tokens out of the text: parse_special)."""
    path, ref, tokens = _flagged(tmp_path, name, rules)
    tok = tokjit.load(path)
    assert type(tok._fused).__name__ == fused
    texts = _texts_around(tokens, 3000, seed=seed) + corpus_lines(step=97)
    expected = [e.ids for e in ref.encode_batch(texts, add_special_tokens=False)]
    assert [tok.encode(t, parse_special=True) for t in texts] == expected
    assert tok.encode_batch(texts, num_threads=2, parse_special=True) == expected
    flat, offsets = tok.encode_batch_numpy(texts, num_threads=1, parse_special=True)
    assert [flat[offsets[i]:offsets[i + 1]].tolist() for i in range(len(texts))] == expected


def test_hf_rules_fused(tmp_path):
    """lstrip / rstrip / single_word tokens in a byte-level tokenizer.json (Llama 3's, with
    <|begin_of_text|> left plain): the fused path runs and its ids are HF's."""
    _assert_hf_rules(tmp_path, "llama3", {"<|start_header_id|>": ("lstrip",), "<|end_header_id|>": ("rstrip",),
                                          "<|eot_id|>": ("lstrip", "rstrip"),
                                          "<|reserved_special_token_5|>": ("single_word",),
                                          "<|begin_of_text|>": ()}, "FusedBPE", seed=1)


def _mpt(shared):
    path = shared / "data" / "gguf" / "ggml-vocab-mpt.gguf"
    if not path.is_file():
        pytest.skip(f"{path} not found")
    return tokjit.load(path)


def _staged(tok, text, parse_special):
    data = np.frombuffer(text.encode("utf-8", "surrogatepass"), np.uint8)
    return tok._encode_staged(data, parse_special, False)[0].tolist()


def test_llamacpp_partition_fused(shared):
    """MPT's GGUF marks runs of 2-24 spaces as tokens that overlap one another, so llama.cpp's
    longest-first partition decides them; the fused kernel's partition gives the staged pipeline's
    ids (held to llama.cpp by its vectors) on code, corpus lines and space runs of every length, with
    special-token text parsed and not, single calls and batches."""
    tok = _mpt(shared)
    assert type(tok._fused).__name__ == "FusedBPE"
    rng = random.Random(2)
    runs = ["".join(rng.choice([" " * rng.randint(1, 30), "x", "\t", "\n", "<|endoftext|>", "  <|padding|> "])
                    for _ in range(rng.randint(1, 12))) for _ in range(400)]
    texts = runs + corpus_lines(step=60)
    for parse_special in (False, True):
        expected = [_staged(tok, t, parse_special) for t in texts]
        assert [tok.encode(t, parse_special=parse_special) for t in texts] == expected
        assert tok.encode_batch(texts, num_threads=2, parse_special=parse_special) == expected


def test_llamacpp_partition_many_occurrences(shared):
    """A document with more occurrences of the tokens than the kernel's scratch holds (a run of spaces
    occurs as every token it contains) goes to the staged pipeline and gets its ids."""
    tok = _mpt(shared)
    text = ("def f():\n" + " " * 24 + "return 1\n") * 50 + " " * 5000
    assert tok.encode(text) == _staged(tok, text, False)
    assert tok.encode_batch([text, "a  b"], num_threads=1) == [_staged(tok, text, False), _staged(tok, "a  b", False)]


def test_hf_rules_sentencepiece_fused(tmp_path):
    """The same rules on a SentencePiece-style BPE tokenizer.json (Mistral's: Prepend / Replace, byte
    fallback; Phi-3's special tokens carry rstrip): the fused SentencePiece kernel runs and its ids are
    HF's; a document with a single_word token goes to the staged pipeline inside the batch."""
    _assert_hf_rules(tmp_path, "mistral-7b", {"<s>": ("lstrip",), "</s>": ("rstrip",), "<unk>": ("single_word",)},
                     "FusedSentencePiece", seed=3)


def test_llamacpp_partition_sentencepiece_fused(shared):
    """Phi-3's GGUF (llama.cpp's SentencePiece tokenizer, special tokens with strip flags): the fused
    SentencePiece kernel runs llama.cpp's partition and gives the staged pipeline's ids (held to
    llama.cpp by its vectors) on texts around its special tokens and on corpus lines, with
    special-token text parsed and not, single calls and batches."""
    path = shared / "data" / "gguf" / "ggml-vocab-phi-3.gguf"
    if not path.is_file():
        pytest.skip(f"{path} not found")
    tok = tokjit.load(path)
    assert type(tok._fused).__name__ == "FusedSentencePiece"
    specials = [t.content for t in tok._match_all.tokens.values()][:40]
    texts = _texts_around(specials, 1500, seed=4) + corpus_lines(step=80)
    for parse_special in (False, True):
        expected = [_staged(tok, t, parse_special) for t in texts]
        assert [tok.encode(t, parse_special=parse_special) for t in texts] == expected
        assert tok.encode_batch(texts, num_threads=2, parse_special=parse_special) == expected


def test_hf_rules_unigram_fused(tmp_path):
    """The same rules on a Unigram tokenizer.json (T5's: Precompiled charsmap, WhitespaceSplit,
    Metaspace; XLM-R's <mask> is an lstrip token): the fused Unigram kernel runs and its ids are HF's,
    a single_word document going to the staged pipeline inside the batch."""
    _assert_hf_rules(tmp_path, "t5", {"<extra_id_0>": ("lstrip",), "</s>": ("rstrip",),
                                      "<extra_id_1>": ("lstrip", "rstrip"), "<extra_id_2>": ("single_word",)},
                     "FusedUnigramHF", seed=5)


def test_single_word_reads_word_characters_as_hf_does(tmp_path):
    """A single_word token must not touch a Rust-regex ``\\w`` character: Unicode Alphabetic (not only
    letters: Ⓐ, Ⅻ, Other_Alphabetic marks), marks, Nd, Pc and joiners. Every assigned code point that
    is not an other-letter (Lo, all Alphabetic), and every 50th that is, before and after the token,
    against HF."""
    import unicodedata
    path, ref, _ = _flagged(tmp_path, "mistral-7b", {"<unk>": ("single_word",)})
    tok = tokjit.load(path)
    points = [c for c in range(0x110000) if not 0xD800 <= c < 0xE000
              and unicodedata.category(chr(c)) not in ("Cn", "Co")]
    points = [c for k, c in enumerate(points) if unicodedata.category(chr(c)) != "Lo" or k % 50 == 0]
    assert 0x24B6 in points and 0x216B in points  # Ⓐ (So), Ⅻ (Nl)
    texts = ["".join(f"{chr(c)}<unk> <unk>{chr(c)} " for c in points[i:i + 100]) for i in range(0, len(points), 100)]
    expected = [e.ids for e in ref.encode_batch(texts, add_special_tokens=False)]
    got = tok.encode_batch(texts, parse_special=True)
    assert [points[i * 100] for i, (e, g) in enumerate(zip(expected, got)) if e != g] == []
