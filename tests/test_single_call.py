"""``encode()`` of one text runs the family's single-text kernel on the calling thread's buffers.

SentencePiece-BPE, WordPiece and Unigram (.model and tokenizer.json) each copy the text into
per-thread buffers that start at 1024 bytes and are rebuilt larger when a text, the charsmap's output
or the ids do not fit. Every text here is compared with the reference library, in this order: texts
across the first capacity, one the charsmap expands about elevenfold (U+FDFA is 3 bytes in, 33 out
under NFKC), then short texts right after the long ones (the buffers are reused: nothing of an
earlier text may reach a later one's ids), and the same texts as one batch.
"""

from __future__ import annotations

import pytest

import tokjit
from conftest import shared_path
from tokjit.fused.driver import FusedPath

FAMILIES = {
    "llama2 .model (SentencePiece-BPE)": (("spm", "llama2", "tokenizer.model"), "sentencepiece"),
    "gemma3 tokenizer.json (SentencePiece-BPE)": (("hf", "gemma3", "tokenizer.json"), "tokenizers"),
    "bert-minilm tokenizer.json (WordPiece)": (("hf", "bert-minilm", "tokenizer.json"), "tokenizers"),
    "t5 spiece.model (Unigram)": (("hf", "t5", "spiece.model"), "sentencepiece"),
    "t5 tokenizer.json (Unigram)": (("hf", "t5", "tokenizer.json"), "tokenizers"),
}

_SENTENCE = "Tokenizers split text into pieces. "  # 35 bytes
TEXTS = [_SENTENCE * k for k in (1, 29, 30, 31, 60, 200)] + [
    "\ufdfa" * 400 + " and a tail",
    "日本語のテキストを分割する。" * 120,
    "Hi",
    "",
    "  two  spaces, tabs\tand\nnew lines  ",
    "ünïcödé ﬃ café ½ Ⅻ ｆｕｌｌｗｉｄｔｈ",
    "<s> [CLS] <unk> looks special",
]


def _reference(kind: str, path: str):
    if kind == "sentencepiece":
        spm = pytest.importorskip("sentencepiece")
        model = spm.SentencePieceProcessor(model_file=path)
        return model.encode, False  # sentencepiece never parses control pieces in text
    hf = pytest.importorskip("tokenizers")
    tok = hf.Tokenizer.from_file(path)
    tok.no_padding()
    tok.no_truncation()
    return (lambda text: tok.encode(text, add_special_tokens=False).ids), True  # HF matches added tokens


@pytest.mark.parametrize("family", list(FAMILIES))
def test_single_calls_match_reference(shared, family):
    parts, kind = FAMILIES[family]
    path = str(shared_path("data", *parts))
    ref, parse_special = _reference(kind, path)
    tok = tokjit.load(path)
    # the family has its own single-text kernel under the one driver
    assert isinstance(tok._fused, FusedPath) and tok._fused.text_kernel is not None
    for text in TEXTS + TEXTS[::-1]:
        assert tok.encode(text, parse_special=parse_special) == ref(text), text[:60]
    batch = tok.encode_batch(TEXTS, parse_special=parse_special)
    assert batch == [ref(text) for text in TEXTS]


def test_borrow_reads_the_same_fields_as_attribute_access():
    """Entry kernels compiled without reference counting read structures with ``structs.borrow``, which
    finds the payload through numba's MemInfo layout: it must give the very arrays (same memory) and
    scalars that ``struct.field`` gives, and survive the structure being reused many times."""
    import numpy as np
    from numba import njit

    from tokjit.kernels import structs

    trie_fields = (np.array([True, False]), np.arange(3), np.arange(3) + 5, np.arange(4, dtype=np.uint8),
                   np.arange(5) * 2, np.arange(6) - 1)
    trie = structs._new_trie(trie_fields)

    @njit(_nrt=False)
    def borrowed(t):
        a = structs.borrow(t, "child_count")
        b = structs.borrow(t, "node_token")
        a[0] += 1  # writes go to the structure's own array
        return a[2] + b[5] + structs.borrow(t, "edge_byte")[3]

    for _ in range(1000):
        assert borrowed(trie) == 7 + 4 + 3
    assert trie_fields[2][0] == 5 + 1000  # child_count, the 3rd field, is arange(3) + 5
    vocab = tokjit.get_encoding("o200k_base")._fused.pipes[0]

    @njit
    def same_memory(pipe):
        v = pipe.vocab
        return (structs.borrow(v, "pair_slots").ctypes.data == v.pair_slots.ctypes.data
                and structs.borrow(v, "max_len") == v.max_len)

    assert same_memory(vocab)
