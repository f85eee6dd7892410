"""Compile every family's numba kernels ahead of use: ``tokjit precompile`` / :func:`precompile`.

numba compiles a kernel on its first call and caches the machine code beside the sources, so the
first encode of each family in a fresh install pays 10-20 s. Kernel signatures depend only on the
family (every array type is fixed when a vocabulary compiles), not on the vocabulary, so a tiny
tokenizer of each family built in memory compiles exactly what a real one will use. Families run in
separate processes, one per core, since numba compiles one function at a time per process.
"""

from __future__ import annotations

import json
import os
import struct
import time
from concurrent.futures import ProcessPoolExecutor
import multiprocessing

from tokjit.text import bytes_to_unicode


def _added(i: int, content: str, special: bool = True) -> dict:
    return {"id": i, "content": content, "single_word": False, "lstrip": False, "rstrip": False,
            "normalized": False, "special": special}


def _byte_level_bpe(normalizer=None) -> dict:
    table = bytes_to_unicode()  # GPT-2's printable stand-in for each byte: the vocabulary's alphabet
    chars = [table[b] for b in range(256)]
    vocab = {c: i for i, c in enumerate(chars)}
    # "Ã©" is é: a character BPE forms whole, so loading compiles the atom kernels (kernels.atoms)
    merges = [("h", "e"), ("l", "l"), ("he", "ll"), ("Ġ", "w"), ("o", "r"), ("Ã", "©")]
    for a, b in merges:
        vocab[a + b] = len(vocab)
    n = len(vocab)
    return {"version": "1.0", "added_tokens": [_added(n, "<|end|>")], "normalizer": normalizer,
            "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                              "use_regex": True},
            "post_processor": None,
            "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
            "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                      "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False,
                      "ignore_merges": True, "vocab": vocab, "merges": [f"{a} {b}" for a, b in merges]}}


def _sentencepiece_bpe_json() -> dict:
    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2}
    for b in range(256):
        vocab[f"<0x{b:02X}>"] = len(vocab)
    merges = [("\u2581", "h"), ("e", "l"), ("\u2581h", "el"), ("l", "o")]
    for c in "\u2581helowrd":
        vocab.setdefault(c, len(vocab))
    for a, b in merges:
        vocab[a + b] = len(vocab)
    return {"version": "1.0", "added_tokens": [_added(0, "<unk>"), _added(1, "<s>"), _added(2, "</s>")],
            "normalizer": {"type": "Sequence", "normalizers": [
                {"type": "Prepend", "prepend": "\u2581"}, {"type": "Replace", "pattern": {"String": " "},
                                                            "content": "\u2581"}]},
            "pre_tokenizer": None, "post_processor": None,
            "decoder": {"type": "Sequence", "decoders": [
                {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "}, {"type": "ByteFallback"},
                {"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
            "model": {"type": "BPE", "dropout": None, "unk_token": "<unk>", "continuing_subword_prefix": None,
                      "end_of_word_suffix": None, "fuse_unk": True, "byte_fallback": True,
                      "vocab": vocab, "merges": [f"{a} {b}" for a, b in merges]}}


def _unigram_json() -> dict:
    pieces = [["<unk>", 0.0], ["</s>", 0.0], ["\u2581", -2.0], ["\u2581he", -3.0], ["llo", -3.5],
              ["h", -5.0], ["e", -5.0], ["l", -5.0], ["o", -5.0], ["w", -5.0], ["r", -5.0], ["d", -5.0]]
    return {"version": "1.0", "added_tokens": [_added(0, "<unk>"), _added(1, "</s>")],
            "normalizer": {"type": "Sequence", "normalizers": [
                {"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": " "}]},
            "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
                {"type": "WhitespaceSplit"},
                {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always", "split": True}]},
            "post_processor": None,
            "decoder": {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always", "split": True},
            "model": {"type": "Unigram", "unk_id": 0, "vocab": pieces, "byte_fallback": False}}


def _wordpiece_json() -> dict:
    vocab = {t: i for i, t in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hello", "world", "he",
                                         "##llo", "##o", "w", "##or", "##ld", ",", "!", "a", "b"])}
    return {"version": "1.0",
            "added_tokens": [_added(vocab[t], t) for t in ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")],
            "normalizer": {"type": "BertNormalizer", "clean_text": True, "handle_chinese_chars": True,
                           "strip_accents": None, "lowercase": True},
            "pre_tokenizer": {"type": "BertPreTokenizer"},
            "post_processor": {"type": "TemplateProcessing",
                               "single": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}},
                                          {"Sequence": {"id": "A", "type_id": 0}},
                                          {"SpecialToken": {"id": "[SEP]", "type_id": 0}}],
                               "pair": [{"Sequence": {"id": "A", "type_id": 0}},
                                        {"Sequence": {"id": "B", "type_id": 1}}],
                               "special_tokens": {"[CLS]": {"id": "[CLS]", "ids": [2], "tokens": ["[CLS]"]},
                                                  "[SEP]": {"id": "[SEP]", "ids": [3], "tokens": ["[SEP]"]}}},
            "decoder": {"type": "WordPiece", "prefix": "##", "cleanup": True},
            "model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
                      "max_input_chars_per_word": 100, "vocab": vocab}}


def _wordlevel_json() -> dict:
    """WordLevel behind UnicodeScripts, Whitespace and FixedLength: the word lookup and script kernels."""
    words = ["[UNK]", "hello", "world", ",", "!", "héllo", "123", "東京", "xxx", "<|end|>", "</s>"]
    return {"version": "1.0", "added_tokens": [_added(0, "[UNK]")], "normalizer": {"type": "Nmt"},
            "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
                {"type": "UnicodeScripts"}, {"type": "Whitespace"}, {"type": "FixedLength", "length": 3}]},
            "post_processor": None, "decoder": None,
            "model": {"type": "WordLevel", "vocab": {w: i for i, w in enumerate(words)}, "unk_token": "[UNK]"}}


# ------------------------------------------------------------------------------ SentencePiece .model

def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _sentencepiece_model(model_type: int) -> bytes:
    """A minimal ``ModelProto`` (1 = UNIGRAM, 2 = BPE with byte fallback)."""
    pieces = [("<unk>", 0.0, 2), ("<s>", 0.0, 3), ("</s>", 0.0, 3)]
    if model_type == 2:
        pieces += [(f"<0x{b:02X}>", 0.0, 6) for b in range(256)]
    pieces += [("\u2581", -1.0, 1), ("\u2581he", -2.0, 1), ("ll", -2.5, 1), ("he", -3.0, 1), ("lo", -3.2, 1),
               ("<user>", 0.0, 4)]
    pieces += [(c, -4.0 - i * 0.1, 1) for i, c in enumerate("helowrd")]
    body = b""
    for text, score, kind in pieces:
        body += _field(1, _field(1, text.encode()) + b"\x15" + struct.pack("<f", score) + b"\x18" + _varint(kind))
    trainer = b"\x18" + _varint(model_type) + (b"\x98\x02\x01" if model_type == 2 else b"")  # 35: byte_fallback
    normalizer = _field(1, b"identity") + b"\x18\x01\x20\x01\x28\x01"
    return body + _field(2, trainer) + _field(3, normalizer)


# ------------------------------------------------------------------------------ the work per family

FAMILIES = {
    "byte-level BPE": lambda: json.dumps(_byte_level_bpe()).encode(),
    "byte-level BPE after NFC": lambda: json.dumps(_byte_level_bpe({"type": "NFC"})).encode(),
    "SentencePiece BPE (tokenizer.json)": lambda: json.dumps(_sentencepiece_bpe_json()).encode(),
    "SentencePiece BPE (.model)": lambda: _sentencepiece_model(2),
    "Unigram (tokenizer.json)": lambda: json.dumps(_unigram_json()).encode(),
    "Unigram (.model)": lambda: _sentencepiece_model(1),
    "WordPiece": lambda: json.dumps(_wordpiece_json()).encode(),
    "WordLevel": lambda: json.dumps(_wordlevel_json()).encode(),
}

SAMPLE = ["hello world, hello!", "", "  héllo\tworld 123 東京 <|end|></s> [SEP]", "x" * 300]


def _exercise(family: str) -> tuple[str, float]:
    """Load the family's tiny tokenizer and run every entry point once (compiling what is missing)."""
    from tokjit.api import load_bytes
    t0 = time.perf_counter()
    tok = load_bytes(FAMILIES[family](), use_cache=False)
    for parse_special in (False, True):
        for text in SAMPLE:
            ids = tok.encode(text, parse_special=parse_special)
            tok.decode(ids)
        tok.encode_batch(SAMPLE, parse_special=parse_special, num_threads=2)
        # past the few short texts answered by single calls: the batch kernels and the list builder
        tok.encode_batch(SAMPLE * 20, parse_special=parse_special, num_threads=1)
        # large enough to be shared between two threads (the chunk kernels)
        tok.encode_batch_numpy(SAMPLE * 100, parse_special=parse_special, num_threads=2)
        tok.encode_batch_numpy(SAMPLE, parse_special=parse_special, num_threads=1)
        tok.encode_with_offsets(SAMPLE[2], parse_special=parse_special)
    tok.encode(SAMPLE[0], add_special_tokens=True)
    stream = tok.decode_stream()
    for tid in tok.encode(SAMPLE[2]):
        stream.step(tid)
    if family.startswith("Unigram"):
        _exercise_charsmap()
    return family, time.perf_counter() - t0


def _exercise_charsmap() -> None:
    """The precompiled-charsmap kernels real Unigram models load with (validation, the plain-character
    bitmap, both normalizers), over a one-unit double array that maps nothing."""
    import numpy as np
    from tokjit.pipeline.charsmap import PrecompiledCharsmap
    charsmap = PrecompiledCharsmap(struct.pack("<II", 4, 0) + b"\0")
    data = np.frombuffer(SAMPLE[2].encode(), np.uint8)
    charsmap.normalize(data, None)
    charsmap.normalize_hf(data, None)


def precompile(families: list[str] | None = None, *, processes: int | None = None, log=None) -> dict:
    """Compile the kernels of ``families`` (default: all of :data:`FAMILIES`) into numba's cache.
    Returns {family: seconds}. Later processes load the machine code instead of compiling."""
    names = list(FAMILIES) if families is None else list(families)
    unknown = [f for f in names if f not in FAMILIES]
    if unknown:
        raise ValueError(f"unknown families {unknown}; known: {list(FAMILIES)}")
    processes = processes or min(len(names), os.cpu_count() or 1)
    times: dict[str, float] = {}
    if processes <= 1:
        for name in names:
            times[name] = _exercise(name)[1]
            if log:
                log(f"{name}: {times[name]:.1f} s")
        return times
    # spawn: a fresh interpreter per worker, never a fork of a process with numba's threads in it
    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(processes, mp_context=ctx) as pool:
        for name, seconds in pool.map(_exercise, names):
            times[name] = seconds
            if log:
                log(f"{name}: {seconds:.1f} s")
    return times
